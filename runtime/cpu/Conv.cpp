//===- Conv.cpp - Convolution and transposed convolution ------------------===//
//
// Conv: per image and group, im2col over a chunk of output positions into an
// fp32 panel (16-bit inputs widened one channel plane at a time), then one
// GEMM with the group's weights. ConvTranspose: GEMM into a column panel,
// then col2im scatter-add into an fp32 accumulator, rounded once at the end.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Conv.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Cpu/Convert.h"

#include "IndexMath.h"
#include "Scratch.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <type_traits>

using namespace mpc::kernels;

namespace mpc {
namespace cpu {

// Column panels are kept under this many elements by chunking positions.
static constexpr int64_t kPanelElements = int64_t(1) << 20;

int64_t convTransposeOutputSize(int64_t in, int64_t kernel, int64_t stride,
                                int64_t dilation, int64_t padBegin,
                                int64_t padEnd, int64_t outputPadding) {
  return stride * (in - 1) + outputPadding + (kernel - 1) * dilation + 1 -
         padBegin - padEnd;
}

void resolveConvTransposePads(AutoPad autoPad, int64_t in, int64_t kernel,
                              int64_t stride, int64_t dilation,
                              int64_t outputPadding, int64_t outputSize,
                              int64_t &padBegin, int64_t &padEnd) {
  if (outputSize < 0) {
    if (autoPad == AutoPad::Valid)
      padBegin = padEnd = 0;
    if (autoPad != AutoPad::SameUpper && autoPad != AutoPad::SameLower)
      return;
    outputSize = in * stride;
  }
  int64_t total = stride * (in - 1) + outputPadding + (kernel - 1) * dilation +
                  1 - outputSize;
  int64_t small = total / 2;
  padBegin = autoPad == AutoPad::SameUpper ? small : total - small;
  padEnd = total - padBegin;
}

namespace {

/// A chunk of consecutive positions of a spatial grid, cut into runs along
/// the innermost dimension: run r covers inner coordinates [start, end) at
/// the outer coordinates outer(r), and starts at column `col` of the chunk.
struct Runs {
  struct Run {
    int64_t col, start, end;
  };
  int64_t outerRank = 0;
  llvm::SmallVector<Run, 64> runs;
  llvm::SmallVector<int64_t, 128> outerCoords;

  const int64_t *outer(size_t r) const {
    return outerCoords.data() + r * outerRank;
  }

  void build(llvm::ArrayRef<int64_t> dims, int64_t p0, int64_t len) {
    outerRank = int64_t(dims.size()) - 1;
    runs.clear();
    outerCoords.clear();
    int64_t inner = dims.back();
    llvm::SmallVector<int64_t, 4> idx(dims.size());
    int64_t rest = p0;
    for (size_t d = dims.size(); d-- > 0;) {
      idx[d] = rest % dims[d];
      rest /= dims[d];
    }
    for (int64_t col = 0; col < len;) {
      int64_t n = std::min(inner - idx.back(), len - col);
      runs.push_back({col, idx.back(), idx.back() + n});
      outerCoords.append(idx.begin(), idx.end() - 1);
      col += n;
      idx.back() = 0;
      for (int64_t d = outerRank - 1; d >= 0; --d) {
        if (++idx[d] < dims[d])
          break;
        idx[d] = 0;
      }
    }
  }
};

} // namespace

/// Compute type of storage type T for convolutions.
/// Fills the column panel rows of one input channel: for each kernel offset
/// (one row each), the input value under every position of the chunk, zero
/// where the window reaches into the padding.
template <typename S>
static void im2colChannel(const ConvGeometry &g, const S *plane,
                          const Runs &runs, int64_t len, S *col) {
  size_t rank = g.inSpatial.size();
  int64_t kSize = product(g.kernel);
  llvm::SmallVector<int64_t, 4> kk(rank, 0), inStride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;)
    inStride[d] = inStride[d + 1] * g.inSpatial[d + 1];
  int64_t s = g.strides.back(), inW = g.inSpatial.back();
  for (int64_t r = 0; r < kSize; ++r, col += len) {
    int64_t off = kk.back() * g.dilations.back() - g.padsBegin.back();
    int64_t lo = ceilDiv(-off, s), hi = floorDiv(inW - 1 - off, s) + 1;
    for (size_t ri = 0; ri < runs.runs.size(); ++ri) {
      const Runs::Run &run = runs.runs[ri];
      S *dst = col + run.col;
      int64_t n = run.end - run.start;
      // Outer input coordinates; a window row in the padding is all zero.
      const int64_t *o = runs.outer(ri);
      int64_t base = 0;
      bool inside = true;
      for (size_t d = 0; d + 1 < rank; ++d) {
        int64_t i =
            o[d] * g.strides[d] - g.padsBegin[d] + kk[d] * g.dilations[d];
        inside &= i >= 0 && i < g.inSpatial[d];
        base += i * inStride[d];
      }
      int64_t a = inside ? std::clamp(lo, run.start, run.end) : run.end;
      int64_t b = inside ? std::clamp(hi, a, run.end) : run.end;
      std::fill(dst, dst + (a - run.start), S(0));
      // Input index of output position ow is base + ow * s + off.
      const S *src = plane + base;
      if (s == 1 && b > a)
        std::memcpy(dst + (a - run.start), src + (a + off),
                    size_t(b - a) * sizeof(S));
      else
        for (int64_t ow = a; ow < b; ++ow)
          dst[ow - run.start] = src[ow * s + off];
      std::fill(dst + (b - run.start), dst + n, S(0));
    }
    // Next kernel offset (odometer, last dimension fastest).
    for (size_t d = rank; d-- > 0;) {
      if (++kk[d] < g.kernel[d])
        break;
      kk[d] = 0;
    }
  }
}

/// Scatter-adds the column panel rows of one output channel into its plane.
template <typename S>
static void col2imChannel(const ConvGeometry &g, const S *col, const Runs &runs,
                          int64_t len, S *plane) {
  size_t rank = g.inSpatial.size();
  int64_t kSize = product(g.kernel);
  llvm::SmallVector<int64_t, 4> kk(rank, 0), outStride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;)
    outStride[d] = outStride[d + 1] * g.outSpatial[d + 1];
  int64_t s = g.strides.back(), outW = g.outSpatial.back();
  for (int64_t r = 0; r < kSize; ++r, col += len) {
    int64_t off = kk.back() * g.dilations.back() - g.padsBegin.back();
    int64_t lo = ceilDiv(-off, s), hi = floorDiv(outW - 1 - off, s) + 1;
    for (size_t ri = 0; ri < runs.runs.size(); ++ri) {
      const Runs::Run &run = runs.runs[ri];
      const int64_t *iCoord = runs.outer(ri);
      int64_t base = 0;
      bool inside = true;
      for (size_t d = 0; d + 1 < rank; ++d) {
        int64_t o =
            iCoord[d] * g.strides[d] - g.padsBegin[d] + kk[d] * g.dilations[d];
        inside &= o >= 0 && o < g.outSpatial[d];
        base += o * outStride[d];
      }
      if (!inside)
        continue;
      int64_t a = std::clamp(lo, run.start, run.end);
      int64_t b = std::clamp(hi, a, run.end);
      // Output index of input position iw is base + iw * s + off.
      const S *src = col + run.col;
      S *dst = plane + base;
      for (int64_t iw = a; iw < b; ++iw)
        dst[iw * s + off] += src[iw - run.start];
    }
    for (size_t d = rank; d-- > 0;) {
      if (++kk[d] < g.kernel[d])
        break;
      kk[d] = 0;
    }
  }
}

/// The weights (and bias) in the compute type: the originals for fp32/fp64,
/// widened copies in scratch for 16-bit storage.
template <typename T, typename S>
static const S *computeTypeCopy(const T *src, int64_t n, ScratchSlot slot) {
  if constexpr (std::is_same<T, S>::value) {
    return src;
  } else {
    S *dst = scratch<S>(slot, size_t(n));
    widenBlock(src, dst, n);
    return dst;
  }
}

static bool isPointwise(const ConvGeometry &g) {
  for (size_t d = 0; d < g.kernel.size(); ++d)
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.padsBegin[d] != 0 ||
        g.padsEnd[d] != 0 || g.inSpatial[d] != g.outSpatial[d])
      return false;
  return true;
}

/// Depthwise 2-D convolution (one input channel per group), computed
/// directly: a GEMM with one output row per group would spend its time in
/// im2col. For each kernel tap, one multiply-add sweep along each output row;
/// with stride 1 the sweep is contiguous and vectorizes.
template <typename T, typename S>
static void depthwiseConv2d(const ConvGeometry &g, const T *x, const S *wf,
                            const S *bf, T *y) {
  constexpr bool kNative = std::is_same<T, S>::value;
  int64_t h = g.inSpatial[0], w = g.inSpatial[1];
  int64_t oh = g.outSpatial[0], ow = g.outSpatial[1];
  int64_t kh = g.kernel[0], kw = g.kernel[1];
  int64_t sh = g.strides[0], sw = g.strides[1];
  int64_t dh = g.dilations[0], dw = g.dilations[1];
  int64_t ph = g.padsBegin[0], pw = g.padsBegin[1];
  int64_t mg = g.outChannels / g.group;
  S *plane = kNative ? nullptr : scratch<S>(ScratchSlot::Input, size_t(h * w));
  S *acc = kNative ? nullptr : scratch<S>(ScratchSlot::Accum, size_t(oh * ow));
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const T *xg = x + (n * g.inChannels + grp) * h * w;
      const S *in;
      if constexpr (kNative) {
        in = xg;
      } else {
        widenBlock(xg, plane, h * w);
        in = plane;
      }
      for (int64_t m = 0; m < mg; ++m) {
        int64_t oc = grp * mg + m;
        T *yc = y + (n * g.outChannels + oc) * oh * ow;
        S *out = kNative ? reinterpret_cast<S *>(yc) : acc;
        std::fill_n(out, oh * ow, bf ? bf[oc] : S(0));
        const S *wc = wf + oc * kh * kw;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t r = 0; r < oh; ++r) {
            int64_t ih = r * sh - ph + i * dh;
            if (ih < 0 || ih >= h)
              continue;
            const S *row = in + ih * w;
            S *orow = out + r * ow;
            for (int64_t j = 0; j < kw; ++j) {
              S wv = wc[i * kw + j];
              int64_t off =
                  j * dw - pw; // Input column of output c: c * sw + off.
              int64_t lo = std::clamp<int64_t>(ceilDiv(-off, sw), 0, ow);
              int64_t hi =
                  std::clamp<int64_t>(floorDiv(w - 1 - off, sw) + 1, lo, ow);
              if (sw == 1) {
                for (int64_t c = lo; c < hi; ++c)
                  orow[c] += wv * row[c + off];
              } else {
                for (int64_t c = lo; c < hi; ++c)
                  orow[c] += wv * row[c * sw + off];
              }
            }
          }
        if constexpr (!kNative)
          narrowBlock(acc, yc, oh * ow);
      }
    }
}

template <typename T>
void conv(const ConvGeometry &g, const T *x, const T *w, const T *bias, T *y) {
  using S = AccumType<T>;
  constexpr bool kNative = std::is_same<T, S>::value;
  assert(!g.inSpatial.empty() && g.inChannels % g.group == 0 &&
         g.outChannels % g.group == 0 && "bad convolution geometry");
  int64_t inSize = product(g.inSpatial), outSize = product(g.outSpatial);
  int64_t kSize = product(g.kernel);
  int64_t cg = g.inChannels / g.group, mg = g.outChannels / g.group;
  int64_t kDim = cg * kSize;
  if (g.batch == 0 || g.outChannels == 0 || outSize == 0)
    return;

  const S *wf =
      computeTypeCopy<T, S>(w, g.outChannels * kDim, ScratchSlot::Weights);
  const S *bf =
      bias ? computeTypeCopy<T, S>(bias, g.outChannels, ScratchSlot::Extra)
           : nullptr;
  if (cg == 1 && g.inSpatial.size() == 2)
    return depthwiseConv2d(g, x, wf, bf, y);
  bool pointwise = isPointwise(g);
  int64_t chunk =
      std::clamp<int64_t>(kPanelElements / std::max<int64_t>(kDim, 1),
                          std::min<int64_t>(outSize, 64), outSize);
  S *panel = scratch<S>(ScratchSlot::Panel, size_t(kDim * chunk));
  S *plane = kNative ? nullptr : scratch<S>(ScratchSlot::Input, size_t(inSize));
  S *tile =
      kNative ? nullptr : scratch<S>(ScratchSlot::Accum, size_t(mg * chunk));
  Runs runs;

  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const T *xg = x + (n * g.inChannels + grp * cg) * inSize;
      T *yg = y + (n * g.outChannels + grp * mg) * outSize;
      const S *wg = wf + grp * mg * kDim;
      for (int64_t p0 = 0; p0 < outSize; p0 += chunk) {
        int64_t len = std::min(chunk, outSize - p0);
        // The B operand: the input itself for fp32 1x1 convolutions,
        // otherwise a kDim x len column panel.
        const S *cols = panel;
        int64_t ldCols = len;
        if (pointwise) {
          if constexpr (kNative) {
            cols = xg + p0;
            ldCols = inSize;
          } else {
            for (int64_t c = 0; c < cg; ++c)
              widenBlock(xg + c * inSize + p0, panel + c * len, len);
          }
        } else {
          runs.build(g.outSpatial, p0, len);
          for (int64_t c = 0; c < cg; ++c) {
            const S *src;
            if constexpr (kNative) {
              src = xg + c * inSize;
            } else {
              widenBlock(xg + c * inSize, plane, inSize);
              src = plane;
            }
            im2colChannel(g, src, runs, len, panel + c * kSize * len);
          }
        }
        // Y (or the fp32 tile) = bias + W_g * cols, rounded once on store.
        S *dst = kNative ? reinterpret_cast<S *>(yg) + p0 : tile;
        int64_t ldDst = kNative ? outSize : len;
        if (bf)
          for (int64_t m = 0; m < mg; ++m)
            std::fill_n(dst + m * ldDst, len, bf[grp * mg + m]);
        gemm<S, S>(false, false, mg, len, kDim, S(1), wg, kDim, cols, ldCols,
                   bf ? S(1) : S(0), dst, ldDst);
        if constexpr (!kNative)
          for (int64_t m = 0; m < mg; ++m)
            narrowBlock(tile + m * len, yg + m * outSize + p0, len);
      }
    }
  }
}

template <typename T>
void convTranspose(const ConvGeometry &g, const T *x, const T *w, const T *bias,
                   T *y) {
  using S = AccumType<T>;
  constexpr bool kNative = std::is_same<T, S>::value;
  assert(!g.inSpatial.empty() && g.inChannels % g.group == 0 &&
         g.outChannels % g.group == 0 && "bad convolution geometry");
  int64_t inSize = product(g.inSpatial), outSize = product(g.outSpatial);
  int64_t kSize = product(g.kernel);
  int64_t cg = g.inChannels / g.group, mg = g.outChannels / g.group;
  int64_t kt = mg * kSize; // Rows of the column panel.
  if (g.batch == 0 || g.outChannels == 0 || outSize == 0)
    return;

  const S *wf =
      computeTypeCopy<T, S>(w, g.inChannels * kt, ScratchSlot::Weights);
  const S *bf =
      bias ? computeTypeCopy<T, S>(bias, g.outChannels, ScratchSlot::Extra)
           : nullptr;
  int64_t chunk =
      inSize == 0
          ? 0
          : std::clamp<int64_t>(kPanelElements / std::max<int64_t>(kt, 1),
                                std::min<int64_t>(inSize, 64), inSize);
  S *panel = scratch<S>(ScratchSlot::Panel, size_t(kt * chunk));
  S *xBlock =
      kNative ? nullptr : scratch<S>(ScratchSlot::Input, size_t(cg * chunk));
  S *acc =
      kNative ? nullptr : scratch<S>(ScratchSlot::Accum, size_t(mg * outSize));
  Runs runs;

  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const T *xg = x + (n * g.inChannels + grp * cg) * inSize;
      T *yg = y + (n * g.outChannels + grp * mg) * outSize;
      const S *wg = wf + grp * cg * kt;
      S *out = kNative ? reinterpret_cast<S *>(yg) : acc;
      for (int64_t m = 0; m < mg; ++m)
        std::fill_n(out + m * outSize, outSize, bf ? bf[grp * mg + m] : S(0));
      for (int64_t p0 = 0; p0 < inSize; p0 += chunk) {
        int64_t len = std::min(chunk, inSize - p0);
        const S *xb;
        int64_t ldx;
        if constexpr (kNative) {
          xb = xg + p0;
          ldx = inSize;
        } else {
          for (int64_t c = 0; c < cg; ++c)
            widenBlock(xg + c * inSize + p0, xBlock + c * len, len);
          xb = xBlock;
          ldx = len;
        }
        // panel (kt x len) = W_g^T (kt x cg) * X_g (cg x len).
        gemm<S, S>(true, false, kt, len, cg, S(1), wg, kt, xb, ldx, S(0), panel,
                   len);
        runs.build(g.inSpatial, p0, len);
        for (int64_t m = 0; m < mg; ++m)
          col2imChannel(g, panel + m * kSize * len, runs, len,
                        out + m * outSize);
      }
      if constexpr (!kNative)
        for (int64_t m = 0; m < mg; ++m)
          narrowBlock(acc + m * outSize, yg + m * outSize, outSize);
    }
  }
}

#define MPC_INSTANTIATE_CONV(T)                                                \
  template void conv<T>(const ConvGeometry &, const T *, const T *, const T *, \
                        T *);                                                  \
  template void convTranspose<T>(const ConvGeometry &, const T *, const T *,   \
                                 const T *, T *);
MPC_INSTANTIATE_CONV(float)
MPC_INSTANTIATE_CONV(double)
MPC_INSTANTIATE_CONV(Half)
MPC_INSTANTIATE_CONV(BFloat16)
#undef MPC_INSTANTIATE_CONV

} // namespace cpu
} // namespace mpc
