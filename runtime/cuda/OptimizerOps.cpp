//===- OptimizerOps.cpp - Fused optimizer steps on CUDA ---------------------===//
//
// SGDStep, MomentumStep and AdamStep (ai.mpc.training; the layout of
// mpc/Ops/OptimizerStep.h) over f32 parameters: one kernel per node
// (OptimizerKernels.cu) reads grad, param and the states once and writes
// param and the states once (and the optional 16-bit weight copy), with the
// skip flag and the scalars read on the device. The row (CudaKernelTable.cpp) takes f32 operands and a bool
// or f32 skip flag; other shapes are the CPU's to report.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "OptimizerLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/OptimizerStep.h"

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

int64_t elementCount(const TensorDesc &d) {
  int64_t n = 1;
  for (int64_t v : d.shape)
    n *= v;
  return n;
}

} // namespace

CudaOpOrError cuda::prepareOptimizerStepOp(const Node &n, const CudaKernel &,
                                           llvm::ArrayRef<TensorDesc> inputs,
                                           const CudaContext &) {
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
