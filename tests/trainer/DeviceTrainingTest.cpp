//===- DeviceTrainingTest.cpp - Training on a device backend with gaps -----===//
//
// What `mpc run --train --device cuda` does, checked without a GPU: the digits
// MLP trains on a FallbackBackend over the tests' asynchronous queue device
// (tests/runtime_exec/QueueBackend.h), which runs the matrix products and the
// element-wise ops and leaves the rest (softmax cross-entropy, reductions,
// the optimizer, the loss-scaling subgraph's checks) to the CPU backend behind
// it. The device keeps the state in its buffers and hands the logged values
// back asynchronously, so this is the trainer's device path. Every step's loss
// and skip decision, and every trained initializer after the steps, must be
// the CPU backend's bit for bit (the same kernels run on the same values), in
// fp32 and after the AMP rewrite with dynamic loss scaling; and a checkpoint
// written by the device run resumes on the CPU with the step the device run
// took next.
//
//===----------------------------------------------------------------------===//
#include "../runtime/ModelText.h"
#include "../runtime_exec/QueueBackend.h"
#include "../unit/OnnxTestUtil.h"
#include "DigitsTraining.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Passes/Amp.h"
#include "mpc/Passes/LossScaling.h"
#include "mpc/Passes/TrainGraph.h"
#include "mpc/Runtime/Checkpoint.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/FallbackBackend.h"
#include "mpc/Runtime/NpyIO.h"
#include "mpc/Runtime/Trainer.h"
#include "mpc/Verify/Verifier.h"
#include "gtest/gtest.h"
#include <cstring>
#include <map>
#include <set>

using namespace mpc;
using mpc::test::QueueBackend;
using namespace mpc::test;

namespace {

uint64_t bitsOf(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

/// The queue device with the gaps of today's CUDA backend: matrix products,
/// element-wise arithmetic and casts; everything else falls back.
std::unique_ptr<FallbackBackend> deviceWithGaps() {
  auto q = std::make_unique<QueueBackend>();
  static const std::set<std::string> ops = {"MatMul", "Gemm", "Add", "Sub", "Mul", "Div",
                                            "Relu", "Cast", "Neg", "Sqrt", "Exp", "Log"};
  q->only = [](const Node &n) { return ops.count(n.opType) > 0; };
  return std::make_unique<FallbackBackend>(std::move(q), std::make_unique<CpuBackend>(1));
}

/// Linear regression plus an embedding row per sample, gathered by an
/// integer data input that setData() does not check (only labels are
/// classes): an id out of range is found by the step's Gather kernel, in the
/// step whose batch holds it. (The step's inputs have names of their own:
/// the text format's scopes nest. The inference inputs read them by position.)
const char kEmbedTraining[] = R"(
graph @m(%x: f32["n",2], %ids: i64["n"]) -> (%y: f32["n",2]) {
  init %w: f32[2,2] = [0.5, -1, 1, 0.25]
  init %table: f32[4,2] = [1, 2, 3, 4, 5, 6, 7, 8]
  %e = Gather(%table, %ids) {axis = 0} : f32["n",2] name="embed"
  %h = MatMul(%x, %w) : f32["n",2] name="mm"
  %y = Add(%h, %e) : f32["n",2] name="add"
  return %y
}
training {
  algorithm graph @step(%sx: f32["n",2], %sids: i64["n"], %t: f32["n",2]) -> (%loss: f32[], %w2: f32[2,2]) {
    init %lr: f32[] = [0.05]
    %se = Gather(%table, %sids) {axis = 0} : f32["n",2] name="step_embed"
    %sh = MatMul(%sx, %w) : f32["n",2] name="step_mm"
    %sy = Add(%sh, %se) : f32["n",2] name="step_add"
    %d = Sub(%sy, %t) : f32["n",2] name="diff"
    %sq = Mul(%d, %d) : f32["n",2] name="square"
    %loss = ReduceMean(%sq) {keepdims = 0} : f32[] name="mean"
    %xt = Transpose(%sx) {perm = [1, 0]} : f32[2,"n"] name="xt"
    %gw = MatMul(%xt, %d) : f32[2,2] name="grad"
    %u = Mul(%gw, %lr) : f32[2,2] name="scaled"
    %w2 = Sub(%w, %u) : f32[2,2] name="update"
    return %loss, %w2
  }
  update_binding %w = %w2
})";

constexpr int64_t kEmbedSamples = 16, kEmbedBatch = 2;

/// kEmbedTraining with its data (in data order, batch 2): sample `bad`
/// has id 9, the others ids in [0, 4).
std::unique_ptr<Model> embedModel() {
  auto m = parseVerified(kEmbedTraining);
  if (m) {
    m->setMetadata("mpc.training.labels", "t");
    m->setMetadata("mpc.training.loss_kind", "mse");
  }
  return m;
}

std::unique_ptr<Trainer> embedTrainer(Model &m, Backend &backend, int64_t bad) {
  auto t = Trainer::create(m, backend, kEmbedBatch);
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError());
    return nullptr;
  }
  HostTensor x(DType::F32, {kEmbedSamples, 2}), ids(DType::I64, {kEmbedSamples}),
      target(DType::F32, {kEmbedSamples, 2});
  for (int64_t i = 0; i < kEmbedSamples; ++i) {
    x.data<float>()[2 * i] = float(i % 5) * 0.25f;
    x.data<float>()[2 * i + 1] = 1.0f - float(i % 3) * 0.5f;
    ids.data<int64_t>()[i] = i == bad ? 9 : i % 4;
    target.data<float>()[2 * i] = float(i % 7) * 0.5f;
    target.data<float>()[2 * i + 1] = -float(i % 2);
  }
  std::vector<NamedTensor> arrays;
  arrays.push_back(NamedTensor{"sx", std::move(x)});
  arrays.push_back(NamedTensor{"sids", std::move(ids)});
  arrays.push_back(NamedTensor{"t", std::move(target)});
  if (llvm::Error err = (*t)->setData(std::move(arrays), 0.0)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return nullptr;
  }
  (*t)->setShuffle(false);
  (*t)->setPosition(1, 0);
  return std::move(*t);
}

const char kStep3Error[] =
    "training step 3: node 'step_embed' (Gather): index 9 out of range for [4, 2]";

/// The digits model (fp32, or AMP with dynamic loss scaling) twice, one
/// trainer on the CPU backend and one on a device, both from seed 7 at step 0.
struct SideBySide {
  bool amp;
  std::unique_ptr<Model> onCpu, onDevice;
  CpuBackend cpu{1};
  std::unique_ptr<Trainer> a, b;

  SideBySide(bool withAmp, Backend &device)
      : amp(withAmp), onCpu(digitsModel(withAmp)), onDevice(digitsModel(withAmp)) {
    if (onCpu && onDevice) {
      a = trainerFor(*onCpu, cpu, 7, 0);
      b = trainerFor(*onDevice, device, 7, 0);
    }
  }
  bool ok() const { return a && b; }

  /// Steps both `steps` times; each step's loss, skip decision and loss
  /// scale after it must agree bit for bit.
  void stepBoth(int steps) {
    for (int i = 0; i < steps; ++i) {
      auto ra = a->step(), rb = b->step();
      ASSERT_TRUE(bool(ra)) << llvm::toString(ra.takeError());
      ASSERT_TRUE(bool(rb)) << llvm::toString(rb.takeError());
      EXPECT_EQ(bitsOf(ra->loss), bitsOf(rb->loss)) << "step " << i << ": " << ra->loss
                                                    << " vs " << rb->loss;
      EXPECT_EQ(ra->skipped, rb->skipped) << "step " << i;
      EXPECT_EQ(ra->hasLossScale, amp);
      EXPECT_EQ(rb->hasLossScale, amp);
      EXPECT_EQ(bitsOf(ra->lossScaleAfter), bitsOf(rb->lossScaleAfter)) << "step " << i;
    }
  }

  /// Both copy their state out; the trained initializers agree byte for byte.
  void expectSameState() {
    ASSERT_FALSE(bool(a->syncModel()));
    ASSERT_FALSE(bool(b->syncModel()));
    EXPECT_EQ(initializerBytes(*onCpu), initializerBytes(*onDevice));
  }
};

const char *ampTrace(bool amp) { return amp ? "amp fp16, dynamic loss scaling" : "fp32"; }

} // namespace

// The step loop never waits for the device: with the whole step on the
// queue device, launching steps blocks the host only when the readback ring
// is full (then for the oldest step alone), and the results, taken later,
// are the CPU backend's bit for bit.
TEST(DeviceTraining, StepsDoNotWaitForTheDeviceUntilTheRingIsFull) {
  for (bool amp : {false, true}) {
    SCOPED_TRACE(ampTrace(amp));
    QueueBackend q;
    SideBySide t(amp, q);
    ASSERT_TRUE(t.ok());
    Trainer *a = t.a.get(), *b = t.b.get();
    const unsigned ring = Trainer::readbackCapacity();
    std::vector<StepResult> want;
    for (unsigned i = 0; i < 2 * ring + 3; ++i) {
      auto r = a->step();
      ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
      want.push_back(*r);
    }
    // The first step plans, prepares and uploads: waits allowed.
    ASSERT_TRUE(bool(b->launchStep()));
    auto first = b->nextResult(true);
    ASSERT_TRUE(first && *first);
    std::vector<StepResult> got{**first};
    // The ring is empty: `ring` steps fit without a single wait.
    uint64_t w0 = q.waits, s0 = q.syncCalls;
    for (unsigned i = 0; i < ring; ++i) {
      ASSERT_TRUE(bool(b->launchStep()));
      EXPECT_EQ(q.waits, w0) << "a host wait in step " << i + 2;
      EXPECT_EQ(q.syncCalls, s0) << "a synchronize() in step " << i + 2;
    }
    // Nothing has run on the device yet: no result is there without waiting.
    EXPECT_GT(q.queue.size(), 0u);
    auto none = b->nextResult(false);
    ASSERT_TRUE(bool(none));
    EXPECT_FALSE(none->has_value());
    // Full: each further step waits once, for the oldest step only, and no
    // step synchronizes the whole stream.
    for (unsigned i = 0; i < ring + 2; ++i) {
      uint64_t w = q.waits;
      ASSERT_TRUE(bool(b->launchStep()));
      EXPECT_EQ(q.waits, w + 1) << "step " << ring + i + 2;
    }
    EXPECT_EQ(q.syncCalls, s0);
    while (true) {
      auto r = b->nextResult(true);
      ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
      if (!*r)
        break;
      got.push_back(**r);
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].step, want[i].step);
      EXPECT_EQ(bitsOf(got[i].loss), bitsOf(want[i].loss)) << "step " << i + 1;
      EXPECT_EQ(got[i].skipped, want[i].skipped) << "step " << i + 1;
      EXPECT_EQ(bitsOf(got[i].lossScaleBefore), bitsOf(want[i].lossScaleBefore));
      EXPECT_EQ(bitsOf(got[i].lossScaleAfter), bitsOf(want[i].lossScaleAfter));
    }
    ASSERT_NO_FATAL_FAILURE(t.expectSameState());
  }
}

// A Gather index out of range in step 3 on the asynchronous device: the
// steps after it were queued before the host saw it (at most the ring's
// capacity less one); the host finds it when it takes step 3's record, after
// the results of steps 1 and 2, with the CPU backend's message, the node and
// the step; from then on no step runs and no state is copied out.
TEST(DeviceTraining, AKernelErrorIsReportedAtItsStepWhenTheHostTakesIt) {
  const unsigned ring = Trainer::readbackCapacity();
  auto m = embedModel();
  ASSERT_TRUE(m);
  auto before = initializerBytes(*m);
  QueueBackend q;
  auto t = embedTrainer(*m, q, /*bad=*/5); // batch 3 holds samples 4 and 5
  ASSERT_TRUE(t);
  // Steps 1 .. ring fill the ring; each further launch takes the oldest
  // record (steps 1, 2 succeed), and the launch that takes step 3's fails.
  unsigned launched = 0;
  llvm::Error err = llvm::Error::success();
  for (unsigned i = 0; i < 2 * ring && !err; ++i) {
    auto k = t->launchStep();
    if (!k)
      err = k.takeError();
    else
      ++launched;
  }
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)), kStep3Error);
  EXPECT_EQ(launched, 3 + ring - 1) << "steps run past the failed one: ring - 1";
  EXPECT_TRUE(t->failed());
  // Steps 1 and 2 are delivered, then the error, again and again.
  for (uint64_t step : {1u, 2u}) {
    auto r = t->nextResult(true);
    ASSERT_TRUE(r && *r) << (r ? "no result" : llvm::toString(r.takeError()));
    EXPECT_EQ((*r)->step, step);
  }
  for (int i = 0; i < 2; ++i) {
    auto r = t->nextResult(true);
    ASSERT_FALSE(bool(r));
    EXPECT_EQ(llvm::toString(r.takeError()), kStep3Error);
  }
  auto k = t->launchStep();
  ASSERT_FALSE(bool(k));
  EXPECT_EQ(llvm::toString(k.takeError()), kStep3Error);
  llvm::Error s = t->syncModel();
  ASSERT_TRUE(bool(s));
  EXPECT_EQ(llvm::toString(std::move(s)), kStep3Error);
  auto e = t->evaluate();
  ASSERT_FALSE(bool(e));
  EXPECT_EQ(llvm::toString(e.takeError()), kStep3Error);
  EXPECT_EQ(initializerBytes(*m), before) << "the failed state was copied out";
}

// The CPU backend reports the same error at the same step, when its result
// is taken right after the step (its copies are done when they return).
TEST(DeviceTraining, TheCpuBackendReportsTheSameErrorAtTheSameStep) {
  auto m = embedModel();
  ASSERT_TRUE(m);
  CpuBackend cpu(1);
  auto t = embedTrainer(*m, cpu, /*bad=*/5);
  ASSERT_TRUE(t);
  for (uint64_t step : {1u, 2u}) {
    auto r = t->step();
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    EXPECT_EQ(r->step, step);
  }
  auto r = t->step();
  ASSERT_FALSE(bool(r));
  EXPECT_EQ(llvm::toString(r.takeError()), kStep3Error);
  EXPECT_TRUE(t->failed());
  // Without the bad id the same steps run on: the error is the data's.
  auto good = embedModel();
  auto u = embedTrainer(*good, cpu, /*bad=*/-1);
  ASSERT_TRUE(u);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(bool(u->step()));
}

TEST(DeviceTraining, StepsAndStateAreTheCpuBackendsBitForBit) {
  for (bool amp : {false, true}) {
    SCOPED_TRACE(ampTrace(amp));
    auto fb = deviceWithGaps();
    SideBySide t(amp, *fb);
    ASSERT_TRUE(t.ok());
    ASSERT_NO_FATAL_FAILURE(t.stepBoth(12));
    ASSERT_NO_FATAL_FAILURE(t.expectSameState());
    // Both sides ran part of the step.
    FallbackBackend::Partition p = fb->partition();
    EXPECT_GT(p.deviceNodes, 10u) << fb->partitionLine();
    EXPECT_GT(p.hostNodes, 0u) << fb->partitionLine();
  }
}

// With every node on the device, the step reaches the backend as one static
// plan (runPlan). State updated in place keeps its address; the state's double
// buffers alternate between two sets of addresses, so the plan alternates
// between two versions: each is captured once and then replayed, and the
// replays compute the CPU's bits. fp32 updates all its state in place (one
// capture); AMP keeps the loss scale double-buffered (two), as does every
// updated state with MPC_TRAIN_DOUBLE_BUFFER.
TEST(DeviceTraining, AWholeDeviceStepIsCapturedOncePerAddressSetAndReplayed) {
  for (bool doubleBuffer : {false, true})
    for (bool amp : {false, true}) {
      SCOPED_TRACE(std::string(ampTrace(amp)) + (doubleBuffer ? ", double-buffered" : ""));
      if (doubleBuffer)
        setenv("MPC_TRAIN_DOUBLE_BUFFER", "1", 1);
      QueueBackend q;
      SideBySide t(amp, q);
      unsetenv("MPC_TRAIN_DOUBLE_BUFFER"); // read once, when the trainer is made
      ASSERT_TRUE(t.ok());
      const int steps = 12;
      ASSERT_NO_FATAL_FAILURE(t.stepBoth(steps));
      ASSERT_NO_FATAL_FAILURE(t.expectSameState());
      unsigned versions = amp || doubleBuffer ? 2 : 1;
      EXPECT_EQ(q.captures, versions);
      EXPECT_EQ(q.replays, unsigned(steps) - versions);
    }
}

TEST(DeviceTraining, ACheckpointOfTheDeviceRunResumesOnTheCpu) {
  test::TempDir dir;
  auto m = digitsModel(/*amp=*/true);
  ASSERT_TRUE(m);
  auto hash = trainingModelHash(*m);
  ASSERT_TRUE(bool(hash)) << llvm::toString(hash.takeError());
  auto fb = deviceWithGaps();
  auto t = trainerFor(*m, *fb, 5, 0);
  ASSERT_TRUE(t);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(bool(t->step()));
  ASSERT_FALSE(bool(t->syncModel()));
  CheckpointPosition at;
  at.step = t->stepsDone();
  at.epoch = 0;
  at.seed = t->seed();
  at.batch = kBatch;
  at.shuffle = true;
  std::string path = dir.file("device.ckpt.onnx");
  ASSERT_FALSE(bool(writeCheckpoint(*m, at, *hash, path)));
  auto next = t->step();
  ASSERT_TRUE(bool(next)) << llvm::toString(next.takeError());

  CheckpointPosition got;
  auto read = readCheckpoint(path, *hash, got);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  CpuBackend cpu(1);
  auto resumed = trainerFor(**read, cpu, got.seed, got.step);
  ASSERT_TRUE(resumed);
  auto step = resumed->step();
  ASSERT_TRUE(bool(step)) << llvm::toString(step.takeError());
  EXPECT_EQ(step->step, 5u);
  EXPECT_EQ(bitsOf(step->loss), bitsOf(next->loss)) << step->loss << " vs " << next->loss;
  EXPECT_EQ(bitsOf(step->lossScaleAfter), bitsOf(next->lossScaleAfter));
}

// Evaluation on a device queues every chunk without waiting for it (its
// outputs bound to device buffers, read back through a ring of host records):
// no chunk synchronizes the stream, and the accuracy and loss are the CPU
// backend's bit for bit, at two points of training.
TEST(DeviceTraining, EvaluationQueuesItsChunksAndMatchesTheCpu) {
  auto onCpu = digitsModel(false), onDevice = digitsModel(false);
  ASSERT_TRUE(onCpu && onDevice);
  CpuBackend cpu(1);
  QueueBackend q;
  auto a = trainerFor(*onCpu, cpu, 7, 0), b = trainerFor(*onDevice, q, 7, 0);
  ASSERT_TRUE(a && b);
  for (int point = 0; point < 2; ++point) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(bool(a->step()));
      ASSERT_TRUE(bool(b->step()));
    }
    auto ea = a->evaluate();
    ASSERT_TRUE(bool(ea)) << llvm::toString(ea.takeError());
    uint64_t s0 = q.syncCalls, w0 = q.waits;
    auto eb = b->evaluate();
    ASSERT_TRUE(bool(eb)) << llvm::toString(eb.takeError());
    EXPECT_GT(ea->samples, 4 * kBatch) << "several chunks";
    EXPECT_EQ(eb->samples, ea->samples);
    ASSERT_TRUE(ea->hasAccuracy && eb->hasAccuracy && ea->hasLoss && eb->hasLoss);
    EXPECT_EQ(bitsOf(eb->accuracy), bitsOf(ea->accuracy)) << point;
    EXPECT_EQ(bitsOf(eb->loss), bitsOf(ea->loss)) << point;
    // No chunk synchronizes the stream (each used to, at the end of its
    // run): only planning does, once per evaluation (the first one also
    // makes the executor and plans again once its outputs are bound). Each
    // chunk's record is waited for at most once, besides the records of the
    // steps still pending (observePending).
    uint64_t chunks = uint64_t((eb->samples + kBatch - 1) / kBatch);
    uint64_t syncs = q.syncCalls - s0;
    EXPECT_GT(chunks, 8u);
    EXPECT_LE(syncs, point == 0 ? 4u : 1u);
    EXPECT_LE(q.waits - w0, chunks + syncs + Trainer::readbackCapacity());
  }
}

// On a device the batch is staged (pinned slots, uploaded on the step's
// stream into buffers bound to the step): the step executor copies nothing
// itself, the trainer counts the same batch bytes per step as the CPU's, and
// the losses are the CPU's bit for bit (StepsDoNotWait... checks that
// staging adds no wait).
TEST(DeviceTraining, TheBatchIsStagedAndCountedAsOnTheCpu) {
  auto onCpu = digitsModel(true), onDevice = digitsModel(true);
  ASSERT_TRUE(onCpu && onDevice);
  CpuBackend cpu(1);
  QueueBackend q;
  auto a = trainerFor(*onCpu, cpu, 3, 0), b = trainerFor(*onDevice, q, 3, 0);
  ASSERT_TRUE(a && b);
  for (int i = 0; i < 20; ++i) {
    auto ra = a->step(), rb = b->step();
    ASSERT_TRUE(bool(ra) && bool(rb));
    EXPECT_EQ(bitsOf(ra->loss), bitsOf(rb->loss)) << "step " << i;
  }
  EXPECT_EQ(b->transfers().stepHostToDevice, a->transfers().stepHostToDevice);
  EXPECT_GT(a->transfers().stepHostToDevice, 0u);
  EXPECT_EQ(a->stepExecutor().transferStats().hostToDevice, a->transfers().stepHostToDevice);
  EXPECT_EQ(b->stepExecutor().transferStats().hostToDevice, 0u);
}
