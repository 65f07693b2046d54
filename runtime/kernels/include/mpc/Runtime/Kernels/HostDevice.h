//===- HostDevice.h - Host and device function markers -----------*- C++ -*-===//
//
// Every op body in runtime/kernels is written once for the CPU and for CUDA
// device code. MPC_HD marks such a function: `__host__ __device__` when nvcc
// compiles the file, nothing in host-only builds. A body marked MPC_HD may
// call only other MPC_HD functions, the C math functions (CUDA has device
// versions of them) and constexpr code; anything CPU-specific (ISA dispatch,
// SIMD, threads, allocation, llvm containers) belongs in runtime/cpu. The
// build checks this with nvcc when it is found (tests/kernels).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_HOSTDEVICE_H
#define MPC_RUNTIME_KERNELS_HOSTDEVICE_H

#if defined(__CUDACC__)
#define MPC_HD __host__ __device__
#else
#define MPC_HD
#endif

#endif // MPC_RUNTIME_KERNELS_HOSTDEVICE_H
