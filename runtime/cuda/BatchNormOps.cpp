//===- BatchNormOps.cpp - Inference batch normalization ---------------------===//
//
// BatchNormalization with running statistics (training_mode = 0; the row
// does not take training mode, which runs on the CPU): the shape split and
// epsilon in prepare, one kernel over the shared body in launch
// (BatchNormKernels.cu).
//
//===----------------------------------------------------------------------===//
#include "BatchNormLaunch.h"
#include "CudaOp.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpParams.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

class BatchNormOp final : public CudaOp {
public:
  DType type = DType::F32, paramType = DType::F32;
  int64_t batch = 1, channels = 1, spatial = 1;
  float epsilon = 1e-5f;

  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const auto &in = call.inputs;
    return launchText(launchBatchNorm(int32_t(type), int32_t(paramType), in[0].data, in[1].data,
                                      in[2].data, in[3].data, in[4].data, call.outputs[0].data,
                                      batch, channels, spatial, epsilon,
                                      ctx.geometry(batch * channels * spatial), s));
  }
};

} // namespace

CudaOpOrError cuda::prepareBatchNormOp(const Node &n, const CudaKernel &,
                                       llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  auto op = std::make_unique<BatchNormOp>();
  auto parsed = paramsOf<BatchNormParams>(parseBatchNorm(n));
  if (!parsed)
    return parsed.takeError();
  op->epsilon = parsed->epsilon;
  op->type = inputs[0].dtype;
  op->paramType = inputs[1].dtype;
  // The CPU's split of X: [N, C, everything else].
  llvm::ArrayRef<int64_t> x = inputs[0].shape;
  op->batch = x.empty() ? 1 : x[0];
  op->channels = x.size() > 1 ? x[1] : 1;
  int64_t elements = 1;
  for (int64_t d : x)
    elements *= d;
  op->spatial = elements / std::max<int64_t>(op->batch * op->channels, 1);
  return std::unique_ptr<CudaOp>(std::move(op));
}
