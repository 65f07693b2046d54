//===- OptimizerOps.cpp - Fused optimizer steps on CUDA ---------------------===//
//
// SGDStep, MomentumStep and AdamStep (ai.mpc.training; the layout of
// mpc/Ops/OptimizerStep.h) over f32 parameters: one kernel per node
// (OptimizerKernels.cu) reads grad, param and the states once and writes
// param and the states once (and the optional 16-bit weight copy), with the
// skip flag and the scalars read on the device. The row (CudaKernelTable.cpp) takes f32 operands and a bool
// or f32 skip flag; other shapes are the CPU's to report.
//
// MultiTensorSGDStep, MultiTensorMomentumStep and MultiTensorAdamStep: one
// launch over every group (OptimizerPlan.h; one per slice of at most
// kLaunchPointers / kStepSlots groups). Prepare plans the chunk table,
// allocates and uploads it; a launch passes the groups' device pointers by
// value (UnscalePlan.h: a captured graph keeps them, where a device table
// would be read from host memory that the training loop's alternating
// buffers had moved on from; the first GPU run failed so).
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "OptimizerLaunch.h"
#include "UnscaleLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/OptimizerStep.h"

#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

class OptimizerStepOp final : public CudaOp {
public:
  explicit OptimizerStepOp(const OptimizerStepLayout &l) : layout(l) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    OptimizerStepArgs a;
    a.kind = kernels::OptimizerStepKind(&layout - optimizerStepLayouts().data());
    auto in = [&](unsigned i) { return static_cast<const float *>(call.inputs[i].data); };
    auto out = [&](unsigned i) { return static_cast<float *>(call.outputs[i].data); };
    size_t states = layout.states.size();
    a.param = in(0);
    a.grad = in(1);
    a.paramOut = out(0);
    if (states > 0) {
      a.state1 = in(2);
      a.state1Out = out(1);
    }
    if (states > 1) {
      a.state2 = in(3);
      a.state2Out = out(2);
    }
    for (unsigned i = 0; i < layout.scalars.size(); ++i)
      a.scalars[i] = in(layout.firstScalar() + i);
    if (call.hasInput(layout.decayInput()))
      a.decay = in(layout.decayInput());
    if (call.hasInput(layout.skipInput())) {
      a.skip = call.inputs[layout.skipInput()].data;
      a.skipIsBool = call.inputs[layout.skipInput()].dtype == DType::Bool;
    }
    unsigned copy = layout.copyOutput();
    if (copy < call.outputs.size() && call.outputs[copy].data) {
      a.copyOut = call.outputs[copy].data;
      a.copyIsBf16 = call.outputs[copy].dtype == DType::BF16;
    }
    a.n = call.inputs[0].numElements();
    return launchText(launchOptimizerStep(a, ctx.geometry(a.n), s));
  }

private:
  const OptimizerStepLayout &layout;
};

class MultiTensorStepOp final : public CudaOp {
public:
  explicit MultiTensorStepOp(const OptimizerStepLayout &l) : layout(l) {}
  const OptimizerStepLayout &layout;
  UnscalePlan plan;
  std::vector<LaunchSlice> slices;
  UnscaleChunk *chunks = nullptr; ///< device copy of plan.chunks

  ~MultiTensorStepOp() override { cudaFree(chunks); }

  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    std::vector<void *> ins, outs;
    for (const auto &t : call.inputs)
      ins.push_back(t.data);
    for (const auto &t : call.outputs)
      outs.push_back(t.data);
    std::vector<void *> table =
        stepPointerTable(unsigned(layout.states.size()), layout.multiFirstGroup(), ins, outs);
    if (table.empty())
      return "the node's inputs and outputs are not whole parameter groups";
    MultiTensorStepArgs a;
    a.kind = kernels::OptimizerStepKind(&layout - optimizerStepLayouts().data());
    for (unsigned i = 0; i < layout.scalars.size(); ++i)
      a.scalars[i] = static_cast<const float *>(call.inputs[i].data);
    if (call.hasInput(layout.multiDecayInput()))
      a.decay = static_cast<const float *>(call.inputs[layout.multiDecayInput()].data);
    if (call.hasInput(layout.multiSkipInput())) {
      a.skip = call.inputs[layout.multiSkipInput()].data;
      a.skipIsBool = call.inputs[layout.multiSkipInput()].dtype == DType::Bool;
    }
    return launchText(
        launchMultiTensorStep(chunks, slices, table, a, plan.blocks, plan.threads, s));
  }
};

int64_t elementCount(const TensorDesc &d) {
  int64_t n = 1;
  for (int64_t v : d.shape)
    n *= v;
  return n;
}

} // namespace

static CudaOpOrError prepareMultiTensorStepOp(const Node &n, const OptimizerStepLayout &l,
                                              llvm::ArrayRef<TensorDesc> inputs,
                                              const CudaContext &ctx);

CudaOpOrError cuda::prepareOptimizerStepOp(const Node &n, const CudaKernel &,
                                           llvm::ArrayRef<TensorDesc> inputs,
                                           const CudaContext &ctx) {
  if (const OptimizerStepLayout *multi = findMultiTensorStep(n.opType, n.domain))
    return prepareMultiTensorStepOp(n, *multi, inputs, ctx);
  const OptimizerStepLayout *l = findOptimizerStep(n.opType, n.domain);
  if (!l || inputs.size() < l->minInputs() || inputs.size() > l->maxInputs())
    return std::unique_ptr<CudaOp>();
  // Param, grad and states of one shape; every scalar one element (the
  // shape function has said so already; a mismatch is the CPU's to report).
  for (unsigned i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype == DType::Undefined)
      continue;
    bool ok = i < l->firstScalar() ? inputs[i].shape == inputs[0].shape
                                   : elementCount(inputs[i]) == 1;
    if (!ok)
      return std::unique_ptr<CudaOp>();
  }
  return std::unique_ptr<CudaOp>(std::make_unique<OptimizerStepOp>(*l));
}

/// MultiTensor*Step: whole groups, each of one shape, every scalar one
/// element (anything else: the CPU's to report).
static CudaOpOrError prepareMultiTensorStepOp(const Node &n, const OptimizerStepLayout &l,
                                              llvm::ArrayRef<TensorDesc> inputs,
                                              const CudaContext &ctx) {
  size_t first = l.multiFirstGroup(), per = l.groupInputs();
  if (inputs.size() < first + per || (inputs.size() - first) % per != 0)
    return std::unique_ptr<CudaOp>();
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype == DType::Undefined) {
      if (i == l.multiDecayInput() || i == l.multiSkipInput()) // optional
        continue;
      return std::unique_ptr<CudaOp>();
    }
    if (i < first) {
      if (elementCount(inputs[i]) != 1)
        return std::unique_ptr<CudaOp>();
      continue;
    }
    const TensorDesc &param = inputs[first + (i - first) / per * per];
    if (inputs[i].shape != param.shape)
      return std::unique_ptr<CudaOp>();
    if ((i - first) % per == 0)
      sizes.push_back(elementCount(param));
  }
  auto op = std::make_unique<MultiTensorStepOp>(l);
  if (!planMultiTensorStep(sizes, ctx.smCount, op->plan))
    return std::unique_ptr<CudaOp>(); // the node then runs on the CPU
  op->slices = sliceLaunches(op->plan, int32_t(sizes.size()), kStepSlots);
  if (op->slices.empty() && !op->plan.chunks.empty())
    return std::unique_ptr<CudaOp>();
  if (llvm::Error err = allocateChunkTable(n, op->plan, op->chunks))
    return std::move(err);
  return std::unique_ptr<CudaOp>(std::move(op));
}
