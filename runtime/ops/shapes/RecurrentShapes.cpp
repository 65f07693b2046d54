//===- RecurrentShapes.cpp - Registry shape functions -----------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): LSTM, GRU and RNN,
// and the activation parsing GRU and RNN share with their kernels.
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../ShapeHelpers.h"
#include "../ShapeFunctions.h"
#include "../NodeGeometry.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>
#include <cmath>

using namespace mpc;
using namespace mpc::shapes;

int64_t shapes::numDirections(const Node &n) {
  return n.stringAttr("direction", "forward") == "bidirectional" ? 2 : 1;
}

static llvm::Error checkRecurrentAttrs(const Node &n);

llvm::Error shapes::checkLstmAttrs(const Node &n) {
  if (auto e = checkRecurrentAttrs(n))
    return e;
  if (n.intAttr("layout", 0) != 0)
    return nodeError(n, "layout = 1 is not supported");
  if (n.attr("clip"))
    return nodeError(n, "the clip attribute is not supported");
  if (n.intAttr("input_forget", 0) != 0)
    return nodeError(n, "input_forget = 1 is not supported");
  if (const Attribute *a = n.attr("activations")) {
    for (size_t i = 0; i < a->strings.size(); ++i) {
      const char *expect = i % 3 == 0 ? "Sigmoid" : "Tanh";
      if (a->strings[i] != expect)
        return nodeError(n, "activation " + a->strings[i] +
                                " is not supported (only Sigmoid, Tanh, Tanh)");
    }
  }
  return llvm::Error::success();
}

/// The optional operands' shapes of a recurrent node with `gates` gate blocks:
/// B, sequence_lens, initial_h (and, for LSTM, initial_c and P). The kernels read them by
/// these sizes: an LSTM with a rank-2 R aborted (std::length_error), a short
/// initial_h was read past its end.
static llvm::Error checkRecurrentOperands(const ShapeQuery &q, int64_t gates, int64_t dirs,
                                          int64_t batch, int64_t hidden, bool batchMajor) {
  const Node &n = q.node;
  auto present = [&](unsigned i) {
    return q.inputs.size() > i && q.inputs[i].dtype != DType::Undefined;
  };
  const auto &r = q.inputs[2].shape;
  if (r.size() != 3 || r[0] != dirs || r[1] != gates * hidden || r[2] != hidden)
    return nodeError(n, "recurrence weight " + formatShape(r) + " does not match");
  if (present(3) && q.inputs[3].shape != std::vector<int64_t>{dirs, 2 * gates * hidden})
    return nodeError(n, "bias " + formatShape(q.inputs[3].shape) + " is not " +
                            formatShape({dirs, 2 * gates * hidden}));
  // sequence_lens is one length per batch entry (a scalar of the right value
  // ran where onnxruntime refuses it).
  if (present(4) && q.inputs[4].shape != std::vector<int64_t>{batch})
    return nodeError(n, "sequence_lens " + formatShape(q.inputs[4].shape) + " is not " +
                            formatShape({batch}) + " (one length per batch entry)");
  std::vector<int64_t> state = batchMajor ? std::vector<int64_t>{batch, dirs, hidden}
                                          : std::vector<int64_t>{dirs, batch, hidden};
  for (unsigned i : {5u, 6u})
    if (present(i) && (i == 5 || gates == 4) && q.inputs[i].shape != state)
      return nodeError(n, std::string(i == 5 ? "initial_h " : "initial_c ") +
                              formatShape(q.inputs[i].shape) + " is not " +
                              formatShape(state));
  if (gates == 4 && present(7) && q.inputs[7].shape != std::vector<int64_t>{dirs, 3 * hidden})
    return nodeError(n, "peepholes " + formatShape(q.inputs[7].shape) + " are not " +
                            formatShape({dirs, 3 * hidden}));
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeLSTM)
llvm::Error shapes::shapeLSTM(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = checkLstmAttrs(q.node))
    return e;
  const auto &x = q.inputs[0].shape, &w = q.inputs[1].shape;
  int64_t dirs = numDirections(q.node);
  int64_t hidden = q.node.intAttr("hidden_size", w.size() == 3 ? w[1] / 4 : 0);
  if (x.size() != 3 || w.size() != 3 || w[0] != dirs || w[1] != 4 * hidden ||
      w[2] != x[2])
    return nodeError(q.node, "input " + formatShape(x) + " and weight " +
                                 formatShape(w) + " do not match");
  if (auto e = checkRecurrentOperands(q, 4, dirs, x[1], hidden, /*batchMajor=*/false))
    return e;
  if (q.inputs.size() > 4 && q.inputs[4].dtype != DType::Undefined) {
    const HostTensor *lens = q.values[4];
    if (!lens)
      return unknownOperand(q.node, "sequence_lens");
    for (int64_t i = 0; i < lens->numElements(); ++i)
      if (lens->getAsInt64(i) != x[0])
        return nodeError(q.node, "sequence_lens shorter than the input are not supported");
  }
  DType t = q.inputs[0].dtype;
  out = {ShapedType{t, {x[0], dirs, x[1], hidden}}, ShapedType{t, {dirs, x[1], hidden}},
         ShapedType{t, {dirs, x[1], hidden}}};
  out.resize(q.node.numOutputs());
  return llvm::Error::success();
}

namespace {
struct ActInfo {
  const char *name;
  ActKind kind;
  bool hasAlpha, hasBeta;
  float alpha, beta; ///< Defaults of the ONNX operators of the same name.
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

llvm::Expected<std::vector<Activation>>
shapes::parseActivations(const Node &n, const RecurrentParams &p,
                         llvm::ArrayRef<const char *> defaults, int64_t dirs) {
  std::vector<std::string> names(defaults.begin(), defaults.end());
  if (!p.activations.empty())
    names = p.activations;
  size_t perDir = defaults.size();
  if (names.size() != perDir && names.size() != perDir * dirs)
    return nodeError(n, "activations lists " + std::to_string(names.size()) +
                            " functions; expected " + std::to_string(perDir * dirs));
  const std::vector<float> &alphas = p.activationAlpha, &betas = p.activationBeta;
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

static llvm::Expected<std::vector<Activation>>
nodeActivations(const Node &n, llvm::ArrayRef<const char *> defaults, int64_t dirs) {
  auto p = parseRecurrent(n);
  if (!p)
    return p.takeError();
  return parseActivations(n, static_cast<const RecurrentParams &>(**p), defaults, dirs);
}

/// The parser's checks (direction, layout, hidden_size), for callers that
/// shape a node the executor did not parse (the report's estimator).
static llvm::Error checkRecurrentAttrs(const Node &n) {
  auto p = parseRecurrent(n);
  return p ? llvm::Error::success() : p.takeError();
}

/// Y and Y_h of a cell with `gates` gate blocks in W (GRU 3, RNN 1).
static llvm::Error shapeRecurrent(const ShapeQuery &q, std::vector<ShapedType> &out,
                                  int64_t gates, llvm::ArrayRef<const char *> acts) {
  const Node &n = q.node;
  if (auto e = checkRecurrentAttrs(n))
    return e;
  int64_t dirs = numDirections(n);
  auto a = nodeActivations(n, acts, dirs);
  if (!a)
    return a.takeError();
  const auto &x = q.inputs[0].shape, &w = q.inputs[1].shape;
  bool batchMajor = n.intAttr("layout", 0) == 1;
  int64_t hidden = n.intAttr("hidden_size", w.size() == 3 ? w[1] / gates : 0);
  if (x.size() != 3 || w.size() != 3 || w[0] != dirs || w[1] != gates * hidden ||
      w[2] != x[2])
    return nodeError(n, "input " + formatShape(x) + " and weight " + formatShape(w) +
                            " do not match");
  int64_t seq = batchMajor ? x[1] : x[0], batch = batchMajor ? x[0] : x[1];
  if (auto e = checkRecurrentOperands(q, gates, dirs, batch, hidden, batchMajor))
    return e;
  DType t = q.inputs[0].dtype;
  if (batchMajor)
    out = {ShapedType{t, {batch, seq, dirs, hidden}}, ShapedType{t, {batch, dirs, hidden}}};
  else
    out = {ShapedType{t, {seq, dirs, batch, hidden}}, ShapedType{t, {dirs, batch, hidden}}};
  out.resize(n.numOutputs());
  return llvm::Error::success();
}

const char *const shapes::kGruActs[2] = {"Sigmoid", "Tanh"};
const char *const shapes::kRnnActs[1] = {"Tanh"};

MPC_DEFINED_BELOW(shapes::shapeGRU)
llvm::Error shapes::shapeGRU(const ShapeQuery &q, std::vector<ShapedType> &out) {
  return shapeRecurrent(q, out, 3, kGruActs);
}

MPC_DEFINED_BELOW(shapes::shapeRNN)
llvm::Error shapes::shapeRNN(const ShapeQuery &q, std::vector<ShapedType> &out) {
  return shapeRecurrent(q, out, 1, kRnnActs);
}
