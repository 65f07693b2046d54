//===- Trainer.h - Runs the training step of a training model ---*- C++ -*-===//
//
// The backend-neutral training loop of `mpc run --train` (docs/training.md):
// holds the training state (the inference-graph initializers that the
// algorithm graph reads or update_binding writes) in backend buffers for the
// whole run, runs training_info[0].algorithm on an executor of its own with
// batches cut from the data, applies update_binding after every step by
// swapping buffers and evaluates the inference graph on the held-out split.
// Progress, logs and checkpoint files are the tool's business
// (tools/mpc/Train.cpp).
//
// Device-resident state: every state tensor has a backend buffer the step
// reads in place (Executor::bindInput); one that update_binding writes has a
// second buffer the step writes its new value into (Executor::bindOutput),
// and applying the binding swaps the two. Nothing is copied between host
// and backend for the state during a step; syncModel() (checkpoints,
// evaluation) copies it out. A skipped step's graph outputs the old values,
// so the state stays bit-identical. The loss, the loss scale, the skip flag
// and the other logged outputs reach the host through a ReadbackRing
// (Readback.h): launchStep() queues their copies and returns, nextResult()
// hands the records over in step order once they landed. No step waits for
// the backend: the step's executor defers its kernel error record
// (Executor::setDeferredErrors), whose copy travels in the step's ring
// record; the host blocks only for a ring slot still in flight (the host
// fell readbackCapacity() steps behind) and where it observes the state
// (evaluate, syncModel). A data-dependent kernel error of step k is found
// when the host takes step k's record: nextResult() returns it (the step's
// number and the node's message) after the results of the steps before k,
// and from then on launchStep(), evaluate() and syncModel() fail with it.
// Steps after k may have been queued (at most readbackCapacity() - 1);
// the state they and step k left is never copied out (docs/training.md,
// "Errors inside a step"). An algorithm graph
// the executor runs in dynamic mode (control flow in the step) cannot bind
// buffers: its state is copied in and out around each step instead.
//
// Batch order: epoch e of seed s visits the training samples in the order
// trainingPermutation(s, e, n) (or 0..n-1 without shuffling); batch b of the
// epoch is positions
// [b*B, (b+1)*B) of it and the last partial batch is dropped. Step k (0-based)
// is batch k % nb of epoch k / nb, so the step count alone fixes where a
// resumed run continues.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_TRAINER_H
#define MPC_RUNTIME_TRAINER_H

#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/Readback.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mpc {

/// splitmix64 (Steele, Lea, Flood 2014): one 64-bit mixing step.
uint64_t splitmix64(uint64_t x);

/// The order in which epoch `epoch` of seed `seed` visits `n` samples. An
/// std::mt19937_64 seeded with splitmix64(splitmix64(seed) + epoch) drives
/// a Fisher-Yates shuffle of 0..n-1: for i = n-1 down to 1, j is drawn
/// uniformly from [0, i] by rejection (draws r below 2^64 mod (i+1) are
/// redrawn; j = r mod (i+1)) and elements i and j are swapped. Spelled out
/// so that other implementations (the tests' NumPy one) reproduce it.
std::vector<int64_t> trainingPermutation(uint64_t seed, uint64_t epoch, int64_t n);

/// What one training step did.
struct StepResult {
  /// Steps applied so far, this one included.
  uint64_t step = 0;
  /// The epoch this step's batch belongs to (0-based).
  uint64_t epoch = 0;
  /// The algorithm's first output.
  double loss = 0;
  /// The mpc.training.found_inf output was true: the graph kept the state.
  bool skipped = false;
  /// The loss scale before and after the step (hasLossScale: the model has
  /// a mpc.training.loss_scale_state).
  bool hasLossScale = false;
  double lossScaleBefore = 0, lossScaleAfter = 0;
  /// Parameters whose gradient had an inf or NaN (mpc.training.grad_nonfinite).
  std::vector<std::string> nonFiniteGradients;
  /// Fraction of gradient elements that are exactly zero, when the
  /// gradients are algorithm outputs.
  bool hasGradZeroFraction = false;
  double gradZeroFraction = 0;
};

/// Bytes copied between host and backend memory by the trainer.
struct TrainerTransfers {
  /// Steps run.
  uint64_t steps = 0;
  /// During steps: the batch (and, without device-resident state, the state)
  /// into backend memory; algorithm outputs the host received as tensors
  /// (without device-resident state: all of them) out of it.
  uint64_t stepHostToDevice = 0, stepDeviceToHost = 0;
  /// State bytes copied per step to apply update_binding or feed the step
  /// (0 with device-resident state).
  uint64_t stateCopied = 0;
  /// Log values (loss, loss scale, skip flag, ...) read back for the host.
  uint64_t readback = 0;
  /// Outside steps: the initial upload, and syncModel() (checkpoints, and
  /// evaluation of a graph in dynamic mode; evaluation reads the state in
  /// place otherwise).
  uint64_t setup = 0, synced = 0;
  /// Whether the state stays in backend buffers (false: dynamic mode).
  bool deviceState = false;
  /// The state: tensors and bytes (one buffer each); of those update_binding
  /// writes, how many (and how many bytes) the step updates in place and
  /// how many have a second buffer.
  uint64_t stateTensors = 0, stateBytes = 0;
  uint64_t inPlaceTensors = 0, inPlaceBytes = 0;
  uint64_t doubleBufferedTensors = 0, doubleBufferedBytes = 0;
};

/// The inference graph on the held-out split.
struct EvalResult {
  int64_t samples = 0;
  /// Integer labels: argmax over the last axis of the first output.
  bool hasAccuracy = false;
  double accuracy = 0;
  /// Float labels: mean squared error of the first output. Integer labels
  /// with loss kind cross-entropy: mean cross-entropy of the first output,
  /// read as probabilities (made by a Softmax), log-probabilities (a
  /// LogSoftmax) or logits (anything else).
  bool hasLoss = false;
  double loss = 0;
};

class Trainer {
public:
  ~Trainer();

  /// Checks the training model (training_info[0] with an algorithm, metadata,
  /// update_binding targets, a kernel for every node of both graphs) and
  /// that `batch` fits the declared batch dims. `model` must outlive the
  /// trainer; its initializers are the initial state.
  static llvm::Expected<std::unique_ptr<Trainer>> create(Model &model, Backend &backend,
                                                         int64_t batch);

  /// The algorithm's inputs: data inputs, then the labels input.
  llvm::ArrayRef<const Value *> dataInputs() const { return inputs; }
  llvm::StringRef labelsName() const { return labels; }

  /// Takes the data arrays (named after dataInputs(); `<input>_test` arrays
  /// form the held-out split, else its last `holdout` fraction) and checks
  /// dtypes, shapes and sample counts, that float arrays hold no NaN or
  /// infinity and that integer labels are classes: in [0, C) for the C of
  /// the inference graph's first output (its last dimension), else of the
  /// loss node's scores, else non-negative; a loss node's ignore_index is
  /// allowed. Errors name the array, the element's index and its value.
  llvm::Error setData(std::vector<NamedTensor> arrays, double holdout);
  int64_t numTrainSamples() const { return numTrain; }
  int64_t numTestSamples() const { return numTest; }
  /// Full batches per epoch (at least 1 once setData succeeded).
  int64_t batchesPerEpoch() const { return numTrain / batchSize; }

  /// Where the next step starts: `stepsDone` steps were applied with `seed`.
  void setPosition(uint64_t seed, uint64_t stepsDone);
  /// Whether epochs visit the samples in trainingPermutation order (the
  /// default) or in data order.
  void setShuffle(bool on) {
    shuffleOn = on;
    permEpoch = ~uint64_t(0);
  }
  bool shuffle() const { return shuffleOn; }
  uint64_t stepsDone() const { return done; }
  uint64_t seed() const { return seedValue; }

  /// Runs one step on the next batch and applies update_binding, and waits
  /// for its result (no results of launchStep() may be pending).
  llvm::Expected<StepResult> step();
  /// Queues one step on the next batch and the copies of its logged values;
  /// does not wait for them. Returns the step's number. When
  /// readbackCapacity() results are pending, the oldest one is waited for
  /// first (kept for nextResult()).
  llvm::Expected<uint64_t> launchStep();
  /// Plans the step for a batch of the first rows (every batch has its
  /// shapes), preparing each node on the backend, and runs nothing: what
  /// `mpc run --train --placement-only` prints the placement of. Everything
  /// the step holds is then allocated but its arena and workspace, which
  /// stepExecutor().memoryStats() gives (`--max-memory`).
  llvm::Error planStep();
  /// The oldest pending step's result: waits for it when `wait`, else
  /// nothing when its values have not reached the host yet (or none is
  /// pending). An error when that step failed (a kernel's data-dependent
  /// error, "training step K: node ...: ..."): the results of the steps
  /// before it were returned first, and the trainer is failed() from then on.
  llvm::Expected<std::optional<StepResult>> nextResult(bool wait);
  /// True once a step's kernel error was found: launchStep(), evaluate() and
  /// syncModel() return that error, and the state is that of a failed step.
  bool failed() const { return failedStep != 0; }
  /// Steps launched whose result nextResult() has not returned.
  uint64_t pendingResults() const { return launched - delivered; }
  static constexpr unsigned readbackCapacity() { return 8; }
  /// Slots of the pinned ring a device backend's batch is staged through
  /// (StagingRing) for a batch of `batchBytes`: one more than the readback
  /// ring, so that staging never waits where the readback ring does not (a
  /// step waits for step k - readbackCapacity() when that ring is full,
  /// which frees every older slot), unless that would pin more than
  /// kStagingBudget bytes: then as many slots as fit, at least two (the host
  /// may then wait for the upload of an older step before staging a batch).
  static constexpr size_t kStagingBudget = size_t(64) << 20;
  static unsigned stagingCapacity(size_t batchBytes);
  const TrainerTransfers &transfers() const { return xfer; }
  /// Runs the inference graph with the current state on the held-out split
  /// (chunks of --batch, or of the inference graph's fixed batch dim). Each
  /// inference input reads the algorithm data input of its name, else the
  /// one at its position.
  llvm::Expected<EvalResult> evaluate();
  /// Writes the current state into the model's initializers (copies it out
  /// of the backend buffers). Waits for the pending steps first (their
  /// results stay for nextResult()); when one of them failed, returns its
  /// error and writes nothing.
  llvm::Error syncModel();
  /// The executor of the training step (for per-node profiles).
  Executor &stepExecutor() { return *algorithm; }

private:
  Trainer(Model &m, Backend &b, int64_t batch);
  llvm::Error init();
  /// A state tensor: its current buffer and, when update_binding writes it,
  /// the buffer the next step writes (swapped after the step), or the same
  /// buffer when the step updates it in place.
  struct StateBuffer {
    std::string name;
    DType dtype = DType::Undefined;
    std::vector<int64_t> shape;
    size_t bytes = 0;
    DeviceBuffer cur, next;
    /// The step writes the new value over the old one (next is cur).
    bool inPlace = false;
    /// The algorithm reads it (an outer value of the step's executor).
    bool read = false;
    /// The update_binding source writing it ("": not updated).
    std::string source;
    TensorRef ref(const DeviceBuffer &b) const;
  };
  /// A value the host reads back after each step for the logs: an algorithm
  /// output (its first element, or all of it) or a state tensor.
  struct LogField {
    /// The algorithm output's name ("": the loss-scale state).
    std::string output;
    /// The loss-scale state's value before the step (else after it).
    bool before = false;
    /// What the host receives: the first element, or all of it.
    DType dtype = DType::Undefined;
    std::vector<int64_t> shape;
    size_t bytes = 0;
    /// Where the step leaves an output no update_binding writes (else it
    /// is read from the state's buffer).
    DeviceBuffer buffer;
  };
  StateBuffer *findState(llvm::StringRef name);
  /// Binds the step's state inputs to the current halves and the
  /// update_binding sources to the next ones.
  llvm::Error bindState();
  llvm::Error prepareDeviceStep();
  /// On a device backend: a device buffer per algorithm input (the batch),
  /// bound to the step, and the pinned ring the batch is staged through.
  llvm::Error prepareStaging();
  /// Copies the step's batch (feeds) into the next staging slot and queues
  /// its uploads on the step's stream, ahead of the step.
  void stageBatch();
  llvm::Error runStepDeviceState(StepResult &r);
  llvm::Error runStepHostState(StepResult &r);
  /// Fills `r`'s logged values from host copies of the algorithm's outputs
  /// (by name; the loss is the first output) and the loss scale.
  void decodeLogs(StepResult &r, const llvm::StringMap<const HostTensor *> &out,
                  const HostTensor *loss, const HostTensor *scaleBefore,
                  const HostTensor *scaleAfter) const;
  void clearBuffers();
  /// Moves the ring's oldest record, once its copies landed (or, with
  /// `wait`, after waiting for them), into `finished`; a record whose kernel
  /// error record is set fails the trainer instead (failedStep, failure).
  void takeFromRing(bool wait);
  /// Waits for every pending step's record (the host is about to observe
  /// the state): the failure when one of them failed.
  llvm::Error observePending();
  /// The failure of step `failedStep`, as an error.
  llvm::Error failureError() const;
  /// The executor of the inference graph for one evaluation. Made once: its
  /// state initializers are inputs bound to the current halves of the state
  /// buffers (read in place, nothing copied). A graph that runs in dynamic
  /// mode cannot bind: it gets a fresh executor over syncModel()'s copy.
  llvm::Expected<Executor *> inferenceExecutor();
  /// evaluate() on a device backend with a static inference plan: every
  /// chunk of `chunk` samples (`chunkInputs(begin)`) is queued without waiting, its outputs
  /// bound to device buffers, its first output and error record read back
  /// through a ring of host records (pinned on a GPU) that the host takes
  /// oldest first, calling `score(begin, y)`; the host waits only for a
  /// full ring and at the end. The chunks are scored in order, as on the CPU.
  llvm::Error evaluateQueued(
      Executor &ex, int64_t chunk,
      llvm::function_ref<std::vector<NamedTensor>(int64_t)> chunkInputs,
      llvm::function_ref<llvm::Error(int64_t, const NamedTensor &)> score);
  /// Records of evaluateQueued's ring: chunks in flight at once.
  static constexpr unsigned kEvalRing = 4;
  std::vector<DeviceBuffer> evalOutputs;
  std::unique_ptr<ReadbackChannel> evalChannel;
  std::unique_ptr<Executor> inference;

  Model &model;
  Backend &backend;
  int64_t batchSize;
  const TrainingInfo *info = nullptr;
  std::unique_ptr<Executor> algorithm;
  /// Algorithm inputs (data then labels) and its outputs.
  std::vector<const Value *> inputs;
  std::string labels;
  /// The run() arguments: one entry per algorithm input (the current batch),
  /// then (without device-resident state) the state the algorithm reads, in
  /// outerValues() order.
  std::vector<NamedTensor> feeds;
  std::vector<StateBuffer> states;
  llvm::StringMap<size_t> stateIndex;
  bool deviceState = false, devicePrepared = false;
  /// Log fields: the loss, the loss scale before and after, found_inf,
  /// grad_nonfinite and the gradients, those the model has.
  std::vector<LogField> logFields;
  std::unique_ptr<ReadbackChannel> channel;
  std::unique_ptr<ReadbackRing> ring;
  /// The batch on a device backend (prepareStaging): its device buffers, one
  /// per algorithm input, each input's offset in a staging slot, and the
  /// ring (over a channel of its own, on the step's stream).
  std::vector<DeviceBuffer> batchBuffers;
  std::vector<size_t> batchOffsets;
  std::unique_ptr<ReadbackChannel> stagingChannel;
  std::unique_ptr<StagingRing> staging;
  /// Per ring record, oldest first: the step executor's callsGeneration()
  /// when the step ran (to name the node of its error record).
  std::deque<uint64_t> ringGenerations;
  /// The first step found failed (0: none) and its message.
  uint64_t failedStep = 0;
  std::string failure;
  /// Results taken from the ring (or made on the host) and not yet returned.
  std::deque<StepResult> finished;
  uint64_t launched = 0, delivered = 0;
  TrainerTransfers xfer;
  /// Inference inputs and the algorithm input whose data feeds each.
  std::vector<std::pair<const Value *, size_t>> evalInputs;
  /// Samples per evaluation run: the inference graph's fixed batch
  /// dimension, else the batch size.
  int64_t evalChunk() const;
  /// Metadata-derived names; empty when absent.
  std::string foundInf, gradNonFinite, lossScaleState, lossKind;
  /// What the inference graph's first output holds (for the eval loss).
  enum class OutputKind { Logits, Probabilities, LogProbabilities };
  OutputKind outputKind = OutputKind::Logits;
  /// Integer labels: the class count (0: unknown) and where it comes from;
  /// the ignore_index values of the algorithm's loss nodes.
  int64_t classCount = 0;
  std::string classSource;
  std::vector<int64_t> ignoredLabels;
  /// The axis of the first output holding the classes, as the loss reads it
  /// (-1: the last); classLayoutError says why it is unknown (empty: known).
  int64_t classAxis = -1;
  std::string classLayoutError;
  void findClassCount();
  /// Held-out integer labels against the first output's layout (before step 1).
  llvm::Error checkEvalLayout(const HostTensor &labels, const std::string &name) const;
  llvm::Error checkValues(const HostTensor &t, const std::string &name, bool isLabels) const;
  std::vector<std::pair<std::string, std::string>> gradients; // PARAM, GRAD
  bool gradientsAreOutputs = false;
  /// Data: per algorithm input, the training and held-out samples.
  std::vector<HostTensor> trainData, testData;
  int64_t numTrain = 0, numTest = 0;
  uint64_t seedValue = 0, done = 0;
  uint64_t permEpoch = ~uint64_t(0);
  bool shuffleOn = true;
  std::vector<int64_t> perm;
};

} // namespace mpc

#endif // MPC_RUNTIME_TRAINER_H
