//===- MemoryPlanner.h - Static offsets for one transient arena -*- C++ -*-===//
//
// Given each buffer's size and live interval [first step, last step]
// (inclusive) in the schedule, assigns arena offsets so that buffers whose
// intervals intersect never overlap in memory. Replays allocations and frees
// in step order with a best-fit gap search over the live blocks sorted by
// offset (ONNX Runtime's MemPatternPlanner approach; docs/gpu-notes.md
// section 5).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_MEMORYPLANNER_H
#define MPC_RUNTIME_MEMORYPLANNER_H

#include "llvm/ADT/ArrayRef.h"
#include <cstdint>
#include <string>
#include <vector>

namespace mpc {

/// Every offset and every planned size is a multiple of this (cudaMalloc
/// bases are already 256-byte aligned).
constexpr uint64_t kArenaAlignment = 256;

/// One buffer to place.
struct BufferRequest {
  /// Size in bytes (rounded up to kArenaAlignment by the planner; 0 -> 256).
  uint64_t size = 0;
  /// First step at which the buffer is written.
  int64_t firstStep = 0;
  /// Last step at which it is read (>= firstStep).
  int64_t lastStep = 0;
};

/// The planner's result.
struct MemoryPlan {
  /// Offsets in the arena, parallel to the requests.
  std::vector<uint64_t> offsets;
  /// Arena size: the highest end of any placed buffer.
  uint64_t peak = 0;
  /// Sum of all rounded sizes: the arena size without reuse.
  uint64_t sumOfSizes = 0;
  /// Lower bound: the most bytes live at any single step.
  uint64_t maxLiveBytes = 0;
};

/// Rounds up to kArenaAlignment (0 becomes one alignment unit).
uint64_t alignArenaSize(uint64_t bytes);

/// Plans offsets; O(n log n + n * live) time.
MemoryPlan planMemory(llvm::ArrayRef<BufferRequest> requests);

/// Checks a plan by an interval sweep (O(n log n)): alignment, and that no
/// two buffers with intersecting lifetimes overlap in memory or run past the
/// peak. Returns an empty string when valid, else the first violation.
std::string checkMemoryPlan(llvm::ArrayRef<BufferRequest> requests,
                            const MemoryPlan &plan);

} // namespace mpc

#endif // MPC_RUNTIME_MEMORYPLANNER_H
