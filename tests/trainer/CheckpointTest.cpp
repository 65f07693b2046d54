//===- CheckpointTest.cpp - The checkpoint format (mpc/Runtime/Checkpoint.h) ===//
//
// A checkpoint of a trained digits MLP (Adam, three steps) is written and
// read back: every initializer, the trained state and its moments included,
// comes back bit for bit with the position, and a trainer resumed from it
// takes the same next step as the one that wrote it. Damaged or foreign
// files are refused with one line naming the file.
//
//===----------------------------------------------------------------------===//
#include "../unit/OnnxTestUtil.h"
#include "DigitsTraining.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Passes/TrainGraph.h"
#include "mpc/Runtime/Checkpoint.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/NpyIO.h"
#include "mpc/Runtime/Trainer.h"
#include "mpc/Verify/Verifier.h"
#include "gtest/gtest.h"
#include "llvm/Support/MemoryBuffer.h"
#include <cstring>
#include <map>

using namespace mpc;
using namespace mpc::test;

namespace {

std::string errorOf(llvm::Error err) {
  EXPECT_TRUE(bool(err));
  return llvm::toString(std::move(err));
}

/// A checkpoint at step 3 of seed 7 in `dir`, with its model and hash.
struct Written {
  std::unique_ptr<Model> model;
  std::string hash, path;
  CheckpointPosition at;
  double nextLoss = 0; // the loss of step 4, taken after writing
};

Written writeTrained(const test::TempDir &dir) {
  Written w;
  w.model = digitsModel(/*amp=*/false);
  if (!w.model)
    return w;
  auto hash = trainingModelHash(*w.model);
  EXPECT_TRUE(bool(hash));
  if (!hash)
    return w;
  w.hash = *hash;
  CpuBackend backend(1);
  auto t = trainerFor(*w.model, backend, 7, 0);
  if (!t)
    return w;
  for (int i = 0; i < 3; ++i)
    if (auto r = t->step(); !r)
      ADD_FAILURE() << llvm::toString(r.takeError());
  if (llvm::Error e = t->syncModel())
    ADD_FAILURE() << llvm::toString(std::move(e));
  w.at.step = t->stepsDone();
  w.at.epoch = 0;
  w.at.seed = t->seed();
  w.at.batch = kBatch;
  w.at.shuffle = true;
  w.path = dir.file("checkpoint.onnx");
  if (llvm::Error err = writeCheckpoint(*w.model, w.at, w.hash, w.path))
    ADD_FAILURE() << llvm::toString(std::move(err));
  auto next = t->step();
  EXPECT_TRUE(bool(next));
  if (next)
    w.nextLoss = next->loss;
  return w;
}

} // namespace

TEST(Checkpoint, TrainedStateReadsBackBitForBitAndResumesTheSameStep) {
  test::TempDir dir;
  auto fresh = digitsModel(/*amp=*/false);
  ASSERT_TRUE(fresh);
  Written w = writeTrained(dir);
  ASSERT_TRUE(w.model);
  CheckpointPosition got;
  auto read = readCheckpoint(w.path, w.hash, got);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(got.step, 3u);
  EXPECT_EQ(got.epoch, 0u);
  EXPECT_EQ(got.seed, 7u);
  EXPECT_EQ(got.batch, kBatch);
  EXPECT_TRUE(got.shuffle);
  // The step's state (weights, Adam moments, step counter) is not the
  // initial one, and every initializer comes back with the bytes written.
  auto before = initializerBytes(*fresh), written = initializerBytes(*w.model),
       back = initializerBytes(**read);
  EXPECT_EQ(back, written);
  EXPECT_NE(written, before);
  // Resuming from the file gives the step the writer took next, bit for bit.
  CpuBackend backend(1);
  auto t = trainerFor(**read, backend, got.seed, got.step);
  ASSERT_TRUE(t);
  auto next = t->step();
  ASSERT_TRUE(bool(next)) << llvm::toString(next.takeError());
  EXPECT_EQ(next->step, 4u);
  uint64_t a, b;
  std::memcpy(&a, &next->loss, 8);
  std::memcpy(&b, &w.nextLoss, 8);
  EXPECT_EQ(a, b) << next->loss << " vs " << w.nextLoss;
}

TEST(Checkpoint, UnshuffledRunKeepsItsOrder) {
  test::TempDir dir;
  auto m = digitsModel(/*amp=*/false);
  ASSERT_TRUE(m);
  auto hash = trainingModelHash(*m);
  ASSERT_TRUE(bool(hash));
  CheckpointPosition at;
  at.step = 12;
  at.epoch = 1;
  at.seed = 99;
  at.batch = 8;
  at.shuffle = false;
  std::string path = dir.file("c.onnx");
  ASSERT_FALSE(bool(writeCheckpoint(*m, at, *hash, path)));
  CheckpointPosition got;
  auto read = readCheckpoint(path, *hash, got);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(got.step, 12u);
  EXPECT_EQ(got.epoch, 1u);
  EXPECT_EQ(got.seed, 99u);
  EXPECT_EQ(got.batch, 8);
  EXPECT_FALSE(got.shuffle);
}

TEST(Checkpoint, DamagedOrForeignFilesAreRefusedWithOneLine) {
  test::TempDir dir;
  Written w = writeTrained(dir);
  ASSERT_TRUE(w.model);
  CheckpointPosition at;

  // Truncated: the loader's message, prefixed with the file.
  auto bytes = llvm::MemoryBuffer::getFile(w.path);
  ASSERT_TRUE(bool(bytes));
  std::string truncated = dir.file("truncated.onnx");
  dir.write("truncated.onnx", (*bytes)->getBuffer().take_front((*bytes)->getBufferSize() / 2));
  std::string e = errorOf(readCheckpoint(truncated, w.hash, at).takeError());
  EXPECT_EQ(e.rfind("checkpoint '" + truncated + "': ", 0), 0u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;

  // Another model's checkpoint (its hash is not the training model's).
  EXPECT_EQ(errorOf(readCheckpoint(w.path, "0123456789abcdef", at).takeError()),
            "checkpoint '" + w.path + "' is of a different model (model hash " + w.hash +
                ", the training model's is 0123456789abcdef)");

  // A training model without the trainer's metadata.
  auto plain = digitsModel(/*amp=*/false);
  ASSERT_TRUE(plain);
  std::string plainPath = dir.file("plain.onnx");
  ASSERT_FALSE(bool(writeOnnxFile(*plain, plainPath)));
  EXPECT_EQ(errorOf(readCheckpoint(plainPath, w.hash, at).takeError()),
            "'" + plainPath + "' is not an mpc checkpoint (no mpc.trainer.model_hash metadata)");

  // Metadata that is not a number, and an unknown shuffle order.
  w.model->setMetadata("mpc.trainer.step", "three");
  std::string badStep = dir.file("badstep.onnx");
  ASSERT_FALSE(bool(writeOnnxFile(*w.model, badStep)));
  EXPECT_EQ(errorOf(readCheckpoint(badStep, w.hash, at).takeError()),
            "checkpoint '" + badStep + "': metadata mpc.trainer.step is missing or not a number");
  w.model->setMetadata("mpc.trainer.step", "3");
  w.model->setMetadata("mpc.trainer.shuffle", "sorted");
  std::string badShuffle = dir.file("badshuffle.onnx");
  ASSERT_FALSE(bool(writeOnnxFile(*w.model, badShuffle)));
  EXPECT_EQ(errorOf(readCheckpoint(badShuffle, w.hash, at).takeError()),
            "checkpoint '" + badShuffle + "': metadata mpc.trainer.shuffle is 'sorted', not none");
}
