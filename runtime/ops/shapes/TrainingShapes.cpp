//===- TrainingShapes.cpp - Registry shape functions ------------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): the ai.mpc.training
// gradient ops, losses and training-mode BatchNormalization.
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../ShapeHelpers.h"
#include "../ShapeFunctions.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>
#include <cmath>

using namespace mpc;
using namespace mpc::shapes;

/// dX: dtype of dY, shape of input 1 (which dY must match).
llvm::Error shapes::shapeUnaryGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = requireSameShape(q, 0, 1))
    return e;
  if (q.inputs[0].dtype != q.inputs[1].dtype)
    return nodeError(q.node, "dY and the forward value differ in dtype");
  out.assign(1, ShapedType{q.inputs[0].dtype, q.inputs[1].shape});
  return llvm::Error::success();
}

llvm::Error shapes::shapeBiasGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto shape = knownInts(q, 1, "the shape input");
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
  out.assign(1, ShapedType{q.inputs[0].dtype, *shape});
  return llvm::Error::success();
}

llvm::Error shapes::shapeSoftmaxGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t axis = q.node.intAttr("axis", -1);
  if (!normalizeAxis(axis, std::max<int64_t>(q.inputs[1].shape.size(), 1)))
    return nodeError(q.node, "axis out of range for " + formatShape(q.inputs[1].shape));
  return shapeUnaryGrad(q, out);
}

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
  inner *= axisDim;
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
llvm::Error shapes::shapeBatchNormTraining(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  if (x.size() < 2)
    return nodeError(q.node, "input " + formatShape(x) + " has rank below 2");
  for (unsigned i = 1; i < 5; ++i) {
    if (auto e = requireFloat(q, i, "scale, B, input_mean and input_var"))
      return e;
    if (numel(q.inputs[i].shape) != x[1])
      return nodeError(q.node, "scale, B, input_mean and input_var must have one element "
                               "per channel of " + formatShape(x));
  }
  out.assign(1, q.inputs[0]);
  out.push_back(q.inputs[3]);
  out.push_back(q.inputs[4]);
  return llvm::Error::success();
}

llvm::Error shapes::shapeGlobalAveragePoolGrad(const ShapeQuery &q,
                                              std::vector<ShapedType> &out) {
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
llvm::Error shapes::shapeGatherGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto x = knownInts(q, 1, "the shape input");
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

llvm::Error shapes::shapeSliceGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto x = knownInts(q, 1, "the shape input");
  if (!x)
    return x.takeError();
  std::vector<int64_t> v[4];
  for (unsigned i = 2; i < 6 && i < q.inputs.size(); ++i) {
    if (q.inputs[i].dtype == DType::Undefined)
      continue;
    auto k = knownInts(q, i, "slice bounds");
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
