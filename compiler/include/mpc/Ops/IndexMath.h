//===- IndexMath.h - Slice and Range arithmetic without overflow -*- C++
//-*-===//
//
// The element counts of Slice and Range, shared by the runtime's shape
// functions and the compiler's shape estimates. Exporters write INT64_MAX and
// INT64_MIN for "to the end", and steps of any size, so every step here is
// done in a width that cannot overflow.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_OPS_INDEXMATH_H
#define MPC_OPS_INDEXMATH_H

#include <algorithm>
#include <cstdint>

namespace mpc {

/// One axis of a Slice resolved against a dimension: the first index taken
/// and how many are taken.
struct SliceAxis {
  int64_t start = 0;
  int64_t count = 0;
};

/// Resolves start/end/step (step != 0) against `dim` as the ONNX spec says:
/// negative start and end count from the end; then start is clamped into
/// [0, dim] for positive steps and [0, dim - 1] for negative ones, end into
/// [0, dim] and [-1, dim - 1]. Correct for INT64_MIN/INT64_MAX bounds and
/// steps.
inline SliceAxis resolveSliceAxis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  SliceAxis r;
  if (dim <= 0)
    return r;
  if (start < 0)
    start += dim; // no overflow: dim > 0 and start < 0
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    r.start = start;
    r.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    r.start = start;
    // |step| as unsigned: -INT64_MIN does not fit an int64.
    uint64_t magnitude = uint64_t(0) - uint64_t(step);
    r.count = start > end ? int64_t(uint64_t(start - end - 1) / magnitude + 1) : 0;
  }
  return r;
}

/// Number of elements of an integer Range(start, limit, delta), delta != 0:
/// max(ceil((limit - start) / delta), 0), computed exactly.
inline int64_t integerRangeCount(int64_t start, int64_t limit, int64_t delta) {
  if (delta > 0 ? limit <= start : limit >= start)
    return 0;
  // The distance and |delta| as unsigned: both fit in 64 bits unsigned.
  uint64_t distance =
      delta > 0 ? uint64_t(limit) - uint64_t(start) : uint64_t(start) - uint64_t(limit);
  uint64_t magnitude = delta > 0 ? uint64_t(delta) : uint64_t(0) - uint64_t(delta);
  uint64_t n = (distance - 1) / magnitude + 1;
  return n > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(n);
}

} // namespace mpc

#endif // MPC_OPS_INDEXMATH_H
