//===- EinsumGather.h - One strided, summing gather --------------*- C++ -*-===//
//
// The gather of EinsumPlan.h, in a header of its own with no LLVM so that
// the launchers (nvcc) include it: a dense row-major result whose every
// element reads a strided index space of its source and sums it. Einsum
// (EinsumKernels.cu) and Attention (AttentionOps.cpp) gather with it.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_EINSUMGATHER_H
#define MPC_RUNTIME_CUDA_EINSUMGATHER_H

#include "mpc/Runtime/Kernels/HostDevice.h"

#include <stdint.h>

namespace mpc {
namespace cuda {

/// The most dimensions (and, separately, summed dimensions) of one gather.
constexpr int kEinsumMaxDims = 8;

/// A gather: element i of a dense row-major tensor of dims[0..rank) is
/// scale * the sum, over the row-major index space sumDims[0..sumRank), of
/// src[offset], where offset adds index * stride over both spaces. Passed
/// to the kernel by value. rank 0 is one element; sumRank 0 a plain copy.
struct EinsumGather {
  int32_t rank = 0, sumRank = 0;
  int64_t dims[kEinsumMaxDims] = {}, strides[kEinsumMaxDims] = {};
  int64_t sumDims[kEinsumMaxDims] = {}, sumStrides[kEinsumMaxDims] = {};
  float scale = 1.0f;

  MPC_HD int64_t count() const { return volume(dims, rank); }
  MPC_HD int64_t sumCount() const { return volume(sumDims, sumRank); }
  /// The source offset of element i (its summed index space starts there).
  MPC_HD int64_t offset(int64_t i) const { return walk(dims, strides, rank, i); }
  /// The offset of summed element j from the start of its space.
  MPC_HD int64_t sumOffset(int64_t j) const { return walk(sumDims, sumStrides, sumRank, j); }

  MPC_HD static int64_t volume(const int64_t *d, int32_t r) {
    int64_t n = 1;
    for (int32_t k = 0; k < r; ++k)
      n *= d[k];
    return n;
  }
  /// The offset of row-major index i of the space d[0..r) with strides s.
  MPC_HD static int64_t walk(const int64_t *d, const int64_t *s, int32_t r, int64_t i) {
    int64_t off = 0;
    for (int32_t k = r; k-- > 0;) {
      int64_t q = i / d[k];
      off += (i - q * d[k]) * s[k];
      i = q;
    }
    return off;
  }
};

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_EINSUMGATHER_H
