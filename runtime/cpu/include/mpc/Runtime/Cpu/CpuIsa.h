//===- CpuIsa.h - Run-time selection of CPU vector extensions ---*- C++ -*-===//
//
// The CPU loops are compiled for the x86-64 baseline and, where the compiler
// supports it, a second time for AVX2/F16C; this picks one at run time. Both
// give bit-identical results: FMA is not enabled and mpc_runtime_cpu is
// built with -ffp-contract=off.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_CPUISA_H
#define MPC_RUNTIME_KERNELS_CPUISA_H

/// Attribute of the AVX2 clone of a CPU loop, and whether clones exist.
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) &&         \
    !defined(__CUDACC__)
#define MPC_HAVE_AVX2_CLONES 1
#define MPC_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define MPC_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define MPC_HAVE_AVX2_CLONES 0
#define MPC_TARGET_AVX2
#define MPC_ALWAYS_INLINE inline
#endif

namespace mpc {
namespace kernels {

/// Vector instruction levels of the CPU loops.
enum class CpuIsa {
  /// SSE2 (x86-64 baseline) and portable fp16 conversion.
  Baseline,
  /// AVX2 + F16C (Haswell and later, Zen).
  Avx2,
};

/// The level the loops use: the best the CPU supports, unless lowered.
CpuIsa activeCpuIsa();

/// Sets the level (clamped to what the CPU supports); tests use it to run
/// both paths. Not for use while kernels run on other threads.
void setCpuIsa(CpuIsa isa);

/// The best level this CPU supports.
CpuIsa detectCpuIsa();

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_CPUISA_H
