//===- ClipOps.cpp - Clip nodes on CUDA -------------------------------------===//
//
// Clip of f32/f16/bf16/i32/i64: the attribute bounds of Clip-6 (the
// registry's parse, as the CPU kernel reads them) or the infinities are
// kept at prepare; the min and max inputs of opset 11 and later are read by
// the kernel on the device (ClipKernels.cu), never on the host.
//
//===----------------------------------------------------------------------===//
#include "ClipLaunch.h"
#include "CudaOp.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpParams.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

class ClipOp final : public CudaOp {
public:
  double minDefault = 0, maxDefault = 0;

  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0];
    int64_t n = x.numElements();
    auto bound = [&](unsigned i) { return call.hasInput(i) ? call.inputs[i].data : nullptr; };
    return launchText(launchClip(int32_t(x.dtype), x.data, bound(1), bound(2), minDefault,
                                 maxDefault, call.outputs[0].data, n, ctx.geometry(n), s));
  }
};

} // namespace

CudaOpOrError cuda::prepareClipOp(const Node &n, const CudaKernel &,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  // A bound input holds one value (the CPU reads its first element).
  for (size_t i = 1; i < inputs.size() && i < 3; ++i) {
    int64_t count = 1;
    for (int64_t d : inputs[i].shape)
      count *= d;
    if (inputs[i].dtype != DType::Undefined && count < 1)
      return std::unique_ptr<CudaOp>();
  }
  auto op = std::make_unique<ClipOp>();
  ParseFn parse = elementwiseParser("Clip", nullptr);
  if (!parse)
    return std::unique_ptr<CudaOp>();
  auto params = paramsOf<ElementwiseParams>(parse(n));
  if (!params)
    return params.takeError();
  op->minDefault = double(params->alpha);
  op->maxDefault = double(params->beta);
  return std::unique_ptr<CudaOp>(std::move(op));
}
