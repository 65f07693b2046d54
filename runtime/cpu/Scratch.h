//===- Scratch.h - Per-thread scratch buffers for CPU kernels ---*- C++ -*-===//
//
// Reusable, growable per-thread buffers, so kernels that widen 16-bit data or
// build im2col panels do not allocate (and page-fault) on every call.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_SCRATCH_H
#define MPC_RUNTIME_CPU_SCRATCH_H

#include <cstddef>

namespace mpc {
namespace cpu {

/// Buffers that one kernel call may hold at the same time. A kernel uses
/// distinct slots for buffers it needs simultaneously; kernels do not call
/// each other while holding a slot, except GEMM, which only uses GemmA..C.
enum class ScratchSlot : unsigned {
  GemmA,
  GemmB,
  GemmC,
  Panel,
  Weights,
  Input,
  Accum,
  Extra,
  Count
};

/// A 64-byte aligned buffer of at least \p bytes, valid until the next call
/// with the same slot on this thread. Contents are unspecified.
void *scratchBytes(ScratchSlot slot, size_t bytes);

/// Typed view of scratchBytes.
template <typename T> T *scratch(ScratchSlot slot, size_t count) {
  return static_cast<T *>(scratchBytes(slot, count * sizeof(T)));
}

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_SCRATCH_H
