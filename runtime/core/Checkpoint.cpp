//===- Checkpoint.cpp - Training checkpoints -------------------------------===//
//
// Moved out of tools/mpc/Train.cpp, which keeps the command line around it
// (where the file is, the flags a resumed run must agree with).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Checkpoint.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Verify/Verifier.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

using namespace mpc;

static constexpr const char *kStepKey = "mpc.trainer.step";
static constexpr const char *kEpochKey = "mpc.trainer.epoch";
static constexpr const char *kSeedKey = "mpc.trainer.seed";
static constexpr const char *kBatchKey = "mpc.trainer.batch";
/// "none" when the run does not shuffle; absent for the seeded order.
static constexpr const char *kShuffleKey = "mpc.trainer.shuffle";
static constexpr const char *kHashKey = "mpc.trainer.model_hash";

static void stripTensorData(onnx::TensorProto &t) {
  t.clear_raw_data();
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_int64_data();
  t.clear_uint64_data();
  t.clear_string_data();
  t.clear_external_data();
  t.clear_data_location();
}

llvm::Expected<std::string> mpc::trainingModelHash(Model &m) {
  google::protobuf::Arena arena;
  auto &p = *google::protobuf::Arena::CreateMessage<onnx::ModelProto>(&arena);
  if (llvm::Error err = exportOnnx(m, p))
    return std::move(err);
  llvm::StringSet<> stateNames;
  for (const onnx::TrainingInfoProto &ti : p.training_info())
    for (const onnx::StringStringEntryProto &b : ti.update_binding())
      stateNames.insert(b.key());
  for (onnx::TensorProto &t : *p.mutable_graph()->mutable_initializer())
    if (stateNames.count(t.name()))
      stripTensorData(t);
  auto *props = p.mutable_metadata_props();
  for (int i = props->size() - 1; i >= 0; --i)
    if (llvm::StringRef(props->Get(i).key()).startswith("mpc.trainer."))
      props->DeleteSubrange(i, 1);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    p.SerializeToCodedStream(&cos);
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  std::string hex;
  llvm::raw_string_ostream(hex) << llvm::format_hex_no_prefix(h, 16);
  return hex;
}

llvm::Expected<std::unique_ptr<Model>>
mpc::readCheckpoint(llvm::StringRef path, llvm::StringRef hash, CheckpointPosition &at,
                    ModelLoader load) {
  auto m = load(path);
  if (!m)
    return inputError("checkpoint '{0}': {1}", path, llvm::toString(m.takeError()));
  if (llvm::Error err = verifyModel(**m))
    return inputError("checkpoint '{0}': {1}", path, llvm::toString(std::move(err)));
  const std::string *stored = (*m)->findMetadata(kHashKey);
  if (!stored)
    return inputError("'{0}' is not an mpc checkpoint (no {1} metadata)", path, kHashKey);
  auto actual = trainingModelHash(**m);
  if (!actual)
    return actual.takeError();
  if (*stored != hash || *actual != hash)
    return inputError("checkpoint '{0}' is of a different model (model hash {1}, the "
                      "training model's is {2})",
                      path, *actual != hash ? *actual : *stored, hash);
  auto number = [&](const char *key, uint64_t &out) -> llvm::Error {
    const std::string *v = (*m)->findMetadata(key);
    if (!v || llvm::StringRef(*v).getAsInteger(10, out))
      return inputError("checkpoint '{0}': metadata {1} is missing or not a number", path, key);
    return llvm::Error::success();
  };
  uint64_t batch = 0;
  for (auto [key, out] : {std::pair<const char *, uint64_t *>{kStepKey, &at.step},
                          {kEpochKey, &at.epoch},
                          {kSeedKey, &at.seed},
                          {kBatchKey, &batch}})
    if (llvm::Error err = number(key, *out))
      return std::move(err);
  at.batch = int64_t(batch);
  const std::string *shuffle = (*m)->findMetadata(kShuffleKey);
  if (shuffle && *shuffle != "none")
    return inputError("checkpoint '{0}': metadata {1} is {2}, not none", path, kShuffleKey,
                      quoteName(*shuffle));
  at.shuffle = !shuffle;
  return std::move(*m);
}

llvm::Error mpc::writeCheckpoint(Model &m, const CheckpointPosition &at, llvm::StringRef hash,
                                 llvm::StringRef path) {
  m.setMetadata(kStepKey, std::to_string(at.step));
  m.setMetadata(kEpochKey, std::to_string(at.epoch));
  m.setMetadata(kSeedKey, std::to_string(at.seed));
  m.setMetadata(kBatchKey, std::to_string(at.batch));
  if (!at.shuffle)
    m.setMetadata(kShuffleKey, "none");
  m.setMetadata(kHashKey, std::string(hash));
  return writeOnnxFile(m, path);
}
