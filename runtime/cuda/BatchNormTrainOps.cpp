//===- BatchNormTrainOps.cpp - Training batch normalization on CUDA ---------===//
//
// BatchNormalization with training_mode = 1 (Y and the optional running
// mean and variance) and ai.mpc.training BatchNormalizationGrad (dX, dScale,
// dBias, each optional): X as [N, C, spatial] (the CPU's split), one block
// per channel (BatchNormTrainLaunch.h). A channel with no element (N or the
// spatial size 0) prepares no op: the CPU writes its statistics.
//
//===----------------------------------------------------------------------===//
#include "BatchNormTrainLaunch.h"
#include "CudaOp.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/SlicePlan.h"
#include "mpc/Runtime/OpParams.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

class BatchNormTrainOp final : public CudaOp {
public:
  bool grad = false;
  float epsilon = 1e-5f, momentum = 0.9f;
  ChannelGeometry geometry;

  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    const auto &in = call.inputs;
    auto out = [&](unsigned i) { return i < call.outputs.size() ? call.outputs[i].data : nullptr; };
    if (grad)
      return launchText(launchBatchNormGrad(int32_t(in[0].dtype), int32_t(in[2].dtype),
                                            in[0].data, in[1].data, in[2].data, epsilon, out(0),
                                            out(1), out(2), geometry, s));
    return launchText(launchBatchNormTraining(
        int32_t(in[0].dtype), int32_t(in[1].dtype), in[0].data, in[1].data, in[2].data,
        in[3].data, in[4].data, epsilon, momentum, out(0), out(1), out(2), geometry, s));
  }
};

} // namespace

bool cuda::isTrainingBatchNorm(const Node &n) {
  if (n.opType != "BatchNormalization" || !n.domain.empty())
    return false;
  auto p = paramsOf<BatchNormParams>(parseBatchNorm(n));
  if (!p) {
    llvm::consumeError(p.takeError());
    return false;
  }
  return p->training;
}

CudaOpOrError cuda::prepareBatchNormTrainOp(const Node &n, const CudaKernel &,
                                            llvm::ArrayRef<TensorDesc> inputs,
                                            const CudaContext &) {
  auto op = std::make_unique<BatchNormTrainOp>();
  op->grad = n.opType == "BatchNormalizationGrad";
  auto p = paramsOf<BatchNormParams>(parseBatchNorm(n));
  if (!p)
    return p.takeError();
  op->epsilon = p->epsilon;
  op->momentum = p->momentum;
  if (inputs.size() < (op->grad ? 3u : 5u))
    return std::unique_ptr<CudaOp>();
  llvm::ArrayRef<int64_t> x = inputs[op->grad ? 1 : 0].shape;
  if (x.size() < 2)
    return std::unique_ptr<CudaOp>();
  ChannelGeometry &g = op->geometry;
  g.batch = x[0];
  g.channels = x[1];
  g.spatial = 1;
  for (size_t i = 2; i < x.size(); ++i)
    g.spatial *= x[i];
  if (g.batch * g.spatial <= 0)
    return std::unique_ptr<CudaOp>();
  g.threads = rowThreads(g.batch * g.spatial);
  return std::unique_ptr<CudaOp>(std::move(op));
}
