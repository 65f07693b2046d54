//===- ProtoIO.h - ONNX TensorProto / SequenceProto files -------*- C++ -*-===//
//
// Reads the .pb files ONNX's backend tests ship (a TensorProto per tensor
// input, a SequenceProto per sequence input) and writes sequence outputs as
// SequenceProto files; also reads a sequence from a .npz (numpy.savez's
// arr_0, arr_1, ...). Errors name the file and what is wrong.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TOOLS_PROTOIO_H
#define MPC_TOOLS_PROTOIO_H

#include "mpc/Runtime/Executor.h"
#include "llvm/Support/Error.h"

namespace mpc {
namespace tool {

/// Reads an ONNX TensorProto file; the name is the TensorProto's.
llvm::Expected<NamedTensor> readTensorPb(llvm::StringRef path);
/// Reads an ONNX SequenceProto file of tensors; the name is the proto's.
llvm::Expected<NamedSequence> readSequencePb(llvm::StringRef path);
/// Reads a sequence from a .npz whose members are arr_0, arr_1, ... (as
/// numpy.savez(FILE, *arrays) writes them); the element type stays
/// undefined when it holds none.
llvm::Expected<NamedSequence> readSequenceNpz(llvm::StringRef path);
/// The SequenceProto serialization of a sequence of tensors.
std::string serializeSequencePb(const NamedSequence &s);

} // namespace tool
} // namespace mpc

#endif // MPC_TOOLS_PROTOIO_H
