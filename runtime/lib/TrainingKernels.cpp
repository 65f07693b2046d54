//===- TrainingKernels.cpp - CPU kernels of the ai.mpc.training ops -------===//
//
// The gradient operators of docs/training.md, as rows of the CPU kernel
// table.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"

using namespace mpc;
using namespace mpc::cpuk;

std::vector<CpuKernel> mpc::cpuk::trainingRows() { return {}; }
