//===- GraphSchedule.cpp - When a plan is captured as a CUDA graph ---------===//
#include "mpc/Runtime/Cuda/GraphSchedule.h"

using namespace mpc::cuda;

GraphSchedule::Action GraphSchedule::next(const void *owner, uint64_t version,
                                          bool capturable) {
  if (!enabled || !capturable)
    return Action::Eager;
  Key key(owner, version);
  auto it = plans.find(key);
  if (it == plans.end()) {
    // Keep the owner's most recently run versions.
    auto first = plans.lower_bound(Key(owner, 0));
    size_t mine = 0;
    auto oldest = plans.end();
    for (auto j = first; j != plans.end() && j->first.first == owner; ++j) {
      ++mine;
      if (oldest == plans.end() || j->second.lastUse < oldest->second.lastUse)
        oldest = j;
    }
    if (mine >= kPerOwner) {
      evicted.push_back(oldest->first);
      plans.erase(oldest);
    }
    it = plans.emplace(key, Plan()).first;
  }
  Plan &p = it->second;
  ++p.runs;
  p.lastUse = ++clock;
  switch (p.state) {
  case State::Warm:
    if (p.runs == 1)
      return Action::Eager;
    p.state = State::Capturing;
    return Action::Capture;
  case State::Captured:
    return Action::Replay;
  case State::Capturing: // the backend never reported: treat as failed
    p.state = State::Failed;
    return Action::Eager;
  case State::Failed:
    return Action::Eager;
  }
  return Action::Eager;
}

void GraphSchedule::captured(Key k) {
  auto it = plans.find(k);
  if (it != plans.end() && it->second.state == State::Capturing)
    it->second.state = State::Captured;
}

void GraphSchedule::captureFailed(Key k) {
  auto it = plans.find(k);
  if (it != plans.end())
    it->second.state = State::Failed;
}
