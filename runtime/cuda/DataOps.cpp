//===- DataOps.cpp - Data-movement nodes on CUDA ----------------------------===//
//
// The data-movement family (CudaKernelKind::DataMove): the view-like copies
// (Identity, Reshape, Flatten, Squeeze, Unsqueeze, inference Dropout) are
// one device-to-device cudaMemcpyAsync, nothing when the executor runs the
// node in place; Transpose, Slice, SliceGrad, Expand, Concat, Split, Tile and
// constant Pad are strided copies over the CopyPlans the CPU kernels walk
// (runtime/cpu/CopyPlans.cpp), launched by DataKernels.cu. Where and Gather
// walk SelectPlan and GatherPlan (CopyPlan.h) as the CPU's kernels do; a
// Gather index out of range goes to the run's error record on the device.
// Sum and Mean walk NaryPlan and add in the CPU's order.
//
// Where a plan depends only on input shapes and attributes it is made in
// prepare. Expand, Tile and Split take their output shapes from value inputs
// (the target shape, the repeats, the split sizes) that the executor knew on
// the host when it inferred shapes, so their plans are made at launch from
// the call's output shapes (host arithmetic on a few small vectors, no
// device work). Slice's, SliceGrad's and Pad's bounds are values too, but the
// shapes do not determine them: they must be known at prepare (initializers,
// Constant nodes' values, or values the static plan folded on the host and
// carries in the signature, TensorDesc::values); anything else makes prepare
// refuse the node, which then runs on the CPU.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "DataLaunch.h"
#include "IndexLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "../ops/NodeGeometry.h"
#include "../ops/ShapeHelpers.h"

#include <cstddef>

using namespace mpc;
using namespace mpc::cuda;
using kernels::CopyPlan;
using namespace mpc::shapes;

static_assert(sizeof(IndexErrorRecord) == sizeof(KernelErrorRecord) &&
                  offsetof(IndexErrorRecord, code) == offsetof(KernelErrorRecord, code) &&
                  offsetof(IndexErrorRecord, call) == offsetof(KernelErrorRecord, call) &&
                  offsetof(IndexErrorRecord, operand) == offsetof(KernelErrorRecord, operand) &&
                  offsetof(IndexErrorRecord, value) == offsetof(KernelErrorRecord, value) &&
                  int32_t(KernelErrorCode::IndexOutOfRange) == 1,
              "the device's view of the error record is KernelErrorRecord");

namespace {

std::unique_ptr<CudaOp> refuse() { return std::unique_ptr<CudaOp>(); }

unsigned elementBytes(DType t) { return unsigned(runtimeElementSize(t)); }

/// Queues a plan's copy (nothing for an empty one).
std::string copy(const CopyPlan &p, DType t, const void *src, void *dst, cudaStream_t s,
                 const CudaContext &ctx) {
  if (p.numElements == 0)
    return "";
  return launchText(
      launchCopyPlan(elementBytes(t), src, dst, p, ctx.geometry(p.numElements), s));
}

/// Identity, Reshape, Flatten, Squeeze, Unsqueeze, inference Dropout: the
/// bytes, unless the executor aliased the output to the input; Dropout's
/// mask all ones (true, or 1 of the data's type before opset 10).
class ByteCopyOp final : public CudaOp {
public:
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &y = call.outputs[0];
    size_t bytes = size_t(x.numElements()) * runtimeElementSize(x.dtype);
    if (bytes && x.data != y.data)
      if (cudaError_t e = cudaMemcpyAsync(y.data, x.data, bytes, cudaMemcpyDeviceToDevice, s))
        return "device copy failed: " + cudaText(e);
    if (call.outputs.size() < 2 || !call.outputs[1].data || !call.outputs[1].numElements())
      return "";
    const TensorRef &mask = call.outputs[1];
    int64_t n = mask.numElements();
    uint64_t one = 0;
    if (!oneBits(mask.dtype, one))
      return "Dropout's mask of type " + dtypeName(mask.dtype).str() + " has no device fill";
    return launchText(
        launchFillBits(elementBytes(mask.dtype), one, mask.data, n, ctx.geometry(n), s));
  }
};

/// One plan made at prepare, input 0 to output 0 (Transpose, Slice).
class PlannedCopyOp final : public CudaOp {
public:
  explicit PlannedCopyOp(const CopyPlan &p) : plan(p) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    return copy(plan, call.inputs[0].dtype, call.inputs[0].data, call.outputs[0].data, s, ctx);
  }

private:
  CopyPlan plan;
};

/// Concat: one plan per input, made at prepare.
class ConcatOp final : public CudaOp {
public:
  explicit ConcatOp(std::vector<CopyPlan> p) : plans(std::move(p)) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    for (size_t i = 0; i < plans.size(); ++i)
      if (std::string e = copy(plans[i], call.inputs[i].dtype, call.inputs[i].data,
                               call.outputs[0].data, s, ctx);
          !e.empty())
        return e;
    return "";
  }

private:
  std::vector<CopyPlan> plans;
};

/// Expand, Tile, Split: plans from the call's output shapes.
class ShapedCopyOp final : public CudaOp {
public:
  ShapedCopyOp(std::string op, int64_t axis) : op(std::move(op)), axis(axis) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0];
    CopyPlan p;
    if (op == "Split") {
      int64_t pos = 0;
      for (const TensorRef &y : call.outputs) {
        if (y.data) {
          if (!kernels::concatPlan(y.shape, x.shape, axis, pos, p))
            return "too many dimensions to split";
          kernels::swapCopySides(p);
          if (std::string e = copy(p, x.dtype, x.data, y.data, s, ctx); !e.empty())
            return e;
        }
        pos += y.shape[size_t(axis)];
      }
      return "";
    }
    const TensorRef &y = call.outputs[0];
    bool ok = op == "Tile" ? kernels::tilePlan(x.shape, y.shape, p)
                           : kernels::expandPlan(x.shape, y.shape, p);
    if (!ok)
      return "too many dimensions to copy";
    return copy(p, x.dtype, x.data, y.data, s, ctx);
  }

private:
  std::string op;
  int64_t axis;
};

/// SliceGrad: zeros, then dY scattered where the forward Slice read; the
/// plan from the output's shape (the forward input's) and the bounds read
/// at prepare.
class SliceGradOp final : public CudaOp {
public:
  SliceGradOp(const Node &n, std::vector<int64_t> v[4]) : node(n) {
    for (int i = 0; i < 4; ++i)
      bounds[i] = v[i];
  }
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &dy = call.inputs[0], &dx = call.outputs[0];
    auto p = sliceParams(node, dx.shape, bounds[0], bounds[1], bounds[2], bounds[3]);
    if (!p)
      return llvm::toString(p.takeError());
    CopyPlan plan;
    if (!kernels::slicePlan(dx.shape, p->starts, p->steps, p->outShape, plan))
      return "too many dimensions to slice";
    kernels::swapCopySides(plan);
    size_t bytes = size_t(dx.numElements()) * runtimeElementSize(dx.dtype);
    if (bytes)
      if (cudaError_t e = cudaMemsetAsync(dx.data, 0, bytes, s))
        return "device fill failed: " + cudaText(e);
    return copy(plan, dy.dtype, dy.data, dx.data, s, ctx);
  }

private:
  const Node &node;
  std::vector<int64_t> bounds[4];
};

/// Constant Pad: the value everywhere (input 2 read on the device, or
/// zero), then the input's part.
class PadOp final : public CudaOp {
public:
  PadOp(const CopyPlan &p, bool valueInput) : plan(p), valueInput(valueInput) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &y = call.outputs[0];
    int64_t n = y.numElements();
    const void *value = valueInput ? call.inputs[2].data : nullptr;
    if (n)
      if (std::string e = launchText(
              launchFill(elementBytes(x.dtype), value, y.data, n, ctx.geometry(n), s));
          !e.empty())
        return e;
    return copy(plan, x.dtype, x.data, y.data, s, ctx);
  }

private:
  CopyPlan plan;
  bool valueInput;
};

/// Where: the three-operand broadcast plan, made at prepare.
class WhereOp final : public CudaOp {
public:
  explicit WhereOp(const kernels::SelectPlan &p) : plan(p) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    if (plan.numElements == 0)
      return "";
    const TensorRef &x = call.inputs[1];
    return launchText(launchSelect(elementBytes(x.dtype), call.inputs[0].as<const bool>(),
                                   x.data, call.inputs[2].data, call.outputs[0].data, plan,
                                   ctx.geometry(plan.numElements), s));
  }

private:
  kernels::SelectPlan plan;
};

/// Gather: the [outer, dim, inner] view, made at prepare; indices checked
/// on the device.
class GatherOp final : public CudaOp {
public:
  explicit GatherOp(const kernels::GatherPlan &p) : plan(p) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    int64_t n = plan.numElements();
    if (n == 0)
      return "";
    const TensorRef &x = call.inputs[0], &idx = call.inputs[1];
    return launchText(launchGather(elementBytes(x.dtype), int32_t(idx.dtype), x.data, idx.data,
                                   call.outputs[0].data, plan,
                                   reinterpret_cast<IndexErrorRecord *>(call.errors), call.index,
                                   ctx.geometry(n), s));
  }

private:
  kernels::GatherPlan plan;
};

/// GatherGrad: zeros, then the deterministic scatter-add of DataLaunch.h;
/// the plan from the output's shape (the shape input's values) at launch,
/// the sort's scratch (sized by the index count) from the executor.
class GatherGradOp final : public CudaOp {
public:
  GatherGradOp(int64_t axis, int64_t count) : axis(axis), count(count) {}
  size_t workspaceBytes() const override { return gatherGradWorkspaceBytes(count); }
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &dy = call.inputs[0], &idx = call.inputs[2], &dx = call.outputs[0];
    int64_t a = axis;
    if (!normalizeAxis(a, int64_t(dx.shape.size())))
      return "axis out of range for " + formatShape(dx.shape);
    size_t bytes = size_t(dx.numElements()) * runtimeElementSize(dx.dtype);
    if (bytes)
      if (cudaError_t e = cudaMemsetAsync(dx.data, 0, bytes, s))
        return "device fill failed: " + cudaText(e);
    kernels::GatherPlan plan = kernels::gatherPlan(dx.shape, a, count);
    if (plan.numElements() == 0)
      return "";
    return launchText(launchGatherGrad(
        int32_t(dy.dtype), int32_t(idx.dtype), dy.data, idx.data, dx.data, plan,
        call.workspace, reinterpret_cast<IndexErrorRecord *>(call.errors), call.index,
        ctx.geometry(count), ctx.geometry(plan.numElements()), s));
  }

private:
  int64_t axis, count;
};

/// Sum, Mean: the n-operand broadcast plan, made at prepare.
/// Sum and Mean: one launch for up to kMaxNaryInputs operands; more are
/// runs of that many (kernels::naryRuns), each adding its operands to an
/// accumulator of the compute type in the workspace, the last writing Y:
/// the CPU's left-to-right sum, rounded once.
class NaryOp final : public CudaOp {
public:
  NaryOp(std::vector<kernels::NaryPlan> runs, size_t computeBytes, bool mean)
      : runs(std::move(runs)), computeBytes(computeBytes), mean(mean) {}
  size_t workspaceBytes() const override {
    return runs.size() > 1 ? size_t(runs[0].numElements) * computeBytes : 0;
  }
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    int64_t n = runs[0].numElements;
    if (n == 0)
      return "";
    if (runs.size() > 1 && (!call.workspace || call.workspaceBytes < workspaceBytes()))
      return "the accumulator of a Sum of " + std::to_string(call.inputs.size()) +
             " operands has no workspace";
    const TensorRef &y = call.outputs[0];
    size_t first = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
      bool last = r + 1 == runs.size();
      if (cudaError_t e = launchNary(int32_t(y.dtype), mean, int64_t(call.inputs.size()),
                                     naryInputsOf(call, runs[r], first),
                                     r == 0 ? nullptr : call.workspace,
                                     last ? nullptr : call.workspace, last ? y.data : nullptr,
                                     runs[r], ctx.geometry(n), s))
        return launchText(e);
      first += size_t(runs[r].inputs);
    }
    return "";
  }

private:
  std::vector<kernels::NaryPlan> runs;
  size_t computeBytes;
  bool mean;
};

/// The integer values of input `i` when it is absent (empty, true) or known
/// before the node runs (knownInputInts: an initializer, a Constant node's
/// value, or a value the static plan folded, such as a bound computed from
/// Shape); false when only the device has them.
bool boundInts(const Node &n, llvm::ArrayRef<TensorDesc> inputs, unsigned i,
               std::vector<int64_t> &out) {
  out.clear();
  if (i >= n.numInputs() || !n.input(i))
    return true;
  return knownInputInts(n, inputs, i, out);
}

/// Transpose's plan.
CudaOpOrError prepareTranspose(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  CopyPlan p;
  std::vector<int64_t> perm = shapes::transposePerm(n, inputs[0].shape.size());
  if (!kernels::transposePlan(inputs[0].shape, perm, p))
    return refuse();
  return std::make_unique<PlannedCopyOp>(p);
}

/// Slice (bounds at inputs 1..4) and SliceGrad (at 2..5), known at prepare.
CudaOpOrError prepareSlice(const Node &n, llvm::ArrayRef<TensorDesc> inputs, bool grad) {
  std::vector<int64_t> v[4];
  unsigned first = grad ? 2 : 1;
  for (unsigned i = 0; i < 4; ++i)
    if (!boundInts(n, inputs, first + i, v[i]))
      return refuse();
  if (grad)
    return std::make_unique<SliceGradOp>(n, v);
  auto p = shapes::sliceParams(n, inputs[0].shape, v[0], v[1], v[2], v[3]);
  if (!p) {
    llvm::consumeError(p.takeError()); // the shape function reports it
    return refuse();
  }
  CopyPlan plan;
  if (!kernels::slicePlan(inputs[0].shape, p->starts, p->steps, p->outShape, plan))
    return refuse();
  return std::make_unique<PlannedCopyOp>(plan);
}

CudaOpOrError prepareConcat(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  if (inputs.empty())
    return refuse();
  size_t rank = inputs[0].shape.size();
  int64_t axis = n.intAttr("axis", 0);
  if (!normalizeAxis(axis, rank))
    return refuse();
  std::vector<int64_t> whole(inputs[0].shape.begin(), inputs[0].shape.end());
  whole[size_t(axis)] = 0;
  for (const TensorDesc &d : inputs) {
    if (d.shape.size() != rank)
      return refuse();
    whole[size_t(axis)] += d.shape[size_t(axis)];
  }
  std::vector<CopyPlan> plans(inputs.size());
  int64_t pos = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!kernels::concatPlan(inputs[i].shape, whole, axis, pos, plans[i]))
      return refuse();
    pos += inputs[i].shape[size_t(axis)];
  }
  return std::make_unique<ConcatOp>(std::move(plans));
}

/// Constant Pad: the pads (attribute before opset 11, else a known input
/// with optional known axes) and the value (a zero attribute
/// before opset 11, else input 2 on the device).
CudaOpOrError preparePad(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  std::vector<int64_t> pads, axes, begin, end;
  bool valueInput = false;
  if (n.opsetVersion() < 11) {
    const Attribute *a = n.attr("pads");
    if (a)
      pads = a->ints;
    if (n.floatAttr("value", 0.0f) != 0.0f)
      return refuse(); // a non-zero attribute value: not carried yet
  } else {
    if (!boundInts(n, inputs, 1, pads) || !boundInts(n, inputs, 3, axes))
      return refuse();
    valueInput = inputs.size() > 2 && inputs[2].dtype != DType::Undefined &&
                 kernels::numElements(inputs[2].shape) > 0;
  }
  if (auto e = padAmounts(n, inputs[0].shape, pads, axes, begin, end)) {
    llvm::consumeError(std::move(e)); // the shape function reports it
    return refuse();
  }
  std::vector<int64_t> out(inputs[0].shape.begin(), inputs[0].shape.end());
  for (size_t k = 0; k < out.size(); ++k)
    out[k] += begin[k] + end[k];
  CopyPlan p;
  if (!kernels::padInteriorPlan(inputs[0].shape, out, begin, p))
    return refuse();
  return std::make_unique<PadOp>(p, valueInput);
}

CudaOpOrError prepareWhere(llvm::ArrayRef<TensorDesc> inputs) {
  if (inputs.size() != 3 || !dataElementBytesOk(elementBytes(inputs[1].dtype)))
    return refuse();
  llvm::SmallVector<int64_t, 6> cx, out;
  if (!kernels::broadcastShapes(inputs[0].shape, inputs[1].shape, cx) ||
      !kernels::broadcastShapes(cx, inputs[2].shape, out))
    return refuse();
  kernels::SelectPlan p;
  if (!kernels::selectPlan(inputs[0].shape, inputs[1].shape, inputs[2].shape, out, p))
    return refuse();
  return std::make_unique<WhereOp>(p);
}

CudaOpOrError prepareNary(llvm::ArrayRef<TensorDesc> inputs, bool mean) {
  std::vector<std::vector<int64_t>> shapes;
  llvm::SmallVector<int64_t, 6> out;
  for (const TensorDesc &d : inputs) {
    if (d.dtype != inputs[0].dtype)
      return refuse();
    llvm::SmallVector<int64_t, 6> next;
    if (!kernels::broadcastShapes(out, d.shape, next))
      return refuse();
    out = next;
    shapes.emplace_back(d.shape.begin(), d.shape.end());
  }
  std::vector<kernels::NaryPlan> runs;
  if (!kernels::naryRuns(shapes, out, runs))
    return refuse();
  // The accumulator's compute type: float for the 16-bit types.
  size_t computeBytes = inputs[0].dtype == DType::F64 ? 8 : 4;
  return std::make_unique<NaryOp>(std::move(runs), computeBytes, mean);
}

CudaOpOrError prepareGather(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  if (inputs.size() != 2 ||
      (inputs[1].dtype != DType::I32 && inputs[1].dtype != DType::I64))
    return refuse();
  int64_t axis = n.intAttr("axis", 0);
  if (!normalizeAxis(axis, int64_t(inputs[0].shape.size())))
    return refuse();
  return std::make_unique<GatherOp>(
      kernels::gatherPlan(inputs[0].shape, axis, kernels::numElements(inputs[1].shape)));
}

} // namespace

CudaOpOrError cuda::prepareDataOp(const Node &n, const CudaKernel &,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  llvm::StringRef op = n.opType;
  if (op == "Where") // input 0 is the bool condition
    return prepareWhere(inputs);
  if (inputs.empty() || !dataElementBytesOk(elementBytes(inputs[0].dtype)))
    return refuse();
  if (op == "Gather")
    return prepareGather(n, inputs);
  if (op == "Sum" || op == "Mean")
    return prepareNary(inputs, op == "Mean");
  if (op == "GatherGrad") {
    if (inputs.size() != 3 || (inputs[2].dtype != DType::I32 && inputs[2].dtype != DType::I64))
      return refuse();
    return std::make_unique<GatherGradOp>(n.intAttr("axis", 0),
                                          kernels::numElements(inputs[2].shape));
  }
  if (op == "Identity" || op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
      op == "Unsqueeze" || op == "Dropout")
    return std::make_unique<ByteCopyOp>();
  if (op == "Transpose")
    return prepareTranspose(n, inputs);
  if (op == "Slice" || op == "SliceGrad")
    return prepareSlice(n, inputs, op == "SliceGrad");
  if (op == "Concat")
    return prepareConcat(n, inputs);
  if (op == "Pad")
    return preparePad(n, inputs);
  if (op == "Expand" || op == "Tile")
    return std::make_unique<ShapedCopyOp>(op.str(), 0);
  if (op == "Split") {
    int64_t axis = n.intAttr("axis", 0);
    if (!normalizeAxis(axis, inputs[0].shape.size()))
      return refuse();
    return std::make_unique<ShapedCopyOp>("Split", axis);
  }
  return refuse();
}
