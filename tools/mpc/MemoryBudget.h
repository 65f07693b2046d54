//===- MemoryBudget.h - `--max-memory` and the memory figures of --stats -*- C++ -*-===//
//
// `mpc run` and `mpc run --train` take --max-memory SIZE: the backend then
// refuses to hold more than SIZE bytes at once (Backend::setMemoryBudget)
// from the end of planning on, and a plan that cannot fit is refused before
// the first run or step, in one line that gives the planned bytes against
// the budget. --stats prints the
// same figures, exactly, and on a GPU the device memory the driver reports
// before the model and after the first run or step (docs/user-guide.md).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TOOLS_MEMORYBUDGET_H
#define MPC_TOOLS_MEMORYBUDGET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>

namespace mpc {
class Backend;
class Executor;
namespace tool {

/// Reads a size: a positive number (integer or decimal) with an optional
/// unit B, KiB, MiB, GiB or TiB (powers of 1024; none: bytes), such as
/// "12GiB", "1.5MiB" or "4096". Returns "" and sets `bytes` (rounded down to
/// whole bytes, at least 1), or what is wrong.
std::string parseByteSize(llvm::StringRef text, uint64_t &bytes);

/// The bytes a planned executor needs on its backend before its first run:
/// what the backend holds already ("persistent": weights, the training
/// state, bound buffers, error records) plus the arena and the workspace the
/// first run allocates (as the backend rounds them, allocationSize).
struct PlannedMemory {
  uint64_t persistent = 0, peak = 0, workspace = 0;
  uint64_t total() const { return persistent + peak + workspace; }
};
PlannedMemory plannedMemory(const Backend &backend, const Executor &ex);

/// Caps the backend at `budget` bytes (--max-memory; 0: none) once the plan
/// is made, or, when `need` does not fit, one error line: "--max-memory B
/// bytes: WHAT 'MODEL' needs T bytes (persistent P + PEAKNAME S + workspace
/// W)".
/// Planning allocates under no cap, so that the line can give the figures;
/// from here on the backend refuses to hold more than `budget`.
llvm::Error applyMemoryBudget(Backend &backend, const PlannedMemory &need, uint64_t budget,
                              llvm::StringRef what, llvm::StringRef model,
                              llvm::StringRef peakName);

/// --stats: "memory bytes: persistent P, PEAKNAME S, workspace W, planned T,
/// backend peak B, budget M|none".
std::string plannedMemoryLine(const Backend &backend, const PlannedMemory &need,
                              llvm::StringRef peakName);

/// The device memory in use as the driver reports it, where the backend has
/// a device of its own (the CUDA backend's cudaMemGetInfo).
struct DeviceMemorySample {
  bool known = false;
  uint64_t used = 0, total = 0;
};
DeviceMemorySample sampleDeviceMemory(Backend &backend);

/// --stats on a GPU: "device memory (cudaMemGetInfo): U0 bytes used before
/// the model, U1 after AFTER (+D), planned T, backend peak B, device total
/// X"; "" where either sample is unknown (the CPU).
std::string deviceMemoryLine(const Backend &backend, const DeviceMemorySample &before,
                             const DeviceMemorySample &after, const PlannedMemory &need,
                             llvm::StringRef afterWhat);

} // namespace tool
} // namespace mpc

#endif // MPC_TOOLS_MEMORYBUDGET_H
