//===- Executor.h - Plans and runs a model on a backend ---------*- C++ -*-===//
//
// create() looks every node up in the op registry (OpRegistry.h), parses its
// attributes once into the row's parameter struct and checks, before
// anything runs, that the backend has a kernel for every node (one error
// naming op, domain, opset and node). plan() infers every shape statically
// for the given input shapes with the registry's shape functions, evaluates
// small host-computable values (initializers, Shape/Gather/Concat/Unsqueeze/
// Cast chains feeding Reshape and friends) on the host, prepares every node
// that runs for its input shapes (Backend::prepare, cached per node until
// the shapes change; the workspace it asks for is the executor's), and
// assigns every remaining value an offset in one transient arena
// (MemoryPlanner.h). run() copies the inputs in, hands the whole plan to the
// backend (Backend::runPlan) on the executor's stream, queues the copies of
// the run's error record and of the outputs, and waits once. A kernel's
// data-dependent error (an index out of range) is reported then, naming the
// node (docs/backends.md). With deferred errors (setDeferredErrors, the
// trainer's steps) a run whose outputs stay in backend memory does not wait
// at all: its caller reads the record later.
//
// Inputs with a default (IR 3 lists initializers among the graph inputs) that
// run() is not given are planned as constants, like initializers: persistent
// and foldable (a Reshape target); given, they are inputs like any other.
//
// Memory: initializers and folded values live in the persistent pool, uploaded
// once per executor (plan) and kept across runs. Activations live in the
// arena, allocated on the first run and reused while the plan fits; an
// element-wise binary op writes in place over an operand of its output's
// dtype and shape whose last use it is. Launches share one workspace, as
// large as the most any prepared node asks for (PreparedKernel); kernels may
// also use heap scratch of their own (LSTM). Each executor owns a stream and
// a per-run error record (KernelErrorRecord, 256 bytes of persistent
// backend memory).
//
// Dynamic mode: a graph with control flow (If, Loop, Scan) or an op whose
// output shape depends on data (NonZero) is not planned statically. Its
// nodes are shaped as they run, every value gets its own backend allocation
// (outside any arena), freed after its last use. Bodies run on
// sub-executors (planned statically when they can be): the values they read
// (formal inputs and values captured from enclosing graphs) are passed as
// host copies, and their outputs come back as host copies. A body whose
// shapes depend on values it only gets at run time (a Slice with
// loop-carried bounds) falls back to dynamic mode itself. Sequence values
// (SequenceConstruct, SplitToSequence, ...) exist in dynamic mode only, as
// vectors of host tensors; they may cross into and out of bodies (a Loop's
// state), and a main graph takes and returns them through the run() that
// has sequence arguments. Optional values (Optional, OptionalGetElement,
// ...: nothing, a tensor or a sequence) are carried like sequences, and
// cross the same run() as NamedSequences marked optional. SequenceMap runs
// its body once per sequence element, like Loop and Scan.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_EXECUTOR_H
#define MPC_RUNTIME_EXECUTOR_H

#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/MemoryPlanner.h"
#include "mpc/Runtime/OpRegistry.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mpc {

struct SequenceValue; // runtime/core (ExecutorSlot.h)
class StagingRing;    // Readback.h

/// A named host tensor: a model input or output.
struct NamedTensor {
  std::string name;
  HostTensor tensor;
};

/// A named sequence of host tensors: a sequence-typed model input or output.
/// With `optional` set, an optional-typed one instead: it holds nothing
/// (`hasValue` false), one tensor (items[0]) or, with `ofSequence`, a
/// sequence (items, maybe none).
struct NamedSequence {
  std::string name;
  /// Element type (what an empty sequence still has).
  DType elem = DType::Undefined;
  std::vector<HostTensor> items;
  bool optional = false;
  /// Optional: its element is a sequence rather than a tensor.
  bool ofSequence = false;
  /// Optional: false when it holds nothing.
  bool hasValue = true;
};

/// Bytes run() copied between host memory and backend memory, counted since
/// the executor was made (the training step's --stats).
struct TransferStats {
  /// Inputs given as host tensors, copied in.
  uint64_t hostToDevice = 0;
  /// Outputs returned as host tensors, copied out.
  uint64_t deviceToHost = 0;
  /// Calls of run().
  uint64_t runs = 0;
};

/// Memory figures of the current plan, in bytes.
struct MemoryStats {
  /// Planned arena size.
  uint64_t plannedPeak = 0;
  /// Arena size without any reuse (sum of all aligned activation sizes).
  uint64_t noReuseSum = 0;
  /// Most bytes live at one step: no plan can do better.
  uint64_t lowerBound = 0;
  /// Persistent pool: initializers and folded values.
  uint64_t persistent = 0;
  /// Launch scratch of the plan: the most any prepared node asks for
  /// (allocated with the arena by the first run).
  uint64_t workspace = 0;
  /// Number of arena buffers.
  size_t numBuffers = 0;
  /// Values computed in place over an operand's buffer.
  size_t numInPlace = 0;
};

class Executor {
public:
  ~Executor();

  /// Checks that `backend` supports every node of the model's main graph
  /// (and of every If/Loop/Scan body).
  static llvm::Expected<std::unique_ptr<Executor>> create(const Model &model,
                                                          Backend &backend);
  /// The same for one graph (a body); values it reads from enclosing graphs
  /// become named inputs (outerValues()), except enclosing initializers for
  /// which `constantOuter` is true: those are loaded like this graph's own
  /// initializers (persistent, foldable: a training step's shape constants).
  /// Initializers of `graph` for which `variable` is true are not loaded:
  /// they become named inputs with a default (like IR 3's initializers
  /// listed among the inputs), which bindInput() points at caller-owned
  /// backend memory (the trainer's state, read in place by evaluation).
  static llvm::Expected<std::unique_ptr<Executor>>
  createForGraph(const Graph &graph, Backend &backend,
                 llvm::function_ref<bool(const Value *)> constantOuter = nullptr,
                 llvm::function_ref<bool(const Value *)> variable = nullptr);

  /// Infers shapes, folds host-computable values and plans the arena for
  /// these input shapes. run() calls it when the shapes change.
  llvm::Error plan(llvm::ArrayRef<NamedTensor> inputs);

  /// Runs the model. Every graph input without a default must be given, with
  /// its declared dtype and a shape matching its declared dims.
  llvm::Expected<std::vector<NamedTensor>> run(llvm::ArrayRef<NamedTensor> inputs);

  /// plan() and run() for a graph with sequence- or optional-typed inputs or
  /// outputs (dynamic mode): `sequences` binds those inputs by name, and each
  /// such output comes back in `seqOutputs` (one entry per graph output,
  /// empty for a tensor) with an empty tensor in its place in the result.
  llvm::Error plan(llvm::ArrayRef<NamedTensor> inputs,
                   llvm::ArrayRef<NamedSequence> sequences);
  llvm::Expected<std::vector<NamedTensor>>
  run(llvm::ArrayRef<NamedTensor> inputs, llvm::ArrayRef<NamedSequence> sequences,
      std::vector<std::optional<NamedSequence>> &seqOutputs);

  /// Device-resident values (the training state): binds formal input
  /// `name` to caller-owned backend memory `buffer`, whose dtype and shape
  /// must fit the declaration. Following run()s read the value there in
  /// place: it is not among run()'s inputs, is not copied and is never
  /// written (no node reuses it in place). Binding again (the other half of
  /// a double buffer) only changes the pointer. Not in dynamic mode: an
  /// error says so, and the caller passes host tensors instead.
  llvm::Error bindInput(llvm::StringRef name, const TensorRef &buffer);
  /// Graph output `name` is written straight into `buffer` by the node that
  /// makes it (when that node runs in place over an operand, the operand's
  /// in-place chain is computed in `buffer` too); run() returns an empty
  /// tensor in its place. An output no node makes in the plan (a graph input
  /// or a constant passed through) is copied into `buffer` after the nodes
  /// ran. run() fails naming the output when the planned dtype and shape
  /// differ from `buffer`'s. Not in dynamic mode, as bindInput.
  llvm::Error bindOutput(llvm::StringRef name, const TensorRef &buffer);
  /// An in-place update (the trainer's state): graph output `output` is
  /// written into the buffer formal input `input` is bound to, wherever
  /// bindInput() moves it, instead of a buffer of its own. Refused (an error
  /// with writeOverProblem()'s reason) unless that is safe by the graph's
  /// structure: then no node of the run reads `input` after the node that
  /// makes `output` starts writing. bindOutput() on `output` undoes it.
  llvm::Error bindOutputOver(llvm::StringRef output, llvm::StringRef input);
  /// Why `output` may not be written over `input`'s buffer ("" when it may).
  /// Safe when one node N makes `output`, every other node reading `input`
  /// runs before N (the schedule is the graph's order), and N reads `input`
  /// only as an operand it may write that output over element by element
  /// (inPlaceOperands); `input` is not a graph output. The dtypes and shapes
  /// of the two are checked when the run is planned.
  std::string writeOverProblem(llvm::StringRef output, llvm::StringRef input) const;
  /// Dtype and shape of graph output `k` in the current plan (after plan()
  /// or run(); static mode).
  const ShapedType &plannedOutputType(size_t k) const;
  /// Host <-> backend copies made by run() so far.
  const TransferStats &transferStats() const { return transfers; }

  /// Asynchronous runs (a training step, docs/backends.md "Deferred
  /// errors"). Off (the default): run() waits once, at its end, for the
  /// run, its error record and its outputs, and returns the first kernel
  /// error naming the node. On: a statically planned run() whose outputs
  /// are all bound (bindOutput) queues the run on executionStream() and
  /// returns without waiting and without reading the error record; the
  /// caller queues a copy of errorRecord() behind the run (before the next
  /// run() clears it) and hands the copy to recordError() once it landed.
  /// Dynamic mode and runs with host outputs still wait and report as
  /// usual (their record is then clear).
  void setDeferredErrors(bool on) { deferredErrors = on; }
  bool hasDeferredErrors() const { return deferredErrors; }
  /// The stream this executor's work goes to: work queued on it after
  /// run() returned is ordered after the run.
  Stream executionStream() const { return stream; }
  /// The run's error record in backend memory (one KernelErrorRecord).
  const KernelErrorRecord *errorRecord() const {
    return static_cast<const KernelErrorRecord *>(errorBuffer.data);
  }
  /// Changes whenever the kernel calls a record's call number refers to are
  /// rebuilt (a new plan): keep it with a record's copy for recordError().
  uint64_t callsGeneration() const { return generation; }
  /// The error a host copy of errorRecord() stands for, naming the failing
  /// node of the calls of `callsGeneration` (success for a clear record).
  llvm::Error recordError(const KernelErrorRecord &rec, uint64_t callsGeneration);

  const MemoryStats &memoryStats() const { return stats; }
  /// Per-node wall time (static mode): when on, run() adds each node's
  /// launch time to nodeSeconds(), indexed like scheduledNodes().
  /// The clock's own cost (two reads, measured once) is subtracted.
  void setProfiling(bool on);
  llvm::ArrayRef<const Node *> scheduledNodes() const { return steps; }
  llvm::ArrayRef<double> nodeSeconds() const { return nodeTime; }
  /// The arena requests and plan (for checkMemoryPlan in tests).
  llvm::ArrayRef<BufferRequest> bufferRequests() const { return requests; }
  const MemoryPlan &memoryPlan() const { return arenaPlan; }
  /// Number of nodes evaluated on the host during planning.
  size_t numFoldedNodes() const { return numFolded; }
  /// True when the graph runs in dynamic mode (see the file comment).
  bool isDynamic() const { return dynamicMode; }
  /// Values of enclosing graphs that this graph reads; run() takes them as
  /// inputs by name.
  llvm::ArrayRef<const Value *> outerValues() const { return outer; }

  struct Slot; // private to runtime/core (ExecutorSlot.h)

  /// What the executor keeps per node for every plan and run.
  struct PreparedNode {
    const OpDef *op = nullptr;
    /// The backend's preparation for `signature` (Backend::prepare).
    PreparedKernel kernel;
    llvm::SmallVector<TensorDesc, 4> signature;
    bool isPrepared = false;
    /// The attributes parsed by the row (null when it has no parser).
    std::unique_ptr<OpParams> params;
    /// The host kernel that evaluates the node while planning (folding),
    /// when the backend names one (Backend::hostKernel).
    HostKernelFn hostKernel = nullptr;
  };

private:
  Executor(const Graph &g, Backend &b);
  llvm::Error checkKernels();
  /// A KernelCall of a prepared node with no tensors yet.
  KernelCall preparedCall(const Node &n) const;
  /// Prepares `n` for these input shapes unless it already is
  /// (Backend::prepare); an unsupported-op error when the backend has no
  /// kernel for them.
  llvm::Error prepareFor(const Node &n, llvm::ArrayRef<TensorDesc> inputs);
  /// Clears the error record on the stream (before a run).
  void clearErrors();
  /// Reads the error record after the stream's work: the failing node's
  /// error, naming it, or success. `callOf` maps a record's call number to
  /// its KernelCall.
  llvm::Error readErrors(llvm::function_ref<const KernelCall *(int32_t)> callOf);
  /// The error of a record already on the host (see readErrors).
  llvm::Error errorOfRecord(const KernelErrorRecord &rec,
                            llvm::function_ref<const KernelCall *(int32_t)> callOf);
  /// The error a record stands for.
  llvm::Error kernelError(const KernelErrorRecord &rec, const KernelCall &call);
  /// Runs a host kernel on host tensors while planning (folding), with a
  /// record of its own: the same messages as a launch.
  llvm::Error runOnHost(HostKernelFn run, KernelCall &call);
  /// Makes `workspace` at least `bytes` large.
  llvm::Error reserveWorkspace(size_t bytes);
  llvm::Error loadInitializers(llvm::function_ref<bool(const Value *)> constantOuter,
                               llvm::function_ref<bool(const Value *)> variable);
  llvm::Error checkInputs(llvm::ArrayRef<NamedTensor> inputs,
                          std::vector<const HostTensor *> &bound) const;
  /// Sets boundSequences for the next call from a caller's sequence (and
  /// optional) inputs.
  llvm::Error bindSequences(llvm::ArrayRef<NamedTensor> inputs,
                            llvm::ArrayRef<NamedSequence> sequences);
  TensorRef tensorRef(unsigned slot) const;
  void releaseFolded();
  llvm::Expected<std::vector<NamedTensor>>
  runDynamic(const std::vector<const HostTensor *> &bound);
  /// Runs If/Loop/Scan/SequenceMap; an operand i that is a sequence (or an
  /// optional) has inputs[i] null and seqInputs[i] set, and seqOutputs[o] is
  /// set for such a result.
  llvm::Expected<std::vector<HostTensor>>
  runControlFlow(const Node &n, llvm::ArrayRef<const HostTensor *> inputs,
                 llvm::ArrayRef<std::shared_ptr<SequenceValue>> seqInputs,
                 std::vector<std::shared_ptr<SequenceValue>> &seqOutputs);
  llvm::Expected<HostTensor> hostValue(unsigned slot, const TensorRef &ref) const;

  const Graph &graph;
  Backend &backend;
  std::vector<Slot> slots;
  llvm::DenseMap<const Value *, unsigned> slotOf;
  /// Per node (not control flow or sequence ops): its prepared state.
  llvm::DenseMap<const Node *, PreparedNode> prepared;
  /// Nodes that run (not folded), in order.
  std::vector<const Node *> steps;
  std::vector<BufferRequest> requests;
  std::vector<unsigned> requestSlot;
  /// Formal inputs followed by the outer values: what run() binds by name.
  std::vector<const Value *> formals;
  MemoryPlan arenaPlan;
  MemoryStats stats;
  DeviceBuffer arena;
  std::vector<DeviceBuffer> persistentBuffers, foldedBuffers;
  std::vector<std::vector<int64_t>> plannedShapes;
  /// Per formal: true when the plan took its default (initializer) as a
  /// known constant because the caller did not bind it.
  std::vector<bool> plannedDefault;
  bool planned = false;
  /// The kernel calls of `steps` for the current plan and arena (run()).
  std::vector<KernelCall> calls;
  const void *callsArena = nullptr, *callsWorkspace = nullptr;
  bool callsValid = false;
  /// LaunchPlan::version: new whenever `calls` is rebuilt, and one per set of
  /// bound buffer addresses since (boundVersions).
  uint64_t callsVersion = 0;
  /// The versions of the last few sets of bound addresses (the values of
  /// externalRefs' slots), so that a training state's double buffers, which
  /// alternate between two sets, alternate between two versions, and a backend
  /// keeps a captured plan for each (kMaxBoundVersions, oldest dropped).
  std::vector<std::pair<std::vector<const void *>, uint64_t>> boundVersions;
  static constexpr size_t kMaxBoundVersions = 4;
  /// The version of the current bound addresses (a new one if unseen).
  uint64_t versionOfBound();
  /// The stream this executor's work goes to (Backend::createStream).
  Stream stream;
  /// The per-run error record (one KernelErrorRecord of backend memory).
  DeviceBuffer errorBuffer;
  /// On a backend whose memory is not the host's: the executor's readback
  /// channel (hostChannel(), made on first use), whose host memory is
  /// page-locked on a GPU. The error record is cleared from a cleared record
  /// there, written once (clearErrors); the inputs a run copies go through a
  /// ring of slots there (copyInputs), as the trainer stages its batches.
  std::unique_ptr<ReadbackChannel> channel;
  void *clearRecord = nullptr;
  std::unique_ptr<StagingRing> inputStaging;
  ReadbackChannel &hostChannel();
  /// One input copied into the arena by a run.
  struct InputCopy {
    void *dst;
    const HostTensor *src;
  };
  /// Queues the copies: copyToDevice on a host-memory backend; otherwise
  /// through the next slot of inputStaging, which waits only for a slot
  /// whose earlier copies are still queued (more than its capacity of runs
  /// in flight).
  void copyInputs(llvm::ArrayRef<InputCopy> copies);
  /// Slots of the input ring: runs queued ahead of the host without waiting
  /// (the trainer's evaluation keeps 4 chunks in flight), fewer, at least
  /// two, where that would pin more than kInputStagingBudget bytes.
  static constexpr size_t kInputStagingSlots = 5;
  static constexpr size_t kInputStagingBudget = size_t(64) << 20;
  static unsigned inputStagingCapacity(size_t bytes);
  /// setDeferredErrors(); callsGeneration().
  bool deferredErrors = false;
  uint64_t generation = 0;
  /// Launch scratch: the largest PreparedKernel::workspaceBytes of the plan.
  DeviceBuffer workspace;
  size_t plannedWorkspace = 0;
  bool profiling = false;
  double clockCost = 0;
  std::vector<double> nodeTime;
  bool dynamicMode = false;
  size_t numFolded = 0;
  /// Values of enclosing graphs read here (or by nested bodies).
  std::vector<const Value *> outer;
  /// Sub-executors of each control-flow node, one per graph attribute.
  llvm::DenseMap<const Node *, std::vector<std::unique_ptr<Executor>>> bodies;
  /// Values of this graph (or outer ones) a control-flow node's bodies read.
  llvm::DenseMap<const Node *, std::vector<const Value *>> captures;
  /// Set by the If/Loop/Scan running this body, for its next run only:
  /// sequences bound to formals (by index; null for tensors), whether
  /// sequence outputs may be returned, and those outputs (null for tensors).
  std::vector<std::shared_ptr<SequenceValue>> boundSequences;
  bool bodyCall = false;
  std::vector<std::shared_ptr<SequenceValue>> sequenceOutputs;
  /// bindInput(), per formal, and bindOutput(), per graph output (null
  /// data: not bound).
  std::vector<TensorRef> boundInputs, boundOutputs;
  /// Whether bindInput(), bindOutput() or bindOutputOver() holds a buffer.
  bool hasBoundBuffers() const;
  /// bindOutputOver(): per graph output, the formal whose buffer it is
  /// written over (-1: none), and the reverse.
  std::vector<int32_t> outputOver;
  llvm::DenseMap<unsigned, unsigned> overOfFormal;
  /// Per bound output: the slots in its buffer (the output and the in-place
  /// chain it ends), empty when no node makes it.
  std::vector<std::vector<unsigned>> boundAliases;
  /// The kernel-call tensors in bound buffers, by slot (patched when a
  /// binding moves).
  std::vector<std::pair<unsigned, TensorRef *>> externalRefs;
  /// Points bound slots at their current buffers; false when a pointer
  /// changed (the kernel calls are rebuilt).
  bool refreshBound();
  /// Fills bound outputs that no node wrote (see bindOutput).
  llvm::Error copyBoundOutputs(Stream stream);
  TransferStats transfers;
};

} // namespace mpc

#endif // MPC_RUNTIME_EXECUTOR_H
