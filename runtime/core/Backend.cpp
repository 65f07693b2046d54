//===- Backend.cpp - The backend interface's own members -------------------===//
//
// What Backend.h declares outside the pure virtual interface: the base
// class's destructor, its default runPlan (one launch per call), its
// default readback channel (Readback.cpp) and the memory budget's check.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/Readback.h"
#include "mpc/Support/Diagnostics.h"

using namespace mpc;

Backend::~Backend() = default;

void Backend::runPlan(const LaunchPlan &plan, Stream stream) {
  for (const KernelCall &call : plan.calls)
    launch(call, stream);
}

std::unique_ptr<ReadbackChannel> Backend::createReadback() { return createSyncReadback(*this); }

llvm::Error Backend::checkBudget(size_t bytes) const {
  uint64_t cap = memoryBudget(), held = allocatedBytes(), size = allocationSize(bytes);
  if (!cap || (size <= cap && held <= cap - size))
    return llvm::Error::success();
  return inputError("memory budget: {0} more bytes on top of the {1} held would exceed the "
                    "budget of {2} bytes",
                    size, held, cap);
}
