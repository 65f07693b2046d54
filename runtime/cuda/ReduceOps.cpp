//===- ReduceOps.cpp - Reduce* and BiasGrad nodes on CUDA -------------------===//
//
// The reduction family. prepare finds the reduced axes with the rule the
// shape function and the CPU kernel use (shapes::reduceAxes: attribute or
// constant input axes, noop_with_empty_axes), or, for BiasGrad, the axes
// along which its shape was broadcast; the tensor is then seen as slices
// (reductionSlices, SlicePlan.h) and launch queues ReduceKernels.cu's
// kernel. Reduced axes split by a kept one are first gathered into one
// trailing run by a transpose into the node's workspace. Left to the CPU
// (prepare makes no op): axes known only when the graph runs, reductions over
// no element (the CPU writes the identities), and whatever the CPU reports as
// an error.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "DataLaunch.h"
#include "ReduceLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "../ops/ShapeHelpers.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mpc;
using namespace mpc::cuda;
using kernels::ReduceKind;

namespace {

/// The reduced axes gathered into one trailing run first: a transpose of x
/// into the workspace (kept axes first, reduced ones last, each in order).
struct Gather {
  kernels::CopyPlan plan;
  size_t bytes = 0; ///< the workspace: x's bytes
};

class ReduceOp final : public CudaOp {
public:
  ReduceOp(ReduceKind kind, SlicePlan plan, std::vector<int64_t> outShape, Gather gather = {},
           bool toF32 = false, ColumnSplit split = {})
      : kind(kind), plan(plan), outShape(std::move(outShape)), gather(std::move(gather)),
        toF32(toF32), split(split) {}
  size_t workspaceBytes() const override {
    return split.tiles ? size_t(split.workspaceFloats()) * sizeof(float) : gather.bytes;
  }
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &y = call.outputs[0];
    // BiasGrad's shape is a value of the graph: the one planned for must be
    // the one the executor gave the output.
    if (!outShape.empty() &&
        !std::equal(outShape.begin(), outShape.end(), y.shape.begin(), y.shape.end()))
      return "output shape " + formatShape(y.shape) + " differs from the prepared " +
             formatShape(outShape);
    const void *src = x.data;
    if (split.tiles) {
      if (!call.workspace || call.workspaceBytes < workspaceBytes())
        return "the split reduction has no workspace";
      if (toF32 && y.dtype != DType::F32)
        return "output type " + dtypeName(y.dtype).str() + " differs from the prepared f32";
      return launchText(launchSplitReduce(kind, int32_t(x.dtype), src, y.data, call.workspace,
                                          split, ctx.smCount, toF32, s));
    }
    if (gather.bytes) {
      if (!call.workspace || call.workspaceBytes < gather.bytes)
        return "the reduction's transpose has no workspace";
      if (std::string e = launchText(launchCopyPlan(
              unsigned(runtimeElementSize(x.dtype)), x.data, call.workspace, gather.plan,
              ctx.geometry(gather.plan.numElements), s));
          !e.empty())
        return e;
      src = call.workspace;
    }
    if (toF32) {
      if (y.dtype != DType::F32)
        return "output type " + dtypeName(y.dtype).str() + " differs from the prepared f32";
      return launchText(launchSumToF32(int32_t(x.dtype), src, static_cast<float *>(y.data),
                                       plan, s));
    }
    return launchText(launchReduce(kind, int32_t(x.dtype), src, y.data, plan, s));
  }

private:
  ReduceKind kind;
  SlicePlan plan;
  std::vector<int64_t> outShape; ///< BiasGrad's: checked at launch
  Gather gather;
  bool toF32; ///< BiasGrad's `to` = float32 over a 16-bit dY
  ColumnSplit split; ///< tiles 0: one launch over plan's slices
};

/// noop_with_empty_axes with no axes: the output is the input.
class CopyOp final : public CudaOp {
public:
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    const TensorRef &x = call.inputs[0];
    size_t bytes = size_t(x.numElements()) * runtimeElementSize(x.dtype);
    if (bytes == 0 || call.outputs[0].data == x.data)
      return "";
    cudaError_t e = cudaMemcpyAsync(call.outputs[0].data, x.data, bytes,
                                    cudaMemcpyDeviceToDevice, s);
    return e == cudaSuccess ? std::string() : "device copy failed: " + cudaText(e);
  }
};

CudaOpOrError none() { return std::unique_ptr<CudaOp>(); }

/// The op over `axes` of x, or none where the slices cannot cover it. Axes
/// split by a kept one (ReduceMean over [0, 2, 3] of NCHW, a convolution's
/// BiasGrad) are first transposed to the end, in the workspace.
CudaOpOrError reduceOver(ReduceKind kind, const TensorDesc &x, const std::vector<int64_t> &axes,
                         const CudaContext &ctx, std::vector<int64_t> outShape = {},
                         bool toF32 = false) {
  SliceShape s;
  Gather gather;
  if (!reductionSlices(x.shape.data(), x.shape.size(), axes.data(), axes.size(), s)) {
    size_t rank = x.shape.size();
    std::vector<bool> reduced(rank, false);
    for (int64_t a : axes)
      if (a >= 0 && size_t(a) < rank)
        reduced[size_t(a)] = true;
    std::vector<int64_t> perm, dims;
    for (bool pass : {false, true})
      for (size_t d = 0; d < rank; ++d)
        if (reduced[d] == pass)
          perm.push_back(int64_t(d));
    std::vector<int64_t> trailing;
    for (size_t k = 0; k < rank; ++k) {
      dims.push_back(x.shape[size_t(perm[k])]);
      if (reduced[size_t(perm[k])])
        trailing.push_back(int64_t(k));
    }
    unsigned bytes = unsigned(runtimeElementSize(x.dtype));
    if (!dataElementBytesOk(bytes) || !kernels::transposePlan(x.shape, perm, gather.plan) ||
        !reductionSlices(dims.data(), rank, trailing.data(), trailing.size(), s))
      return none();
    gather.bytes = size_t(gather.plan.numElements) * bytes;
  }
  if (s.axisDim == 0 && s.slices() != 0)
    return none();
  // A middle axis with few results: the two passes of planColumnSplit.
  ColumnSplit split;
  if (!gather.bytes && splitReducible(kind))
    split = planColumnSplit(s, ctx.smCount);
  return std::make_unique<ReduceOp>(kind, planSlices(s, ctx.smCount), std::move(outShape),
                                    std::move(gather), toF32, split);
}

CudaOpOrError prepareReduce(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> in, const CudaContext &ctx) {
  const TensorDesc &x = in[0];
  auto params = paramsOf<ReduceParams>(parseReduce(n));
  if (!params)
    return params.takeError();
  const ReduceParams &p = *params;
  bool hasAxes = in.size() > 1 && in[1].dtype != DType::Undefined;
  HostTensor axesValue;
  if (hasAxes) {
    std::vector<int64_t> v;
    if (!knownInputInts(n, in, 1, v))
      return none();
    axesValue = HostTensor(DType::I64, {int64_t(v.size())});
    std::copy(v.begin(), v.end(), axesValue.data<int64_t>());
  }
  auto axes = shapes::reduceAxes(n, p.axes, p.noopWithEmptyAxes, x.shape.size(), &axesValue,
                                 hasAxes);
  if (!axes) {
    llvm::consumeError(axes.takeError()); // the CPU reports it
    return none();
  }
  if (axes->empty() && p.noopWithEmptyAxes)
    return std::make_unique<CopyOp>();
  return reduceOver(ReduceKind(row.op), x, *axes, ctx);
}

/// BiasGrad(dY, shape): the sum of dY over the axes along which `shape`
/// broadcasts to dY's (right-aligned; missing leading axes and 1s against
/// larger dims). The shape is a constant input or the node's static output
/// type. With `to` = float32 over a 16-bit dY the sum is stored as float.
CudaOpOrError prepareBiasGrad(const Node &n, llvm::ArrayRef<TensorDesc> in,
                              const CudaContext &ctx) {
  const TensorDesc &dy = in[0];
  auto outType = shapes::biasGradOutputType(n, dy.dtype);
  if (!outType) {
    llvm::consumeError(outType.takeError()); // the CPU reports it
    return none();
  }
  bool toF32 = *outType != dy.dtype;
  std::vector<int64_t> b;
  if (!knownInputInts(n, in, 1, b)) {
    const Value *out = n.numOutputs() ? n.output(0) : nullptr;
    if (!out || !out->type.hasShape)
      return none();
    for (const Dim &d : out->type.dims) {
      if (!d.isKnown())
        return none();
      b.push_back(d.value);
    }
  }
  if (b.size() > dy.shape.size())
    return none();
  size_t lead = dy.shape.size() - b.size();
  std::vector<int64_t> axes;
  for (size_t d = 0; d < dy.shape.size(); ++d) {
    if (d < lead) {
      axes.push_back(int64_t(d));
      continue;
    }
    int64_t bd = b[d - lead];
    if (bd != dy.shape[d] && bd != 1)
      return none(); // the CPU reports the mismatch
    if (bd == 1 && dy.shape[d] != 1)
      axes.push_back(int64_t(d));
  }
  return reduceOver(ReduceKind::Sum, dy, axes, ctx, b.empty() ? std::vector<int64_t>{} : b,
                    toF32);
}

} // namespace

CudaOpOrError cuda::prepareColumnSum(const TensorDesc &x, bool toF32, const CudaContext &ctx) {
  if (x.shape.size() != 2)
    return none();
  return reduceOver(ReduceKind::Sum, x, {0}, ctx, {}, toF32);
}

CudaOpOrError cuda::prepareReduceOp(const Node &n, const CudaKernel &row,
                                    llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  if (inputs.empty())
    return none();
  switch (row.kind) {
  case CudaKernelKind::Reduce:
    return prepareReduce(n, row, inputs, ctx);
  case CudaKernelKind::BiasGrad:
    return prepareBiasGrad(n, inputs, ctx);
  default:
    return none();
  }
}
