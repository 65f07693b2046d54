//===- MemoryBudget.cpp - `--max-memory` and the memory figures of --stats -===//
#include "MemoryBudget.h"
#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>

using namespace mpc;
using namespace mpc::tool;

std::string tool::parseByteSize(llvm::StringRef text, uint64_t &bytes) {
  std::string bad = "--max-memory takes a positive size in bytes with an optional unit B, KiB, "
                    "MiB, GiB or TiB (such as 12GiB, 1.5MiB or 4096), not " +
                    quoteName(text);
  llvm::StringRef number = text.take_while([](char c) { return llvm::isDigit(c) || c == '.'; });
  llvm::StringRef unit = text.drop_front(number.size());
  static const std::pair<const char *, unsigned> kUnits[] = {
      {"", 0}, {"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  int shift = -1;
  for (const auto &[name, s] : kUnits)
    if (unit == name)
      shift = int(s);
  auto [whole, frac] = number.split('.');
  uint64_t w = 0;
  if (shift < 0 || whole.empty() || frac.contains('.') ||
      (number.contains('.') && frac.empty()) || whole.getAsInteger(10, w) ||
      w >= (uint64_t(1) << (62 - shift)))
    return bad;
  // The whole part exactly; the fraction of a unit rounded down to bytes.
  double f = 0;
  std::string fracText = "0." + frac.str();
  if (!frac.empty() && llvm::StringRef(fracText).getAsDouble(f))
    return bad;
  bytes = (w << shift) + uint64_t(std::floor(f * double(uint64_t(1) << shift)));
  if (bytes == 0)
    return bad;
  return "";
}

PlannedMemory tool::plannedMemory(const Backend &backend, const Executor &ex) {
  PlannedMemory m;
  m.persistent = backend.allocatedBytes();
  if (ex.isDynamic())
    return m; // no static plan: every value is allocated as it is made
  const MemoryStats &ms = ex.memoryStats();
  m.peak = allocationSize(ms.plannedPeak);
  m.workspace = ms.workspace ? allocationSize(ms.workspace) : 0;
  return m;
}

llvm::Error tool::applyMemoryBudget(Backend &backend, const PlannedMemory &need,
                                    uint64_t budget, llvm::StringRef what,
                                    llvm::StringRef model, llvm::StringRef peakName) {
  if (budget && need.total() > budget)
    return inputError("--max-memory {0} bytes: {1} '{2}' needs {3} bytes (persistent {4} + {5} "
                      "{6} + workspace {7})",
                      budget, what, model, need.total(), need.persistent, peakName, need.peak,
                      need.workspace);
  backend.setMemoryBudget(budget);
  return llvm::Error::success();
}

std::string tool::plannedMemoryLine(const Backend &backend, const PlannedMemory &need,
                                    llvm::StringRef peakName) {
  uint64_t cap = backend.memoryBudget();
  return llvm::formatv("memory bytes: persistent {0}, {1} {2}, workspace {3}, planned {4}, "
                       "backend peak {5}, budget {6}",
                       need.persistent, peakName, need.peak, need.workspace, need.total(),
                       backend.peakAllocatedBytes(), cap ? std::to_string(cap) : "none")
      .str();
}

DeviceMemorySample tool::sampleDeviceMemory(Backend &backend) {
  DeviceMemorySample s;
  s.known = backend.deviceMemoryInfo(s.used, s.total);
  return s;
}

std::string tool::deviceMemoryLine(const Backend &backend, const DeviceMemorySample &before,
                                   const DeviceMemorySample &after, const PlannedMemory &need,
                                   llvm::StringRef afterWhat) {
  if (!before.known || !after.known)
    return "";
  int64_t grew = int64_t(after.used) - int64_t(before.used);
  return llvm::formatv("device memory (cudaMemGetInfo): {0} bytes used before the model, {1} "
                       "after {2} ({3}{4}), planned {5}, backend peak {6}, device total {7}",
                       before.used, after.used, afterWhat, grew < 0 ? "" : "+", grew,
                       need.total(), backend.peakAllocatedBytes(), after.total)
      .str();
}
