//===- ExecutorSlot.h - Per-value state of the executor ---------*- C++ -*-===//
//
// Shared by Executor.cpp (static planning) and ControlFlow.cpp (dynamic
// mode). Private to runtime/core.
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

/// A sequence value (dynamic mode only): host tensors of one element type.
/// Slots share them, so one is never changed while shared: an op changes a
/// sequence in place only when it holds the only reference (the sequence's
/// last use, see runSequenceOp), and builds a new one otherwise.
/// With `optional` set it is an optional value instead, carried the same way:
/// it holds a sequence (`inner`), a tensor (items[0]) or nothing.
struct SequenceValue {
  DType elem = DType::Undefined;
  std::vector<HostTensor> items;
  bool optional = false;
  /// Optional: its element is a sequence (what an empty one still knows).
  bool ofSequence = false;
  /// Optional holding a sequence: that sequence.
  std::shared_ptr<SequenceValue> inner;

  /// An optional holding nothing.
  bool isNone() const { return optional && !inner && items.empty(); }
};

/// True for the default-domain sequence and optional ops the executor runs
/// itself (SequenceOps.cpp): SequenceConstruct/At/Insert/Erase/Length/Empty,
/// ConcatFromSequence, SplitToSequence, Optional, OptionalHasElement,
/// OptionalGetElement.
bool isSequenceOp(const Node &n);

/// True for a value of a type only dynamic mode holds (a sequence or an
/// optional).
inline bool isContainerType(const Type &t) {
  return t.kind == TypeKind::Sequence || t.kind == TypeKind::Optional;
}

/// An operand of a sequence op: a sequence (or optional), a host tensor, or
/// neither (an absent optional input).
struct SequenceOperand {
  std::shared_ptr<SequenceValue> seq;
  const HostTensor *tensor = nullptr;
};

/// The single output of a sequence op: a sequence (or optional) or a tensor.
struct SequenceResult {
  std::shared_ptr<SequenceValue> seq;
  HostTensor tensor;
};

/// Runs a sequence op on the host. SequenceInsert and SequenceErase change
/// their input sequence in place and return it when `ins[0]` holds its only
/// reference (a loop that appends to a sequence each iteration would
/// otherwise copy the whole sequence every time); else they copy it.
llvm::Expected<SequenceResult> runSequenceOp(const Node &n,
                                             llvm::MutableArrayRef<SequenceOperand> ins);

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
  /// Caller-owned backend memory bound by bindInput/bindOutput: the value
  /// is read or written there, never in the arena (null: not bound).
  void *external = nullptr;
  /// Live interval in steps (static mode).
  int64_t firstStep = -1, lastStep = -1;
  /// The value when it is a sequence (dynamic mode).
  std::shared_ptr<SequenceValue> seq;
};

} // namespace mpc

#endif // MPC_RUNTIME_LIB_EXECUTORSLOT_H
