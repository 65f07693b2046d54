//===- NormShapes.cpp - Registry shape functions ----------------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): instance, group and
// Lp normalization.
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

MPC_DEFINED_BELOW(shapes::shapeInstanceNorm)
llvm::Error shapes::shapeInstanceNorm(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  if (x.size() < 3 || q.inputs[1].shape != std::vector<int64_t>{x[1]} ||
      q.inputs[2].shape != std::vector<int64_t>{x[1]})
    return nodeError(q.node, "input " + formatShape(x) +
                                 " needs [C] scale and bias and rank >= 3");
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}

/// GroupNormalization-18 takes [G] scale/bias; 21 takes [C].
MPC_DEFINED_BELOW(shapes::shapeGroupNorm)
llvm::Error shapes::shapeGroupNorm(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  int64_t g = q.node.intAttr("num_groups", 0);
  if (x.size() < 3 || g <= 0 || x[1] % g)
    return nodeError(q.node, "channels of " + formatShape(x) + " not divisible by " +
                                 "num_groups " + std::to_string(g));
  int64_t want = q.node.opsetVersion() >= 21 ? x[1] : g;
  if (q.inputs[1].shape != std::vector<int64_t>{want} ||
      q.inputs[2].shape != std::vector<int64_t>{want})
    return nodeError(q.node, "scale and bias must have " + std::to_string(want) + " values");
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeLpNorm)
llvm::Error shapes::shapeLpNorm(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t axis = q.node.intAttr("axis", -1), p = q.node.intAttr("p", 2);
  if (!normalizeAxis(axis, q.inputs[0].shape.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(q.inputs[0].shape));
  if (p != 1 && p != 2)
    return nodeError(q.node, "p must be 1 or 2");
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}

/// The normalized axes of an RMSNormalization: X's dims from `axis` on.
llvm::Expected<int64_t> shapes::rmsAxis(const Node &n, llvm::ArrayRef<int64_t> x) {
  int64_t axis = n.intAttr("axis", -1);
  if (!normalizeAxis(axis, static_cast<int64_t>(x.size())))
    return nodeError(n, "axis out of range for " + formatShape(x.vec()));
  return axis;
}

/// True when `scale` broadcasts (numpy rules, aligned right) to `norm`.
static bool broadcastsTo(const std::vector<int64_t> &scale, llvm::ArrayRef<int64_t> norm) {
  if (scale.size() > norm.size())
    return false;
  size_t off = norm.size() - scale.size();
  for (size_t i = 0; i < scale.size(); ++i)
    if (scale[i] != 1 && scale[i] != norm[off + i])
      return false;
  return true;
}

MPC_DEFINED_BELOW(shapes::shapeRMSNorm)
llvm::Error shapes::shapeRMSNorm(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const std::vector<int64_t> &x = q.inputs[0].shape, &scale = q.inputs[1].shape;
  llvm::Expected<int64_t> axis = rmsAxis(q.node, x);
  if (!axis)
    return axis.takeError();
  if (q.inputs[1].dtype != q.inputs[0].dtype)
    return nodeError(q.node, "X is " + dtypeName(q.inputs[0].dtype).str() + " and scale " +
                                 dtypeName(q.inputs[1].dtype).str() +
                                 ": mixed types are not supported");
  llvm::ArrayRef<int64_t> normalized = llvm::makeArrayRef(x).drop_front(*axis);
  if (!broadcastsTo(scale, normalized))
    return nodeError(q.node, "scale " + formatShape(scale) +
                                 " does not broadcast to the normalized axes " +
                                 formatShape(normalized.vec()) + " of X " + formatShape(x) +
                                 " (axis " + std::to_string(*axis) + ")");
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}
