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

/// Before opset 7 the binary ops broadcast only with `broadcast = 1`, and then
/// B over a run of A's axes starting at `axis` (default: A's last axes, which
/// is NumPy's alignment); PRelu's slope was per channel (axis 1). The kernels
/// broadcast the NumPy way: where that differs, the node is refused (an Add-6
/// with axis = 1 and A [2, 3, 4, 3], B [3] added B along the last axis).
static llvm::Error checkLegacyBroadcast(const ShapeQuery &q) {
  const Node &n = q.node;
  llvm::StringRef op = n.opType;
  // Max and Min broadcast from opset 8 on; before, every input has one
  // shape (onnxruntime: "All inputs must have the same shape").
  if ((op == "Max" || op == "Min") && n.opsetVersion() < 8 && !q.estimate) {
    for (const ShapedType &in : q.inputs)
      if (in.shape != q.inputs[0].shape)
        return nodeError(n, "before opset 8 the inputs of " + op.str() + " have one shape (" +
                                formatShape(q.inputs[0].shape) + " and " +
                                formatShape(in.shape) + ")");
    return llvm::Error::success();
  }
  if (n.opsetVersion() >= 7 || q.inputs.size() != 2 || q.estimate)
    return llvm::Error::success();
  const std::vector<int64_t> &a = q.inputs[0].shape, &b = q.inputs[1].shape;
  std::string hint = "; convert the model to opset 7 or newer (onnx.version_converter)";
  if (op == "PRelu") {
    if (a.size() > 2 && numel(b) != 1)
      return nodeError(n, "PRelu before opset 7 takes its slope " + formatShape(b) +
                              " per channel (axis 1), which mpc does not run" + hint);
    return llvm::Error::success();
  }
  static const char *const kLegacy[] = {"Add",  "Sub",   "Mul",     "Div",  "Pow",
                                        "And",  "Or",    "Xor",     "Equal", "Greater",
                                        "Less"};
  if (!llvm::is_contained(kLegacy, op))
    return llvm::Error::success();
  if (n.intAttr("broadcast", 0) == 0) {
    if (a != b)
      return nodeError(n, "before opset 7 the operands of " + op.str() + " have one shape "
                              "unless broadcast = 1 (" + formatShape(a) + " and " +
                              formatShape(b) + ")");
    return llvm::Error::success();
  }
  if (const Attribute *axis = n.attr("axis")) {
    int64_t suffix = static_cast<int64_t>(a.size()) - static_cast<int64_t>(b.size());
    int64_t at = axis->i < 0 ? axis->i + static_cast<int64_t>(a.size()) : axis->i;
    if (at != suffix)
      return nodeError(n, "B " + formatShape(b) + " broadcast along axis " +
                              std::to_string(axis->i) + " of A " + formatShape(a) +
                              " (before opset 7) is not NumPy's alignment, which mpc runs" +
                              hint);
  }
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeBroadcast)
llvm::Error shapes::shapeBroadcast(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = checkLegacyBroadcast(q))
    return e;
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
