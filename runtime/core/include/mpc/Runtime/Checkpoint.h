//===- Checkpoint.h - Training checkpoints -----------------------*- C++ -*-===//
//
// The checkpoint format of `mpc run --train` (docs/training.md): the training
// model with its state initializers holding the current state, plus metadata
// mpc.trainer.{step,epoch,seed,batch,model_hash} (and mpc.trainer.shuffle =
// "none" for a run that does not shuffle). The model hash covers the model
// without the state's data and without mpc.trainer.* metadata, so a
// checkpoint and the training model it was made from hash alike.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CHECKPOINT_H
#define MPC_RUNTIME_CHECKPOINT_H

#include "mpc/IO/Onnx.h"
#include "mpc/IR/Graph.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <memory>
#include <string>

namespace mpc {

/// Where a checkpoint left off: the trainer's position and the settings a
/// resumed run must keep.
struct CheckpointPosition {
  uint64_t step = 0, epoch = 0, seed = 0;
  int64_t batch = 0;
  bool shuffle = true;
};

/// FNV-1a (64-bit) of `m` without the data of its training state (the
/// initializers update_binding writes) and without the trainer's own
/// metadata, as 16 hex digits. Everything else counts: the graphs, frozen
/// constants, the algorithm's constants (a learning rate), the metadata.
llvm::Expected<std::string> trainingModelHash(Model &m);

/// Reads a model file (ONNX by default; `mpc` passes its own loader, which
/// also reads the text form).
using ModelLoader = llvm::function_ref<llvm::Expected<std::unique_ptr<Model>>(llvm::StringRef)>;

/// Reads, verifies and checks the checkpoint file `path` of the training
/// model whose hash is `hash`: the model (its state initializers hold the
/// checkpointed state) and, in `at`, where it left off. Errors are one line
/// naming the file.
llvm::Expected<std::unique_ptr<Model>> readCheckpoint(llvm::StringRef path, llvm::StringRef hash,
                                                      CheckpointPosition &at,
                                                      ModelLoader load = importOnnxFile);

/// Writes `m` (whose state initializers already hold the state to save)
/// with the metadata of `at` and `hash` to `path`, whole (temporary file,
/// rename). Sets the metadata on `m`.
llvm::Error writeCheckpoint(Model &m, const CheckpointPosition &at, llvm::StringRef hash,
                            llvm::StringRef path);

} // namespace mpc

#endif // MPC_RUNTIME_CHECKPOINT_H
