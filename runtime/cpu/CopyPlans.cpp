//===- CopyPlans.cpp - Strided-copy plans of the data-movement ops ----------===//
//
// The plan builders of CopyPlans.h and the host walker the CPU kernels use.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "mpc/Runtime/Cpu/Broadcast.h"

#include <algorithm>
#include <cstring>

using namespace mpc;
using namespace mpc::kernels;

std::vector<int64_t> kernels::denseStrides(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * shape[i];
  return s;
}

/// Drops the size-1 dimensions of `dims` and merges each dimension into the
/// one outside it where every stride set in `sets` stays linear; `sets`
/// (one stride per dimension each) are rewritten to match.
static std::vector<int64_t> collapse(llvm::ArrayRef<int64_t> dims,
                                     std::vector<std::vector<int64_t>> &sets) {
  std::vector<int64_t> d;
  std::vector<std::vector<int64_t>> merged(sets.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1)
      continue;
    bool linear = !d.empty();
    for (size_t s = 0; s < sets.size() && linear; ++s)
      linear = merged[s].back() == sets[s][k] * dims[k];
    if (linear) {
      d.back() *= dims[k];
      for (size_t s = 0; s < sets.size(); ++s)
        merged[s].back() = sets[s][k];
      continue;
    }
    d.push_back(dims[k]);
    for (size_t s = 0; s < sets.size(); ++s)
      merged[s].push_back(sets[s][k]);
  }
  sets = std::move(merged);
  return d;
}

bool kernels::makeCopyPlan(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> srcStrides,
                           llvm::ArrayRef<int64_t> dstStrides, int64_t srcBase,
                           int64_t dstBase, CopyPlan &out) {
  out = CopyPlan();
  out.srcBase = srcBase;
  out.dstBase = dstBase;
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  out.numElements = n;
  if (n == 0)
    return true; // nothing is copied: rank 0 over no element
  std::vector<std::vector<int64_t>> sets = {srcStrides.vec(), dstStrides.vec()};
  std::vector<int64_t> d = collapse(dims, sets);
  if (d.size() > size_t(kMaxCopyRank))
    return false;
  out.rank = int(d.size());
  std::copy(d.begin(), d.end(), out.dims);
  std::copy(sets[0].begin(), sets[0].end(), out.srcStrides);
  std::copy(sets[1].begin(), sets[1].end(), out.dstStrides);
  return true;
}

void kernels::swapCopySides(CopyPlan &p) {
  std::swap(p.srcBase, p.dstBase);
  for (int k = 0; k < p.rank; ++k)
    std::swap(p.srcStrides[k], p.dstStrides[k]);
}

bool kernels::transposePlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> perm,
                            CopyPlan &out) {
  std::vector<int64_t> inStride = denseStrides(in), dims, src;
  for (int64_t p : perm) {
    dims.push_back(in[size_t(p)]);
    src.push_back(inStride[size_t(p)]);
  }
  return makeCopyPlan(dims, src, denseStrides(dims), 0, 0, out);
}

bool kernels::slicePlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> starts,
                        llvm::ArrayRef<int64_t> steps, llvm::ArrayRef<int64_t> outShape,
                        CopyPlan &out) {
  std::vector<int64_t> inStride = denseStrides(in), src(in.size());
  int64_t base = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    src[k] = inStride[k] * steps[k];
    base += starts[k] * inStride[k];
  }
  return makeCopyPlan(outShape, src, denseStrides(outShape), base, 0, out);
}

static std::vector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> in,
                                             llvm::ArrayRef<int64_t> outShape);

bool kernels::expandPlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> outShape,
                         CopyPlan &out) {
  return makeCopyPlan(outShape, broadcastStrides(in, outShape), denseStrides(outShape), 0, 0,
                      out);
}

bool kernels::concatPlan(llvm::ArrayRef<int64_t> part, llvm::ArrayRef<int64_t> whole,
                         int64_t axis, int64_t offset, CopyPlan &out) {
  std::vector<int64_t> wholeStride = denseStrides(whole);
  return makeCopyPlan(part, denseStrides(part), wholeStride, 0,
                      offset * wholeStride[size_t(axis)], out);
}

bool kernels::tilePlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> outShape,
                       CopyPlan &out) {
  std::vector<int64_t> inStride = denseStrides(in), outStride = denseStrides(outShape);
  std::vector<int64_t> dims, src, dst;
  for (size_t k = 0; k < in.size(); ++k) {
    // out[k] = repeats * in[k]: the repeat is outer, the position inner.
    int64_t reps = in[k] ? outShape[k] / in[k] : 1;
    dims.insert(dims.end(), {reps, in[k]});
    src.insert(src.end(), {0, inStride[k]});
    dst.insert(dst.end(), {in[k] * outStride[k], outStride[k]});
  }
  return makeCopyPlan(dims, src, dst, 0, 0, out);
}

bool kernels::padInteriorPlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> outShape,
                              llvm::ArrayRef<int64_t> begin, CopyPlan &out) {
  std::vector<int64_t> inStride = denseStrides(in), outStride = denseStrides(outShape);
  std::vector<int64_t> dims(in.size());
  int64_t srcBase = 0, dstBase = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    int64_t from = std::max<int64_t>(0, -begin[k]), to = std::max<int64_t>(0, begin[k]);
    dims[k] = std::max<int64_t>(0, std::min(in[k] - from, outShape[k] - to));
    srcBase += from * inStride[k];
    dstBase += to * outStride[k];
  }
  return makeCopyPlan(dims, inStride, outStride, srcBase, dstBase, out);
}

/// Element strides of `in` broadcast to `outShape` (0 along size-1 and
/// missing leading axes).
static std::vector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> in,
                                             llvm::ArrayRef<int64_t> outShape) {
  std::vector<int64_t> inStride = denseStrides(in), s(outShape.size(), 0);
  size_t lead = outShape.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k)
    s[lead + k] = in[k] == 1 ? 0 : inStride[k];
  return s;
}

/// The collapsed broadcast of `shapes` to `outShape`: dims and one stride
/// set per operand; false when more than kMaxCopyRank dimensions remain.
static bool broadcastAll(llvm::ArrayRef<std::vector<int64_t>> shapes,
                         llvm::ArrayRef<int64_t> outShape, std::vector<int64_t> &dims,
                         std::vector<std::vector<int64_t>> &sets) {
  sets.clear();
  for (const std::vector<int64_t> &s : shapes)
    sets.push_back(broadcastStrides(s, outShape));
  dims = collapse(outShape, sets);
  return dims.size() <= size_t(kMaxCopyRank);
}

bool kernels::selectPlan(llvm::ArrayRef<int64_t> c, llvm::ArrayRef<int64_t> x,
                         llvm::ArrayRef<int64_t> y, llvm::ArrayRef<int64_t> outShape,
                         SelectPlan &out) {
  out = SelectPlan();
  out.numElements = numElements(outShape);
  if (out.numElements == 0)
    return true;
  std::vector<int64_t> d;
  std::vector<std::vector<int64_t>> sets;
  if (!broadcastAll({c.vec(), x.vec(), y.vec()}, outShape, d, sets))
    return false;
  out.rank = int(d.size());
  std::copy(d.begin(), d.end(), out.dims);
  for (int k = 0; k < 3; ++k)
    std::copy(sets[size_t(k)].begin(), sets[size_t(k)].end(), out.strides[k]);
  return true;
}

bool kernels::naryPlan(llvm::ArrayRef<std::vector<int64_t>> shapes,
                       llvm::ArrayRef<int64_t> outShape, NaryPlan &out) {
  out = NaryPlan();
  if (shapes.empty() || shapes.size() > size_t(kMaxNaryInputs))
    return false;
  out.inputs = int(shapes.size());
  out.numElements = numElements(outShape);
  if (out.numElements == 0)
    return true;
  std::vector<int64_t> d;
  std::vector<std::vector<int64_t>> sets;
  if (!broadcastAll(shapes, outShape, d, sets))
    return false;
  out.rank = int(d.size());
  std::copy(d.begin(), d.end(), out.dims);
  for (size_t k = 0; k < sets.size(); ++k)
    std::copy(sets[k].begin(), sets[k].end(), out.strides[k]);
  return true;
}

bool kernels::naryRuns(llvm::ArrayRef<std::vector<int64_t>> shapes,
                       llvm::ArrayRef<int64_t> outShape, std::vector<NaryPlan> &out) {
  out.clear();
  if (shapes.empty())
    return false;
  for (size_t first = 0; first < shapes.size(); first += size_t(kMaxNaryInputs)) {
    NaryPlan p;
    if (!naryPlan(shapes.slice(first, std::min(shapes.size() - first, size_t(kMaxNaryInputs))),
                  outShape, p)) {
      out.clear();
      return false;
    }
    out.push_back(p);
  }
  return true;
}

GatherPlan kernels::gatherPlan(llvm::ArrayRef<int64_t> data, int64_t axis, int64_t count) {
  GatherPlan p;
  p.outer = p.inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    p.outer *= data[size_t(i)];
  p.dim = data[size_t(axis)];
  for (size_t i = size_t(axis) + 1; i < data.size(); ++i)
    p.inner *= data[i];
  p.count = count;
  return p;
}

/// Rows of a plan with elements of Es bytes (a constant-size memcpy per
/// element: any storage type, no aliasing questions).
template <size_t Es> static void copyRows(const CopyPlan &p, const char *src, char *dst) {
  int64_t inner = p.rank ? p.dims[p.rank - 1] : 1;
  int64_t ss = p.rank ? p.srcStrides[p.rank - 1] : 0;
  int64_t ds = p.rank ? p.dstStrides[p.rank - 1] : 0;
  for (int64_t r = 0, rows = p.numElements / inner; r < rows; ++r) {
    int64_t s, d;
    copyOffsets(p, r * inner, s, d);
    if (ss == 1 && ds == 1) {
      std::memcpy(dst + d * Es, src + s * Es, size_t(inner) * Es);
      continue;
    }
    for (int64_t j = 0; j < inner; ++j)
      std::memcpy(dst + (d + j * ds) * Es, src + (s + j * ss) * Es, Es);
  }
}

void kernels::copyByPlan(const CopyPlan &p, const void *src, void *dst, size_t elementBytes) {
  if (p.numElements == 0)
    return;
  const char *s = static_cast<const char *>(src);
  char *d = static_cast<char *>(dst);
  switch (elementBytes) {
  case 1: return copyRows<1>(p, s, d);
  case 2: return copyRows<2>(p, s, d);
  case 4: return copyRows<4>(p, s, d);
  case 8: return copyRows<8>(p, s, d);
  default:
    for (int64_t i = 0; i < p.numElements; ++i) {
      int64_t so, dof;
      copyOffsets(p, i, so, dof);
      std::memcpy(d + dof * int64_t(elementBytes), s + so * int64_t(elementBytes), elementBytes);
    }
  }
}
