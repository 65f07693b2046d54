//===- GraphSchedule.h - When a plan is captured as a CUDA graph -*- C++ -*-===//
//
// CudaBackend::runPlan's decision, as pure host logic (tested without a GPU
// in tests/cuda_host): run a static plan eagerly, capture it into a CUDA
// graph, or replay the graph it captured. A plan is known by its owner (the
// executor) and version (LaunchPlan: it changes whenever the calls or the
// bound buffers' addresses do, and comes back when a double-buffered state
// returns to addresses seen before).
//
// The first run of a (owner, version) is eager: it is the warm-up, in which
// lazily loaded kernel modules and the libraries' first-call setup happen
// outside any capture. The second run captures (and then launches the
// graph), and every later run replays it. A version whose capture failed
// runs eagerly from then on. An owner keeps its kPerOwner most recently run
// versions; an older one is evicted and the backend drops its graph
// (takeEvicted). Runs on the synchronous stream, and every run when graphs
// are off (`--cuda-graph off`), are eager and not counted.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_GRAPHSCHEDULE_H
#define MPC_RUNTIME_CUDA_GRAPHSCHEDULE_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace mpc {
namespace cuda {

class GraphSchedule {
public:
  enum class Action { Eager, Capture, Replay };
  using Key = std::pair<const void *, uint64_t>; ///< (owner, version)
  /// Versions kept per owner: two for a double-buffered training step, and
  /// room for an evaluation plan's.
  static constexpr size_t kPerOwner = 4;

  explicit GraphSchedule(bool enabled) : enabled(enabled) {}

  /// What to do with this run of (owner, version); `capturable` is false on
  /// the synchronous stream. Counts the run.
  Action next(const void *owner, uint64_t version, bool capturable);
  /// The capture that next() asked for succeeded: replay from now on.
  void captured(Key k);
  /// The capture that next() asked for failed: eager from now on.
  void captureFailed(Key k);
  /// The plans evicted since the last call, whose graphs are to be dropped.
  std::vector<Key> takeEvicted() { return std::exchange(evicted, {}); }
  /// The number of (owner, version) plans known.
  std::size_t size() const { return plans.size(); }

private:
  enum class State { Warm, Capturing, Captured, Failed };
  struct Plan {
    unsigned runs = 0;
    uint64_t lastUse = 0;
    State state = State::Warm;
  };
  bool enabled;
  uint64_t clock = 0;
  std::map<Key, Plan> plans;
  std::vector<Key> evicted;
};

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_GRAPHSCHEDULE_H
