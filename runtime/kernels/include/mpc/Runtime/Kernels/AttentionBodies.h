//===- AttentionBodies.h - Attention's score math per element ---*- C++ -*-===//
//
// ONNX Attention (opset 23), once for the CPU kernel
// (runtime/cpu/AttentionKernel.cpp) and the CUDA launcher
// (runtime/cuda/AttentionKernels.cu): the soft cap of a raw score, the
// additive bias of score (b, h, i, j) from attn_mask (bool: 0 or -inf; a
// float mask is added; columns past the mask's last dimension are -inf) and
// the causal triangle shifted by the past length. The softmax over a row of
// biased scores is NormBodies.h's (maxKeepNaN, softmaxExp): a row that is
// all -inf, or holds a NaN, is NaN everywhere, as the reference.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_ATTENTIONBODIES_H
#define MPC_RUNTIME_KERNELS_ATTENTIONBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

#include <stdint.h>

namespace mpc {
namespace kernels {

/// attn_mask's shape padded on the left to rank 4 ([b, h, i, j] with size-1
/// dimensions broadcast); `present` false without a mask.
struct AttentionMaskShape {
  int64_t dims[4] = {1, 1, 1, 1};
  bool present = false, isBool = false;
};

/// The offset of row (b, h, i) of the mask (its element j is at + j).
MPC_HD inline int64_t attentionMaskRow(const AttentionMaskShape &m, int64_t b, int64_t h,
                                       int64_t i) {
  const int64_t *d = m.dims;
  int64_t off = ((d[0] == 1 ? 0 : b) * d[1] + (d[1] == 1 ? 0 : h)) * d[2] + (d[2] == 1 ? 0 : i);
  return off * d[3];
}

/// The mask's part of the bias of column j, given the mask's element at j
/// (`value`, widened; read only where j is inside the mask).
template <typename C>
MPC_HD inline C attentionMaskBias(const AttentionMaskShape &m, int64_t j, C value) {
  if (!m.present)
    return C(0);
  if (j >= m.dims[3])
    return -math::infinity<C>();
  if (m.isBool)
    return value != C(0) ? C(0) : -math::infinity<C>();
  return value;
}

/// The causal part, added to the mask's: -inf past the diagonal shifted by
/// the past length.
template <typename C>
MPC_HD inline C attentionCausalBias(bool causal, int64_t i, int64_t j, int64_t past, C bias) {
  return causal && j > i + past ? bias + -math::infinity<C>() : bias;
}

/// A raw score after the soft cap (none when softcap <= 0).
template <typename C> MPC_HD inline C attentionSoftcap(C s, C softcap) {
  return softcap > C(0) ? softcap * math::tanh(s / softcap) : s;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_ATTENTIONBODIES_H
