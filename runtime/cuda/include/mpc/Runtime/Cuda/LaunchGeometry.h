//===- LaunchGeometry.h - Grid and block sizes of element-wise launches -*- C++ -*-===//
//
// How the CUDA backend's element-wise launchers cover n elements, as a pure
// function of n and the device's multiprocessor count, so that CI (no GPU)
// tests it. Every launcher is a grid-stride loop: thread t of the grid
// handles elements t, t + stride, t + 2 * stride, ... with stride = blocks *
// threads, so a capped grid still covers any n, and no index exceeds int64.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_LAUNCHGEOMETRY_H
#define MPC_RUNTIME_CUDA_LAUNCHGEOMETRY_H

#include <cstdint>

namespace mpc {
namespace cuda {

/// Threads per block of the element-wise launchers: a multiple of the warp
/// size that lets 8 blocks share one sm_80/sm_90 multiprocessor (2048
/// resident threads).
constexpr unsigned kElementwiseBlock = 256;
/// Blocks per multiprocessor the grid is capped at: enough resident warps to
/// hide memory latency; larger n loop in the grid stride instead.
constexpr unsigned kBlocksPerSM = 8;

struct LaunchGeometry {
  unsigned blocks = 0;  ///< 0: nothing to launch (n == 0)
  unsigned threads = 0; ///< threads per block
  /// Elements between two consecutive elements of one thread.
  int64_t stride() const { return int64_t(blocks) * threads; }
};

/// The geometry for n elements on a device with `smCount` multiprocessors
/// (at least 1 is assumed): one thread per element while that needs at most
/// smCount * kBlocksPerSM blocks, otherwise exactly that many blocks.
constexpr LaunchGeometry elementwiseGeometry(int64_t n, unsigned smCount) {
  LaunchGeometry g;
  if (n <= 0)
    return g;
  int64_t cap = int64_t(smCount ? smCount : 1) * kBlocksPerSM;
  int64_t need = (n + kElementwiseBlock - 1) / kElementwiseBlock;
  g.blocks = unsigned(need < cap ? need : cap);
  g.threads = kElementwiseBlock;
  return g;
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_LAUNCHGEOMETRY_H
