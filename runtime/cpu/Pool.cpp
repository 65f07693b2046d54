//===- Pool.cpp - Max, average and Lp pooling ------------------------------===//
//
// Window bounds are tabulated once per spatial dimension and output
// coordinate; each plane is widened to fp32 once (16-bit storage), then every
// output walks only the taps inside the input. The window math is the
// host/device body the CUDA launchers run (Kernels/WindowBodies.h): the
// bounds of every path, and the whole window of the 1-D and 3-D paths and of
// MaxPool with Indices (up to 3 spatial axes; more keep the N-d loops here).
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Pool.h"
#include "mpc/Runtime/Cpu/Convert.h"
#include "mpc/Runtime/Kernels/WindowBodies.h"

#include "llvm/ADT/ArrayRef.h"

#include "Accumulate.h"
#include "IndexMath.h"
#include "Scratch.h"

#include <algorithm>
#include <cassert>
#include <type_traits>

using namespace mpc::kernels;

namespace mpc {
namespace cpu {

static WindowAxis windowAxisOf(const PoolGeometry &g, size_t d) {
  return WindowAxis{g.inSpatial[d], g.outSpatial[d], g.kernel[d],   g.strides[d],
                    g.dilations[d], g.padsBegin[d],  g.padsEnd[d]};
}

bool windowShapeOf(const PoolGeometry &g, WindowShape &w) {
  size_t rank = g.inSpatial.size();
  if (rank < 1 || rank > size_t(kWindowAxes))
    return false;
  w = WindowShape();
  size_t lead = size_t(kWindowAxes) - rank;
  for (size_t d = 0; d < rank; ++d)
    w.axis[lead + d] = windowAxisOf(g, d);
  return true;
}

namespace {
/// Per dimension and output coordinate: the first input position of the
/// window, the range [lo, hi) of taps inside the input, and the number of
/// taps inside the padded input.
struct WindowTable {
  struct Entry {
    int64_t start, lo, hi, padded;
  };
  llvm::SmallVector<llvm::SmallVector<Entry, 64>, 3> dims;

  explicit WindowTable(const PoolGeometry &g) {
    for (size_t d = 0; d < g.inSpatial.size(); ++d) {
      WindowAxis axis = windowAxisOf(g, d);
      llvm::SmallVector<Entry, 64> entries;
      for (int64_t o = 0; o < g.outSpatial[d]; ++o) {
        WindowSpan w = windowSpan(axis, o);
        entries.push_back({w.start, w.lo, w.hi, w.padded});
      }
      dims.push_back(std::move(entries));
    }
  }
};

} // namespace

/// Visits every output position of a plane: visit(outIndex, entries) with
/// the window entry of each dimension.
template <typename Visit>
static void forEachOutput(const PoolGeometry &g, const WindowTable &table,
                          Visit visit) {
  size_t rank = g.outSpatial.size();
  llvm::SmallVector<int64_t, 4> o(rank, 0);
  llvm::SmallVector<const WindowTable::Entry *, 4> e(rank);
  int64_t outSize = 1;
  for (int64_t d : g.outSpatial)
    outSize *= d;
  for (int64_t idx = 0; idx < outSize; ++idx) {
    for (size_t d = 0; d < rank; ++d)
      e[d] = &table.dims[d][o[d]];
    visit(idx, e);
    for (size_t d = rank; d-- > 0;) {
      if (++o[d] < g.outSpatial[d])
        break;
      o[d] = 0;
    }
  }
}

/// Calls tap(value, position offset in the plane) for every tap of a window
/// that lies inside the input, the last dimension innermost.
template <typename S, typename Tap>
static void
forEachTap(const PoolGeometry &g, llvm::ArrayRef<const WindowTable::Entry *> e,
           llvm::ArrayRef<int64_t> inStride, const S *plane, Tap tap) {
  size_t rank = e.size();
  for (size_t d = 0; d < rank; ++d)
    if (e[d]->hi <= e[d]->lo)
      return;
  llvm::SmallVector<int64_t, 4> t(rank);
  for (size_t d = 0; d < rank; ++d)
    t[d] = e[d]->lo;
  const WindowTable::Entry &last = *e[rank - 1];
  int64_t dl = g.dilations[rank - 1];
  while (true) {
    int64_t base = 0;
    for (size_t d = 0; d + 1 < rank; ++d)
      base += (e[d]->start + t[d] * g.dilations[d]) * inStride[d];
    for (int64_t tw = last.lo; tw < last.hi; ++tw) {
      int64_t pos = base + last.start + tw * dl;
      tap(plane[pos], pos);
    }
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++t[d] < e[d]->hi)
        break;
      t[d] = e[d]->lo;
    }
    if (d == size_t(-1))
      return;
  }
}

/// The row-major strides of an input plane, per spatial dimension.
static llvm::SmallVector<int64_t, 4> rowMajorStrides(const PoolGeometry &g) {
  size_t rank = g.inSpatial.size();
  llvm::SmallVector<int64_t, 4> stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;)
    stride[d] = stride[d + 1] * g.inSpatial[d + 1];
  return stride;
}

/// The plane in the compute type: the original for fp32/fp64, else widened.
template <typename T, typename S>
static const S *planeOf(const T *x, int64_t size) {
  if constexpr (std::is_same<T, S>::value) {
    return x;
  } else {
    S *buf = scratch<S>(ScratchSlot::Input, size_t(size));
    widenBlock(x, buf, size);
    return buf;
  }
}

/// The output columns [lo, hi) whose windows lie entirely inside the input
/// horizontally; their taps are uniform, so they can be swept as vectors.
static void interiorColumns(const PoolGeometry &g, const WindowTable &t,
                            int64_t &lo, int64_t &hi) {
  const auto &cols = t.dims[1];
  int64_t ow = g.outSpatial[1], kw = g.kernel[1];
  lo = 0;
  while (lo < ow && !(cols[lo].lo == 0 && cols[lo].hi == kw))
    ++lo;
  hi = lo;
  while (hi < ow && cols[hi].lo == 0 && cols[hi].hi == kw)
    ++hi;
}

/// 2-D fast path of maxPool without indices. Per output row, the window
/// rows are first reduced vertically into vmax (contiguous, vectorizes),
/// then each output reduces its taps of vmax; interior columns do that one
/// tap at a time across the row. NaN is sticky throughout.
template <typename S>
static void maxPlane2d(const PoolGeometry &g, const WindowTable &t,
                       const S *plane, S *out, S *vmax) {
  int64_t w = g.inSpatial[1], ow = g.outSpatial[1], kw = g.kernel[1];
  int64_t sw = g.strides[1], pw = g.padsBegin[1];
  int64_t dh = g.dilations[0], dw = g.dilations[1];
  int64_t lo, hi;
  interiorColumns(g, t, lo, hi);
  for (int64_t r = 0; r < g.outSpatial[0]; ++r) {
    const WindowTable::Entry &eh = t.dims[0][r];
    std::fill(vmax, vmax + w, -math::infinity<S>());
    for (int64_t th = eh.lo; th < eh.hi; ++th) {
      const S *row = plane + (eh.start + th * dh) * w;
      for (int64_t x = 0; x < w; ++x)
        vmax[x] = (row[x] > vmax[x] || row[x] != row[x]) ? row[x] : vmax[x];
    }
    S *orow = out + r * ow;
    std::fill(orow + lo, orow + hi, -math::infinity<S>());
    for (int64_t tw = 0; tw < kw; ++tw) {
      int64_t off = tw * dw - pw; // vmax column of output c: c * sw + off.
      for (int64_t c = lo; c < hi; ++c) {
        S v = vmax[c * sw + off];
        orow[c] = (v > orow[c] || v != v) ? v : orow[c];
      }
    }
    auto border = [&](int64_t c) {
      const WindowTable::Entry &ew = t.dims[1][c];
      S m = -math::infinity<S>();
      for (int64_t tw = ew.lo; tw < ew.hi; ++tw) {
        S v = vmax[ew.start + tw * dw];
        m = (v > m || v != v) ? v : m;
      }
      orow[c] = m;
    };
    for (int64_t c = 0; c < lo; ++c)
      border(c);
    for (int64_t c = hi; c < ow; ++c)
      border(c);
  }
}

/// 2-D fast path of averagePool, organized like maxPlane2d.
template <typename S>
static void averagePlane2d(const PoolGeometry &g, const WindowTable &t,
                           bool countIncludePad, const S *plane, S *out,
                           S *vsum) {
  int64_t w = g.inSpatial[1], ow = g.outSpatial[1], kw = g.kernel[1];
  int64_t sw = g.strides[1], pw = g.padsBegin[1];
  int64_t dh = g.dilations[0], dw = g.dilations[1];
  int64_t lo, hi;
  interiorColumns(g, t, lo, hi);
  for (int64_t r = 0; r < g.outSpatial[0]; ++r) {
    const WindowTable::Entry &eh = t.dims[0][r];
    std::fill(vsum, vsum + w, S(0));
    for (int64_t th = eh.lo; th < eh.hi; ++th) {
      const S *row = plane + (eh.start + th * dh) * w;
      for (int64_t x = 0; x < w; ++x)
        vsum[x] += row[x];
    }
    S *orow = out + r * ow;
    std::fill(orow + lo, orow + hi, S(0));
    for (int64_t tw = 0; tw < kw; ++tw) {
      int64_t off = tw * dw - pw;
      for (int64_t c = lo; c < hi; ++c)
        orow[c] += vsum[c * sw + off];
    }
    auto border = [&](int64_t c) {
      const WindowTable::Entry &ew = t.dims[1][c];
      S sum = S(0);
      for (int64_t tw = ew.lo; tw < ew.hi; ++tw)
        sum += vsum[ew.start + tw * dw];
      orow[c] = sum;
    };
    for (int64_t c = 0; c < lo; ++c)
      border(c);
    for (int64_t c = hi; c < ow; ++c)
      border(c);
    for (int64_t c = 0; c < ow; ++c) {
      const WindowTable::Entry &ew = t.dims[1][c];
      int64_t count = countIncludePad ? eh.padded * ew.padded
                                      : (eh.hi - eh.lo) * (ew.hi - ew.lo);
      orow[c] = orow[c] / S(count);
    }
  }
}

template <typename T>
void maxPool(const PoolGeometry &g, const T *x, T *y, int64_t *indices,
             bool columnMajorIndices) {
  using S = AccumType<T>;
  size_t rank = g.inSpatial.size();
  assert(rank >= 1 && "pooling needs a spatial dimension");
  int64_t inSize = product(g.inSpatial), outSize = product(g.outSpatial);
  if (outSize == 0)
    return;
  WindowTable table(g);
  llvm::SmallVector<int64_t, 4> inStride = rowMajorStrides(g), colStride(rank, 1);
  for (size_t d = 1; d < rank; ++d)
    colStride[d] = colStride[d - 1] * g.inSpatial[d - 1];
  S *out = scratch<S>(ScratchSlot::Accum, size_t(outSize));
  S *rowBuf = scratch<S>(ScratchSlot::Extra, size_t(g.inSpatial.back()));
  WindowShape shape;
  bool shared = windowShapeOf(g, shape);

  for (int64_t p = 0; p < g.batch * g.channels; ++p) {
    const S *plane = planeOf<T, S>(x + p * inSize, inSize);
    if (rank == 2 && !indices) {
      maxPlane2d(g, table, plane, out, rowBuf);
      narrowBlock(out, y + p * outSize, outSize);
      continue;
    }
    int64_t *idxOut = indices ? indices + p * outSize : nullptr;
    if (shared) {
      for (int64_t o = 0; o < outSize; ++o) {
        int64_t arg;
        out[o] = windowMax(shape, plane, o, arg);
        if (idxOut)
          idxOut[o] = p * inSize + windowIndex(shape, arg, columnMajorIndices);
      }
      narrowBlock(out, y + p * outSize, outSize);
      continue;
    }
    forEachOutput(g, table,
                  [&](int64_t o, llvm::ArrayRef<const WindowTable::Entry *> e) {
                    S m = -math::infinity<S>();
                    int64_t arg = -1;
                    forEachTap(g, e, inStride, plane, [&](S v, int64_t pos) {
                      if (v > m || (v != v && m == m) || arg < 0) {
                        m = v;
                        arg = pos;
                      }
                    });
                    out[o] = m;
                    if (idxOut) {
                      int64_t flat = 0;
                      if (arg >= 0 && columnMajorIndices) {
                        int64_t rest = arg;
                        for (size_t d = rank; d-- > 0;) {
                          flat += (rest % g.inSpatial[d]) * colStride[d];
                          rest /= g.inSpatial[d];
                        }
                      } else {
                        flat = std::max<int64_t>(arg, 0);
                      }
                      idxOut[o] = p * inSize + flat;
                    }
                  });
    narrowBlock(out, y + p * outSize, outSize);
  }
}

namespace {
/// What the plane loops of a window pool share: the window table, the
/// plane's strides and, for 1 to 3 spatial axes, the shared bodies' form.
struct PoolPass {
  WindowTable table;
  llvm::SmallVector<int64_t, 4> inStride;
  WindowShape shape;
  bool shared;
  explicit PoolPass(const PoolGeometry &g) : table(g), inStride(rowMajorStrides(g)) {
    shared = windowShapeOf(g, shape);
  }
};
} // namespace

/// Calls fill(pass, plane, out) for every plane of x, widened to the compute
/// type, and narrows the out it filled into y.
template <typename T, typename Fill>
static void forEachPlane(const PoolGeometry &g, const T *x, T *y, Fill fill) {
  using S = AccumType<T>;
  assert(!g.inSpatial.empty() && "pooling needs a spatial dimension");
  int64_t inSize = product(g.inSpatial), outSize = product(g.outSpatial);
  if (outSize == 0)
    return;
  PoolPass pass(g);
  S *out = scratch<S>(ScratchSlot::Accum, size_t(outSize));
  for (int64_t p = 0; p < g.batch * g.channels; ++p) {
    fill(pass, planeOf<T, S>(x + p * inSize, inSize), out);
    narrowBlock(out, y + p * outSize, outSize);
  }
}

template <typename T>
void averagePool(const PoolGeometry &g, bool countIncludePad, const T *x,
                 T *y) {
  using S = AccumType<T>;
  size_t rank = g.inSpatial.size();
  int64_t outSize = product(g.outSpatial);
  S *rowBuf = rank == 2 ? scratch<S>(ScratchSlot::Extra, size_t(g.inSpatial.back())) : nullptr;
  forEachPlane(g, x, y, [&](const PoolPass &pass, const S *plane, S *out) {
    if (rank == 2) {
      averagePlane2d(g, pass.table, countIncludePad, plane, out, rowBuf);
      return;
    }
    if (pass.shared) {
      for (int64_t o = 0; o < outSize; ++o)
        out[o] = windowAverage(pass.shape, plane, o, countIncludePad);
      return;
    }
    forEachOutput(g, pass.table, [&](int64_t o, llvm::ArrayRef<const WindowTable::Entry *> e) {
      S sum = S(0);
      forEachTap(g, e, pass.inStride, plane, [&](S v, int64_t) { sum += v; });
      int64_t count = 1;
      for (size_t d = 0; d < rank; ++d)
        count *= countIncludePad ? e[d]->padded : e[d]->hi - e[d]->lo;
      out[o] = sum / S(count);
    });
  });
}

template <typename T>
void lpPool(const PoolGeometry &g, double p, const T *x, T *y) {
  using S = AccumType<T>;
  int64_t outSize = product(g.outSpatial);
  S order = S(p);
  forEachPlane(g, x, y, [&](const PoolPass &pass, const S *plane, S *out) {
    if (pass.shared) {
      for (int64_t o = 0; o < outSize; ++o)
        out[o] = windowLpPool(pass.shape, plane, o, order);
      return;
    }
    forEachOutput(g, pass.table, [&](int64_t o, llvm::ArrayRef<const WindowTable::Entry *> e) {
      S sum = S(0);
      forEachTap(g, e, pass.inStride, plane, [&](S v, int64_t) { sum += lpTerm(v, order); });
      out[o] = lpRoot(sum, order);
    });
  });
}

template <typename T>
void globalLpPool(const T *x, T *y, int64_t planes, int64_t planeSize, double p) {
  using S = AccumType<T>;
  S order = S(p);
  for (int64_t pl = 0; pl < planes; ++pl) {
    const S *plane = planeOf<T, S>(x + pl * planeSize, planeSize);
    S sum = S(0);
    for (int64_t i = 0; i < planeSize; ++i)
      sum += lpTerm(plane[i], order);
    y[pl] = store<T>(lpRoot(sum, order));
  }
}

template <typename T>
void globalAveragePool(const T *x, T *y, int64_t planes, int64_t planeSize) {
  using S = AccumType<T>;
  for (int64_t p = 0; p < planes; ++p) {
    const S *plane = planeOf<T, S>(x + p * planeSize, planeSize);
    S mean = sumOf<S>(plane, planeSize) / S(planeSize);
    y[p] = store<T>(mean);
  }
}

template <typename T>
void globalMaxPool(const T *x, T *y, int64_t planes, int64_t planeSize) {
  using S = AccumType<T>;
  for (int64_t p = 0; p < planes; ++p) {
    const S *plane = planeOf<T, S>(x + p * planeSize, planeSize);
    y[p] = store<T>(maxOf(plane, planeSize));
  }
}

#define MPC_INSTANTIATE_POOL(T)                                                \
  template void maxPool<T>(const PoolGeometry &, const T *, T *, int64_t *,    \
                           bool);                                              \
  template void averagePool<T>(const PoolGeometry &, bool, const T *, T *);    \
  template void globalAveragePool<T>(const T *, T *, int64_t, int64_t);        \
  template void globalMaxPool<T>(const T *, T *, int64_t, int64_t);          \
  template void lpPool<T>(const PoolGeometry &, double, const T *, T *);     \
  template void globalLpPool<T>(const T *, T *, int64_t, int64_t, double);
MPC_INSTANTIATE_POOL(float)
MPC_INSTANTIATE_POOL(double)
MPC_INSTANTIATE_POOL(Half)
MPC_INSTANTIATE_POOL(BFloat16)
#undef MPC_INSTANTIATE_POOL

} // namespace cpu
} // namespace mpc
