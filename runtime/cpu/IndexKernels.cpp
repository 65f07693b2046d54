//===- IndexKernels.cpp - CPU glue for indexing and selection ops -----------===//
//
// ArgMax, ArgMin, TopK, CumSum, CumProd, GatherElements, ScatterElements,
// GatherND, ScatterND and OneHot. Selections compare in the compute type; the
// scans (CumSum, CumProd) and scatter reductions widen 16-bit floats to float
// and round each stored result once.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/CopyPlan.h"
#include "mpc/Runtime/Kernels/IndexBodies.h"
#include "mpc/Runtime/Kernels/MoveBodies.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/Kernels/TopKBodies.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

static size_t elemSize(DType t) { return runtimeElementSize(t); }

/// Sizes before, at and after `axis`.
static void splitAtAxis(llvm::ArrayRef<int64_t> shape, int64_t axis, int64_t &outer,
                        int64_t &dim, int64_t &inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  dim = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i)
    inner *= shape[i];
}

//===----------------------------------------------------------------------===//
// ArgMax, ArgMin
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runArgReduce(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  const AxisParams &params = paramsOf<AxisParams>(c);
  int64_t axis = params.axis, outer, dim, inner;
  normalizeAxis(axis, x.shape.size());
  splitAtAxis(x.shape, axis, outer, dim, inner);
  bool isMax = c.node->opType == "ArgMax";
  bool last = params.flagA;
  int64_t *y = c.outputs[0].as<int64_t>();
  // One slice at a time through the body the CUDA launcher runs per thread.
  const k::AxisSplit split{outer, dim, inner};
  dispatchSigned(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = x.as<T>();
    for (int64_t s = 0; s < outer * inner; ++s)
      y[s] = k::argReduceSlice(p, split, s, isMax, last);
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// TopK
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runTopK(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &vals = c.outputs[0], &inds = c.outputs[1];
  const AxisParams &params = paramsOf<AxisParams>(c);
  int64_t axis = params.axis, outer, dim, inner;
  normalizeAxis(axis, x.shape.size());
  splitAtAxis(x.shape, axis, outer, dim, inner);
  int64_t kk = vals.shape[axis];
  bool largest = params.flagA;
  dispatchSigned(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = k::ComputeType<T>;
    const T *p = x.as<T>();
    std::vector<int64_t> order(dim);
    std::vector<C> row(dim);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t j = 0; j < dim; ++j)
          row[j] = k::load(p[(o * dim + j) * inner + i]);
        std::iota(order.begin(), order.end(), 0);
        // Ties keep the lower index first (as onnx.reference and onnxruntime).
        auto cmp = [&](int64_t a, int64_t b) {
          return k::topKBefore(row[a], a, row[b], b, largest);
        };
        std::partial_sort(order.begin(), order.begin() + kk, order.end(), cmp);
        for (int64_t j = 0; j < kk; ++j) {
          int64_t off = (o * kk + j) * inner + i;
          vals.as<T>()[off] = p[(o * dim + order[j]) * inner + i];
          if (inds.data)
            inds.as<int64_t>()[off] = order[j];
        }
      }
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// CumSum, CumProd
//===----------------------------------------------------------------------===//

/// A running reduction along input 1's axis, starting from `identity` and
/// combining with Op (k::Add or k::Mul: integers wrap around); `exclusive`
/// stores the value before each step, `reverse` runs from the end.
template <typename Op> static llvm::Error runScan(const KernelCall &c, int identity) {
  const TensorRef &x = c.inputs[0];
  int64_t axis = readInts(c.inputs[1]).at(0), outer, dim, inner;
  if (!normalizeAxis(axis, x.shape.size()))
    return nodeError(*c.node, "axis out of range for " + formatShape(x.shape));
  splitAtAxis(x.shape, axis, outer, dim, inner);
  bool exclusive = paramsOf<AxisParams>(c).flagA;
  bool reverse = paramsOf<AxisParams>(c).flagB;
  // One slice at a time through the body the CUDA launcher runs per thread.
  const k::AxisSplit split{outer, dim, inner};
  dispatchArithmetic(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = x.as<T>();
    T *y = c.outputs[0].as<T>();
    for (int64_t s = 0; s < outer * inner; ++s)
      k::scanSlice<Op>(p, y, split, s, identity, exclusive, reverse);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runCumSum(const KernelCall &c) { return runScan<k::Add>(c, 0); }

llvm::Error cpuk::runCumProd(const KernelCall &c) { return runScan<k::Mul>(c, 1); }

//===----------------------------------------------------------------------===//
// GatherElements, ScatterElements
//===----------------------------------------------------------------------===//

/// The index plan the CUDA launchers walk too, of input 0 indexed by input 1.
static llvm::Expected<k::ElementIndexPlan> elementIndexPlan(const KernelCall &c, int64_t axis) {
  const TensorRef &data = c.inputs[0], &ind = c.inputs[1];
  k::ElementIndexPlan plan;
  if (data.shape.size() != ind.shape.size() ||
      !k::makeElementIndexPlan(data.shape.data(), ind.shape.data(), int(data.shape.size()),
                               int(axis), plan))
    return nodeError(*c.node, "cannot index " + formatShape(data.shape) + " by " +
                                  formatShape(ind.shape) + ": more than " +
                                  std::to_string(k::kMaxElementIndexRank) + " dimensions");
  return plan;
}

/// Calls fn(dataOffset, indexPosition) for every element of input 1 (the
/// indices) in order; a bad index is recorded (recordKernelError) and ends
/// the loop.
template <typename Fn>
static void forEachElementIndex(const KernelCall &c, const k::ElementIndexPlan &plan, Fn &&fn) {
  std::vector<int64_t> idxv = readInts(c.inputs[1]);
  for (int64_t e = 0; e < plan.count; ++e) {
    int64_t v = idxv[size_t(e)];
    if (!k::normalizeIndex(v, plan.dim))
      return recordKernelError(c, KernelErrorCode::IndexOutOfRange, /*operand=*/0, v);
    fn(k::elementIndexOffset(plan, e, v), e);
  }
}

llvm::Error cpuk::runGatherElements(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, x.shape.size());
  size_t es = elemSize(x.dtype);
  const char *src = x.as<const char>();
  char *dst = c.outputs[0].as<char>();
  auto plan = elementIndexPlan(c, axis);
  if (!plan)
    return plan.takeError();
  forEachElementIndex(c, *plan, [&](int64_t off, int64_t e) {
    std::memcpy(dst + e * es, src + off * es, es);
  });
  return llvm::Error::success();
}

/// The combine of the scatter bodies (MoveBodies.h) for a reduction.
static k::ScatterCombine combineOf(ScatterReduction r) {
  static_assert(int(ScatterReduction::Min) == int(k::ScatterCombine::Min),
                "one order of the reductions");
  return k::ScatterCombine(r);
}

llvm::Error cpuk::runScatterElements(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &upd = c.inputs[2], &y = c.outputs[0];
  const ScatterParams &p = paramsOf<ScatterParams>(c);
  int64_t axis = p.axis;
  normalizeAxis(axis, x.shape.size());
  k::ScatterCombine red = combineOf(p.reduction);
  auto plan = elementIndexPlan(c, axis);
  if (!plan)
    return plan.takeError();
  if (x.data != y.data)
    std::memcpy(y.data, x.data, x.numElements() * elemSize(x.dtype));
  dispatchAll(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    T *out = y.as<T>();
    const T *u = upd.as<T>();
    forEachElementIndex(c, *plan, [&](int64_t off, int64_t e) {
      out[off] = k::scatterCombine(out[off], u[e], red);
    });
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// GatherND, ScatterND
//===----------------------------------------------------------------------===//

/// The tuple plan of input 0 indexed by input 1 (MoveBodies.h), or the
/// node's error for a tuple longer than kMaxTupleLength.
static llvm::Expected<k::TupleIndexPlan> tuplePlan(const KernelCall &c, int64_t batchDims) {
  const TensorRef &x = c.inputs[0], &ind = c.inputs[1];
  k::TupleIndexPlan plan;
  if (!k::makeTupleIndexPlan(x.shape.data(), int(x.shape.size()), ind.shape.data(),
                             int(ind.shape.size()), batchDims, plan))
    return nodeError(*c.node, "cannot index " + formatShape(x.shape) + " by " +
                                  formatShape(ind.shape) + ": tuples longer than " +
                                  std::to_string(k::kMaxTupleLength));
  return plan;
}

/// Calls fn(dataOffset, tuple) for every index tuple in order; a bad index
/// is recorded (no operand, as before the plans) and ends the loop.
template <typename Fn>
static void forEachTuple(const KernelCall &c, const k::TupleIndexPlan &plan, Fn &&fn) {
  std::vector<int64_t> idx = readInts(c.inputs[1]);
  for (int64_t t = 0; t < plan.tuples; ++t) {
    int64_t off = 0, bad = 0;
    if (!k::tupleOffset(plan, idx.data(), t, off, bad))
      return recordKernelError(c, KernelErrorCode::IndexOutOfRange,
                               KernelErrorRecord::kNoOperand, bad);
    fn(off, t);
  }
}

llvm::Error cpuk::runGatherND(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  auto plan = tuplePlan(c, paramsOf<IntParams>(c).value);
  if (!plan)
    return plan.takeError();
  size_t es = elemSize(x.dtype), row = size_t(plan->slice) * es;
  const char *src = x.as<const char>();
  char *dst = c.outputs[0].as<char>();
  forEachTuple(c, *plan, [&](int64_t off, int64_t t) {
    std::memcpy(dst + t * row, src + off * es, row);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runScatterND(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &upd = c.inputs[2], &y = c.outputs[0];
  k::ScatterCombine red = combineOf(paramsOf<ScatterParams>(c).reduction);
  auto plan = tuplePlan(c, 0);
  if (!plan)
    return plan.takeError();
  if (x.data != y.data)
    std::memcpy(y.data, x.data, x.numElements() * elemSize(x.dtype));
  int64_t slice = plan->slice;
  dispatchAll(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    T *out = y.as<T>();
    const T *u = upd.as<T>();
    forEachTuple(c, *plan, [&](int64_t off, int64_t t) {
      for (int64_t s = 0; s < slice; ++s)
        out[off + s] = k::scatterCombine(out[off + s], u[t * slice + s], red);
    });
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// OneHot
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runOneHot(const KernelCall &c) {
  const TensorRef &ind = c.inputs[0], &vals = c.inputs[2], &y = c.outputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, y.shape.size());
  int64_t outer, depth, inner;
  splitAtAxis(y.shape, axis, outer, depth, inner);
  // Each index's position through the body the CUDA launcher calls.
  std::vector<int64_t> pos(ind.numElements());
  dispatchSigned(ind.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < pos.size(); ++i)
      pos[i] = k::oneHotPosition(ind.as<T>()[i], depth);
  });
  size_t es = elemSize(vals.dtype);
  const char *off = vals.as<const char>(), *on = off + es;
  char *dst = y.as<char>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t d = 0; d < depth; ++d)
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dst + ((o * depth + d) * inner + i) * es,
                    pos[size_t(o * inner + i)] == d ? on : off, es);
  return llvm::Error::success();
}
