//===- Backend.cpp - The backend interface's own members -------------------===//
//
// What Backend.h declares outside the pure virtual interface: the base
// class's destructor, its default runPlan (one launch per call) and its
// default readback channel (Readback.cpp).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/Readback.h"

using namespace mpc;

Backend::~Backend() = default;

void Backend::runPlan(const LaunchPlan &plan, Stream stream) {
  for (const KernelCall &call : plan.calls)
    launch(call, stream);
}

std::unique_ptr<ReadbackChannel> Backend::createReadback() { return createSyncReadback(*this); }
