//===- UnscaleOps.cpp - MultiTensorUnscale nodes on CUDA -------------------===//
//
// ai.mpc.training MultiTensorUnscale (docs/training.md, "Loss scaling") as
// one kernel launch over every gradient. Prepare plans the chunk table
// (UnscalePlan.h, a pure function of the shapes), allocates and uploads it,
// and slices the gradients into launches: nothing of it happens in a step.
// A launch passes the gradients' and outputs' device pointers by value
// (UnscalePlan.h says why: a captured graph keeps them).
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "UnscaleLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/CudaOps.h"
#include "mpc/Support/Diagnostics.h"

#include <algorithm>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

class UnscaleOp final : public CudaOp {
public:
  UnscalePlan plan;
  std::vector<LaunchSlice> slices;
  int32_t tensors = 0;
  UnscaleChunk *chunks = nullptr; ///< device copy of plan.chunks

  ~UnscaleOp() override { cudaFree(chunks); }

  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    std::vector<void *> pointers(kUnscaleSlots * size_t(tensors));
    for (size_t i = 0; i < size_t(tensors); ++i) {
      pointers[kUnscaleSlots * i] = call.inputs[1 + i].data;
      pointers[kUnscaleSlots * i + 1] = call.outputs[2 + i].data;
    }
    return launchText(launchMultiTensorUnscale(
        chunks, slices, pointers, tensors,
        static_cast<const float *>(call.inputs[0].data), static_cast<bool *>(call.outputs[0].data),
        static_cast<float *>(call.outputs[1].data), plan.blocks, plan.threads, s));
  }
};

} // namespace

CudaOpOrError cuda::prepareUnscaleOp(const Node &n, const CudaKernel &,
                                     llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  if (inputs.size() < 2 || inputs[0].dtype != DType::F32)
    return std::unique_ptr<CudaOp>();
  std::vector<int64_t> sizes;
  std::vector<int32_t> types;
  for (size_t i = 1; i < inputs.size(); ++i) {
    int64_t count = 1;
    for (int64_t d : inputs[i].shape)
      count *= d;
    sizes.push_back(count);
    types.push_back(int32_t(inputs[i].dtype));
  }
  auto op = std::make_unique<UnscaleOp>();
  if (!planUnscale(sizes, types, ctx.smCount, op->plan))
    return std::unique_ptr<CudaOp>(); // the node then runs on the CPU
  op->tensors = int32_t(sizes.size());
  op->slices = sliceLaunches(op->plan, op->tensors, kUnscaleSlots);
  if (op->slices.empty() && !op->plan.chunks.empty())
    return std::unique_ptr<CudaOp>();
  if (llvm::Error err = allocateChunkTable(n, op->plan, op->chunks))
    return std::move(err);
  return std::unique_ptr<CudaOp>(std::move(op));
}

llvm::Error cuda::allocateChunkTable(const Node &n, const UnscalePlan &plan,
                                     UnscaleChunk *&chunks) {
  size_t table = std::max<size_t>(plan.chunks.size(), 1) * sizeof(UnscaleChunk);
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void **>(&chunks), table))
    return inputError("{0}: chunk table: {1}", describeNode(n), cudaGetErrorString(e));
  if (!plan.chunks.empty())
    if (cudaError_t e = cudaMemcpy(chunks, plan.chunks.data(),
                                   plan.chunks.size() * sizeof(UnscaleChunk),
                                   cudaMemcpyHostToDevice))
      return inputError("{0}: chunk upload: {1}", describeNode(n), cudaGetErrorString(e));
  return llvm::Error::success();
}
