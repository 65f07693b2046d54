//===- DataKernels.cpp - CPU glue for shape and data-movement ops -----------===//
//
// Reshape, Flatten, Squeeze, Unsqueeze, Identity (copies), Transpose, Shape,
// Size, Gather, Concat, Slice, Expand and Constant. These move bytes and do no
// arithmetic, so they work on every dtype by element size; Transpose, Concat,
// Slice and Expand run the strided-copy plans the CUDA launchers run
// (CopyPlans.h).
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Kernels/MoveBodies.h"
#include "mpc/Runtime/NmsSelect.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "mpc/Runtime/IndexParams.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cstring>

using namespace mpc;
using namespace mpc::cpuk;

static size_t elemSize(const TensorRef &t) { return runtimeElementSize(t.dtype); }

std::vector<int64_t> cpuk::readInts(const TensorRef &t) {
  std::vector<int64_t> v(t.numElements());
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = t.dtype == DType::I32 ? t.as<int32_t>()[j] : t.as<int64_t>()[j];
  return v;
}

llvm::Error cpuk::runCopy(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  if (x.data != y.data)
    std::memcpy(y.data, x.data, x.numElements() * elemSize(x));
  return llvm::Error::success();
}

static std::vector<int64_t> permOf(const TransposeParams &p, size_t rank) {
  std::vector<int64_t> perm = p.perm.values;
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i)
      perm.push_back(rank - 1 - i);
  return perm;
}

/// A strided copy over the transpose plan (CopyPlans.h): the CUDA launcher
/// runs the same plan.
llvm::Error cpuk::runTranspose(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  std::vector<int64_t> perm = permOf(paramsOf<TransposeParams>(c), x.shape.size());
  kernels::CopyPlan plan;
  if (!kernels::transposePlan(x.shape, perm, plan))
    return nodeError(*c.node, "cannot transpose " + formatShape(x.shape) +
                                  ": too many dimensions after merging");
  kernels::copyByPlan(plan, x.data, y.data, elemSize(x));
  return llvm::Error::success();
}

llvm::Error cpuk::runShape(const KernelCall &c) {
  int64_t s, e;
  shapeRange(paramsOf<ShapeParams>(c), int64_t(c.inputs[0].shape.size()), s, e);
  for (int64_t i = s; i < e; ++i)
    c.outputs[0].as<int64_t>()[i - s] = c.inputs[0].shape[i];
  return llvm::Error::success();
}

llvm::Error cpuk::runSize(const KernelCall &c) {
  *c.outputs[0].as<int64_t>() = c.inputs[0].numElements();
  return llvm::Error::success();
}

bool cpuk::normalizeIndices(const KernelCall &c, std::vector<int64_t> &idx, int64_t dim,
                            int32_t operand) {
  for (int64_t &i : idx) {
    int64_t given = i;
    if (!kernels::normalizeIndex(i, dim)) {
      recordKernelError(c, KernelErrorCode::IndexOutOfRange, operand, given);
      return false;
    }
  }
  return true;
}

/// Rows of `inner` elements, each at the data offset of GatherPlan's body
/// (the CUDA launcher maps single elements with the same functions).
llvm::Error cpuk::runGather(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, x.shape.size());
  std::vector<int64_t> idx = readInts(c.inputs[1]);
  kernels::GatherPlan plan = kernels::gatherPlan(x.shape, axis, int64_t(idx.size()));
  if (!normalizeIndices(c, idx, plan.dim, /*operand=*/0))
    return llvm::Error::success();
  size_t es = elemSize(x);
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(c.outputs[0].data);
  for (int64_t e = 0, n = plan.numElements(); e < n; e += plan.inner) {
    int64_t j = kernels::gatherIndexPosition(plan, e);
    int64_t from = kernels::gatherSource(plan, e, idx[size_t(j)]);
    std::memcpy(dst + e * int64_t(es), src + from * int64_t(es), size_t(plan.inner) * es);
  }
  return llvm::Error::success();
}

llvm::Error cpuk::runConcat(const KernelCall &c) {
  const TensorRef &y = c.outputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, y.shape.size());
  int64_t pos = 0;
  for (const TensorRef &x : c.inputs) {
    kernels::CopyPlan plan;
    if (!kernels::concatPlan(x.shape, y.shape, axis, pos, plan))
      return nodeError(*c.node, "cannot concatenate " + formatShape(x.shape) +
                                    ": too many dimensions after merging");
    kernels::copyByPlan(plan, x.data, y.data, elemSize(y));
    pos += x.shape[axis];
  }
  return llvm::Error::success();
}

llvm::Error cpuk::runConstant(const KernelCall &c) {
  auto t = constantValue(*c.node);
  if (!t)
    return t.takeError();
  std::memcpy(c.outputs[0].data, t->bytes.data(), t->bytes.size());
  return llvm::Error::success();
}

llvm::Error cpuk::runSlice(const KernelCall &c) {
  std::vector<int64_t> v[4];
  for (unsigned i = 1; i < 5; ++i)
    if (c.hasInput(i))
      v[i - 1] = readInts(c.inputs[i]);
  const TensorRef &x = c.inputs[0];
  auto p = sliceParams(*c.node, x.shape, v[0], v[1], v[2], v[3]);
  if (!p)
    return p.takeError();
  kernels::CopyPlan plan;
  if (!kernels::slicePlan(x.shape, p->starts, p->steps, p->outShape, plan))
    return nodeError(*c.node, "cannot slice " + formatShape(x.shape) +
                                  ": too many dimensions after merging");
  kernels::copyByPlan(plan, x.data, c.outputs[0].data, elemSize(x));
  return llvm::Error::success();
}

llvm::Error cpuk::runExpand(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  kernels::CopyPlan plan;
  if (!kernels::expandPlan(x.shape, y.shape, plan))
    return nodeError(*c.node, "cannot expand " + formatShape(x.shape) +
                                  ": too many dimensions after merging");
  kernels::copyByPlan(plan, x.data, y.data, elemSize(x));
  return llvm::Error::success();
}

llvm::Error cpuk::runNonMaxSuppression(const KernelCall &c) {
  // The shape function checked the operands and counted the boxes selected.
  const TensorRef &boxes = c.inputs[0], &scores = c.inputs[1];
  auto opt = [&](size_t i) { return i < c.inputs.size() ? c.inputs[i] : TensorRef(); };
  TensorRef m = opt(2), iou = opt(3), st = opt(4);
  kernels::NmsOptions o;
  if (const char *bad = kernels::nmsReadOptions(
          m.data ? m.as<int64_t>() : nullptr, m.numElements(),
          iou.data ? iou.as<float>() : nullptr, iou.numElements(),
          st.data ? st.as<float>() : nullptr, st.numElements(),
          paramsOf<IntParams>(c).value, o))
    return nodeError(*c.node, bad);
  std::vector<int64_t> triples;
  int64_t count = kernels::nmsSelect(boxes.as<float>(), scores.as<float>(), boxes.shape[0],
                                     scores.shape[1], boxes.shape[1], o, triples);
  if (c.outputs[0].numElements() != count * 3)
    return nodeError(*c.node, "the selection differs from the one the shape was taken from");
  if (count)
    std::memcpy(c.outputs[0].data, triples.data(), size_t(count) * 3 * sizeof(int64_t));
  return llvm::Error::success();
}

llvm::Error cpuk::runNonZero(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int rank = int(x.shape.size());
  int64_t n = x.numElements(), count = c.outputs[0].shape[1];
  int64_t *out = c.outputs[0].as<int64_t>();
  int64_t k = 0;
  // The bodies the CUDA launcher runs: which elements count, their
  // coordinates as column k.
  dispatchAll(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = x.as<T>();
    for (int64_t e = 0; e < n && k < count; ++e)
      if (kernels::isNonZero(p[e]))
        kernels::writeCoordinates(x.shape.data(), rank, e, out, count, k++);
  });
  return llvm::Error::success();
}
