//===- ElementwiseShapes.cpp - Registry shape functions ---------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): element-wise ops:
// same shape, broadcasting, casts and predicates.
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

MPC_DEFINED_BELOW(shapes::shapeCastLike)
llvm::Error shapes::shapeCastLike(const ShapeQuery &q, std::vector<ShapedType> &out) {
  DType to = q.inputs[1].dtype;
  if (runtimeElementSize(to) == 0)
    return nodeError(q.node, "cannot cast to element type " + dtypeName(to));
  out.assign(1, ShapedType{to, q.inputs[0].shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeSameAsInput0)
llvm::Error shapes::shapeSameAsInput0(const ShapeQuery &q, std::vector<ShapedType> &out) {
  out.assign(q.node.numOutputs(), q.inputs[0]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeBroadcast)
llvm::Error shapes::shapeBroadcast(const ShapeQuery &q, std::vector<ShapedType> &out) {
  std::vector<int64_t> shape;
  DType dt = DType::Undefined;
  for (size_t i = 0; i < q.inputs.size(); ++i) {
    const ShapedType &in = q.inputs[i];
    if (q.node.opType == "Where" && i == 0)
      ; // the condition is bool
    else if (dt == DType::Undefined)
      dt = in.dtype;
    else if (in.dtype != dt)
      return nodeError(q.node, "operands have different element types " +
                                   dtypeName(dt) + " and " + dtypeName(in.dtype));
    llvm::SmallVector<int64_t, 6> b;
    if (!broadcastShapes(shape, in.shape, b, q.estimate))
      return nodeError(q.node, "shapes " + formatShape(shape) + " and " +
                                   formatShape(in.shape) + " do not broadcast");
    shape.assign(b.begin(), b.end());
  }
  // Python's remainder (fmod = 0, the divisor's sign) is the integers'; the
  // spec requires fmod = 1 for floating-point operands.
  if (q.node.opType == "Mod" && isFloatingPoint(dt) && q.node.intAttr("fmod", 0) == 0)
    return nodeError(q.node, "Mod of " + dtypeName(dt).str() +
                                 " operands needs fmod = 1 (fmod = 0 is for integers)");
  out.assign(1, ShapedType{dt, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeCompare)
llvm::Error shapes::shapeCompare(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = shapeBroadcast(q, out))
    return e;
  out[0].dtype = DType::Bool;
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapePredicate)
llvm::Error shapes::shapePredicate(const ShapeQuery &q, std::vector<ShapedType> &out) {
  out.assign(1, ShapedType{DType::Bool, q.inputs[0].shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeCast)
llvm::Error shapes::shapeCast(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t to = q.node.intAttr("to", 0);
  if (!isKnownDType(to) || runtimeElementSize(DType(to)) == 0)
    return nodeError(q.node, "cannot cast to element type " + std::to_string(to));
  out.assign(1, ShapedType{DType(to), q.inputs[0].shape});
  return llvm::Error::success();
}
