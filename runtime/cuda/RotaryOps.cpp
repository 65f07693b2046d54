//===- RotaryOps.cpp - RotaryEmbedding nodes on CUDA ------------------------===//
//
// The layout is parsed once here (shapes::rotaryLayout, the CPU kernel's);
// launch passes it by value to RotaryKernels.cu with the operands' device
// pointers. Position ids are read by the kernel only.
//
//===----------------------------------------------------------------------===//
#include "../ops/NodeGeometry.h"
#include "CudaOp.h"
#include "RotaryLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpParams.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

class RotaryOp final : public CudaOp {
public:
  kernels::RotaryShape shape;
  int64_t maxPosition = 0;

  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    RotaryArgs a;
    a.shape = shape;
    a.type = int32_t(call.inputs[0].dtype);
    a.x = call.inputs[0].data;
    a.cosCache = call.inputs[1].data;
    a.sinCache = call.inputs[2].data;
    if (call.hasInput(3)) {
      a.positions = call.inputs[3].data;
      a.positionType = int32_t(call.inputs[3].dtype);
    }
    a.y = call.outputs[0].data;
    a.maxPosition = maxPosition;
    a.record = reinterpret_cast<IndexErrorRecord *>(call.errors);
    a.call = call.index;
    return launchText(launchRotary(a, ctx.geometry(rotaryThreads(shape)), s));
  }
};

} // namespace

CudaOpOrError cuda::prepareRotaryOp(const Node &n, const CudaKernel &,
                                    llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  auto params = paramsOf<RotaryParams>(parseRotaryEmbedding(n));
  if (!params)
    return params.takeError();
  if (inputs.size() < 3)
    return std::unique_ptr<CudaOp>();
  bool positions = inputs.size() > 3 && inputs[3].dtype != DType::Undefined;
  auto lay = shapes::rotaryLayout(n, *params, inputs[0].shape, inputs[1].shape, positions);
  if (!lay)
    return lay.takeError();
  auto op = std::make_unique<RotaryOp>();
  op->shape = shapes::rotaryShapeOf(*lay);
  op->maxPosition = positions ? inputs[1].shape[0] : 0;
  return std::unique_ptr<CudaOp>(std::move(op));
}
