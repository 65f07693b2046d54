//===- RnnKernels.cpp - ONNX GRU and RNN on the CPU -------------------------===//
//
// The GRU and plain RNN cells, with the structure of LstmKernel.cpp: inputs
// are widened to fp32 once, the input projections of every step are one gemm
// per direction, each step adds the recurrent gemm, and the outputs are
// narrowed once (fp32 accumulation whatever the storage type).
//
//   per direction:  XW = X[seq*batch, in] * W^T + Wb       (one gemm)
//   GRU step:       z, r = f(XW_zr[t] + H * R_zr^T + Rb_zr)
//                   lbr 0: h~ = g(XW_h[t] + (r . H) * R_h^T + Rb_h)
//                   lbr 1: h~ = g(XW_h[t] + r . (H * R_h^T + Rb_h))
//                   H = (1 - z) . h~ + z . H
//   RNN step:       H = f(XW[t] + H * R^T + Rb)
//
// sequence_lens is read at run time: batch row b only runs its first
// lens[b] steps (a reverse direction starts at lens[b] - 1); Y is zero past
// the end and Y_h holds the last state. layout = 1 (batch-major) is handled
// by transposing X and initial_h in and Y and Y_h out.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Cast.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Cpu/Elementwise.h"
#include <cmath>

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

namespace {
enum class ActKind {
  Sigmoid,
  Tanh,
  Relu,
  Affine,
  LeakyRelu,
  ThresholdedRelu,
  ScaledTanh,
  HardSigmoid,
  Elu,
  Softsign,
  Softplus
};

struct ActInfo {
  const char *name;
  ActKind kind;
  bool hasAlpha, hasBeta;
  float alpha, beta; ///< Defaults of the ONNX operators of the same name.
};

struct Activation {
  ActKind kind = ActKind::Tanh;
  float alpha = 0, beta = 0;
};
} // namespace

static const ActInfo kActivations[] = {
    {"Affine", ActKind::Affine, true, true, 1.0f, 0.0f},
    {"Elu", ActKind::Elu, true, false, 1.0f, 0.0f},
    {"HardSigmoid", ActKind::HardSigmoid, true, true, 0.2f, 0.5f},
    {"LeakyRelu", ActKind::LeakyRelu, true, false, 0.01f, 0.0f},
    {"Relu", ActKind::Relu, false, false, 0.0f, 0.0f},
    {"ScaledTanh", ActKind::ScaledTanh, true, true, 1.0f, 1.0f},
    {"Sigmoid", ActKind::Sigmoid, false, false, 0.0f, 0.0f},
    {"Softplus", ActKind::Softplus, false, false, 0.0f, 0.0f},
    {"Softsign", ActKind::Softsign, false, false, 0.0f, 0.0f},
    {"Tanh", ActKind::Tanh, false, false, 0.0f, 0.0f},
    {"ThresholdedRelu", ActKind::ThresholdedRelu, true, false, 1.0f, 0.0f},
};

/// The activations of every direction (perDir each, forward first). A list
/// with only perDir names serves both directions; activation_alpha/beta are
/// consumed in order by the activations that take them.
static llvm::Expected<std::vector<Activation>>
parseActivations(const Node &n, llvm::ArrayRef<const char *> defaults, int64_t dirs) {
  std::vector<std::string> names(defaults.begin(), defaults.end());
  if (const Attribute *a = n.attr("activations"))
    if (!a->strings.empty())
      names = a->strings;
  size_t perDir = defaults.size();
  if (names.size() != perDir && names.size() != perDir * dirs)
    return nodeError(n, "activations lists " + std::to_string(names.size()) +
                            " functions; expected " + std::to_string(perDir * dirs));
  std::vector<float> alphas, betas;
  if (const Attribute *a = n.attr("activation_alpha"))
    alphas = a->floats;
  if (const Attribute *a = n.attr("activation_beta"))
    betas = a->floats;
  size_t ai = 0, bi = 0;
  std::vector<Activation> acts;
  for (const std::string &name : names) {
    const ActInfo *info = nullptr;
    for (const ActInfo &i : kActivations)
      if (llvm::StringRef(name).equals_insensitive(i.name))
        info = &i;
    if (!info)
      return nodeError(n, "activation " + quoteName(name) + " is not supported");
    Activation act{info->kind, info->alpha, info->beta};
    if (info->hasAlpha && ai < alphas.size())
      act.alpha = alphas[ai++];
    if (info->hasBeta && bi < betas.size())
      act.beta = betas[bi++];
    acts.push_back(act);
  }
  while (acts.size() < perDir * dirs)
    acts.push_back(acts[acts.size() - perDir]);
  return acts;
}

static float activate(const Activation &a, float x) {
  switch (a.kind) {
  case ActKind::Sigmoid: return k::Sigmoid()(x);
  case ActKind::Tanh: return std::tanh(x);
  case ActKind::Relu: return x < 0 ? 0.0f : x;
  case ActKind::Affine: return a.alpha * x + a.beta;
  case ActKind::LeakyRelu: return x < 0 ? a.alpha * x : x;
  case ActKind::ThresholdedRelu: return x > a.alpha ? x : 0.0f;
  case ActKind::ScaledTanh: return a.alpha * std::tanh(a.beta * x);
  case ActKind::HardSigmoid: return std::max(0.0f, std::min(1.0f, a.alpha * x + a.beta));
  case ActKind::Elu: return x >= 0 ? x : a.alpha * std::expm1(x);
  case ActKind::Softsign: return x / (1.0f + std::fabs(x));
  case ActKind::Softplus:
    return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  return x;
}

/// Clips (when clip > 0) and applies `a` to x[0, n) in place.
static void applyActivation(const Activation &a, float clip, float *x, int64_t n) {
  if (clip > 0)
    for (int64_t i = 0; i < n; ++i)
      x[i] = std::max(-clip, std::min(clip, x[i]));
  // The defaults take the vectorized element-wise loops.
  if (a.kind == ActKind::Sigmoid)
    k::applyUnary<float, float, k::Sigmoid>(k::Sigmoid(), x, x, n);
  else if (a.kind == ActKind::Tanh)
    k::applyUnary<float, float, k::Tanh>(k::Tanh(), x, x, n);
  else
    for (int64_t i = 0; i < n; ++i)
      x[i] = activate(a, x[i]);
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

static llvm::Error checkDirection(const Node &n) {
  llvm::StringRef d = n.stringAttr("direction", "forward");
  if (d != "forward" && d != "reverse" && d != "bidirectional")
    return nodeError(n, "unknown direction " + quoteName(d));
  if (n.intAttr("layout", 0) != 0 && n.intAttr("layout", 0) != 1)
    return nodeError(n, "layout must be 0 or 1");
  return llvm::Error::success();
}

/// Y and Y_h of a cell with `gates` gate blocks in W (GRU 3, RNN 1).
static llvm::Error shapeRecurrent(const ShapeQuery &q, std::vector<ShapedType> &out,
                                  int64_t gates, llvm::ArrayRef<const char *> acts) {
  const Node &n = q.node;
  if (auto e = checkDirection(n))
    return e;
  int64_t dirs = numDirections(n);
  auto a = parseActivations(n, acts, dirs);
  if (!a)
    return a.takeError();
  const auto &x = q.inputs[0].shape, &w = q.inputs[1].shape;
  bool batchMajor = n.intAttr("layout", 0) == 1;
  int64_t hidden = n.intAttr("hidden_size", w.size() == 3 ? w[1] / gates : 0);
  if (x.size() != 3 || w.size() != 3 || w[0] != dirs || w[1] != gates * hidden ||
      w[2] != x[2])
    return nodeError(n, "input " + formatShape(x) + " and weight " + formatShape(w) +
                            " do not match");
  const auto &r = q.inputs[2].shape;
  if (r.size() != 3 || r[0] != dirs || r[1] != gates * hidden || r[2] != hidden)
    return nodeError(n, "recurrence weight " + formatShape(r) + " does not match");
  if (q.inputs.size() > 3 && q.inputs[3].dtype != DType::Undefined &&
      k::numElements(q.inputs[3].shape) != dirs * 2 * gates * hidden)
    return nodeError(n, "bias " + formatShape(q.inputs[3].shape) + " does not match");
  int64_t seq = batchMajor ? x[1] : x[0], batch = batchMajor ? x[0] : x[1];
  DType t = q.inputs[0].dtype;
  if (batchMajor)
    out = {ShapedType{t, {batch, seq, dirs, hidden}}, ShapedType{t, {batch, dirs, hidden}}};
  else
    out = {ShapedType{t, {seq, dirs, batch, hidden}}, ShapedType{t, {dirs, batch, hidden}}};
  out.resize(n.numOutputs());
  return llvm::Error::success();
}

static const char *const kGruActs[] = {"Sigmoid", "Tanh"};
static const char *const kRnnActs[] = {"Tanh"};

llvm::Error shapes::shapeGRU(const ShapeQuery &q, std::vector<ShapedType> &out) {
  return shapeRecurrent(q, out, 3, kGruActs);
}

llvm::Error shapes::shapeRNN(const ShapeQuery &q, std::vector<ShapedType> &out) {
  return shapeRecurrent(q, out, 1, kRnnActs);
}

//===----------------------------------------------------------------------===//
// The shared driver
//===----------------------------------------------------------------------===//

/// Swaps the two leading axes of a [a, b, inner] array.
static std::vector<float> swapLeading(const std::vector<float> &v, int64_t a, int64_t b,
                                      int64_t inner) {
  std::vector<float> t(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      std::copy_n(v.data() + (i * b + j) * inner, inner, t.data() + (j * a + i) * inner);
  return t;
}

namespace {
/// Everything a cell step needs, in fp32 and sequence-major layout.
struct Recurrence {
  int64_t seq = 0, batch = 0, in = 0, hid = 0, dirs = 1, gates = 1;
  bool reverse = false;
  float clip = 0;
  std::vector<float> x, w, r, b, h0;
  std::vector<int64_t> lens;
  std::vector<Activation> acts;
};
} // namespace

static llvm::Expected<Recurrence> loadRecurrence(const KernelCall &c, int64_t gates,
                                                 llvm::ArrayRef<const char *> acts) {
  const Node &n = *c.node;
  Recurrence p;
  bool batchMajor = n.intAttr("layout", 0) == 1;
  p.seq = c.inputs[0].shape[batchMajor ? 1 : 0];
  p.batch = c.inputs[0].shape[batchMajor ? 0 : 1];
  p.in = c.inputs[0].shape[2];
  p.dirs = numDirections(n);
  p.hid = c.inputs[2].shape[2];
  p.gates = gates;
  p.reverse = n.stringAttr("direction", "forward") == "reverse";
  p.clip = n.attr("clip") ? n.floatAttr("clip", 0.0f) : 0.0f;
  auto a = parseActivations(n, acts, p.dirs);
  if (!a)
    return a.takeError();
  p.acts = std::move(*a);
  p.x = widenInput(c, 0);
  p.w = widenInput(c, 1);
  p.r = widenInput(c, 2);
  p.b = widenInput(c, 3);
  p.h0 = widenInput(c, 5);
  if (batchMajor) {
    p.x = swapLeading(p.x, p.batch, p.seq, p.in);
    if (!p.h0.empty())
      p.h0 = swapLeading(p.h0, p.batch, p.dirs, p.hid);
  }
  p.lens.assign(p.batch, p.seq);
  if (c.hasInput(4)) {
    p.lens = readInts(c.inputs[4]);
    if (int64_t(p.lens.size()) != p.batch)
      return nodeError(n, "sequence_lens has " + std::to_string(p.lens.size()) +
                              " values for a batch of " + std::to_string(p.batch));
    for (int64_t &l : p.lens)
      if (l < 0 || l > p.seq)
        return nodeError(n, "sequence_lens value " + std::to_string(l) +
                                " is outside [0, " + std::to_string(p.seq) + "]");
  }
  return p;
}

/// Runs every direction: `step(d, gx, h, hNew)` maps the projected inputs
/// gx [batch, gates*hid] and the state h [batch, hid] to hNew. Y is
/// [seq, dirs, batch, hid] and Y_h [dirs, batch, hid].
template <typename StepFn>
static void runDirections(const Recurrence &p, StepFn step, std::vector<float> &y,
                          std::vector<float> &yh) {
  int64_t gh = p.gates * p.hid, hid = p.hid, batch = p.batch;
  y.assign(p.seq * p.dirs * batch * hid, 0.0f);
  yh.assign(p.dirs * batch * hid, 0.0f);
  std::vector<float> xw(p.seq * batch * gh), gx(batch * gh), h(batch * hid),
      hNew(batch * hid);
  for (int64_t d = 0; d < p.dirs; ++d) {
    cpu::gemm<float, float>(false, true, p.seq * batch, gh, p.in, 1.0f, p.x.data(), p.in,
                            p.w.data() + d * gh * p.in, p.in, 0.0f, xw.data(), gh);
    if (!p.b.empty())
      for (int64_t row = 0; row < p.seq * batch; ++row)
        for (int64_t j = 0; j < gh; ++j)
          xw[row * gh + j] += p.b[d * 2 * gh + j];
    for (int64_t i = 0; i < batch * hid; ++i)
      h[i] = p.h0.empty() ? 0.0f : p.h0[d * batch * hid + i];
    bool backward = p.reverse || d == 1;
    for (int64_t s = 0; s < p.seq; ++s) {
      for (int64_t bi = 0; bi < batch; ++bi) {
        int64_t t = backward ? p.lens[bi] - 1 - s : s;
        if (s < p.lens[bi])
          std::copy_n(xw.data() + (t * batch + bi) * gh, gh, gx.data() + bi * gh);
        else
          std::fill_n(gx.data() + bi * gh, gh, 0.0f);
      }
      step(d, gx.data(), h.data(), hNew.data());
      for (int64_t bi = 0; bi < batch; ++bi) {
        if (s >= p.lens[bi])
          continue;
        int64_t t = backward ? p.lens[bi] - 1 - s : s;
        std::copy_n(hNew.data() + bi * hid, hid, h.data() + bi * hid);
        std::copy_n(hNew.data() + bi * hid, hid,
                    y.data() + ((t * p.dirs + d) * batch + bi) * hid);
      }
    }
    std::copy(h.begin(), h.end(), yh.begin() + d * batch * hid);
  }
}

static void storeOutputs(const KernelCall &c, const Recurrence &p, std::vector<float> &y,
                         std::vector<float> &yh) {
  if (c.node->intAttr("layout", 0) == 1) {
    // [seq, dirs, batch, hid] -> [batch, seq, dirs, hid]; [dirs, batch, hid] -> [batch, dirs, hid].
    y = swapLeading(y, p.seq * p.dirs, p.batch, p.hid);
    yh = swapLeading(yh, p.dirs, p.batch, p.hid);
  }
  if (c.outputs.size() > 0)
    narrowFrom(c.outputs[0], y);
  if (c.outputs.size() > 1)
    narrowFrom(c.outputs[1], yh);
}

//===----------------------------------------------------------------------===//
// GRU
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runGRU(const KernelCall &c) {
  auto loaded = loadRecurrence(c, 3, kGruActs);
  if (!loaded)
    return loaded.takeError();
  const Recurrence &p = *loaded;
  bool linearBeforeReset = c.node->intAttr("linear_before_reset", 0) != 0;
  int64_t hid = p.hid, batch = p.batch, g3 = 3 * hid;
  std::vector<float> hr(batch * g3), rh(batch * hid), y, yh;
  auto step = [&](int64_t d, float *gx, const float *h, float *hNew) {
    const float *rd = p.r.data() + d * g3 * hid;
    const float *rb = p.b.empty() ? nullptr : p.b.data() + d * 2 * g3 + g3;
    const Activation &f = p.acts[d * 2], &g = p.acts[d * 2 + 1];
    // z and r (and with linear_before_reset the h block too) from one gemm.
    int64_t cols = linearBeforeReset ? g3 : 2 * hid;
    cpu::gemm<float, float>(false, true, batch, cols, hid, 1.0f, h, hid, rd, hid, 0.0f,
                            hr.data(), g3);
    for (int64_t bi = 0; bi < batch; ++bi) {
      float *zr = gx + bi * g3, *hrRow = hr.data() + bi * g3;
      for (int64_t j = 0; j < 2 * hid; ++j)
        zr[j] += hrRow[j] + (rb ? rb[j] : 0.0f);
      applyActivation(f, p.clip, zr, 2 * hid);
    }
    if (linearBeforeReset) {
      for (int64_t bi = 0; bi < batch; ++bi) {
        float *row = gx + bi * g3, *hrRow = hr.data() + bi * g3;
        for (int64_t j = 0; j < hid; ++j)
          row[2 * hid + j] +=
              row[hid + j] * (hrRow[2 * hid + j] + (rb ? rb[2 * hid + j] : 0.0f));
      }
    } else {
      for (int64_t bi = 0; bi < batch; ++bi)
        for (int64_t j = 0; j < hid; ++j)
          rh[bi * hid + j] = gx[bi * g3 + hid + j] * h[bi * hid + j];
      // (r . H) * R_h^T accumulated straight into the h block of gx.
      cpu::gemm<float, float>(false, true, batch, hid, hid, 1.0f, rh.data(), hid,
                              rd + 2 * hid * hid, hid, 1.0f, gx + 2 * hid, g3);
      if (rb)
        for (int64_t bi = 0; bi < batch; ++bi)
          for (int64_t j = 0; j < hid; ++j)
            gx[bi * g3 + 2 * hid + j] += rb[2 * hid + j];
    }
    for (int64_t bi = 0; bi < batch; ++bi) {
      float *row = gx + bi * g3, *ht = row + 2 * hid;
      applyActivation(g, p.clip, ht, hid);
      for (int64_t j = 0; j < hid; ++j)
        hNew[bi * hid + j] = (1.0f - row[j]) * ht[j] + row[j] * h[bi * hid + j];
    }
  };
  runDirections(p, step, y, yh);
  storeOutputs(c, p, y, yh);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// RNN
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runRNN(const KernelCall &c) {
  auto loaded = loadRecurrence(c, 1, kRnnActs);
  if (!loaded)
    return loaded.takeError();
  const Recurrence &p = *loaded;
  int64_t hid = p.hid, batch = p.batch;
  std::vector<float> y, yh;
  auto step = [&](int64_t d, float *gx, const float *h, float *hNew) {
    const float *rb = p.b.empty() ? nullptr : p.b.data() + d * 2 * hid + hid;
    cpu::gemm<float, float>(false, true, batch, hid, hid, 1.0f, h, hid,
                            p.r.data() + d * hid * hid, hid, 1.0f, gx, hid);
    for (int64_t bi = 0; bi < batch; ++bi) {
      float *row = gx + bi * hid;
      if (rb)
        for (int64_t j = 0; j < hid; ++j)
          row[j] += rb[j];
      applyActivation(p.acts[d], p.clip, row, hid);
      std::copy_n(row, hid, hNew + bi * hid);
    }
  };
  runDirections(p, step, y, yh);
  storeOutputs(c, p, y, yh);
  return llvm::Error::success();
}
