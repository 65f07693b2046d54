//===- MemoryPlanner.cpp - Best-fit arena planning --------------------------===//
//
// Allocation replay: at each step, frees the buffers whose last step has
// passed, then places the buffers born at that step (largest first) in the
// smallest gap between live blocks that fits, or above the highest one.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/MemoryPlanner.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>

using namespace mpc;

uint64_t mpc::alignArenaSize(uint64_t bytes) {
  if (bytes == 0)
    return kArenaAlignment;
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

MemoryPlan mpc::planMemory(llvm::ArrayRef<BufferRequest> reqs) {
  MemoryPlan plan;
  size_t n = reqs.size();
  plan.offsets.assign(n, 0);
  std::vector<uint64_t> sizes(n);
  for (size_t i = 0; i < n; ++i) {
    sizes[i] = alignArenaSize(reqs[i].size);
    plan.sumOfSizes += sizes[i];
  }
  // Birth order: by first step, then largest first, then index (deterministic).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (reqs[a].firstStep != reqs[b].firstStep)
      return reqs[a].firstStep < reqs[b].firstStep;
    if (sizes[a] != sizes[b])
      return sizes[a] > sizes[b];
    return a < b;
  });
  // Live blocks by offset -> end; pending frees by last step.
  std::map<uint64_t, uint64_t> live;
  using Free = std::pair<int64_t, size_t>;
  std::priority_queue<Free, std::vector<Free>, std::greater<Free>> frees;
  uint64_t liveBytes = 0;
  for (size_t idx : order) {
    const BufferRequest &r = reqs[idx];
    while (!frees.empty() && frees.top().first < r.firstStep) {
      size_t dead = frees.top().second;
      frees.pop();
      live.erase(plan.offsets[dead]);
      liveBytes -= sizes[dead];
    }
    uint64_t size = sizes[idx];
    uint64_t best = UINT64_MAX, bestGap = UINT64_MAX, prevEnd = 0;
    for (auto &[off, end] : live) {
      if (off >= prevEnd + size && off - prevEnd < bestGap) {
        bestGap = off - prevEnd;
        best = prevEnd;
      }
      prevEnd = std::max(prevEnd, end);
    }
    if (best == UINT64_MAX)
      best = prevEnd;
    plan.offsets[idx] = best;
    live.emplace(best, best + size);
    liveBytes += size;
    plan.maxLiveBytes = std::max(plan.maxLiveBytes, liveBytes);
    plan.peak = std::max(plan.peak, best + size);
    frees.push({std::max(r.lastStep, r.firstStep), idx});
  }
  return plan;
}

std::string mpc::checkMemoryPlan(llvm::ArrayRef<BufferRequest> reqs,
                                 const MemoryPlan &plan) {
  size_t n = reqs.size();
  if (plan.offsets.size() != n)
    return "plan has the wrong number of offsets";
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reqs[a].firstStep != reqs[b].firstStep
               ? reqs[a].firstStep < reqs[b].firstStep
               : a < b;
  });
  // Active buffers ordered by offset; they are pairwise disjoint (checked
  // on insertion), so only the neighbours of a new one can overlap it.
  std::set<std::pair<uint64_t, size_t>> active;
  using Free = std::pair<int64_t, size_t>;
  std::priority_queue<Free, std::vector<Free>, std::greater<Free>> frees;
  for (size_t i : order) {
    uint64_t off = plan.offsets[i], size = alignArenaSize(reqs[i].size);
    if (off % kArenaAlignment)
      return llvm::formatv("buffer {0}: offset {1} is not aligned", i, off).str();
    if (off + size > plan.peak)
      return llvm::formatv("buffer {0}: ends past the peak", i).str();
    while (!frees.empty() && frees.top().first < reqs[i].firstStep) {
      size_t d = frees.top().second;
      active.erase({plan.offsets[d], d});
      frees.pop();
    }
    auto next = active.lower_bound({off, 0});
    if (next != active.end() && next->first < off + size)
      return llvm::formatv("buffers {0} and {1} overlap while both live", i,
                           next->second)
          .str();
    if (next != active.begin()) {
      auto prev = std::prev(next);
      if (prev->first + alignArenaSize(reqs[prev->second].size) > off)
        return llvm::formatv("buffers {0} and {1} overlap while both live",
                             prev->second, i)
            .str();
    }
    active.insert({off, i});
    frees.push({std::max(reqs[i].lastStep, reqs[i].firstStep), i});
  }
  return "";
}
