//===- GradOps.cpp - Activation gradient nodes on CUDA ----------------------===//
//
// ReluGrad, SigmoidGrad, TanhGrad, ErfGrad and GeluGrad (ai.mpc.training,
// docs/training.md): dX from dY and the forward's input or output, of one
// shape (the CPU's rule; another shape, or an unknown GeluGrad approximate,
// prepares no op and the CPU reports it). launch queues GradKernels.cu's
// kernel.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "GradLaunch.h"
#include "mpc/IR/Graph.h"

using namespace mpc;
using namespace mpc::cuda;
using kernels::ActivationGrad;

namespace {

class ActivationGradOp final : public CudaOp {
public:
  explicit ActivationGradOp(ActivationGrad kind) : kind(kind) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &dy = call.inputs[0];
    int64_t n = dy.numElements();
    return launchText(launchActivationGrad(kind, int32_t(dy.dtype), dy.data, call.inputs[1].data,
                                           call.outputs[0].data, n, ctx.geometry(n), s));
  }

private:
  ActivationGrad kind;
};

} // namespace

CudaOpOrError cuda::prepareGradOp(const Node &n, const CudaKernel &row,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  if (inputs.size() != 2 || inputs[0] != inputs[1])
    return std::unique_ptr<CudaOp>();
  ActivationGrad kind = ActivationGrad(row.op);
  if (kind == ActivationGrad::Gelu) {
    llvm::StringRef approx = n.stringAttr("approximate", "none");
    if (approx == "tanh")
      kind = ActivationGrad::GeluTanh;
    else if (approx != "none")
      return std::unique_ptr<CudaOp>();
  }
  return std::make_unique<ActivationGradOp>(kind);
}
