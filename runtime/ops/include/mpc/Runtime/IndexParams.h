//===- IndexParams.h - Parsed attributes of the index and shape ops -*- C++ -*-===//
//
// The parameter structs of the index/shape ops that used to read their
// attributes at launch (Shape, ConstantOfShape), parsed once per node by
// the registry row (IndexParams.cpp) and read by the CPU kernels and the
// CUDA prepare functions alike. (OneHot's axis is an AxisParams, parsed by
// parseAxisMinus1.)
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_INDEXPARAMS_H
#define MPC_RUNTIME_INDEXPARAMS_H

#include "mpc/Runtime/OpParams.h"
#include <algorithm>
#include <cstdint>
#include <vector>

namespace mpc {

/// Shape (opset 15): the start and end attributes, clamped per input rank
/// by shapeRange.
struct ShapeParams final : OpParams {
  int64_t start = 0, end = 0;
  bool hasEnd = false;
};
ParsedParams parseShape(const Node &n);

/// [start, end) of a rank-`rank` input's dimensions: negative values count
/// from the end, both are clamped to [0, rank] and end to at least start.
inline void clampShapeRange(int64_t rank, int64_t &start, int64_t &end) {
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::min(std::max<int64_t>(start, 0), rank);
  end = std::min(std::max<int64_t>(end, start), rank);
}
inline void shapeRange(const ShapeParams &p, int64_t rank, int64_t &start, int64_t &end) {
  start = p.start;
  end = p.hasEnd ? p.end : rank;
  clampShapeRange(rank, start, end);
}

/// ConstantOfShape: the fill value's dtype and the bytes of its one element
/// (a float 0 when the value attribute is absent).
struct FillParams final : OpParams {
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;
};
ParsedParams parseConstantOfShape(const Node &n);

} // namespace mpc

#endif // MPC_RUNTIME_INDEXPARAMS_H
