//===- Backend.cpp - The backend interface's own members -------------------===//
//
// What Backend.h declares outside the pure virtual interface: the base
// class's destructor and its default runPlan, one launch per call.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Backend.h"

using namespace mpc;

Backend::~Backend() = default;

void Backend::runPlan(const LaunchPlan &plan, Stream stream) {
  for (const KernelCall &call : plan.calls)
    launch(call, stream);
}
