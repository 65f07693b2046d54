//===- StatNormOps.cpp - Instance, group and Lp normalization on CUDA -------===//
//
// InstanceNormalization, GroupNormalization (scale/bias per group before
// opset 21, per channel from 21) and LpNormalization (p = 1 or 2, any
// axis), split as the CPU's NormKernels.cpp splits them (StatNormLaunch.h).
// The shape functions have checked the operands before any backend sees
// the node.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "StatNormLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpParams.h"
#include "../ops/ShapeHelpers.h"

#include <algorithm>

using namespace mpc;
using namespace mpc::cuda;

namespace {

class RunNormOp final : public CudaOp {
public:
  RunNormGeometry geometry;
  double epsilon = 1e-5;
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    const auto &in = call.inputs;
    return launchText(launchRunNorm(int32_t(in[0].dtype), int32_t(in[1].dtype), in[0].data,
                                    in[1].data, in[2].data, call.outputs[0].data, epsilon,
                                    geometry, s));
  }
};

class LpNormOp final : public CudaOp {
public:
  SlicePlan plan;
  int64_t p = 2;
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    return launchText(launchLpNorm(int32_t(call.inputs[0].dtype), call.inputs[0].data,
                                   call.outputs[0].data, p, plan, s));
  }
};

} // namespace

CudaOpOrError cuda::prepareStatNormOp(const Node &n, const CudaKernel &,
                                      llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  auto params = paramsOf<NormParams>(parseNorm(n));
  if (!params)
    return params.takeError();
  llvm::ArrayRef<int64_t> x = inputs[0].shape;
  int64_t numel = 1;
  for (int64_t d : x)
    numel *= d;
  if (n.opType == "LpNormalization") {
    int64_t axis = params->axis;
    if (!shapes::normalizeAxis(axis, int64_t(x.size())))
      return std::unique_ptr<CudaOp>();
    auto op = std::make_unique<LpNormOp>();
    op->p = params->p;
    op->plan = planSlices(splitAxes(x.data(), x.size(), size_t(axis), size_t(axis) + 1),
                          ctx.smCount);
    return std::unique_ptr<CudaOp>(std::move(op));
  }
  if (x.size() < 3 || inputs.size() < 3)
    return std::unique_ptr<CudaOp>();
  auto op = std::make_unique<RunNormOp>();
  op->epsilon = double(params->epsilon);
  RunNormGeometry &g = op->geometry;
  bool group = n.opType == "GroupNormalization";
  g.runs = x[0] * (group ? params->numGroups : x[1]);
  g.len = numel / std::max<int64_t>(g.runs, 1);
  g.chanLen = group ? numel / std::max<int64_t>(x[0] * x[1], 1) : g.len;
  g.channels = 1;
  for (int64_t d : inputs[1].shape)
    g.channels *= d;
  if (g.channels < 1)
    return std::unique_ptr<CudaOp>();
  g.perRunParams = !group || n.opsetVersion() < 21;
  g.threads = rowThreads(g.len);
  return std::unique_ptr<CudaOp>(std::move(op));
}
