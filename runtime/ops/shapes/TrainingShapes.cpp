//===- TrainingShapes.cpp - Registry shape functions ------------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): the ai.mpc.training
// gradient ops, losses and training-mode BatchNormalization.
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../ShapeHelpers.h"
#include "../ShapeFunctions.h"
#include "../NodeGeometry.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/GemmBiasAct.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Ops/OptimizerStep.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>
#include <cmath>

using namespace mpc;
using namespace mpc::shapes;

/// dX: dtype of dY, shape of input 1 (which dY must match).
MPC_DEFINED_BELOW(shapes::shapeUnaryGrad)
llvm::Error shapes::shapeUnaryGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = requireSameShape(q, 0, 1))
    return e;
  if (q.inputs[0].dtype != q.inputs[1].dtype)
    return nodeError(q.node, "dY and the forward value differ in dtype");
  out.assign(1, ShapedType{q.inputs[0].dtype, q.inputs[1].shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeBiasGrad)
llvm::Error shapes::shapeBiasGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto shape = knownInts(q, 1, "the shape input", ListForm::Any);
  if (!shape)
    return shape.takeError();
  const auto &dy = q.inputs[0].shape;
  bool ok = shape->size() <= dy.size();
  for (size_t j = 0; ok && j < shape->size(); ++j) {
    int64_t b = (*shape)[j], d = dy[dy.size() - shape->size() + j];
    ok = b == d || b == 1;
  }
  if (!ok)
    return nodeError(q.node, "shape " + formatShape(*shape) + " does not broadcast to dY " +
                                 formatShape(dy));
  auto to = biasGradOutputType(q.node, q.inputs[0].dtype);
  if (!to)
    return to.takeError();
  out.assign(1, ShapedType{*to, *shape});
  return llvm::Error::success();
}

llvm::Expected<DType> shapes::biasGradOutputType(const Node &n, DType dy) {
  if (!n.attr("to"))
    return dy;
  int64_t to = n.intAttr("to", 0);
  if (to == int64_t(dy))
    return dy;
  if (to == int64_t(DType::F32) && (dy == DType::F16 || dy == DType::BF16))
    return DType::F32;
  return nodeError(n, "to = " + std::to_string(to) + " with dY of type " +
                          std::string(dtypeName(dy)) +
                          ": `to` is dY's type, or 1 (float32) for a float16 or bfloat16 dY");
}

MPC_DEFINED_BELOW(shapes::shapeSoftmaxGrad)
llvm::Error shapes::shapeSoftmaxGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t axis = q.node.intAttr("axis", -1);
  if (!normalizeAxis(axis, std::max<int64_t>(q.inputs[1].shape.size(), 1)))
    return nodeError(q.node, "axis out of range for " + formatShape(q.inputs[1].shape));
  return shapeUnaryGrad(q, out);
}

MPC_DEFINED_BELOW(shapes::shapeLayerNormGrad)
llvm::Error shapes::shapeLayerNormGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = requireSameShape(q, 0, 1))
    return e;
  for (unsigned i = 2; i < 5; ++i)
    if (auto e = requireFloat(q, i, "Scale, Mean and InvStdDev"))
      return e;
  const auto &x = q.inputs[1].shape;
  int64_t axis = q.node.intAttr("axis", -1);
  if (!normalizeAxis(axis, x.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(x));
  int64_t outer, axisDim, inner;
  splitAt(x, axis, outer, axisDim, inner);
  inner = mulSat(inner, axisDim);
  if (numel(q.inputs[2].shape) != inner)
    return nodeError(q.node, "Scale " + formatShape(q.inputs[2].shape) +
                                 " does not cover the normalized axes of " + formatShape(x));
  if (numel(q.inputs[3].shape) != outer ||
      numel(q.inputs[4].shape) != outer)
    return nodeError(q.node, "Mean and InvStdDev must have one element per row");
  out.assign(1, ShapedType{q.inputs[0].dtype, x});
  out.push_back(q.inputs[2]);
  out.push_back(q.inputs[2]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeBatchNormGrad)
llvm::Error shapes::shapeBatchNormGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = requireSameShape(q, 0, 1))
    return e;
  if (auto e = requireFloat(q, 2, "scale"))
    return e;
  const auto &x = q.inputs[1].shape;
  if (x.size() < 2 || numel(q.inputs[2].shape) != x[1])
    return nodeError(q.node, "scale " + formatShape(q.inputs[2].shape) +
                                 " must have one element per channel of " + formatShape(x));
  out.assign(1, ShapedType{q.inputs[0].dtype, x});
  out.push_back(q.inputs[2]);
  out.push_back(q.inputs[2]);
  return llvm::Error::success();
}

/// Training-mode BatchNormalization (opset 14+, training_mode = 1): Y and
/// the optional running_mean and running_var, typed like input_mean.
MPC_DEFINED_BELOW(shapes::shapeBatchNormTraining)
llvm::Error shapes::shapeBatchNormTraining(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  if (x.size() < 2)
    return nodeError(q.node, "input " + formatShape(x) + " has rank below 2");
  for (unsigned i = 1; i < 5; ++i) {
    if (auto e = requireFloat(q, i, "scale, B, input_mean and input_var"))
      return e;
    if (q.inputs[i].shape != std::vector<int64_t>{x[1]})
      return nodeError(q.node, "scale, B, input_mean and input_var must be [" +
                                   std::to_string(x[1]) + "], one value per channel of " +
                                   formatShape(x) + "; input #" + std::to_string(i) + " is " +
                                   formatShape(q.inputs[i].shape));
  }
  out.assign(1, q.inputs[0]);
  out.push_back(q.inputs[3]);
  out.push_back(q.inputs[4]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeGlobalAveragePoolGrad)
llvm::Error shapes::shapeGlobalAveragePoolGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[1].shape, &dy = q.inputs[0].shape;
  bool ok = x.size() >= 2 && dy.size() == x.size() && dy[0] == x[0] && dy[1] == x[1];
  for (size_t i = 2; ok && i < dy.size(); ++i)
    ok = dy[i] == 1;
  if (!ok)
    return nodeError(q.node, "dY " + formatShape(dy) + " is not the GlobalAveragePool "
                                 "output shape of X " + formatShape(x));
  out.assign(1, ShapedType{q.inputs[0].dtype, x});
  return llvm::Error::success();
}

/// The forward data shape (input 1) and the checked dY shape of GatherGrad.
MPC_DEFINED_BELOW(shapes::shapeGatherGrad)
llvm::Error shapes::shapeGatherGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto x = knownInts(q, 1, "the shape input", ListForm::Any);
  if (!x)
    return x.takeError();
  int64_t axis = q.node.intAttr("axis", 0);
  if (!normalizeAxis(axis, x->size()))
    return nodeError(q.node, "axis out of range for " + formatShape(*x));
  if (q.inputs[2].dtype != DType::I64 && q.inputs[2].dtype != DType::I32)
    return nodeError(q.node, "indices must be int32 or int64");
  std::vector<int64_t> y(x->begin(), x->begin() + axis);
  const auto &ind = q.inputs[2].shape;
  y.insert(y.end(), ind.begin(), ind.end());
  y.insert(y.end(), x->begin() + axis + 1, x->end());
  if (q.inputs[0].shape != y)
    return nodeError(q.node, "dY " + formatShape(q.inputs[0].shape) +
                                 " is not the Gather output shape " + formatShape(y));
  out.assign(1, ShapedType{q.inputs[0].dtype, *x});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeSliceGrad)
llvm::Error shapes::shapeSliceGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto x = knownInts(q, 1, "the shape input", ListForm::Any);
  if (!x)
    return x.takeError();
  std::vector<int64_t> v[4];
  for (unsigned i = 2; i < 6 && i < q.inputs.size(); ++i) {
    if (q.inputs[i].dtype == DType::Undefined)
      continue;
    auto k = knownInts(q, i, "slice bounds", ListForm::Any);
    if (!k)
      return k.takeError();
    v[i - 2] = *k;
  }
  auto p = sliceParams(q.node, *x, v[0], v[1], v[2], v[3]);
  if (!p)
    return p.takeError();
  if (q.inputs[0].shape != p->outShape)
    return nodeError(q.node, "dY " + formatShape(q.inputs[0].shape) +
                                 " is not the Slice output shape " + formatShape(p->outShape));
  out.assign(1, ShapedType{q.inputs[0].dtype, *x});
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

llvm::Expected<LossReduction> shapes::lossReductionOf(const Node &n, llvm::StringRef r) {
  if (r == "none")
    return LossReduction::None;
  if (r == "sum")
    return LossReduction::Sum;
  if (r == "mean")
    return LossReduction::Mean;
  return nodeError(n, "unknown reduction " + quoteName(r));
}

static llvm::Expected<LossReduction> reductionAttr(const Node &n) {
  return lossReductionOf(n, n.stringAttr("reduction", "mean"));
}

/// Scores [N, C, d...] and labels [N, d...] (int32/int64) at the given ports.
static llvm::Error checkLabels(const ShapeQuery &q, unsigned scores, unsigned labels) {
  const auto &s = q.inputs[scores].shape, &l = q.inputs[labels].shape;
  DType lt = q.inputs[labels].dtype;
  if (lt != DType::I32 && lt != DType::I64)
    return nodeError(q.node, "labels must be int32 or int64");
  bool ok = s.size() >= 2 && l.size() == s.size() - 1 && l[0] == s[0];
  for (size_t i = 1; ok && i < l.size(); ++i)
    ok = l[i] == s[i + 1];
  if (!ok)
    return nodeError(q.node, "labels " + formatShape(l) + " do not match scores " +
                                 formatShape(s));
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeClassificationLoss)
llvm::Error shapes::shapeClassificationLoss(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = checkLabels(q, 0, 1))
    return e;
  auto red = reductionAttr(q.node);
  if (!red)
    return red.takeError();
  const auto &s = q.inputs[0].shape;
  if (q.inputs.size() > 2 && q.inputs[2].dtype != DType::Undefined &&
      (q.inputs[2].shape.size() != 1 || q.inputs[2].shape[0] != s[1] ||
       q.inputs[2].dtype != q.inputs[0].dtype))
    return nodeError(q.node, "weights must be a [C] tensor of the scores' dtype");
  std::vector<int64_t> lossShape;
  if (*red == LossReduction::None)
    lossShape = q.inputs[1].shape;
  out.assign(1, ShapedType{q.inputs[0].dtype, lossShape});
  out.push_back(q.inputs[0]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeSoftmaxCrossEntropyLossGrad)
llvm::Error shapes::shapeSoftmaxCrossEntropyLossGrad(const ShapeQuery &q,
                                                     std::vector<ShapedType> &out) {
  if (auto e = checkLabels(q, 1, 2))
    return e;
  auto red = reductionAttr(q.node);
  if (!red)
    return red.takeError();
  int64_t want = *red == LossReduction::None ? numel(q.inputs[2].shape) : 1;
  if (numel(q.inputs[0].shape) != want)
    return nodeError(q.node, "dLoss " + formatShape(q.inputs[0].shape) +
                                 " does not match the loss of reduction " +
                                 quoteName(q.node.stringAttr("reduction", "mean")));
  if (q.inputs[0].dtype != q.inputs[1].dtype)
    return nodeError(q.node, "dLoss and log_prob differ in dtype");
  out.assign(1, q.inputs[1]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeMSELossGrad)
llvm::Error shapes::shapeMSELossGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = requireSameShape(q, 1, 2))
    return e;
  auto red = reductionAttr(q.node);
  if (!red)
    return red.takeError();
  if (*red == LossReduction::None ? q.inputs[0].shape != q.inputs[1].shape
                                       : numel(q.inputs[0].shape) != 1)
    return nodeError(q.node, "dLoss " + formatShape(q.inputs[0].shape) +
                                 " does not match the loss of reduction " +
                                 quoteName(q.node.stringAttr("reduction", "mean")));
  if (q.inputs[0].dtype != q.inputs[1].dtype || q.inputs[1].dtype != q.inputs[2].dtype)
    return nodeError(q.node, "dLoss, pred and target must have one dtype");
  out.assign(1, q.inputs[1]);
  return llvm::Error::success();
}

/// SGDStep, MomentumStep, AdamStep (mpc/Ops/OptimizerStep.h): param, grad and
/// the states of one shape and dtype (f32 or f64), one-element scalars of
/// that dtype, a bool or f32 skip flag; every output typed like param but
/// the optional param_copy (f32 param only), typed by copy_to.
MPC_DEFINED_BELOW(shapes::shapeOptimizerStep)
llvm::Error shapes::shapeOptimizerStep(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const OptimizerStepLayout *l = findOptimizerStep(q.node.opType, q.node.domain);
  if (!l)
    return nodeError(q.node, "not a fused optimizer step");
  unsigned n = unsigned(q.inputs.size());
  if (n < l->minInputs() || n > l->maxInputs())
    return nodeError(q.node, "takes " + std::to_string(l->minInputs()) + " to " +
                                 std::to_string(l->maxInputs()) + " inputs, not " +
                                 std::to_string(n));
  auto name = [&](unsigned i) -> std::string {
    if (i < 2)
      return i == 0 ? "param" : "grad";
    if (i < l->firstScalar())
      return l->states[i - 2];
    if (i < l->decayInput())
      return l->scalars[i - l->firstScalar()];
    return i == l->decayInput() ? "weight_decay" : "skip";
  };
  DType t = q.inputs[0].dtype;
  if (t != DType::F32 && t != DType::F64)
    return nodeError(q.node, "param must be float or double, not " + dtypeName(t).str());
  for (unsigned i = 0; i < n; ++i) {
    const ShapedType &in = q.inputs[i];
    bool optional = i >= l->decayInput();
    if (in.dtype == DType::Undefined) {
      if (optional)
        continue;
      return nodeError(q.node, "input " + quoteName(name(i)) + " is required");
    }
    bool isSkip = i == l->skipInput();
    if (isSkip ? in.dtype != DType::Bool && in.dtype != DType::F32 : in.dtype != t)
      return nodeError(q.node, "input " + quoteName(name(i)) + " is " +
                                   dtypeName(in.dtype).str() + "; it must be " +
                                   (isSkip ? std::string("bool or float")
                                           : dtypeName(t).str() + " like param"));
    if (i < l->firstScalar() ? in.shape != q.inputs[0].shape : numel(in.shape) != 1)
      return nodeError(q.node, "input " + quoteName(name(i)) + " has shape " +
                                   formatShape(in.shape) + "; it must be " +
                                   (i < l->firstScalar() ? "param's " + formatShape(q.inputs[0].shape)
                                                         : std::string("a one-element scalar")));
  }
  out.assign(l->numOutputs(), q.inputs[0]);
  // The optional 16-bit copy of the new param, typed by copy_to.
  unsigned copy = l->copyOutput();
  if (q.node.numOutputs() > l->maxOutputs())
    return nodeError(q.node, "has " + std::to_string(q.node.numOutputs()) + " outputs; at most " +
                                 std::to_string(l->maxOutputs()));
  if (q.node.numOutputs() > copy && q.node.output(copy)) {
    int64_t to = q.node.intAttr(kOptimizerCopyToAttr, 0);
    if (to != int64_t(DType::F16) && to != int64_t(DType::BF16))
      return nodeError(q.node, "output " + quoteName("param_copy") + " needs " +
                                   quoteName(kOptimizerCopyToAttr) +
                                   " = 10 (float16) or 16 (bfloat16)");
    if (t != DType::F32)
      return nodeError(q.node, "output " + quoteName("param_copy") +
                                   " needs a float param, not " + dtypeName(t).str());
    out.push_back(ShapedType{DType(to), q.inputs[0].shape});
  }
  return llvm::Error::success();
}

/// MultiTensorSGDStep, MultiTensorMomentumStep, MultiTensorAdamStep
/// (mpc/Ops/OptimizerStep.h): one-element scalars of one dtype (f32 or
/// f64), a bool or f32 skip flag, then whole groups whose param, grad and
/// states have one shape and the scalars' dtype; outputs per group, typed
/// and shaped like its param.
MPC_DEFINED_BELOW(shapes::shapeMultiTensorStep)
llvm::Error shapes::shapeMultiTensorStep(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const OptimizerStepLayout *l = findMultiTensorStep(q.node.opType, q.node.domain);
  if (!l)
    return nodeError(q.node, "not a multi-tensor optimizer step");
  unsigned n = unsigned(q.inputs.size()), first = l->multiFirstGroup(), per = l->groupInputs();
  if (n < first + per || (n - first) % per != 0)
    return nodeError(q.node, "takes " + std::to_string(first) +
                                 " inputs (the scalars, weight_decay, skip) then groups of " +
                                 std::to_string(per) + " (param, grad" +
                                 (l->states.empty() ? std::string() : ", states") + "), not " +
                                 std::to_string(n) + " inputs");
  unsigned groups = (n - first) / per;
  if (q.node.numOutputs() != groups * l->groupOutputs())
    return nodeError(q.node, std::to_string(groups) + " group(s) need " +
                                 std::to_string(groups * l->groupOutputs()) + " outputs, not " +
                                 std::to_string(q.node.numOutputs()));
  auto name = [&](unsigned i) -> std::string {
    if (i < l->multiDecayInput())
      return l->scalars[i];
    if (i < first)
      return i == l->multiDecayInput() ? "weight_decay" : "skip";
    unsigned g = (i - first) / per, k = (i - first) % per;
    const Value *v = q.node.input(i);
    std::string role = k == 0 ? "param" : k == 1 ? "grad" : l->states[k - 2];
    return role + " of group " + std::to_string(g) + (v ? " (" + v->name().str() + ")" : "");
  };
  DType t = q.inputs[0].dtype;
  if (t != DType::F32 && t != DType::F64)
    return nodeError(q.node, "input " + quoteName(name(0)) + " must be float or double, not " +
                                 dtypeName(t).str());
  out.clear();
  for (unsigned i = 0; i < n; ++i) {
    const ShapedType &in = q.inputs[i];
    bool optional = i == l->multiDecayInput() || i == l->multiSkipInput();
    if (in.dtype == DType::Undefined) {
      if (optional)
        continue;
      return nodeError(q.node, "input " + quoteName(name(i)) + " is required");
    }
    bool isSkip = i == l->multiSkipInput();
    if (isSkip ? in.dtype != DType::Bool && in.dtype != DType::F32 : in.dtype != t)
      return nodeError(q.node, "input " + quoteName(name(i)) + " is " +
                                   dtypeName(in.dtype).str() + "; it must be " +
                                   (isSkip ? std::string("bool or float")
                                           : dtypeName(t).str() + " like " + name(0)));
    const std::vector<int64_t> *want = nullptr;
    if (i >= first)
      want = &q.inputs[first + (i - first) / per * per].shape;
    if (want ? in.shape != *want : numel(in.shape) != 1)
      return nodeError(q.node, "input " + quoteName(name(i)) + " has shape " +
                                   formatShape(in.shape) + "; it must be " +
                                   (want ? "its param's " + formatShape(*want)
                                         : std::string("a one-element scalar")));
  }
  for (unsigned g = 0; g < groups; ++g)
    out.insert(out.end(), l->groupOutputs(), q.inputs[first + g * per]);
  return llvm::Error::success();
}

/// found_inf: bool scalar; nonfinite: f32 [N]; u_i: f32 shaped like g_i.
MPC_DEFINED_BELOW(shapes::shapeMultiTensorUnscale)
llvm::Error shapes::shapeMultiTensorUnscale(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (q.inputs.size() < 2)
    return nodeError(q.node, "needs inv_scale and at least one gradient");
  if (q.inputs[0].dtype != DType::F32 || numel(q.inputs[0].shape) != 1)
    return nodeError(q.node, "inv_scale must be one float32 value, not " +
                                 dtypeName(q.inputs[0].dtype).str() + " " +
                                 formatShape(q.inputs[0].shape));
  out.assign(1, ShapedType{DType::Bool, {}});
  out.push_back(ShapedType{DType::F32, {int64_t(q.inputs.size() - 1)}});
  for (size_t i = 1; i < q.inputs.size(); ++i) {
    DType t = q.inputs[i].dtype;
    const Value *g = q.node.input(unsigned(i));
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      return nodeError(q.node, "gradient " + quoteName(g ? g->name() : "") + " is " +
                                   dtypeName(t).str() +
                                   "; float32, float16 and bfloat16 are supported");
    out.push_back(ShapedType{DType::F32, q.inputs[i].shape});
  }
  return llvm::Error::success();
}

/// Input i is given (an optional input left empty has no type).
static bool present(const ShapeQuery &q, unsigned i) {
  return i < q.inputs.size() && q.inputs[i].dtype != DType::Undefined;
}

/// GemmBiasAct (mpc/Ops/GemmBiasAct.h): Y [A's batch..., M, N] in the type
/// the attributes and gemmBiasActTypeError allow.
MPC_DEFINED_BELOW(shapes::shapeGemmBiasAct)
llvm::Error shapes::shapeGemmBiasAct(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (q.inputs.size() < 2 || q.inputs.size() > 3)
    return nodeError(q.node, "needs A, B and an optional bias");
  GemmBiasActAttrs at = gemmBiasActAttrsOf(q.node);
  if (!at.actKnown)
    return nodeError(q.node, "activation " + quoteName(q.node.stringAttr("activation", "")) +
                                 " is not none, relu, gelu or gelu_tanh");
  if (q.node.attr("to") && at.to == DType::Undefined)
    return nodeError(q.node, "to " + std::to_string(q.node.intAttr("to", 0)) +
                                 " is not an element type");
  const ShapedType &a = q.inputs[0], &b = q.inputs[1];
  bool hasBias = present(q, 2);
  DType y = at.outputType(a.dtype);
  std::string typeError =
      gemmBiasActTypeError(a.dtype, b.dtype, hasBias ? q.inputs[2].dtype : DType::Undefined, y);
  if (!typeError.empty())
    return nodeError(q.node, typeError);
  size_t ra = a.shape.size();
  if (ra < 1 || b.shape.size() != 2 || (at.transA && ra != 2))
    return nodeError(q.node, "A " + formatShape(a.shape) + " and B " + formatShape(b.shape) +
                                 ": A needs rank 1 or more (exactly 2 with transA) and B "
                                 "rank 2");
  int64_t k = a.shape[at.transA ? ra - 2 : ra - 1];
  int64_t kb = b.shape[at.transB ? 1 : 0], n = b.shape[at.transB ? 0 : 1];
  if (k != kb)
    return nodeError(q.node, "op(A) and op(B) do not multiply (A " + formatShape(a.shape) +
                                 ", B " + formatShape(b.shape) + ")");
  if (hasBias) {
    const ShapedType &bias = q.inputs[2];
    bool biasOk = !bias.shape.empty() && bias.shape.size() <= ra && bias.shape.back() == n;
    for (size_t i = 0; biasOk && i + 1 < bias.shape.size(); ++i)
      biasOk = bias.shape[i] == 1;
    if (!biasOk)
      return nodeError(q.node, "bias " + formatShape(bias.shape) + " is not a vector of N = " +
                                   std::to_string(n) + " (leading axes of size 1 allowed)");
  }
  // A 1-D A is a row vector whose axis is dropped, as MatMul's.
  ShapedType r{y, {a.shape.begin(), a.shape.end() - std::min<size_t>(ra, 2)}};
  if (ra > 1)
    r.shape.push_back(a.shape[at.transA ? ra - 1 : ra - 2]);
  r.shape.push_back(n);
  out.assign(1, std::move(r));
  // bias_grad: the stored operand summed over its first axis (k), typed like Y.
  bool wantsBiasGrad = q.node.numOutputs() > 1 && q.node.output(1);
  if (!wantsBiasGrad && at.biasGradOf == -1)
    return llvm::Error::success();
  if (!wantsBiasGrad)
    return nodeError(q.node, "bias_grad_of is set but the node has no bias_grad output");
  if (at.biasGradOf != 0 && at.biasGradOf != 1)
    return nodeError(q.node, "bias_grad_of " + std::to_string(at.biasGradOf) +
                                 " is not 0 (A) or 1 (B)");
  if (hasBias || at.act != GemmActivation::None)
    return nodeError(q.node, "bias_grad needs no bias input and activation none");
  if (at.biasGradOf == 0 && !(at.transA && ra == 2))
    return nodeError(q.node, "bias_grad of A needs a 2-D A with transA = 1 (A stored [K, M])");
  if (at.biasGradOf == 1 && at.transB)
    return nodeError(q.node, "bias_grad of B needs transB = 0 (B stored [K, N])");
  out.push_back(ShapedType{y, {at.biasGradOf == 0 ? a.shape[1] : n}});
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Recurrent gradients
//===----------------------------------------------------------------------===//

const RecurrentGradPorts shapes::kLstmPorts = {
    kDY, kX, kW, kR, kB, kLens, {kDYh, kDYc, kH0, kC0},
    "dY_h, dY_c, initial_h and initial_c", 4};
const RecurrentGradPorts shapes::kGruPorts = {
    kGDY, kGX, kGW, kGR, kGB, kGLens, {kGDYh, kGH0}, "dY_h and initial_h", 3};

llvm::Error shapes::checkGruGradAttrs(const Node &n) {
  if (n.intAttr("layout", 0) != 0)
    return nodeError(n, "layout = 1 is not supported");
  if (n.attr("clip"))
    return nodeError(n, "the clip attribute is not supported");
  if (const Attribute *a = n.attr("activations"))
    for (size_t i = 0; i < a->strings.size(); ++i) {
      const char *expect = i % 2 == 0 ? "Sigmoid" : "Tanh";
      if (a->strings[i] != expect)
        return nodeError(n, "activation " + quoteName(a->strings[i]) +
                                " is not supported (only Sigmoid, Tanh)");
    }
  return llvm::Error::success();
}

llvm::Expected<LstmShape> shapes::recurrentGradShape(const ShapeQuery &q,
                                                     const RecurrentGradPorts &p,
                                                     llvm::Error (*checkAttrs)(const Node &)) {
  const Node &n = q.node;
  if (llvm::Error err = checkAttrs(n))
    return std::move(err);
  llvm::StringRef dir = n.stringAttr("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return nodeError(n, "unknown direction " + quoteName(dir));
  if (q.inputs.size() <= p.r || !present(q, p.x) || !present(q, p.w) || !present(q, p.r))
    return nodeError(n, "X, W and R are required");
  if (!isFloatType(q.inputs[p.x].dtype))
    return nodeError(n, "X must be a float tensor");
  const auto &x = q.inputs[p.x].shape, &r = q.inputs[p.r].shape;
  LstmShape s;
  s.directions = dir == "bidirectional" ? 2 : 1;
  s.reverse = dir == "reverse";
  if (x.size() != 3 || r.size() != 3)
    return nodeError(n, "X " + formatShape(x) + " and R " + formatShape(r) +
                            " must have rank 3");
  s.seq = x[0];
  s.batch = x[1];
  s.input = x[2];
  s.hidden = r[2];
  if (const Attribute *h = n.attr("hidden_size"))
    if (h->i != s.hidden)
      return nodeError(n, "hidden_size " + std::to_string(h->i) + " does not match R " +
                              formatShape(r));
  int64_t dirs = s.directions, hid = s.hidden, batch = s.batch, gh = p.gates * hid;
  auto expect = [&](unsigned i, std::vector<int64_t> want, const char *what) -> llvm::Error {
    if (!present(q, i))
      return llvm::Error::success();
    if (q.inputs[i].shape != want)
      return nodeError(n, std::string(what) + " " + formatShape(q.inputs[i].shape) +
                              " should be " + formatShape(want));
    if (i != p.lens && q.inputs[i].dtype != q.inputs[p.x].dtype)
      return nodeError(n, std::string(what) + " is " +
                              dtypeName(q.inputs[i].dtype).str() + " but X is " +
                              dtypeName(q.inputs[p.x].dtype).str());
    return llvm::Error::success();
  };
  std::vector<int64_t> state = {dirs, batch, hid};
  if (auto e = expect(p.w, {dirs, gh, s.input}, "W"))
    return std::move(e);
  if (auto e = expect(p.r, {dirs, gh, hid}, "R"))
    return std::move(e);
  if (auto e = expect(p.b, {dirs, 2 * gh}, "B"))
    return std::move(e);
  if (auto e = expect(p.dY, {s.seq, dirs, batch, hid}, "dY"))
    return std::move(e);
  for (unsigned i : p.states)
    if (auto e = expect(i, state, p.statesWhat))
      return std::move(e);
  if (auto e = expect(p.lens, {batch}, "sequence_lens"))
    return std::move(e);
  if (present(q, p.lens) && q.inputs[p.lens].dtype != DType::I32 &&
      q.inputs[p.lens].dtype != DType::I64)
    return nodeError(n, "sequence_lens must be int32");
  return s;
}

/// dX, dW, dR like X, W, R; dB [dirs, 2 * gates * H]; then one [dirs, batch,
/// H] gradient per initial state.
static void recurrentGradOutputs(const ShapeQuery &q, const RecurrentGradPorts &p,
                                 const LstmShape &s, size_t numStates,
                                 std::vector<ShapedType> &out) {
  DType t = q.inputs[p.x].dtype;
  std::vector<int64_t> state = {s.directions, s.batch, s.hidden};
  out = {q.inputs[p.x], q.inputs[p.w], q.inputs[p.r],
         ShapedType{t, {s.directions, 2 * p.gates * s.hidden}}};
  out.resize(4 + numStates, ShapedType{t, state});
  out.resize(std::min<size_t>(out.size(), q.node.numOutputs()));
}

MPC_DEFINED_BELOW(shapes::shapeLstmGrad)
llvm::Error shapes::shapeLstmGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto s = recurrentGradShape(q, kLstmPorts, checkLstmAttrs);
  if (!s)
    return s.takeError();
  recurrentGradOutputs(q, kLstmPorts, *s, 2, out);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeGruGrad)
llvm::Error shapes::shapeGruGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto s = recurrentGradShape(q, kGruPorts, checkGruGradAttrs);
  if (!s)
    return s.takeError();
  recurrentGradOutputs(q, kGruPorts, *s, 1, out);
  return llvm::Error::success();
}
