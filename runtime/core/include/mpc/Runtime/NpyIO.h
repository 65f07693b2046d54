//===- NpyIO.h - numpy .npy / .npz files for tensors ------------*- C++ -*-===//
//
// Reads .npy (format 1.0-3.0, little-endian, C order) and .npz archives with
// stored (uncompressed) members; writes .npy atomically. bfloat16, which
// numpy lacks, is written as float32. Errors name the file and what is wrong.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_NPYIO_H
#define MPC_RUNTIME_NPYIO_H

#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/HostTensor.h"
#include "llvm/Support/Error.h"

namespace mpc {

/// Parses .npy bytes; `what` names the source in errors.
llvm::Expected<HostTensor> parseNpy(llvm::StringRef bytes, llvm::StringRef what);
/// Reads a .npy file.
llvm::Expected<HostTensor> readNpyFile(llvm::StringRef path);
/// Reads every member of a .npz archive ("x.npy" becomes input "x").
llvm::Expected<std::vector<NamedTensor>> readNpzFile(llvm::StringRef path);
/// The .npy serialization of a tensor.
std::string serializeNpy(const HostTensor &t);
/// Writes a .npy file atomically (temporary file in the same folder, rename).
llvm::Error writeNpyFile(llvm::StringRef path, const HostTensor &t);

} // namespace mpc

#endif // MPC_RUNTIME_NPYIO_H
