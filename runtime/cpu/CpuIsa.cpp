//===- CpuIsa.cpp - Run-time selection of CPU vector extensions -----------===//
//
// CPUID-based detection of what the AVX2 clones of the CPU loops need: AVX2
// and F16C in the CPU, and YMM state saving enabled by the OS (XGETBV).
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/CpuIsa.h"

#include <atomic>

#if MPC_HAVE_AVX2_CLONES
#include <cpuid.h>
#endif

namespace mpc {
namespace kernels {

#if MPC_HAVE_AVX2_CLONES
static bool cpuHasAvx2AndF16c() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
    return false;
  bool osxsave = ecx & (1u << 27), avx = ecx & (1u << 28),
       f16c = ecx & (1u << 29);
  if (!osxsave || !avx || !f16c)
    return false;
  unsigned xcr0Lo, xcr0Hi;
  __asm__("xgetbv" : "=a"(xcr0Lo), "=d"(xcr0Hi) : "c"(0));
  if ((xcr0Lo & 6u) != 6u) // The OS saves XMM and YMM registers.
    return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
    return false;
  return ebx & (1u << 5);
}
#endif

CpuIsa detectCpuIsa() {
#if MPC_HAVE_AVX2_CLONES
  static const bool avx2 = cpuHasAvx2AndF16c();
  if (avx2)
    return CpuIsa::Avx2;
#endif
  return CpuIsa::Baseline;
}

static std::atomic<CpuIsa> &activeIsa() {
  static std::atomic<CpuIsa> isa(detectCpuIsa());
  return isa;
}

CpuIsa activeCpuIsa() { return activeIsa().load(std::memory_order_relaxed); }

void setCpuIsa(CpuIsa isa) {
  CpuIsa best = detectCpuIsa();
  activeIsa().store(unsigned(isa) > unsigned(best) ? best : isa,
                    std::memory_order_relaxed);
}

} // namespace kernels
} // namespace mpc
