//===- ShapeHelpers.cpp - Helpers of the registry's shape functions --------===//
#include "../ShapeHelpers.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/IndexParams.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <limits>

using namespace mpc;
using namespace mpc::shapes;

llvm::Error shapes::nodeError(const Node &n, const llvm::Twine &msg) {
  return inputError("{0}: {1}", describeNode(n), msg.str());
}

llvm::Error shapes::unknownOperand(const Node &n, const llvm::Twine &what,
                                   llvm::StringRef more) {
  return llvm::make_error<UnknownOperandError>(describeNode(n) + ": " + what.str() +
                                               " must be known before running" + more.str());
}

std::vector<int64_t> shapes::intsAttr(const Node &n, llvm::StringRef name,
                                    std::vector<int64_t> dflt) {
  const Attribute *a = n.attr(name);
  return a ? a->ints : dflt;
}

bool shapes::normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

llvm::Expected<std::vector<int64_t>> shapes::knownInts(const ShapeQuery &q, unsigned i,
                                                     llvm::StringRef what, ListForm form) {
  if (i >= q.values.size() || !q.values[i])
    return unknownOperand(q.node, what, " (an initializer or computed from shapes)");
  const HostTensor &t = *q.values[i];
  // A list in another shape (a scalar, a matrix) was read as if flattened;
  // onnxruntime refuses it where `form` does.
  size_t rank = t.shape.size();
  bool ok = rank == 1 || form == ListForm::Any ||
            (form == ListForm::VectorOrScalar && rank == 0) ||
            (form == ListForm::VectorOrRow && rank == 2 && t.shape[0] == 1);
  if (!ok)
    return nodeError(q.node, what + " is " + formatShape(t.shape) + "; it must be a 1-D tensor" +
                                 (form == ListForm::VectorOrScalar ? " or a scalar"
                                  : form == ListForm::VectorOrRow  ? " or one row"
                                                                   : ""));
  std::vector<int64_t> v(t.numElements());
  // Integers exactly: through double, INT64_MAX (Slice's "to the end") overflows.
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = t.getAsInt64(j);
  return v;
}

llvm::Expected<SliceParams> shapes::sliceParams(const Node &n, llvm::ArrayRef<int64_t> x,
                                             std::vector<int64_t> starts,
                                             std::vector<int64_t> ends,
                                             std::vector<int64_t> axes,
                                             std::vector<int64_t> steps) {
  size_t rank = x.size();
  SliceParams p;
  p.starts.assign(rank, 0);
  p.steps.assign(rank, 1);
  p.outShape.assign(x.begin(), x.end());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return nodeError(n, "starts, ends, axes and steps have different lengths");
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i], dim, st = steps[i];
    if (!normalizeAxis(a, rank) || st == 0)
      return nodeError(n, "bad slice axis or step");
    // A repeated axis (ONNX: invalid) took its last bounds.
    if (seen[size_t(a)])
      return nodeError(n, "axes " + formatShape(axes) + " name axis " + std::to_string(a) +
                              " twice");
    seen[size_t(a)] = true;
    dim = x[a];
    SliceAxis r = resolveSliceAxis(dim, starts[i], ends[i], st);
    p.outShape[a] = r.count;
    p.starts[a] = r.start;
    p.steps[a] = st;
  }
  return p;
}

std::vector<int64_t> shapes::transposePerm(const Node &n, size_t rank) {
  std::vector<int64_t> perm = intsAttr(n, "perm", {});
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i)
      perm.push_back(rank - 1 - i);
  return perm;
}

/// Shape's start/end attributes (opset 15) clamp the returned range.
void shapes::shapeOpRange(const Node &n, int64_t rank, int64_t &start, int64_t &end) {
  start = n.intAttr("start", 0);
  end = n.intAttr("end", rank);
  clampShapeRange(rank, start, end);
}

bool shapes::isTrainingBatchNorm(const Node &n) {
  return n.opsetVersion() >= 14 && n.intAttr("training_mode", 0) != 0;
}

int64_t shapes::numel(llvm::ArrayRef<int64_t> shape) {
  // Saturates at INT64_MAX: a declared shape can hold any int64 (a model's
  // [N, 64, 2^62]), and no tensor that large passes an allocation check.
  if (llvm::is_contained(shape, 0))
    return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

int64_t shapes::mulSat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

void shapes::splitAt(llvm::ArrayRef<int64_t> shape, int64_t axis, int64_t &outer,
                    int64_t &axisDim, int64_t &inner) {
  // numel saturates; a dimension before `axis` goes to outer, after it to
  // inner (all of them to inner for a negative axis, to outer past the rank).
  int64_t rank = int64_t(shape.size());
  int64_t split = std::clamp<int64_t>(axis, 0, rank);
  outer = numel(shape.take_front(size_t(split)));
  axisDim = axis >= 0 && axis < rank ? shape[size_t(axis)] : 1;
  inner = numel(shape.drop_front(size_t(std::clamp<int64_t>(axis + 1, 0, rank))));
}

bool shapes::broadcastShapes(llvm::ArrayRef<int64_t> aShape,
                     llvm::ArrayRef<int64_t> bShape,
                     llvm::SmallVectorImpl<int64_t> &outShape, bool estimate) {
  size_t rank = std::max(aShape.size(), bShape.size());
  outShape.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    size_t ai = i + aShape.size(), bi = i + bShape.size();
    int64_t da = ai >= rank ? aShape[ai - rank] : 1;
    int64_t db = bi >= rank ? bShape[bi - rank] : 1;
    if (da == db || db == 1)
      outShape[i] = da;
    else if (da == 1)
      outShape[i] = db;
    else if (estimate)
      outShape[i] = std::max(da, db);
    else
      return false;
  }
  return true;
}

bool shapes::isFloatType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

llvm::Error shapes::requireFloat(const ShapeQuery &q, unsigned i, llvm::StringRef what) {
  if (i >= q.inputs.size() || !isFloatType(q.inputs[i].dtype))
    return nodeError(q.node, what + " must be a float tensor");
  return llvm::Error::success();
}

llvm::Error shapes::requireSameShape(const ShapeQuery &q, unsigned a, unsigned b) {
  if (q.inputs[a].shape != q.inputs[b].shape)
    return nodeError(q.node, "inputs " + std::to_string(a) + " and " + std::to_string(b) +
                                 " differ in shape: " + formatShape(q.inputs[a].shape) +
                                 " and " + formatShape(q.inputs[b].shape));
  return llvm::Error::success();
}

bool shapes::matmulShape(llvm::ArrayRef<int64_t> aShape, llvm::ArrayRef<int64_t> bShape,
                 llvm::SmallVectorImpl<int64_t> &outShape) {
  if (aShape.empty() || bShape.empty())
    return false;
  int64_t kA = aShape.back();
  int64_t kB = bShape.size() == 1 ? bShape[0] : bShape[bShape.size() - 2];
  if (kA != kB)
    return false;
  llvm::ArrayRef<int64_t> aBatch =
      aShape.drop_back(std::min<size_t>(2, aShape.size()));
  llvm::ArrayRef<int64_t> bBatch =
      bShape.drop_back(std::min<size_t>(2, bShape.size()));
  if (!broadcastShapes(aBatch, bBatch, outShape))
    return false;
  if (aShape.size() > 1)
    outShape.push_back(aShape[aShape.size() - 2]);
  if (bShape.size() > 1)
    outShape.push_back(bShape.back());
  return true;
}

bool shapes::reduceOutputShape(llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<int64_t> axes, bool keepDims,
                       llvm::SmallVectorImpl<int64_t> &outShape) {
  int64_t rank = int64_t(shape.size());
  llvm::SmallVector<bool, 8> reduced(shape.size(), axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return false;
    int64_t d = a < 0 ? a + rank : a;
    if (reduced[d])
      return false;
    reduced[d] = true;
  }
  outShape.clear();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d])
      outShape.push_back(shape[d]);
    else if (keepDims)
      outShape.push_back(1);
  }
  return true;
}
