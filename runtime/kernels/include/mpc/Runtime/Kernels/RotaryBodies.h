//===- RotaryBodies.h - RotaryEmbedding's per-element math ------*- C++ -*-===//
//
// RotaryEmbedding (opset 23), once for the CPU kernel
// (runtime/cpu/RotaryEmbeddingKernel.cpp, a loop over every slot of every
// head vector) and the CUDA launcher (runtime/cuda/RotaryKernels.cu, one
// thread per slot). A head vector of headSize elements has `dim / 2 +
// (headSize - dim)` slots: slot i < dim / 2 rotates the pair (x1, x2) into
// (cos*x1 - sin*x2, sin*x1 + cos*x2), the pair being elements (i, i + dim/2)
// or, interleaved, (2i, 2i + 1); the remaining slots copy the elements past
// the rotated part. The math is in the storage type's compute type (fp32
// for 16-bit storage), each output rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_ROTARYBODIES_H
#define MPC_RUNTIME_KERNELS_ROTARYBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <stdint.h>

namespace mpc {
namespace kernels {

/// The layout of one RotaryEmbedding call: X is [batch, heads, seq,
/// headSize] (fourD) or [batch, seq, heads * headSize]; `dim` is the rotated
/// part of each head vector (even, at most headSize).
struct RotaryShape {
  int64_t batch = 0, seq = 0, heads = 0, headSize = 0, dim = 0;
  bool fourD = false, interleaved = false;
};

/// Slots per head vector (see the file comment).
MPC_HD inline int64_t rotarySlots(const RotaryShape &r) { return r.dim / 2 + r.headSize - r.dim; }

/// The element offset of head vector (b, s, h) in X and Y.
MPC_HD inline int64_t rotaryHeadOffset(const RotaryShape &r, int64_t b, int64_t s, int64_t h) {
  return r.fourD ? ((b * r.heads + h) * r.seq + s) * r.headSize
                 : (b * r.seq + s) * r.heads * r.headSize + h * r.headSize;
}

/// Writes slot `i` of one head vector: `in`/`out` point at the vector,
/// `cs`/`sn` at its position's row of the caches (dim / 2 elements).
template <typename T>
MPC_HD inline void rotarySlot(const RotaryShape &r, const T *in, T *out, const T *cs,
                              const T *sn, int64_t i) {
  using C = ComputeType<T>;
  int64_t half = r.dim / 2;
  if (i >= half) {
    int64_t e = r.dim + (i - half);
    out[e] = in[e];
    return;
  }
  int64_t i1 = r.interleaved ? 2 * i : i, i2 = r.interleaved ? 2 * i + 1 : i + half;
  C x1 = C(load(in[i1])), x2 = C(load(in[i2]));
  C co = C(load(cs[i])), si = C(load(sn[i]));
  out[i1] = store<T>(C(co * x1 - si * x2));
  out[i2] = store<T>(C(si * x1 + co * x2));
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_ROTARYBODIES_H
