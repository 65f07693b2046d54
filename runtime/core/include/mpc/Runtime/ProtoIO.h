//===- ProtoIO.h - ONNX Tensor/Sequence/OptionalProto files -----*- C++ -*-===//
//
// Reads the .pb files ONNX's backend tests ship (a TensorProto per tensor
// input, a SequenceProto per sequence input, an OptionalProto per optional
// input) and writes sequence and optional outputs as such files; also reads
// a sequence from a .npz (numpy.savez's arr_0, arr_1, ...). Errors name the
// file and what is wrong.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_PROTOIO_H
#define MPC_RUNTIME_PROTOIO_H

#include "mpc/Runtime/Executor.h"
#include "llvm/Support/Error.h"

namespace mpc {

/// Reads an ONNX TensorProto file; the name is the TensorProto's.
llvm::Expected<NamedTensor> readTensorPb(llvm::StringRef path);
/// Reads an ONNX SequenceProto file of tensors; the name is the proto's.
llvm::Expected<NamedSequence> readSequencePb(llvm::StringRef path);
/// Reads an ONNX OptionalProto file holding nothing, a tensor or a sequence
/// of tensors (an empty one leaves ofSequence and elem to the declaration).
llvm::Expected<NamedSequence> readOptionalPb(llvm::StringRef path);
/// Reads a sequence from a .npz whose members are arr_0, arr_1, ... (as
/// numpy.savez(FILE, *arrays) writes them); the element type stays
/// undefined when it holds none.
llvm::Expected<NamedSequence> readSequenceNpz(llvm::StringRef path);
/// The SequenceProto serialization of a sequence of tensors.
std::string serializeSequencePb(const NamedSequence &s);
/// The OptionalProto serialization of an optional (NamedSequence::optional).
std::string serializeOptionalPb(const NamedSequence &s);

} // namespace mpc

#endif // MPC_RUNTIME_PROTOIO_H
