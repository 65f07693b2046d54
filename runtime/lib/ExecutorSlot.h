//===- ExecutorSlot.h - Per-value state of the executor ---------*- C++ -*-===//
//
// Shared by Executor.cpp (static planning) and ControlFlow.cpp (dynamic
// mode). Private to runtime/lib.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_LIB_EXECUTORSLOT_H
#define MPC_RUNTIME_LIB_EXECUTORSLOT_H

#include "mpc/Runtime/Executor.h"

namespace mpc {

/// Where a value lives.
enum class SlotKind {
  Input,       ///< bound per run (formal input or outer value): arena
  Initializer, ///< persistent pool, uploaded once
  Activation,  ///< produced by a node: arena (dynamic mode: own allocation)
  Folded,      ///< computed while planning: persistent pool
};

struct Executor::Slot {
  const Value *value = nullptr;
  SlotKind kind = SlotKind::Activation;
  ShapedType type;
  /// Known value on the host (small initializers, folded values).
  std::unique_ptr<HostTensor> host;
  /// Device pointer of initializers and folded values.
  void *persistent = nullptr;
  /// Arena offset of inputs and activations.
  uint64_t offset = 0;
  /// Live interval in steps (static mode).
  int64_t firstStep = -1, lastStep = -1;
};

} // namespace mpc

#endif // MPC_RUNTIME_LIB_EXECUTORSLOT_H
