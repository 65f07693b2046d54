//===- MoveOps.cpp - Data-movement index nodes on CUDA ---------------------===//
//
// DepthToSpace, SpaceToDepth, GatherND, ScatterND, ScatterElements,
// ReverseSequence, EyeLike, Compress and NonZero over the plans of
// MoveBodies.h (the CPU kernels' own), made in prepare from the input shapes
// and the attributes the executor parsed once per node. Compress and NonZero
// have value-dependent output shapes: the executor runs such a graph in
// dynamic mode, reading their inputs on the host to shape the node before it
// runs (its documented sync point), so the output shape is known at launch
// and the kernels only number the kept elements on the device. What the
// launchers cannot take prepares no op and the node runs on the CPU: a
// NonZero of rank above kMaxNonZeroRank, a tuple longer than
// kMaxTupleLength, ScatterElements indices wider than the data off the axis
// or updates of another shape.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "MoveLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/OpParams.h"
#include "../ops/ShapeHelpers.h"

using namespace mpc;
using namespace mpc::cuda;

static_assert(kNoIndexOperand == KernelErrorRecord::kNoOperand,
              "GatherND/ScatterND record no operand, as the CPU");

namespace {

std::unique_ptr<CudaOp> none() { return std::unique_ptr<CudaOp>(); }

unsigned bytesOf(DType t) { return unsigned(runtimeElementSize(t)); }

IndexErrorRecord *recordOf(const KernelCall &call) {
  return reinterpret_cast<IndexErrorRecord *>(call.errors);
}

class BlockMoveOp final : public CudaOp {
public:
  BlockMoveOp(kernels::BlockMovePlan plan, bool toSpace) : plan(plan), toSpace(toSpace) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0];
    return launchText(launchBlockMove(bytesOf(x.dtype), toSpace, x.data, call.outputs[0].data,
                                      plan, ctx.geometry(plan.count), s));
  }

private:
  kernels::BlockMovePlan plan;
  bool toSpace;
};

/// DepthToSpace's space side is its output: block times the input's
/// height and width, its channels divided by block squared.
CudaOpOrError prepareBlockMove(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  bool toSpace = n.opType == "DepthToSpace";
  auto params = paramsOf<BlockParams>(toSpace ? parseDepthToSpace(n) : parseSpaceToDepth(n));
  if (!params)
    return params.takeError();
  std::vector<int64_t> space(in[0].shape.begin(), in[0].shape.end());
  int64_t b = params->blocksize;
  if (space.size() != 4 || b <= 0)
    return none();
  if (toSpace) {
    if (space[1] % (b * b))
      return none();
    space = {space[0], space[1] / (b * b), space[2] * b, space[3] * b};
  }
  kernels::BlockMovePlan plan;
  if (!kernels::makeBlockMovePlan(space.data(), 4, b, toSpace && params->crd, plan))
    return none();
  return std::make_unique<BlockMoveOp>(plan, toSpace);
}

class GatherNDOp final : public CudaOp {
public:
  explicit GatherNDOp(kernels::TupleIndexPlan plan) : plan(plan) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &idx = call.inputs[1];
    int64_t n = plan.tuples * plan.slice;
    return launchText(launchGatherND(bytesOf(x.dtype), int32_t(idx.dtype), x.data, idx.data,
                                     call.outputs[0].data, plan, recordOf(call), call.index,
                                     ctx.geometry(n), s));
  }

private:
  kernels::TupleIndexPlan plan;
};

/// Copies the data into the output (unless the executor runs the node in
/// place) before the updates are applied.
std::string copyData(const KernelCall &call, cudaStream_t s) {
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  size_t bytes = size_t(x.numElements()) * runtimeElementSize(x.dtype);
  if (bytes && x.data != y.data)
    if (cudaError_t e = cudaMemcpyAsync(y.data, x.data, bytes, cudaMemcpyDeviceToDevice, s))
      return "device copy failed: " + cudaText(e);
  return "";
}

class ScatterNDOp final : public CudaOp {
public:
  ScatterNDOp(kernels::TupleIndexPlan plan, kernels::ScatterCombine combine)
      : plan(plan), combine(combine) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &idx = call.inputs[1], &upd = call.inputs[2];
    std::string failed = copyData(call, s);
    if (!failed.empty() || plan.tuples == 0)
      return failed;
    return launchText(launchScatterND(int32_t(x.dtype), bytesOf(x.dtype), combine,
                                      int32_t(idx.dtype), idx.data, upd.data,
                                      call.outputs[0].data, plan, recordOf(call), call.index,
                                      ctx.geometry(std::max<int64_t>(plan.slice, 1)), s));
  }

private:
  kernels::TupleIndexPlan plan;
  kernels::ScatterCombine combine;
};

class ScatterElementsOp final : public CudaOp {
public:
  ScatterElementsOp(kernels::ElementIndexPlan plan, kernels::ScatterCombine combine)
      : plan(plan), combine(combine) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &idx = call.inputs[1], &upd = call.inputs[2];
    std::string failed = copyData(call, s);
    if (!failed.empty())
      return failed;
    int64_t lines = kernels::elementLines(plan).lines;
    return launchText(launchScatterElements(int32_t(x.dtype), bytesOf(x.dtype), combine,
                                            int32_t(idx.dtype), idx.data, upd.data,
                                            call.outputs[0].data, plan, recordOf(call),
                                            call.index, ctx.geometry(lines), s));
  }

private:
  kernels::ElementIndexPlan plan;
  kernels::ScatterCombine combine;
};

kernels::ScatterCombine combineOf(ScatterReduction r) {
  static_assert(int(ScatterReduction::Min) == int(kernels::ScatterCombine::Min),
                "one order of the reductions");
  return kernels::ScatterCombine(r);
}

CudaOpOrError prepareGatherND(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<IntParams>(parseGatherND(n));
  if (!params)
    return params.takeError();
  kernels::TupleIndexPlan plan;
  if (in.size() != 2 ||
      !kernels::makeTupleIndexPlan(in[0].shape.data(), int(in[0].shape.size()),
                                   in[1].shape.data(), int(in[1].shape.size()), params->value,
                                   plan))
    return none();
  return std::make_unique<GatherNDOp>(plan);
}

CudaOpOrError prepareScatter(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<ScatterParams>(parseScatter(n));
  if (!params)
    return params.takeError();
  if (in.size() != 3)
    return none();
  llvm::ArrayRef<int64_t> data = in[0].shape, ind = in[1].shape, upd = in[2].shape;
  kernels::ScatterCombine combine = combineOf(params->reduction);
  if (n.opType == "ScatterND") {
    kernels::TupleIndexPlan plan;
    if (!kernels::makeTupleIndexPlan(data.data(), int(data.size()), ind.data(), int(ind.size()),
                                     0, plan) ||
        shapes::numel(upd) != plan.tuples * plan.slice)
      return none();
    return std::make_unique<ScatterNDOp>(plan, combine);
  }
  // ScatterElements: indices and updates of one shape, no wider than the
  // data off the axis (so lines address disjoint data).
  int64_t axis = params->axis;
  int rank = int(data.size());
  kernels::ElementIndexPlan plan;
  if (ind != upd || int(ind.size()) != rank || !shapes::normalizeAxis(axis, rank))
    return none();
  for (int d = 0; d < rank; ++d)
    if (d != axis && ind[size_t(d)] > data[size_t(d)])
      return none();
  if (!kernels::makeElementIndexPlan(data.data(), ind.data(), rank, int(axis), plan))
    return none();
  return std::make_unique<ScatterElementsOp>(plan, combine);
}

class ReverseSequenceOp final : public CudaOp {
public:
  explicit ReverseSequenceOp(kernels::ReverseSequencePlan plan) : plan(plan) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &lens = call.inputs[1];
    int64_t n = x.numElements();
    return launchText(launchReverseSequence(bytesOf(x.dtype), int32_t(lens.dtype), x.data,
                                            lens.data, call.outputs[0].data, plan, n,
                                            ctx.geometry(n), s));
  }

private:
  kernels::ReverseSequencePlan plan;
};

CudaOpOrError prepareReverseSequence(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = reverseSequenceParamsOf(n);
  if (!params)
    return params.takeError();
  if (in.size() != 2 || in[0].shape.size() < 2)
    return none();
  kernels::ReverseSequencePlan plan;
  plan.d0 = in[0].shape[0];
  plan.d1 = in[0].shape[1];
  for (size_t i = 2; i < in[0].shape.size(); ++i)
    plan.inner *= in[0].shape[i];
  plan.batchFirst = params->batchAxis == 0;
  int64_t batches = plan.batchFirst ? plan.d0 : plan.d1;
  if (shapes::numel(in[1].shape) < batches)
    return none(); // the shape function reports it
  return std::make_unique<ReverseSequenceOp>(plan);
}

class EyeLikeOp final : public CudaOp {
public:
  EyeLikeOp(uint64_t one, int64_t k) : one(one), k(k) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &y = call.outputs[0];
    int64_t rows = y.shape[0], cols = y.shape[1];
    return launchText(launchEyeLike(bytesOf(y.dtype), one, y.data, rows, cols, k,
                                    ctx.geometry(rows * cols), s));
  }

private:
  uint64_t one;
  int64_t k;
};

CudaOpOrError prepareEyeLike(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<IntParams>(parseEyeLike(n));
  if (!params)
    return params.takeError();
  DType to = DType(n.intAttr("dtype", int64_t(in[0].dtype)));
  uint64_t one = 0;
  if (in[0].shape.size() != 2 || !oneBits(to, one))
    return none();
  return std::make_unique<EyeLikeOp>(one, params->value);
}

/// Compress: the kept count is the output's (the executor shaped the node
/// from the condition's values on the host before it runs).
class CompressOp final : public CudaOp {
public:
  CompressOp(kernels::AxisSplit split, int64_t considered, int axis)
      : split(split), considered(considered), axis(axis) {}
  size_t workspaceBytes() const override {
    return size_t(std::max<int64_t>(considered, 1)) * sizeof(int64_t);
  }
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &cond = call.inputs[1], &y = call.outputs[0];
    int64_t kept = axis < 0 ? y.numElements() : y.shape[size_t(axis)];
    if (kept > considered)
      return "output of " + std::to_string(kept) + " kept positions, prepared for at most " +
             std::to_string(considered);
    if (kept && !call.workspace)
      return "no workspace for the kept positions";
    return launchText(launchCompress(bytesOf(x.dtype), cond.as<const bool>(), considered,
                                     x.data, y.data, split, kept,
                                     static_cast<int64_t *>(call.workspace),
                                     ctx.geometry(split.outer * kept * split.inner), s));
  }

private:
  kernels::AxisSplit split;
  int64_t considered;
  int axis;
};

CudaOpOrError prepareCompress(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<AxisParams>(parseCompress(n));
  if (!params)
    return params.takeError();
  if (in.size() != 2)
    return none();
  llvm::ArrayRef<int64_t> shape = in[0].shape;
  kernels::AxisSplit split;
  split.dim = shapes::numel(shape);
  int64_t axis = -1;
  if (params->flagA) {
    axis = params->axis;
    if (!shapes::normalizeAxis(axis, int64_t(shape.size())))
      return none(); // the shape function reports it
    split = kernels::AxisSplit();
    for (int64_t i = 0; i < axis; ++i)
      split.outer *= shape[size_t(i)];
    split.dim = shape[size_t(axis)];
    for (size_t i = size_t(axis) + 1; i < shape.size(); ++i)
      split.inner *= shape[i];
  }
  int64_t considered = std::min<int64_t>(shapes::numel(in[1].shape), split.dim);
  return std::make_unique<CompressOp>(split, considered, int(axis));
}

class NonZeroOp final : public CudaOp {
public:
  explicit NonZeroOp(NonZeroShape shape) : shape(shape) {}
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    const TensorRef &x = call.inputs[0], &y = call.outputs[0];
    return launchText(launchNonZero(int32_t(x.dtype), x.data, x.numElements(), shape,
                                    y.as<int64_t>(), y.shape.size() == 2 ? y.shape[1] : 0, s));
  }

private:
  NonZeroShape shape;
};

CudaOpOrError prepareNonZero(llvm::ArrayRef<TensorDesc> in) {
  llvm::ArrayRef<int64_t> dims = in[0].shape;
  if (dims.size() > size_t(kMaxNonZeroRank))
    return none();
  NonZeroShape shape;
  shape.rank = int32_t(dims.size());
  for (size_t d = 0; d < dims.size(); ++d)
    shape.dims[d] = dims[d];
  return std::make_unique<NonZeroOp>(shape);
}

} // namespace

CudaOpOrError cuda::prepareMoveOp(const Node &n, const CudaKernel &row,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  if (inputs.empty())
    return none();
  switch (row.kind) {
  case CudaKernelKind::BlockMove:
    return prepareBlockMove(n, inputs);
  case CudaKernelKind::GatherND:
    return prepareGatherND(n, inputs);
  case CudaKernelKind::Scatter:
    return prepareScatter(n, inputs);
  case CudaKernelKind::ReverseSequence:
    return prepareReverseSequence(n, inputs);
  case CudaKernelKind::EyeLike:
    return prepareEyeLike(n, inputs);
  case CudaKernelKind::Compress:
    return prepareCompress(n, inputs);
  case CudaKernelKind::NonZero:
    return prepareNonZero(inputs);
  default:
    return none();
  }
}
