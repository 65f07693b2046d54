//===- LinalgShapes.cpp - Registry shape functions --------------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): gemm, global
// pooling, the normalizations with statistics and com.microsoft FusedMatMul
// (with the operand layouts its kernels share, NodeGeometry.h).
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

MPC_DEFINED_BELOW(shapes::shapeGemm)
llvm::Error shapes::shapeGemm(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &a = q.inputs[0].shape, &b = q.inputs[1].shape;
  if (a.size() != 2 || b.size() != 2)
    return nodeError(q.node, "inputs must be matrices, got " + formatShape(a) +
                                 " and " + formatShape(b));
  bool ta = q.node.intAttr("transA", 0), tb = q.node.intAttr("transB", 0);
  int64_t m = ta ? a[1] : a[0], ka = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (ka != kb)
    return nodeError(q.node, "inner dimensions differ: " + formatShape(a) +
                                 " and " + formatShape(b));
  if (q.inputs.size() > 2 && q.inputs[2].dtype != DType::Undefined) {
    llvm::SmallVector<int64_t, 2> bc;
    if (!broadcastShapes({m, n}, q.inputs[2].shape, bc) ||
        bc != llvm::ArrayRef<int64_t>({m, n}))
      return nodeError(q.node, "bias " + formatShape(q.inputs[2].shape) +
                                   " does not broadcast to the result");
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, {m, n}});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeGlobalPool)
llvm::Error shapes::shapeGlobalPool(const ShapeQuery &q, std::vector<ShapedType> &out) {
  std::vector<int64_t> shape = q.inputs[0].shape;
  if (shape.size() < 2)
    return nodeError(q.node, "input " + formatShape(shape) + " has rank below 2");
  for (size_t i = 2; i < shape.size(); ++i)
    shape[i] = 1;
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeBatchNorm)
llvm::Error shapes::shapeBatchNorm(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (isTrainingBatchNorm(q.node))
    return shapeBatchNormTraining(q, out);
  // Inference mode normalizes with the given statistics: Y is its only
  // result (the running statistics are training mode's, opset 14 on).
  for (unsigned i = 1; i < q.node.numOutputs(); ++i)
    if (const Value *v = q.node.output(i))
      return nodeError(q.node, "output #" + std::to_string(i) + " " + quoteName(v->name()) +
                                   " is a training-mode result (training_mode = 1, opset 14 "
                                   "on); in inference mode Y is the only output");
  // One scale, bias, mean and variance per channel; fewer were read past
  // their end (a mean of 2 values for 3 channels ran).
  const auto &x = q.inputs[0].shape;
  if (x.size() < 2)
    return nodeError(q.node, "input " + formatShape(x) + " has rank below 2");
  if (!q.estimate)
    for (unsigned i = 1; i < 5 && i < q.inputs.size(); ++i)
      if (q.inputs[i].shape != std::vector<int64_t>{x[1]})
        return nodeError(q.node, "scale, B, input_mean and input_var must be [" +
                                     std::to_string(x[1]) + "], one value per channel of " +
                                     formatShape(x) + "; input #" + std::to_string(i) +
                                     " is " + formatShape(q.inputs[i].shape));
  return shapeSameAsInput0(q, out);
}

MPC_DEFINED_BELOW(shapes::shapeLayerNorm)
llvm::Error shapes::shapeLayerNorm(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t axis = q.node.intAttr("axis", -1);
  std::vector<int64_t> x = q.inputs[0].shape;
  if (!normalizeAxis(axis, x.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(x));
  // Scale and bias cover the normalized axes element for element (the
  // kernels read them so; a bias of one element was read past its end):
  // their shape is the normalized axes', leading 1s aside. The same count
  // in another shape ([5, 1] for [5], [5, 4] for [4, 5]) does not
  // broadcast to them.
  if (!q.estimate) {
    std::vector<int64_t> normalized(x.begin() + axis, x.end());
    auto core = [](llvm::ArrayRef<int64_t> s) {
      while (!s.empty() && s.front() == 1)
        s = s.drop_front();
      return s;
    };
    // (More leading 1s than X has axes would broadcast Y to a higher rank.)
    for (unsigned k : {1u, 2u})
      if (k < q.inputs.size() && q.inputs[k].dtype != DType::Undefined &&
          (core(q.inputs[k].shape) != core(normalized) || q.inputs[k].shape.size() > x.size()))
        return nodeError(q.node, std::string(k == 1 ? "scale " : "bias ") +
                                     formatShape(q.inputs[k].shape) + " does not match the "
                                     "normalized axes " + formatShape(normalized) +
                                     " element for element (mpc does not broadcast it)");
  }
  out.assign(1, q.inputs[0]);
  std::vector<int64_t> stat(x.begin(), x.end());
  for (size_t i = axis; i < stat.size(); ++i)
    stat[i] = 1;
  DType st = q.node.intAttr("stash_type", 1) == 1 ? DType::F32 : q.inputs[0].dtype;
  for (unsigned i = 1; i < q.node.numOutputs(); ++i)
    out.push_back(ShapedType{st, stat});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeMatMul)
llvm::Error shapes::shapeMatMul(const ShapeQuery &q, std::vector<ShapedType> &out) {
  llvm::SmallVector<int64_t, 6> shape;
  if (!matmulShape(q.inputs[0].shape, q.inputs[1].shape, shape))
    return nodeError(q.node, "shapes " + formatShape(q.inputs[0].shape) + " and " +
                                 formatShape(q.inputs[1].shape) + " do not multiply");
  out.assign(1, ShapedType{q.inputs[0].dtype, {shape.begin(), shape.end()}});
  return llvm::Error::success();
}

/// The reduced axes: attribute before opset 18 (13 for ReduceSum), else the
/// optional second input, which must be known at plan time.
llvm::Expected<std::vector<int64_t>>
shapes::reduceAxes(const Node &n, size_t rank, const HostTensor *axesValue, bool hasAxesInput) {
  return reduceAxes(n, intsAttr(n, "axes", {}), n.intAttr("noop_with_empty_axes", 0) != 0, rank,
                    axesValue, hasAxesInput);
}

llvm::Expected<std::vector<int64_t>>
shapes::reduceAxes(const Node &n, std::vector<int64_t> axes, bool noopWithEmptyAxes, size_t rank,
                   const HostTensor *axesValue, bool hasAxesInput) {
  if (hasAxesInput) {
    if (!axesValue)
      return unknownOperand(n, "axes");
    if (axesValue->shape.size() != 1)
      return nodeError(n, "axes is " + formatShape(axesValue->shape) +
                              "; it must be a 1-D tensor");
    for (int64_t i = 0; i < axesValue->numElements(); ++i)
      axes.push_back(axesValue->getAsInt64(i));
  }
  if (axes.empty() && !noopWithEmptyAxes)
    for (size_t i = 0; i < rank; ++i)
      axes.push_back(i);
  for (int64_t &a : axes)
    if (!normalizeAxis(a, rank))
      return nodeError(n, "axis out of range");
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

MPC_DEFINED_BELOW(shapes::shapeReduce)
llvm::Error shapes::shapeReduce(const ShapeQuery &q, std::vector<ShapedType> &out) {
  bool hasAxes = q.inputs.size() > 1 && q.inputs[1].dtype != DType::Undefined;
  auto axes = reduceAxes(q.node, q.inputs[0].shape.size(),
                         hasAxes ? q.values[1] : nullptr, hasAxes);
  if (!axes)
    return axes.takeError();
  // noop_with_empty_axes and no axes: the output is the input.
  if (axes->empty() && q.node.intAttr("noop_with_empty_axes", 0)) {
    out.assign(1, q.inputs[0]);
    return llvm::Error::success();
  }
  llvm::SmallVector<int64_t, 6> shape;
  if (!reduceOutputShape(q.inputs[0].shape, *axes, q.node.intAttr("keepdims", 1),
                              shape))
    return nodeError(q.node, "cannot reduce " + formatShape(q.inputs[0].shape));
  out.assign(1, ShapedType{q.inputs[0].dtype, {shape.begin(), shape.end()}});
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// FusedMatMul
//===----------------------------------------------------------------------===//

/// The layout of operand `x` (B when isB: a vector is a column then).
static FusedOperand fusedOperand(llvm::ArrayRef<int64_t> x, bool trans, bool transBatch, bool isB) {
  FusedOperand op;
  op.shape.assign(x.begin(), x.end());
  if (x.size() == 1) {
    op.batchStride = x[0];
    op.ld = isB ? 1 : x[0];
    return op;
  }
  size_t r = x.size();
  int64_t rows = transBatch ? x[0] : x[r - 2], cols = x[r - 1];
  if (transBatch)
    op.batch.assign(x.begin() + 1, x.end() - 1);
  else
    op.batch.assign(x.begin(), x.end() - 2);
  op.batchStride = transBatch ? cols : rows * cols;
  op.ld = transBatch ? numel(op.batch) * cols : cols;
  op.trans = trans;
  op.shape.assign(op.batch.begin(), op.batch.end());
  op.shape.push_back(trans ? cols : rows);
  op.shape.push_back(trans ? rows : cols);
  return op;
}

std::pair<FusedOperand, FusedOperand>
shapes::fusedOperands(const FusedMatMulParams &p, llvm::ArrayRef<int64_t> a,
                      llvm::ArrayRef<int64_t> b) {
  return {fusedOperand(a, p.transA, p.transBatchA, /*isB=*/false),
          fusedOperand(b, p.transB, p.transBatchB, /*isB=*/true)};
}

MPC_DEFINED_BELOW(shapes::shapeFusedMatMul)
llvm::Error shapes::shapeFusedMatMul(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const ShapedType &a = q.inputs[0], &b = q.inputs[1];
  if (a.shape.empty() || b.shape.empty())
    return nodeError(q.node, "A " + formatShape(a.shape) + " and B " + formatShape(b.shape) +
                                 " must have rank 1 or more");
  if (a.dtype != b.dtype)
    return nodeError(q.node, "A and B must have one dtype");
  FusedMatMulParams p = fusedMatMulParamsOf(q.node);
  // As onnxruntime's kernel (MatMulComputeHelper): the batch axes of an
  // operand with transBatch pair with the other's only at equal ranks.
  if ((p.transBatchA || p.transBatchB) &&
      (a.shape.size() < 3 || a.shape.size() != b.shape.size()))
    return nodeError(q.node, "transBatchA/transBatchB need A and B of one rank, 3 or more; "
                             "got A " +
                                 formatShape(a.shape) + " and B " + formatShape(b.shape));
  auto ops = fusedOperands(p, a.shape, b.shape);
  llvm::SmallVector<int64_t, 6> shape;
  if (!matmulShape(ops.first.shape, ops.second.shape, shape)) {
    std::string flags;
    for (const char *f : {"transA", "transB", "transBatchA", "transBatchB"})
      flags += std::string(", ") + f + " " + std::to_string(q.node.intAttr(f, 0));
    return nodeError(q.node, "op(A) " + formatShape(ops.first.shape) + " and op(B) " +
                                 formatShape(ops.second.shape) + " do not multiply (A " +
                                 formatShape(a.shape) + ", B " + formatShape(b.shape) + flags +
                                 ")");
  }
  out.assign(1, ShapedType{a.dtype, {shape.begin(), shape.end()}});
  return llvm::Error::success();
}
