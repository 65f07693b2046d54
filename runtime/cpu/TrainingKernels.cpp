//===- TrainingKernels.cpp - CPU kernels of the ai.mpc.training ops -------===//
//
// The gradient operators of docs/training.md, the default-domain losses
// (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) and training-mode
// BatchNormalization, as rows of the CPU kernel table: shape functions and
// KernelCall wrappers over the math in runtime/cpu/TrainingOps.cpp.
// Parameters and statistics of another float type than the data (fp32 scale
// with fp16 data) are widened to the accumulation type here.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Cast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "mpc/Ops/OptimizerStep.h"
#include "mpc/Runtime/Cpu/TrainingOps.h"
#include "mpc/Runtime/Kernels/OptimizerBodies.h"
#include "mpc/Runtime/Kernels/UnscaleBody.h"
#include "mpc/Runtime/LossErrors.h"
#include <algorithm>
#include <cstring>
#include <limits>

using namespace mpc;
using namespace mpc::cpuk;

static const char *const kDomain = "ai.mpc.training";
static constexpr DTypeSet kOptimizerStepTypes = dtypeBit(DType::F32) | dtypeBit(DType::F64);

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The elements of a float tensor converted to A.
template <typename A> static std::vector<A> loadAs(const TensorRef &t) {
  std::vector<A> v(size_t(t.numElements()));
  dispatchFloat(t.dtype, [&](auto tag) {
    using S = decltype(tag);
    const S *p = t.as<S>();
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = kernels::castValue<A>(p[i]);
  });
  return v;
}

/// Stores v into an output of any float type; absent outputs are skipped.
template <typename A> static void storeAs(const std::vector<A> &v, const TensorRef &t) {
  if (!t.data)
    return;
  dispatchFloat(t.dtype, [&](auto tag) {
    using S = decltype(tag);
    S *p = t.as<S>();
    for (size_t i = 0; i < v.size(); ++i)
      p[i] = kernels::castValue<S>(v[i]);
  });
}

static bool hasOutput(const KernelCall &c, unsigned i) {
  return i < c.outputs.size() && c.outputs[i].data != nullptr;
}

/// The reduction of a launched loss, from its parsed parameters.
static llvm::Expected<cpu::LossReduction> reductionOf(const KernelCall &c) {
  return lossReductionOf(*c.node, paramsOf<LossParams>(c).reduction);
}

//===----------------------------------------------------------------------===//
// Element-wise gradients
//===----------------------------------------------------------------------===//

template <cpu::ActivationGrad K> static llvm::Error runActivationGrad(const KernelCall &c) {
  cpu::ActivationGrad kind = K;
  if (K == cpu::ActivationGrad::Gelu) {
    llvm::StringRef approx = paramsOf<ElementwiseParams>(c).text;
    if (approx == "tanh")
      kind = cpu::ActivationGrad::GeluTanh;
    else if (approx != "none")
      return nodeError(*c.node, "unknown approximate " + quoteName(approx));
  }
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::activationGrad<T>(kind, c.inputs[0].as<T>(), c.inputs[1].as<T>(),
                           c.outputs[0].as<T>(), c.outputs[0].numElements());
  });
  return llvm::Error::success();
}

static llvm::Error runBiasGrad(const KernelCall &c) {
  DType in = c.inputs[0].dtype, out = c.outputs[0].dtype;
  if (in != out) { // `to` = float32 over a 16-bit dY (the shape function allows no other)
    if (out != DType::F32 || (in != DType::F16 && in != DType::BF16))
      return nodeError(*c.node, "no kernel for dY " + dtypeName(in).str() + " -> " +
                                    dtypeName(out).str());
    if (in == DType::F16)
      cpu::biasGrad<Half, float>(c.inputs[0].as<Half>(), c.inputs[0].shape,
                                 c.outputs[0].shape, c.outputs[0].as<float>());
    else
      cpu::biasGrad<BFloat16, float>(c.inputs[0].as<BFloat16>(), c.inputs[0].shape,
                                     c.outputs[0].shape, c.outputs[0].as<float>());
    return llvm::Error::success();
  }
  dispatchFloat(out, [&](auto tag) {
    using T = decltype(tag);
    cpu::biasGrad<T>(c.inputs[0].as<T>(), c.inputs[0].shape, c.outputs[0].shape,
                     c.outputs[0].as<T>());
  });
  return llvm::Error::success();
}

template <bool Log> static llvm::Error runSoftmaxGrad(const KernelCall &c) {
  const auto &shape = c.inputs[1].shape;
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, std::max<int64_t>(shape.size(), 1));
  int64_t outer, axisDim, inner;
  splitAt(shape, axis, outer, axisDim, inner);
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::softmaxGrad<T>(c.inputs[0].as<T>(), c.inputs[1].as<T>(), c.outputs[0].as<T>(),
                        outer, axisDim, inner, Log);
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Normalization gradients
//===----------------------------------------------------------------------===//

static llvm::Error runLayerNormGrad(const KernelCall &c) {
  const auto &x = c.inputs[1].shape;
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, x.size());
  int64_t outer, axisDim, inner;
  splitAt(x, axis, outer, axisDim, inner);
  inner *= axisDim;
  dispatchFloat(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = kernels::AccumType<T>;
    std::vector<A> scale = loadAs<A>(c.inputs[2]), mean = loadAs<A>(c.inputs[3]),
                   inv = loadAs<A>(c.inputs[4]);
    std::vector<A> dScale(size_t(inner), A(0)), dBias(size_t(inner), A(0));
    cpu::layerNormGrad<T>(c.inputs[0].as<T>(), c.inputs[1].as<T>(), scale.data(), mean.data(),
                          inv.data(), hasOutput(c, 0) ? c.outputs[0].as<T>() : nullptr,
                          hasOutput(c, 1) ? dScale.data() : nullptr,
                          hasOutput(c, 2) ? dBias.data() : nullptr, outer, inner);
    if (hasOutput(c, 1))
      storeAs(dScale, c.outputs[1]);
    if (hasOutput(c, 2))
      storeAs(dBias, c.outputs[2]);
  });
  return llvm::Error::success();
}

static llvm::Error runBatchNormGrad(const KernelCall &c) {
  const auto &x = c.inputs[1].shape;
  int64_t batch = x[0], channels = x[1];
  int64_t spatial = c.inputs[1].numElements() / std::max<int64_t>(batch * channels, 1);
  float eps = paramsOf<BatchNormParams>(c).epsilon;
  dispatchFloat(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = kernels::AccumType<T>;
    std::vector<A> scale = loadAs<A>(c.inputs[2]);
    std::vector<A> dScale(static_cast<size_t>(channels)), dBias(static_cast<size_t>(channels));
    cpu::batchNormGrad<T>(c.inputs[0].as<T>(), c.inputs[1].as<T>(), scale.data(), eps,
                          hasOutput(c, 0) ? c.outputs[0].as<T>() : nullptr, dScale.data(),
                          dBias.data(), batch, channels, spatial);
    if (hasOutput(c, 1))
      storeAs(dScale, c.outputs[1]);
    if (hasOutput(c, 2))
      storeAs(dBias, c.outputs[2]);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runBatchNormTraining(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t batch = x.shape[0], channels = x.shape[1];
  int64_t spatial = x.numElements() / std::max<int64_t>(batch * channels, 1);
  const BatchNormParams &params = paramsOf<BatchNormParams>(c);
  float eps = params.epsilon;
  float momentum = params.momentum;
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = kernels::AccumType<T>;
    std::vector<A> scale = loadAs<A>(c.inputs[1]), bias = loadAs<A>(c.inputs[2]),
                   mean = loadAs<A>(c.inputs[3]), var = loadAs<A>(c.inputs[4]);
    std::vector<A> runMean(static_cast<size_t>(channels)), runVar(static_cast<size_t>(channels));
    cpu::batchNormTraining<T>(x.as<T>(), scale.data(), bias.data(), mean.data(), var.data(),
                              eps, momentum, c.outputs[0].as<T>(), runMean.data(),
                              runVar.data(), batch, channels, spatial);
    if (hasOutput(c, 1))
      storeAs(runMean, c.outputs[1]);
    if (hasOutput(c, 2))
      storeAs(runVar, c.outputs[2]);
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling gradients
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runConvGrad(const KernelCall &c) {
  auto g = convGradGeometry(*c.node, paramsOf<WindowParams>(c), c.inputs[0].shape, c.inputs[1].shape, c.inputs[2].shape);
  if (!g)
    return g.takeError();
  dispatchFloat(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::convGrad<T>(*g, c.inputs[0].as<T>(), c.inputs[1].as<T>(), c.inputs[2].as<T>(),
                     hasOutput(c, 0) ? c.outputs[0].as<T>() : nullptr,
                     hasOutput(c, 1) ? c.outputs[1].as<T>() : nullptr,
                     hasOutput(c, 2) ? c.outputs[2].as<T>() : nullptr);
  });
  return llvm::Error::success();
}

template <bool Max> static llvm::Error runPoolGrad(const KernelCall &c) {
  const WindowParams &p = paramsOf<WindowParams>(c);
  auto g = poolGradGeometry(*c.node, p, c.inputs[0].shape, c.inputs[1].shape);
  if (!g)
    return g.takeError();
  bool includePad = p.countIncludePad;
  dispatchFloat(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (Max)
      cpu::maxPoolGrad<T>(*g, c.inputs[0].as<T>(), c.inputs[1].as<T>(), c.outputs[0].as<T>());
    else
      cpu::averagePoolGrad<T>(*g, includePad, c.inputs[0].as<T>(), c.outputs[0].as<T>());
  });
  return llvm::Error::success();
}

static llvm::Error runGlobalAveragePoolGrad(const KernelCall &c) {
  const auto &x = c.inputs[1].shape;
  int64_t planes = x[0] * x[1];
  int64_t planeSize = c.inputs[1].numElements() / std::max<int64_t>(planes, 1);
  dispatchFloat(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::globalAveragePoolGrad<T>(c.inputs[0].as<T>(), c.outputs[0].as<T>(), planes,
                                  planeSize);
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Indexing gradients
//===----------------------------------------------------------------------===//

/// dX[o, idx[j], i] += dY[o, j, i], summed in A and rounded once.
template <typename A> static llvm::Error gatherGradAs(const KernelCall &c) {
  const TensorRef &dx = c.outputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, dx.shape.size());
  int64_t outer, dim, inner;
  splitAt(dx.shape, axis, outer, dim, inner);
  std::vector<int64_t> idx = readInts(c.inputs[2]);
  if (!normalizeIndices(c, idx, dim, /*operand=output 0*/ -1))
    return llvm::Error::success();
  std::vector<A> dy = loadAs<A>(c.inputs[0]), acc(size_t(dx.numElements()), A(0));
  int64_t n = int64_t(idx.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      const A *src = dy.data() + (o * n + j) * inner;
      A *dst = acc.data() + (o * dim + idx[j]) * inner;
      for (int64_t i = 0; i < inner; ++i)
        dst[i] += src[i];
    }
  storeAs(acc, dx);
  return llvm::Error::success();
}

static llvm::Error runGatherGrad(const KernelCall &c) {
  return c.inputs[0].dtype == DType::F64 ? gatherGradAs<double>(c) : gatherGradAs<float>(c);
}

/// Zeros, then each dY element copied to the X element the forward read.
static llvm::Error runSliceGrad(const KernelCall &c) {
  const TensorRef &dx = c.outputs[0];
  std::vector<int64_t> v[4];
  for (unsigned i = 2; i < 6; ++i)
    if (c.hasInput(i))
      v[i - 2] = readInts(c.inputs[i]);
  auto p = sliceParams(*c.node, dx.shape, v[0], v[1], v[2], v[3]);
  if (!p)
    return p.takeError();
  size_t es = runtimeElementSize(dx.dtype);
  kernels::CopyPlan plan;
  if (!kernels::slicePlan(dx.shape, p->starts, p->steps, p->outShape, plan))
    return nodeError(*c.node, "cannot slice " + formatShape(dx.shape) +
                                  ": too many dimensions after merging");
  kernels::swapCopySides(plan); // dY's elements scattered where the forward read
  std::memset(dx.data, 0, size_t(dx.numElements()) * es);
  kernels::copyByPlan(plan, c.inputs[0].data, dx.data, es);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Recurrent gradients
//===----------------------------------------------------------------------===//

/// The checked sizes of a recurrent gradient call and its sequence lengths
/// (empty when absent; each must lie in [1, seq]).
static llvm::Expected<cpu::LstmShape>
recurrentGradCall(const KernelCall &c, const RecurrentGradPorts &p,
                  llvm::Error (*checkAttrs)(const Node &), std::vector<int64_t> &lens) {
  std::vector<ShapedType> types;
  for (const TensorRef &t : c.inputs)
    types.push_back(ShapedType{t.dtype, std::vector<int64_t>(t.shape.begin(), t.shape.end())});
  std::vector<const HostTensor *> values(types.size(), nullptr);
  auto s = recurrentGradShape(ShapeQuery{*c.node, types, values}, p, checkAttrs);
  if (!s)
    return s.takeError();
  if (c.hasInput(p.lens)) {
    lens = readInts(c.inputs[p.lens]);
    for (size_t i = 0; i < lens.size(); ++i)
      if (lens[i] < 1 || lens[i] > s->seq)
        return nodeError(*c.node, "sequence_lens[" + std::to_string(i) + "] = " +
                                      std::to_string(lens[i]) + " is outside [1, " +
                                      std::to_string(s->seq) + "]");
  }
  return s;
}

static llvm::Error runLstmGrad(const KernelCall &c) {
  std::vector<int64_t> lens;
  auto s = recurrentGradCall(c, kLstmPorts, checkLstmAttrs, lens);
  if (!s)
    return s.takeError();
  dispatchFloat(c.inputs[kX].dtype, [&](auto tag) {
    using T = decltype(tag);
    auto in = [&](unsigned i) { return c.hasInput(i) ? c.inputs[i].as<T>() : nullptr; };
    auto out = [&](unsigned i) { return hasOutput(c, i) ? c.outputs[i].as<T>() : nullptr; };
    cpu::LstmGradBuffers<T> io;
    io.dY = in(kDY);
    io.dYh = in(kDYh);
    io.dYc = in(kDYc);
    io.x = in(kX);
    io.w = in(kW);
    io.r = in(kR);
    io.b = in(kB);
    io.h0 = in(kH0);
    io.c0 = in(kC0);
    io.lens = lens.empty() ? nullptr : lens.data();
    io.dX = out(0);
    io.dW = out(1);
    io.dR = out(2);
    io.dB = out(3);
    io.dH0 = out(4);
    io.dC0 = out(5);
    cpu::lstmGrad<T>(*s, io);
  });
  return llvm::Error::success();
}

static llvm::Error runGruGrad(const KernelCall &c) {
  std::vector<int64_t> lens;
  auto s = recurrentGradCall(c, kGruPorts, checkGruGradAttrs, lens);
  if (!s)
    return s.takeError();
  cpu::GruShape shape;
  static_cast<cpu::LstmShape &>(shape) = *s;
  shape.linearBeforeReset = c.node->intAttr("linear_before_reset", 0) != 0;
  dispatchFloat(c.inputs[kGX].dtype, [&](auto tag) {
    using T = decltype(tag);
    auto in = [&](unsigned i) { return c.hasInput(i) ? c.inputs[i].as<T>() : nullptr; };
    auto out = [&](unsigned i) { return hasOutput(c, i) ? c.outputs[i].as<T>() : nullptr; };
    cpu::GruGradBuffers<T> io;
    io.dY = in(kGDY);
    io.dYh = in(kGDYh);
    io.x = in(kGX);
    io.w = in(kGW);
    io.r = in(kGR);
    io.b = in(kGB);
    io.h0 = in(kGH0);
    io.lens = lens.empty() ? nullptr : lens.data();
    io.dX = out(0);
    io.dW = out(1);
    io.dR = out(2);
    io.dB = out(3);
    io.dH0 = out(4);
    cpu::gruGrad<T>(shape, io);
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Losses and their gradients
//===----------------------------------------------------------------------===//

/// Runs fn(I()) for the label dtype, after checking every label is a class
/// index or the ignored value.
template <typename Fn>
static llvm::Error withLabels(const KernelCall &c, unsigned port, int64_t classes, Fn &&fn) {
  const TensorRef &l = c.inputs[port];
  auto run = [&](auto tag) -> llvm::Error {
    using I = decltype(tag);
    cpu::LossLabels<I> labels;
    labels.labels = l.as<I>();
    const LossParams &params = paramsOf<LossParams>(c);
    labels.hasIgnoreIndex = params.hasIgnoreIndex;
    labels.ignoreIndex = params.ignoreIndex;
    int64_t bad = cpu::findBadLabel(labels, l.numElements(), classes);
    if (bad >= 0)
      return nodeError(*c.node, badLabelText(int64_t(labels.labels[bad]), bad, classes));
    fn(labels);
    return llvm::Error::success();
  };
  return l.dtype == DType::I32 ? run(int32_t()) : run(int64_t());
}

template <bool FromLogProb> static llvm::Error runClassificationLoss(const KernelCall &c) {
  auto red = reductionOf(c);
  if (!red)
    return red.takeError();
  const auto &s = c.inputs[0].shape;
  int64_t batch = s[0], classes = s[1];
  int64_t inner = c.inputs[0].numElements() / std::max<int64_t>(batch * classes, 1);
  llvm::Error err = llvm::Error::success();
  dispatchFloat(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *weights = c.hasInput(2) ? c.inputs[2].as<T>() : nullptr;
    T *logProb = hasOutput(c, 1) ? c.outputs[1].as<T>() : nullptr;
    err = withLabels(c, 1, classes, [&](const auto &labels) {
      cpu::classificationLoss<T>(c.inputs[0].as<T>(), labels, weights, *red, FromLogProb,
                                 c.outputs[0].as<T>(), logProb, batch, classes, inner);
    });
  });
  return err;
}

static llvm::Error runSoftmaxCrossEntropyLossGrad(const KernelCall &c) {
  auto red = reductionOf(c);
  if (!red)
    return red.takeError();
  const auto &s = c.inputs[1].shape;
  int64_t batch = s[0], classes = s[1];
  int64_t inner = c.inputs[1].numElements() / std::max<int64_t>(batch * classes, 1);
  llvm::Error err = llvm::Error::success();
  dispatchFloat(c.inputs[1].dtype, [&](auto tag) {
    using T = decltype(tag);
    err = withLabels(c, 2, classes, [&](const auto &labels) {
      cpu::softmaxCrossEntropyLossGrad<T>(c.inputs[0].as<T>(), c.inputs[1].as<T>(), labels,
                                          *red, c.outputs[0].as<T>(), batch, classes, inner);
    });
  });
  return err;
}

static llvm::Error runMSELossGrad(const KernelCall &c) {
  auto red = reductionOf(c);
  if (!red)
    return red.takeError();
  dispatchFloat(c.inputs[1].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::mseLossGrad<T>(c.inputs[0].as<T>(), c.inputs[1].as<T>(), c.inputs[2].as<T>(), *red,
                        c.outputs[0].as<T>(), c.outputs[0].numElements());
  });
  return llvm::Error::success();
}

/// n elements of one gradient through kernels::unscaleElement; true when one
/// of the results is not finite. A plain loop over restrict pointers, so the
/// compiler may vectorize it as it does the element-wise kernels.
template <typename T>
static bool unscaleSpan(const T *__restrict x, int64_t n, float inv, float *__restrict u) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i)
    bad |= kernels::unscaleElement(x[i], inv, u[i]);
  return bad;
}

/// MultiTensorUnscale: every gradient in order; a gradient's flag is NaN when
/// any of its elements was not finite. An output the executor left without a
/// buffer (a repeated gradient line whose copy nobody reads) is only checked.
static llvm::Error runMultiTensorUnscale(const KernelCall &c) {
  const float inv = *c.inputs[0].as<float>();
  float *flags = c.outputs[1].as<float>();
  bool any = false;
  std::vector<float> scratch;
  for (size_t g = 1; g < c.inputs.size(); ++g) {
    const TensorRef &in = c.inputs[g];
    float *u = c.outputs[g + 1].as<float>();
    int64_t n = in.numElements();
    if (!u) {
      scratch.resize(size_t(n));
      u = scratch.data();
    }
    bool bad = false;
    dispatchFloat(in.dtype, [&](auto tag) {
      using T = decltype(tag);
      bad = unscaleSpan(in.as<T>(), n, inv, u);
    });
    flags[g - 1] = bad ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    any |= bad;
  }
  *c.outputs[0].as<bool>() = any;
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Fused optimizer steps
//===----------------------------------------------------------------------===//

/// Whether the optional skip input of a fused step is present and true
/// (nonzero for a float flag).
static bool optimizerStepSkipped(const KernelCall &c, unsigned skipInput) {
  if (!c.hasInput(skipInput))
    return false;
  const TensorRef &f = c.inputs[skipInput];
  return f.dtype == DType::Bool ? f.as<bool>()[0] : f.as<float>()[0] != 0.0f;
}

/// The scalar inputs of a fused step of `kind` in `l`'s order.
template <typename T>
static kernels::OptimizerScalars<T> optimizerScalars(const KernelCall &c,
                                                     const OptimizerStepLayout &l,
                                                     kernels::OptimizerStepKind kind) {
  const T *scalars[kernels::kMaxOptimizerScalars] = {};
  for (unsigned i = 0; i < l.scalars.size() && i < kernels::kMaxOptimizerScalars; ++i)
    scalars[i] = c.inputs[l.firstScalar() + i].as<T>();
  const T *decay = c.hasInput(l.decayInput()) ? c.inputs[l.decayInput()].as<T>() : nullptr;
  return kernels::optimizerScalarsFrom(kind, scalars, decay);
}

/// The optional param_copy output of a fused step (f16 or bf16), or null.
static const TensorRef *optimizerStepCopy(const KernelCall &c, const OptimizerStepLayout &l) {
  unsigned o = l.copyOutput();
  if (o >= c.outputs.size() || !c.outputs[o].data)
    return nullptr;
  return &c.outputs[o];
}

/// The 16-bit weight copy of the n params at `p`, rounded by the Cast
/// kernel's own converter (cpu::castArray): the copy equals what a Cast of
/// the param gives, bit for bit.
static void writeWeightCopy(const TensorRef &copy, const float *p, int64_t n) {
  if (copy.dtype == DType::BF16)
    cpu::castArray(p, copy.as<BFloat16>(), n);
  else
    cpu::castArray(p, copy.as<Half>(), n);
}

/// One parameter's update: param, grad and `states` states at inputs
/// in, in+1, ...; the new param and states at outputs out, out+1, ...; the
/// bodies of OptimizerBodies.h element by element.
template <typename T>
static void stepGroup(const KernelCall &c, kernels::OptimizerStepKind kind,
                      const kernels::OptimizerScalars<T> &s, unsigned states, size_t in,
                      size_t out) {
  const T *p = c.inputs[in].as<T>(), *g = c.inputs[in + 1].as<T>();
  const T *s1 = states > 0 ? c.inputs[in + 2].as<T>() : nullptr;
  const T *s2 = states > 1 ? c.inputs[in + 3].as<T>() : nullptr;
  T *po = c.outputs[out].as<T>();
  T *s1o = states > 0 ? c.outputs[out + 1].as<T>() : nullptr;
  T *s2o = states > 1 ? c.outputs[out + 2].as<T>() : nullptr;
  for (int64_t i = 0, n = c.inputs[in].numElements(); i < n; ++i) {
    T param = p[i], a = s1 ? s1[i] : T(0), b = s2 ? s2[i] : T(0);
    kernels::optimizerStepElement(kind, s, g[i], param, a, b);
    po[i] = param;
    if (s1o)
      s1o[i] = a;
    if (s2o)
      s2o[i] = b;
  }
}

/// Copies input `in` to output `out` unless they share the buffer.
static void copyThrough(const KernelCall &c, size_t in, size_t out) {
  const TensorRef &src = c.inputs[in];
  if (c.outputs[out].data != src.data)
    std::memcpy(c.outputs[out].data, src.data,
                size_t(src.numElements()) * runtimeElementSize(src.dtype));
}

/// SGDStep, MomentumStep, AdamStep: one pass over the parameter with the
/// bodies of OptimizerBodies.h; a skipped step copies param and states.
/// The optional 16-bit copy is the new param rounded (a skipped step's is
/// the unchanged param rounded), written right after the update.
static llvm::Error runOptimizerStep(const KernelCall &c) {
  const OptimizerStepLayout *l = findOptimizerStep(c.node->opType, c.node->domain);
  if (!l)
    return nodeError(*c.node, "not a fused optimizer step");
  auto kind = kernels::OptimizerStepKind(l - optimizerStepLayouts().data());
  unsigned states = unsigned(l->states.size());
  const TensorRef *copy = optimizerStepCopy(c, *l);
  if (copy && (c.inputs[0].dtype != DType::F32 ||
               (copy->dtype != DType::F16 && copy->dtype != DType::BF16)))
    return nodeError(*c.node, "param_copy needs a float param and a float16 or bfloat16 copy");
  if (optimizerStepSkipped(c, l->skipInput())) {
    for (unsigned o = 0; o < l->numOutputs(); ++o)
      copyThrough(c, o == 0 ? 0 : o + 1, o);
    if (copy)
      writeWeightCopy(*copy, c.inputs[0].as<float>(), c.inputs[0].numElements());
    return llvm::Error::success();
  }
  bool ok = false;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    kernels::OptimizerScalars<T> s = optimizerScalars<T>(c, *l, kind);
    stepGroup<T>(c, kind, s, states, 0, 0);
    if constexpr (std::is_same<T, float>::value)
      if (copy)
        writeWeightCopy(*copy, c.outputs[0].as<float>(), c.inputs[0].numElements());
    ok = true;
  };
  if (c.inputs[0].dtype == DType::F32)
    run(float());
  else if (c.inputs[0].dtype == DType::F64)
    run(double());
  if (!ok)
    return nodeError(*c.node, "param must be float or double");
  return llvm::Error::success();
}

/// MultiTensorSGDStep, MultiTensorMomentumStep, MultiTensorAdamStep: the
/// per-parameter step's body over each group in turn, with the scalars read
/// once; a skipped step copies every param and state.
static llvm::Error runMultiTensorStep(const KernelCall &c) {
  const OptimizerStepLayout *l = findMultiTensorStep(c.node->opType, c.node->domain);
  if (!l)
    return nodeError(*c.node, "not a multi-tensor optimizer step");
  auto kind = kernels::OptimizerStepKind(l - optimizerStepLayouts().data());
  unsigned states = unsigned(l->states.size());
  size_t first = l->multiFirstGroup(), per = l->groupInputs(), outs = l->groupOutputs();
  size_t groups = c.inputs.size() > first ? (c.inputs.size() - first) / per : 0;
  if (optimizerStepSkipped(c, l->multiSkipInput())) {
    for (size_t g = 0; g < groups; ++g)
      for (size_t o = 0; o < outs; ++o)
        copyThrough(c, first + g * per + (o == 0 ? 0 : o + 1), g * outs + o);
    return llvm::Error::success();
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *scalars[kernels::kMaxOptimizerScalars] = {};
    for (unsigned i = 0; i < l->scalars.size() && i < kernels::kMaxOptimizerScalars; ++i)
      scalars[i] = c.inputs[i].as<T>();
    const T *decay =
        c.hasInput(l->multiDecayInput()) ? c.inputs[l->multiDecayInput()].as<T>() : nullptr;
    kernels::OptimizerScalars<T> s = kernels::optimizerScalarsFrom(kind, scalars, decay);
    for (size_t g = 0; g < groups; ++g)
      stepGroup<T>(c, kind, s, states, first + g * per, g * outs);
  };
  if (c.inputs[0].dtype == DType::F32)
    run(float());
  else if (c.inputs[0].dtype == DType::F64)
    run(double());
  else
    return nodeError(*c.node, "the scalars and params must be float or double");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

std::vector<CpuKernel> mpc::cpuk::trainingRows() {
  using cpu::ActivationGrad;
  return {
      MPC_CPU_KERNEL("AveragePoolGrad", kDomain, 1, kFloatTypes, runPoolGrad<false>),
      MPC_CPU_KERNEL("BatchNormalizationGrad", kDomain, 1, kFloatTypes, runBatchNormGrad),
      MPC_CPU_KERNEL("BiasGrad", kDomain, 1, kFloatTypes, runBiasGrad),
      MPC_CPU_KERNEL("ConvGrad", kDomain, 1, kFloatTypes, runConvGrad),
      MPC_CPU_KERNEL("ErfGrad", kDomain, 1, kFloatTypes, runActivationGrad<ActivationGrad::Erf>),
      MPC_CPU_KERNEL("GatherGrad", kDomain, 1, kFloatTypes, runGatherGrad),
      MPC_CPU_KERNEL("GeluGrad", kDomain, 1, kFloatTypes, runActivationGrad<ActivationGrad::Gelu>),
      MPC_CPU_KERNEL("GlobalAveragePoolGrad", kDomain, 1, kFloatTypes, runGlobalAveragePoolGrad),
      // dY and dY_h are optional, as for LSTMGrad below.
      MPC_CPU_KERNEL("GRUGrad", kDomain, 1, kFloatTypes | dtypeBit(DType::Undefined), runGruGrad),
      MPC_CPU_KERNEL("LayerNormalizationGrad", kDomain, 1, kFloatTypes, runLayerNormGrad),
      MPC_CPU_KERNEL("LogSoftmaxGrad", kDomain, 1, kFloatTypes, runSoftmaxGrad<true>),
      // Input 0 (dY) is optional: the mask admits an absent one (Undefined) and
      // shapeLstmGrad checks X's dtype instead.
      MPC_CPU_KERNEL("LSTMGrad", kDomain, 1, kFloatTypes | dtypeBit(DType::Undefined), runLstmGrad),
      MPC_CPU_KERNEL("GemmBiasAct", kDomain, 1, dtypeBit(DType::F32) | dtypeBit(DType::F16) | dtypeBit(DType::BF16), runGemmBiasAct),
      MPC_CPU_KERNEL("MaxPoolGrad", kDomain, 1, kFloatTypes, runPoolGrad<true>),
      MPC_CPU_KERNEL("MSELossGrad", kDomain, 1, kFloatTypes, runMSELossGrad),
      MPC_CPU_KERNEL("MultiTensorUnscale", kDomain, 1, dtypeBit(DType::F32), runMultiTensorUnscale),
      MPC_CPU_KERNEL("ReluGrad", kDomain, 1, kFloatTypes, runActivationGrad<ActivationGrad::Relu>),
      MPC_CPU_KERNEL("SigmoidGrad", kDomain, 1, kFloatTypes, runActivationGrad<ActivationGrad::Sigmoid>),
      MPC_CPU_KERNEL("SoftmaxCrossEntropyLossGrad", kDomain, 1, kFloatTypes,
                     runSoftmaxCrossEntropyLossGrad),
      MPC_CPU_KERNEL("SliceGrad", kDomain, 1, kFloatTypes, runSliceGrad),
      MPC_CPU_KERNEL("SoftmaxGrad", kDomain, 1, kFloatTypes, runSoftmaxGrad<false>),
      MPC_CPU_KERNEL("TanhGrad", kDomain, 1, kFloatTypes, runActivationGrad<ActivationGrad::Tanh>),
      // Fused optimizer steps: f32 and f64 params (the skip flag is not the key).
      MPC_CPU_KERNEL("SGDStep", kDomain, 1, kOptimizerStepTypes, runOptimizerStep),
      MPC_CPU_KERNEL("MomentumStep", kDomain, 1, kOptimizerStepTypes, runOptimizerStep),
      MPC_CPU_KERNEL("AdamStep", kDomain, 1, kOptimizerStepTypes, runOptimizerStep),
      // Their multi-tensor forms, keyed by the first scalar (lr).
      MPC_CPU_KERNEL("MultiTensorSGDStep", kDomain, 1, kOptimizerStepTypes, runMultiTensorStep),
      MPC_CPU_KERNEL("MultiTensorMomentumStep", kDomain, 1, kOptimizerStepTypes, runMultiTensorStep),
      MPC_CPU_KERNEL("MultiTensorAdamStep", kDomain, 1, kOptimizerStepTypes, runMultiTensorStep),
      // Default-domain losses used by training graphs.
      MPC_CPU_KERNEL("NegativeLogLikelihoodLoss", "", 12, kFloatTypes, runClassificationLoss<true>),
      MPC_CPU_KERNEL("SoftmaxCrossEntropyLoss", "", 12, kFloatTypes, runClassificationLoss<false>),
  };
}
