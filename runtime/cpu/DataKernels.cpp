//===- DataKernels.cpp - CPU glue for shape and data-movement ops -----------===//
//
// Reshape, Flatten, Squeeze, Unsqueeze, Identity (copies), Transpose, Shape,
// Size, Gather, Concat, Slice, Expand and Constant. These move bytes and do no
// arithmetic, so they work on every dtype by element size.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
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

/// Strided copy: the output walks its dims in order, reading the input at
/// the permuted strides; the innermost run is copied with memcpy when the
/// last axis stays last.
llvm::Error cpuk::runTranspose(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  size_t rank = x.shape.size(), es = elemSize(x);
  std::vector<int64_t> perm = permOf(paramsOf<TransposeParams>(c), rank);
  std::vector<int64_t> inStride(rank, 1);
  for (size_t i = rank; i-- > 1;)
    inStride[i - 1] = inStride[i] * x.shape[i];
  int64_t n = y.numElements();
  if (n == 0)
    return llvm::Error::success();
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(y.data);
  if (rank == 0) {
    std::memcpy(dst, src, es);
    return llvm::Error::success();
  }
  bool lastStays = perm[rank - 1] == int64_t(rank - 1);
  int64_t run = lastStays ? y.shape[rank - 1] : 1;
  size_t outerRank = lastStays ? rank - 1 : rank;
  std::vector<int64_t> idx(outerRank, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < n; o += run) {
    if (run > 1)
      std::memcpy(dst + o * es, src + off * es, run * es);
    else
      std::memcpy(dst + o * es, src + off * es, es);
    for (size_t d = outerRank; d-- > 0;) {
      off += inStride[perm[d]];
      if (++idx[d] < y.shape[d])
        break;
      off -= inStride[perm[d]] * y.shape[d];
      idx[d] = 0;
    }
  }
  return llvm::Error::success();
}

llvm::Error cpuk::runShape(const KernelCall &c) {
  int64_t s, e;
  shapeOpRange(*c.node, c.inputs[0].shape.size(), s, e);
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
    if (i < -dim || i >= dim) {
      recordKernelError(c, KernelErrorCode::IndexOutOfRange, operand, i);
      return false;
    }
    if (i < 0)
      i += dim;
  }
  return true;
}

llvm::Error cpuk::runGather(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, x.shape.size());
  std::vector<int64_t> idx = readInts(c.inputs[1]);
  int64_t outer = 1, inner = elemSize(x), dim = x.shape[axis];
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[i];
  for (size_t i = axis + 1; i < x.shape.size(); ++i)
    inner *= x.shape[i];
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(c.outputs[0].data);
  if (!normalizeIndices(c, idx, dim, /*operand=*/0))
    return llvm::Error::success();
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < idx.size(); ++j)
      std::memcpy(dst + (o * idx.size() + j) * inner, src + (o * dim + idx[j]) * inner,
                  inner);
  return llvm::Error::success();
}

llvm::Error cpuk::runConcat(const KernelCall &c) {
  const TensorRef &y = c.outputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, y.shape.size());
  int64_t outer = 1, es = elemSize(y);
  for (int64_t i = 0; i < axis; ++i)
    outer *= y.shape[i];
  int64_t outRow = y.numElements() / std::max<int64_t>(outer, 1) * es, pos = 0;
  char *dst = static_cast<char *>(y.data);
  for (const TensorRef &x : c.inputs) {
    int64_t row = x.numElements() / std::max<int64_t>(outer, 1) * es;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * outRow + pos, static_cast<const char *>(x.data) + o * row, row);
    pos += row;
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

void cpuk::forEachSliced(const SliceParams &p, llvm::ArrayRef<int64_t> x,
                         llvm::function_ref<void(int64_t, int64_t)> fn) {
  size_t rank = x.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t i = rank; i-- > 1;)
    stride[i - 1] = stride[i] * x[i];
  int64_t n = 1;
  for (int64_t d : p.outShape)
    n *= d;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < n; ++o) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off += (p.starts[d] + idx[d] * p.steps[d]) * stride[d];
    fn(o, off);
    for (size_t d = rank; d-- > 0;)
      if (++idx[d] < p.outShape[d])
        break;
      else
        idx[d] = 0;
  }
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
  size_t es = elemSize(x);
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(c.outputs[0].data);
  forEachSliced(*p, x.shape, [&](int64_t o, int64_t off) {
    std::memcpy(dst + o * es, src + off * es, es);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runExpand(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  size_t rank = y.shape.size(), es = elemSize(x), xr = x.shape.size();
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t i = 0; i < xr; ++i) {
    size_t d = xr - 1 - i;
    stride[rank - 1 - i] = x.shape[d] == 1 ? 0 : s;
    s *= x.shape[d];
  }
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0, n = y.numElements();
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(y.data);
  for (int64_t o = 0; o < n; ++o) {
    std::memcpy(dst + o * es, src + off * es, es);
    for (size_t d = rank; d-- > 0;) {
      off += stride[d];
      if (++idx[d] < y.shape[d])
        break;
      off -= stride[d] * y.shape[d];
      idx[d] = 0;
    }
  }
  return llvm::Error::success();
}

llvm::Error cpuk::runNonZero(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t rank = x.shape.size(), n = x.numElements(), count = c.outputs[0].shape[1];
  int64_t *out = c.outputs[0].as<int64_t>();
  std::vector<int64_t> idx(rank, 0);
  int64_t k = 0;
  dispatchAll(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = x.as<T>();
    for (int64_t e = 0; e < n; ++e) {
      if (!(kernels::castValue<double>(p[e]) == 0)) {
        for (int64_t d = 0; d < rank; ++d)
          out[d * count + k] = idx[d];
        ++k;
      }
      for (int64_t d = rank; d-- > 0;)
        if (++idx[d] < x.shape[d])
          break;
        else
          idx[d] = 0;
    }
  });
  return llvm::Error::success();
}
