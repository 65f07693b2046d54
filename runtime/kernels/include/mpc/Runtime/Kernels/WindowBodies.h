//===- WindowBodies.h - Pooling windows, host and device --------*- C++ -*-===//
//
// The per-window math of MaxPool, AveragePool, LpPool and the gradients, written
// once for the CPU backend (runtime/cpu/Pool.cpp, TrainingOps.cpp) and the
// CUDA launchers (runtime/cuda/PoolKernels.cu): which taps of a window lie
// inside the input and inside the padded input (ceil_mode windows clipped,
// dilations), the max with its position, the average with or without the
// padding in the count, the Lp norm, and the gradients of max and average
// at one input position.
//
// A window geometry always has three spatial axes: a 1-D or 2-D pool gets
// leading axes of size 1 (one tap, no padding), which change no position,
// count or summation order. Taps are visited axis 0 outermost, the last
// axis innermost, in increasing position: every backend sums and compares
// in that order.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_WINDOWBODIES_H
#define MPC_RUNTIME_KERNELS_WINDOWBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <cstdint>

namespace mpc {
namespace kernels {

constexpr int kWindowAxes = 3;

/// One spatial axis of a pooling window: the input and output lengths, the
/// kernel, stride and dilation and the pads at both ends.
struct WindowAxis {
  int64_t in = 1, out = 1, kernel = 1, stride = 1, dilation = 1, padBegin = 0, padEnd = 0;
};

/// The three axes of a pooling op (leading axes of size 1 for 1-D and 2-D).
struct WindowShape {
  WindowAxis axis[kWindowAxes];
};

/// The window of one output coordinate on one axis: its first input
/// position `start` (may be negative), the taps [lo, hi) that lie inside the
/// input, and how many taps lie inside the padded input.
struct WindowSpan {
  int64_t start = 0, lo = 0, hi = 0, padded = 0;
};

/// a / b rounded toward negative infinity (b > 0).
MPC_HD inline int64_t windowFloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
/// a / b rounded toward positive infinity (b > 0).
MPC_HD inline int64_t windowCeilDiv(int64_t a, int64_t b) { return -windowFloorDiv(-a, b); }

MPC_HD inline WindowSpan windowSpan(const WindowAxis &a, int64_t o) {
  WindowSpan s;
  s.start = o * a.stride - a.padBegin;
  int64_t dl = a.dilation;
  s.lo = windowCeilDiv(-s.start, dl);
  s.lo = s.lo > 0 ? s.lo : 0;
  s.hi = windowFloorDiv(a.in - 1 - s.start, dl) + 1;
  s.hi = s.hi < a.kernel ? s.hi : a.kernel;
  s.hi = s.hi > s.lo ? s.hi : s.lo;
  int64_t padLo = windowCeilDiv(-a.padBegin - s.start, dl);
  padLo = padLo > 0 ? padLo : 0;
  int64_t padHi = windowFloorDiv(a.in + a.padEnd - 1 - s.start, dl) + 1;
  padHi = padHi < a.kernel ? padHi : a.kernel;
  s.padded = padHi > padLo ? padHi - padLo : 0;
  return s;
}

/// The number of input and output positions of one plane.
MPC_HD inline int64_t windowInSize(const WindowShape &w) {
  return w.axis[0].in * w.axis[1].in * w.axis[2].in;
}
MPC_HD inline int64_t windowOutSize(const WindowShape &w) {
  return w.axis[0].out * w.axis[1].out * w.axis[2].out;
}

/// The spans of output `o` (an index into the output plane) on every axis.
MPC_HD inline void windowSpans(const WindowShape &w, int64_t o, WindowSpan *spans) {
  for (int d = kWindowAxes - 1; d >= 0; --d) {
    spans[d] = windowSpan(w.axis[d], o % w.axis[d].out);
    o /= w.axis[d].out;
  }
}

/// Calls tap(pos) for every tap of the window `spans` that lies inside the
/// input, with pos its index in the input plane, the last axis innermost.
template <typename Tap>
MPC_HD inline void forEachWindowTap(const WindowShape &w, const WindowSpan *spans, Tap &&tap) {
  const WindowAxis *a = w.axis;
  for (int64_t t0 = spans[0].lo; t0 < spans[0].hi; ++t0) {
    int64_t p0 = spans[0].start + t0 * a[0].dilation;
    for (int64_t t1 = spans[1].lo; t1 < spans[1].hi; ++t1) {
      int64_t p1 = p0 * a[1].in + spans[1].start + t1 * a[1].dilation;
      for (int64_t t2 = spans[2].lo; t2 < spans[2].hi; ++t2)
        tap(p1 * a[2].in + spans[2].start + t2 * a[2].dilation);
    }
  }
}

/// The divisor of an average window: its taps inside the padded input
/// (count_include_pad) or inside the input.
MPC_HD inline int64_t windowCount(const WindowSpan *spans, bool countIncludePad) {
  int64_t count = 1;
  for (int d = 0; d < kWindowAxes; ++d)
    count *= countIncludePad ? spans[d].padded : spans[d].hi - spans[d].lo;
  return count;
}

/// MaxPool of output `o` of one plane, in T's accumulation type: the largest
/// tap (-inf for a window with no tap inside the input; NaN once any tap is
/// NaN), and in `arg` the position of the first tap holding it (-1 when
/// there is none).
template <typename T>
MPC_HD inline AccumType<T> windowMax(const WindowShape &w, const T *plane, int64_t o,
                                     int64_t &arg) {
  using A = AccumType<T>;
  WindowSpan spans[kWindowAxes];
  windowSpans(w, o, spans);
  A m = -math::infinity<A>();
  arg = -1;
  forEachWindowTap(w, spans, [&](int64_t pos) {
    A v = A(load(plane[pos]));
    if (v > m || (v != v && m == m) || arg < 0) {
      m = v;
      arg = pos;
    }
  });
  return m;
}

/// MaxPool's Indices entry of a window whose max is at `arg` (its position
/// in the plane, -1 for none: 0), row-major or, for storage_order = 1,
/// column-major over the plane.
MPC_HD inline int64_t windowIndex(const WindowShape &w, int64_t arg, bool columnMajor) {
  if (arg < 0)
    return 0;
  if (!columnMajor)
    return arg;
  int64_t flat = 0, stride = 1, rest = arg;
  int64_t strides[kWindowAxes];
  for (int d = 0; d < kWindowAxes; ++d) {
    strides[d] = stride;
    stride *= w.axis[d].in;
  }
  for (int d = kWindowAxes - 1; d >= 0; --d) {
    flat += (rest % w.axis[d].in) * strides[d];
    rest /= w.axis[d].in;
  }
  return flat;
}

/// AveragePool of output `o` of one plane: the taps' sum, in T's
/// accumulation type, over windowCount.
template <typename T>
MPC_HD inline AccumType<T> windowAverage(const WindowShape &w, const T *plane, int64_t o,
                                         bool countIncludePad) {
  using A = AccumType<T>;
  WindowSpan spans[kWindowAxes];
  windowSpans(w, o, spans);
  A sum = A(0);
  forEachWindowTap(w, spans, [&](int64_t pos) { sum += A(load(plane[pos])); });
  return sum / A(windowCount(spans, countIncludePad));
}

/// |v|^p, one term of an Lp norm (p = 1 and 2 without a call to pow).
template <typename A> MPC_HD inline A lpTerm(A v, A p) {
  A a = math::abs(v);
  return p == A(1) ? a : p == A(2) ? a * a : math::pow(a, p);
}

/// sum^(1/p), the Lp norm of the terms summed in `sum`.
template <typename A> MPC_HD inline A lpRoot(A sum, A p) {
  return p == A(1) ? sum : p == A(2) ? math::sqrt(sum) : math::pow(sum, A(1) / p);
}

/// LpPool of output `o` of one plane: (sum of |x|^p over the taps inside
/// the input)^(1/p) in T's accumulation type. Padding taps are zeros, so
/// they add nothing; a window with no tap inside the input gives 0.
template <typename T>
MPC_HD inline AccumType<T> windowLpPool(const WindowShape &w, const T *plane, int64_t o,
                                        AccumType<T> p) {
  using A = AccumType<T>;
  WindowSpan spans[kWindowAxes];
  windowSpans(w, o, spans);
  A sum = A(0);
  forEachWindowTap(w, spans, [&](int64_t pos) { sum += lpTerm(A(load(plane[pos])), p); });
  return lpRoot(sum, p);
}

/// The input position MaxPoolGrad routes output `o`'s gradient to: the
/// first tap holding the window's largest value (a NaN tap never wins), -1
/// for a window with no tap inside the input.
template <typename T>
MPC_HD inline int64_t windowGradArgmax(const WindowShape &w, const T *x, int64_t o) {
  using A = AccumType<T>;
  WindowSpan spans[kWindowAxes];
  windowSpans(w, o, spans);
  int64_t best = -1;
  A bestVal = A(0);
  forEachWindowTap(w, spans, [&](int64_t pos) {
    A v = A(load(x[pos]));
    if (best < 0 || v > bestVal) {
      best = pos;
      bestVal = v;
    }
  });
  return best;
}

/// The coordinates of input position `i` of a plane, per axis.
MPC_HD inline void windowInputCoords(const WindowShape &w, int64_t i, int64_t *pos) {
  for (int d = kWindowAxes - 1; d >= 0; --d) {
    pos[d] = i % w.axis[d].in;
    i /= w.axis[d].in;
  }
}

/// Per axis, the outputs whose windows may hold input position `i`:
/// [first, last] (empty when last < first).
MPC_HD inline void windowCovering(const WindowAxis &a, int64_t i, int64_t &first, int64_t &last) {
  int64_t reach = (a.kernel - 1) * a.dilation;
  first = windowCeilDiv(i + a.padBegin - reach, a.stride);
  first = first > 0 ? first : 0;
  last = windowFloorDiv(i + a.padBegin, a.stride);
  last = last < a.out - 1 ? last : a.out - 1;
}

/// MaxPoolGrad at input position `i` of one plane: the sum of dy over the
/// outputs whose windowGradArgmax is i, in increasing output order, in T's
/// accumulation type.
template <typename T>
MPC_HD inline AccumType<T> maxPoolGradAt(const WindowShape &w, const T *x, const T *dy,
                                         int64_t i) {
  using A = AccumType<T>;
  int64_t pos[kWindowAxes], first[kWindowAxes], last[kWindowAxes];
  windowInputCoords(w, i, pos);
  for (int d = 0; d < kWindowAxes; ++d)
    windowCovering(w.axis[d], pos[d], first[d], last[d]);
  A sum = A(0);
  for (int64_t o0 = first[0]; o0 <= last[0]; ++o0)
    for (int64_t o1 = first[1]; o1 <= last[1]; ++o1)
      for (int64_t o2 = first[2]; o2 <= last[2]; ++o2) {
        int64_t o = (o0 * w.axis[1].out + o1) * w.axis[2].out + o2;
        if (windowGradArgmax(w, x, o) == i)
          sum += A(load(dy[o]));
      }
  return sum;
}

/// AveragePoolGrad at input position `i` of one plane: the sum, over the
/// taps in window order (the kernel's axis 0 outermost), of dy[o] /
/// windowCount(o) for the output o whose window puts that tap on i, in T's
/// accumulation type.
template <typename T>
MPC_HD inline AccumType<T> averagePoolGradAt(const WindowShape &w, const T *dy, int64_t i,
                                             bool countIncludePad) {
  using A = AccumType<T>;
  int64_t pos[kWindowAxes];
  windowInputCoords(w, i, pos);
  // The output coordinate on axis d that tap t reaches i from, or -1.
  auto outputOf = [&](int d, int64_t t) -> int64_t {
    const WindowAxis &a = w.axis[d];
    int64_t num = pos[d] + a.padBegin - t * a.dilation;
    if (num < 0 || num % a.stride)
      return -1;
    int64_t o = num / a.stride;
    return o < a.out ? o : -1;
  };
  A sum = A(0);
  for (int64_t t0 = 0; t0 < w.axis[0].kernel; ++t0) {
    int64_t o0 = outputOf(0, t0);
    if (o0 < 0)
      continue;
    for (int64_t t1 = 0; t1 < w.axis[1].kernel; ++t1) {
      int64_t o1 = outputOf(1, t1);
      if (o1 < 0)
        continue;
      for (int64_t t2 = 0; t2 < w.axis[2].kernel; ++t2) {
        int64_t o2 = outputOf(2, t2);
        if (o2 < 0)
          continue;
        int64_t o = (o0 * w.axis[1].out + o1) * w.axis[2].out + o2;
        WindowSpan spans[kWindowAxes];
        windowSpans(w, o, spans);
        sum += A(load(dy[o])) / A(windowCount(spans, countIncludePad));
      }
    }
  }
  return sum;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_WINDOWBODIES_H
