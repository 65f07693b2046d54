//===- TopKOps.cpp - TopK nodes on CUDA -------------------------------------===//
//
// TopK of f32/f16/bf16/i32/i64 along any axis, `largest` either way, always
// sorted (as the CPU). K is not read: the launch takes k from the output's
// shape, which the executor planned from K (TopKLaunch.h).
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "TopKLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/SlicePlan.h"
#include "mpc/Runtime/OpParams.h"
#include "../ops/ShapeHelpers.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

class TopKOp final : public CudaOp {
public:
  size_t axis = 0;
  int64_t outer = 1, dim = 1, inner = 1;
  bool largest = true;

  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &values = call.outputs[0];
    int64_t k = values.shape[axis];
    int64_t *indices =
        call.outputs.size() > 1 ? static_cast<int64_t *>(call.outputs[1].data) : nullptr;
    return launchText(launchTopK(int32_t(call.inputs[0].dtype), call.inputs[0].data,
                                 values.data, indices, outer, dim, inner, k, largest,
                                 ctx.geometry(k ? outer * inner : 0), s));
  }
};

} // namespace

CudaOpOrError cuda::prepareTopKOp(const Node &n, const CudaKernel &,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  auto params = paramsOf<AxisParams>(parseTopK(n));
  if (!params)
    return params.takeError();
  llvm::ArrayRef<int64_t> x = inputs[0].shape;
  int64_t axis = params->axis;
  if (!shapes::normalizeAxis(axis, int64_t(x.size())))
    return std::unique_ptr<CudaOp>();
  auto op = std::make_unique<TopKOp>();
  op->axis = size_t(axis);
  op->largest = params->flagA;
  SliceShape split = splitAxes(x.data(), x.size(), op->axis, op->axis + 1);
  op->outer = split.outer;
  op->dim = split.axisDim;
  op->inner = split.inner;
  return std::unique_ptr<CudaOp>(std::move(op));
}
