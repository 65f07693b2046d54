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

} // namespace

TEST(DeviceTraining, StepsAndStateAreTheCpuBackendsBitForBit) {
  for (bool amp : {false, true}) {
    SCOPED_TRACE(amp ? "amp fp16, dynamic loss scaling" : "fp32");
    auto onCpu = digitsModel(amp), onDevice = digitsModel(amp);
    ASSERT_TRUE(onCpu && onDevice);
    CpuBackend cpu(1);
    auto fb = deviceWithGaps();
    auto a = trainerFor(*onCpu, cpu, 7, 0), b = trainerFor(*onDevice, *fb, 7, 0);
    ASSERT_TRUE(a && b);
    for (int i = 0; i < 12; ++i) {
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
    a->syncModel();
    b->syncModel();
    EXPECT_EQ(initializerBytes(*onCpu), initializerBytes(*onDevice));
    // Both sides ran part of the step.
    FallbackBackend::Partition p = fb->partition();
    EXPECT_GT(p.deviceNodes, 10u) << fb->partitionLine();
    EXPECT_GT(p.hostNodes, 0u) << fb->partitionLine();
  }
}

// With every node on the device, the step reaches the backend as one static
// plan (runPlan). The state's double buffers alternate between two sets of
// addresses, so the plan alternates between two versions: each is captured
// once and then replayed, and the replays compute the CPU's bits.
TEST(DeviceTraining, AWholeDeviceStepIsCapturedTwiceAndReplayed) {
  for (bool amp : {false, true}) {
    SCOPED_TRACE(amp ? "amp fp16, dynamic loss scaling" : "fp32");
    auto onCpu = digitsModel(amp), onDevice = digitsModel(amp);
    ASSERT_TRUE(onCpu && onDevice);
    CpuBackend cpu(1);
    QueueBackend q;
    auto a = trainerFor(*onCpu, cpu, 7, 0), b = trainerFor(*onDevice, q, 7, 0);
    ASSERT_TRUE(a && b);
    const int steps = 12;
    for (int i = 0; i < steps; ++i) {
      auto ra = a->step(), rb = b->step();
      ASSERT_TRUE(bool(ra)) << llvm::toString(ra.takeError());
      ASSERT_TRUE(bool(rb)) << llvm::toString(rb.takeError());
      EXPECT_EQ(bitsOf(ra->loss), bitsOf(rb->loss)) << "step " << i;
      EXPECT_EQ(ra->skipped, rb->skipped) << "step " << i;
    }
    a->syncModel();
    b->syncModel();
    EXPECT_EQ(initializerBytes(*onCpu), initializerBytes(*onDevice));
    EXPECT_EQ(q.captures, 2u);
    EXPECT_EQ(q.replays, unsigned(steps - 2));
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
  t->syncModel();
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
