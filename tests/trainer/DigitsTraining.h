//===- DigitsTraining.h - The digits MLP as a training model, for tests -*- C++ -*-===//
//
// models/digits_mlp.onnx made a training model (cross-entropy, Adam), optionally
// rewritten to fp16 with dynamic loss scaling as `mpc rewrite` does it, and a
// trainer over models/data/digits.npz at a given position. Used by the
// checkpoint and device-training tests.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TESTS_TRAINER_DIGITSTRAINING_H
#define MPC_TESTS_TRAINER_DIGITSTRAINING_H

#include "mpc/IO/Onnx.h"
#include "mpc/Passes/Amp.h"
#include "mpc/Passes/LossScaling.h"
#include "mpc/Passes/TrainGraph.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/NpyIO.h"
#include "mpc/Runtime/Trainer.h"
#include "mpc/Verify/Verifier.h"
#include "gtest/gtest.h"
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mpc {
namespace test {

constexpr int64_t kBatch = 16;

/// models/digits_mlp.onnx made a training model (cross-entropy, Adam), and
/// with `amp` rewritten to fp16 with dynamic loss scaling as `mpc rewrite`
/// does it.
inline std::unique_ptr<Model> digitsModel(bool amp) {
  auto m = importOnnxFile(MPC_SOURCE_DIR "/models/digits_mlp.onnx");
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  TrainGraphOptions opts;
  opts.optimizer = OptimizerKind::Adam;
  opts.lr = 0.01f;
  if (auto res = buildTrainingGraph(**m, opts); !res) {
    ADD_FAILURE() << llvm::toString(res.takeError());
    return nullptr;
  }
  if (amp) {
    AmpRunOptions ro;
    ro.amp.fp32Nodes = trainingFp32Nodes(**m);
    CpuCaps caps;
    if (auto r = runAmpRewrite(**m, ro, caps); !r) {
      ADD_FAILURE() << llvm::toString(r.takeError());
      return nullptr;
    }
    auto ls = insertLossScaling(**m, ro.amp.lossScale, ro.amp.target);
    if (!ls) {
      ADD_FAILURE() << llvm::toString(ls.takeError());
      return nullptr;
    }
    EXPECT_EQ(ls->status, LossScalingResult::Status::Inserted);
  }
  if (llvm::Error err = verifyModel(**m)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return nullptr;
  }
  return std::move(*m);
}

inline std::unique_ptr<Trainer> trainerFor(Model &m, Backend &backend, uint64_t seed, uint64_t step) {
  auto t = Trainer::create(m, backend, kBatch);
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError());
    return nullptr;
  }
  auto arrays = readNpzFile(MPC_SOURCE_DIR "/models/data/digits.npz");
  if (!arrays) {
    ADD_FAILURE() << llvm::toString(arrays.takeError());
    return nullptr;
  }
  if (llvm::Error err = (*t)->setData(std::move(*arrays), 0.1)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return nullptr;
  }
  (*t)->setPosition(seed, step);
  return std::move(*t);
}

inline std::map<std::string, std::vector<uint8_t>> initializerBytes(const Model &m) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const Value *v : m.graph->initializers())
    out[v->name()] = v->initializer()->bytes().vec();
  return out;
}

} // namespace test
} // namespace mpc

#endif // MPC_TESTS_TRAINER_DIGITSTRAINING_H
