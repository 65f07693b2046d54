//===- UnscaleOps.cpp - MultiTensorUnscale nodes on CUDA -------------------===//
//
// ai.mpc.training MultiTensorUnscale (docs/training.md, "Loss scaling") as
// one kernel launch over every gradient. Prepare plans the chunk table
// (UnscalePlan.h, a pure function of the shapes), allocates it and the
// table of the gradients' device pointers, and uploads the chunk table:
// nothing of it happens in a step. A launch uploads the pointer table only
// when the executor's buffers moved since the last launch (its arena keeps
// them from step to step, so in a training loop only the first launch
// does); the source is pageable host memory, which cudaMemcpyAsync stages
// before it returns, in stream order with the kernel that reads it.
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
  int32_t tensors = 0;
  UnscaleChunk *chunks = nullptr; ///< device copy of plan.chunks
  void **pointers = nullptr;      ///< device: the gradients, then the outputs
  mutable std::vector<void *> uploaded; ///< what `pointers` holds (empty: nothing yet)

  ~UnscaleOp() override {
    cudaFree(chunks);
    cudaFree(pointers);
  }

  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    std::vector<void *> now(2 * size_t(tensors));
    for (int32_t i = 0; i < tensors; ++i) {
      now[size_t(i)] = call.inputs[1 + size_t(i)].data;
      now[size_t(tensors + i)] = call.outputs[2 + size_t(i)].data;
    }
    if (now != uploaded) {
      if (cudaError_t e = cudaMemcpyAsync(pointers, now.data(), now.size() * sizeof(void *),
                                          cudaMemcpyHostToDevice, s))
        return launchText(e);
      uploaded = std::move(now);
    }
    return launchText(launchMultiTensorUnscale(
        chunks, int32_t(plan.chunks.size()), pointers, tensors,
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
  if (llvm::Error err = allocateChunkTables(n, op->plan, op->chunks, 2 * sizes.size(),
                                            op->pointers))
    return std::move(err);
  return std::unique_ptr<CudaOp>(std::move(op));
}

llvm::Error cuda::allocateChunkTables(const Node &n, const UnscalePlan &plan,
                                      UnscaleChunk *&chunks, size_t pointerCount,
                                      void **&pointers) {
  size_t table = std::max<size_t>(plan.chunks.size(), 1) * sizeof(UnscaleChunk);
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void **>(&chunks), table))
    return inputError("{0}: chunk table: {1}", describeNode(n), cudaGetErrorString(e));
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void **>(&pointers),
                                 std::max<size_t>(pointerCount, 1) * sizeof(void *)))
    return inputError("{0}: pointer table: {1}", describeNode(n), cudaGetErrorString(e));
  if (!plan.chunks.empty())
    if (cudaError_t e = cudaMemcpy(chunks, plan.chunks.data(),
                                   plan.chunks.size() * sizeof(UnscaleChunk),
                                   cudaMemcpyHostToDevice))
      return inputError("{0}: chunk upload: {1}", describeNode(n), cudaGetErrorString(e));
  return llvm::Error::success();
}
