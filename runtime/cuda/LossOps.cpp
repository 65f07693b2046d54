//===- LossOps.cpp - Loss nodes on CUDA -------------------------------------===//
//
// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss (scores [N, C, d...],
// labels [N, d...] of i32/i64, optional [C] weights and log_prob output),
// ai.mpc.training SoftmaxCrossEntropyLossGrad and MSELossGrad, every
// reduction. The shape functions have checked the operands before any
// backend sees the node; what the launchers cannot take (planLoss: no
// class, more labels than 2^31 - 1) prepares no op and the node runs on the
// CPU. launch queues LossKernels.cu's kernels (LossPlan.h).
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "LossLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpParams.h"
#include "../ops/NodeGeometry.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

enum class LossOpKind : uint8_t { Classification, SoftmaxCrossEntropyGrad, MSEGrad };

class LossOp final : public CudaOp {
public:
  LossOpKind kind = LossOpKind::Classification;
  bool fromLogProb = false;
  LossReduce reduce = LossReduce::Mean;
  kernels::LossLabelRule rule;
  LossPlan plan;

  size_t workspaceBytes() const override { return plan.workspaceBytes; }

  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const auto &in = call.inputs;
    if (kind == LossOpKind::MSEGrad) {
      int64_t n = in[1].numElements();
      return launchText(launchMSELossGrad(int32_t(in[1].dtype), reduce, in[0].data, in[1].data,
                                          in[2].data, call.outputs[0].data, n, ctx.geometry(n),
                                          s));
    }
    // The labels' port, and the scores' whose dimension 1 is the class
    // count of a bad label's message.
    unsigned scores = kind == LossOpKind::Classification ? 0 : 1;
    LossErrorSink err;
    err.record = reinterpret_cast<IndexErrorRecord *>(call.errors);
    err.call = call.index;
    err.scoresOperand = int32_t(scores);
    int32_t type = int32_t(in[scores].dtype), labelType = int32_t(in[scores + 1].dtype);
    if (kind == LossOpKind::SoftmaxCrossEntropyGrad)
      return launchText(launchSoftmaxCrossEntropyLossGrad(
          type, labelType, reduce, rule, in[0].data, in[1].data, in[2].data,
          call.outputs[0].data, plan, ctx.geometry(plan.shape.numElements()), call.workspace,
          err, s));
    LossTensors t;
    t.scores = in[0].data;
    t.labels = in[1].data;
    t.weights = call.hasInput(2) ? in[2].data : nullptr;
    t.loss = call.outputs[0].data;
    t.logProb = call.outputs.size() > 1 ? call.outputs[1].data : nullptr;
    return launchText(launchClassificationLoss(type, labelType, fromLogProb, reduce, rule, t,
                                               plan, call.workspace, err, s));
  }
};

} // namespace

CudaOpOrError cuda::prepareLossOp(const Node &n, const CudaKernel &row,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  auto op = std::make_unique<LossOp>();
  auto params = paramsOf<LossParams>(parseLoss(n));
  if (!params)
    return params.takeError();
  auto red = shapes::lossReductionOf(n, params->reduction);
  if (!red)
    return red.takeError();
  op->reduce = *red == LossReduction::None  ? LossReduce::None
               : *red == LossReduction::Sum ? LossReduce::Sum
                                            : LossReduce::Mean;
  llvm::StringRef type = row.opType;
  if (type == "MSELossGrad") {
    op->kind = LossOpKind::MSEGrad;
    return std::unique_ptr<CudaOp>(std::move(op));
  }
  op->kind = type == "SoftmaxCrossEntropyLossGrad" ? LossOpKind::SoftmaxCrossEntropyGrad
                                                   : LossOpKind::Classification;
  op->fromLogProb = type == "NegativeLogLikelihoodLoss";
  unsigned scores = op->kind == LossOpKind::Classification ? 0 : 1;
  if (inputs.size() <= scores + 1)
    return std::unique_ptr<CudaOp>();
  const TensorDesc &s = inputs[scores];
  if (!planLoss(s.shape.data(), s.shape.size(),
                op->kind == LossOpKind::Classification ? LossLaunch::Loss : LossLaunch::LossGrad,
                op->reduce != LossReduce::None, ctx.smCount, op->plan))
    return std::unique_ptr<CudaOp>();
  op->rule.hasIgnoreIndex = params->hasIgnoreIndex;
  op->rule.ignoreIndex = params->ignoreIndex;
  op->rule.classes = s.shape[1];
  return std::unique_ptr<CudaOp>(std::move(op));
}
