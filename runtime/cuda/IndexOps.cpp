//===- IndexOps.cpp - Index, logic and shape nodes on CUDA ------------------===//
//
// The index/logic/shape family: And, Or, Xor (a broadcast plan, as the
// binary rows) and Not over bool; ArgMax/ArgMin (the axis split of the
// parsed axis, one thread per slice); Shape and Size (their values are
// known at prepare and written by a kernel from its parameters, so nothing
// is copied from the host when the node runs); Range (start and delta read
// on the device); ConstantOfShape (the parsed value, by value to a fill
// kernel); OneHot (the values read on the device); Trilu (k known before running); CumSum/CumProd (the axis
// input known before running; one thread per slice); GatherElements (the
// index plan of IndexBodies.h; a bad index goes to the error record). What
// the launchers cannot take prepares no op and the node runs on the CPU: an
// ArgMax over an empty axis (the CPU reports it), a Shape of rank above
// kMaxSmallInts, a k or axis known only when running, ranks above
// kMaxElementIndexRank.
//
//===----------------------------------------------------------------------===//
#include "CudaLaunch.h"
#include "CudaOp.h"
#include "IndexLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/IndexParams.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/OpParams.h"
#include "../ops/ShapeHelpers.h"
#include <cstring>

using namespace mpc;
using namespace mpc::cuda;

namespace {

std::unique_ptr<CudaOp> none() { return std::unique_ptr<CudaOp>(); }

class LogicalOp final : public CudaOp {
public:
  LogicalOp(LogicalOpId op, kernels::BroadcastPlan plan) : op(op), plan(plan) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    return launchText(launchLogical(op, call.inputs[0].as<const bool>(),
                                    call.inputs[1].as<const bool>(),
                                    call.outputs[0].as<bool>(), plan,
                                    ctx.geometry(plan.numElements), s));
  }

private:
  LogicalOpId op;
  kernels::BroadcastPlan plan;
};

class NotOp final : public CudaOp {
public:
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    int64_t n = call.inputs[0].numElements();
    return launchText(launchNot(call.inputs[0].as<const bool>(), call.outputs[0].as<bool>(), n,
                                ctx.geometry(n), s));
  }
};

class ArgReduceOp final : public CudaOp {
public:
  ArgReduceOp(kernels::AxisSplit split, bool isMax, bool last)
      : split(split), isMax(isMax), last(last) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0];
    return launchText(launchArgReduce(int32_t(x.dtype), x.data, call.outputs[0].as<int64_t>(),
                                      split, isMax, last,
                                      ctx.geometry(split.outer * split.inner), s));
  }

private:
  kernels::AxisSplit split;
  bool isMax, last;
};

class SmallIntsOp final : public CudaOp {
public:
  explicit SmallIntsOp(SmallInts values) : values(values) {}
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    if (call.outputs[0].numElements() != values.count)
      return "output of " + std::to_string(call.outputs[0].numElements()) +
             " elements, prepared for " + std::to_string(values.count);
    return launchText(launchSmallInts(values, call.outputs[0].as<int64_t>(), s));
  }

private:
  SmallInts values;
};

class RangeOp final : public CudaOp {
public:
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &y = call.outputs[0];
    int64_t n = y.numElements();
    return launchText(launchRange(int32_t(y.dtype), call.inputs[0].data, call.inputs[2].data,
                                  y.data, n, ctx.geometry(n), s));
  }
};

unsigned elementBytes(DType t) { return unsigned(runtimeElementSize(t)); }

class TriluOp final : public CudaOp {
public:
  TriluOp(int64_t rows, int64_t cols, int64_t k, bool upper)
      : rows(rows), cols(cols), k(k), upper(upper) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0];
    int64_t n = x.numElements();
    return launchText(launchTrilu(elementBytes(x.dtype), x.data, call.outputs[0].data, n, rows,
                                  cols, k, upper, ctx.geometry(n), s));
  }

private:
  int64_t rows, cols, k;
  bool upper;
};

class ScanOp final : public CudaOp {
public:
  ScanOp(bool sum, kernels::AxisSplit split, bool exclusive, bool reverse)
      : sum(sum), split(split), exclusive(exclusive), reverse(reverse) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0];
    return launchText(launchScan(sum, int32_t(x.dtype), x.data, call.outputs[0].data, split,
                                 exclusive, reverse, ctx.geometry(split.outer * split.inner),
                                 s));
  }

private:
  bool sum;
  kernels::AxisSplit split;
  bool exclusive, reverse;
};

class GatherElementsOp final : public CudaOp {
public:
  explicit GatherElementsOp(kernels::ElementIndexPlan plan) : plan(plan) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &idx = call.inputs[1];
    return launchText(launchGatherElements(
        elementBytes(x.dtype), int32_t(idx.dtype), x.data, idx.data, call.outputs[0].data, plan,
        reinterpret_cast<IndexErrorRecord *>(call.errors), call.index,
        ctx.geometry(plan.count), s));
  }

private:
  kernels::ElementIndexPlan plan;
};

/// `shape` split at `axis` (already in range).
kernels::AxisSplit splitAt(llvm::ArrayRef<int64_t> shape, int64_t axis) {
  kernels::AxisSplit split;
  for (int64_t i = 0; i < axis; ++i)
    split.outer *= shape[size_t(i)];
  split.dim = shape[size_t(axis)];
  for (size_t i = size_t(axis) + 1; i < shape.size(); ++i)
    split.inner *= shape[i];
  return split;
}

CudaOpOrError prepareArgReduce(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<AxisParams>(parseArgReduce(n));
  if (!params)
    return params.takeError();
  llvm::ArrayRef<int64_t> shape = in[0].shape;
  int64_t axis = params->axis;
  if (!shapes::normalizeAxis(axis, int64_t(shape.size())))
    return none();
  kernels::AxisSplit split = splitAt(shape, axis);
  if (split.dim == 0)
    return none();
  return std::make_unique<ArgReduceOp>(split, n.opType == "ArgMax", params->flagA);
}

CudaOpOrError prepareShapeOf(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  llvm::ArrayRef<int64_t> shape = in[0].shape;
  SmallInts values;
  if (n.opType == "Size") {
    values.count = 1;
    values.v[0] = shapes::numel(shape);
    return std::make_unique<SmallIntsOp>(values);
  }
  auto params = paramsOf<ShapeParams>(parseShape(n));
  if (!params)
    return params.takeError();
  int64_t start, end;
  shapeRange(*params, int64_t(shape.size()), start, end);
  if (end - start > kMaxSmallInts)
    return none();
  for (int64_t i = start; i < end; ++i)
    values.v[values.count++] = shape[size_t(i)];
  return std::make_unique<SmallIntsOp>(values);
}

class FillOp final : public CudaOp {
public:
  FillOp(unsigned bytes, uint64_t bits) : bytes(bytes), bits(bits) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &y = call.outputs[0];
    int64_t n = y.numElements();
    return launchText(launchFillBits(bytes, bits, y.data, n, ctx.geometry(n), s));
  }

private:
  unsigned bytes;
  uint64_t bits;
};

/// ConstantOfShape: the parsed fill value's bytes, passed to the kernel by
/// value (a 16-byte or string value runs on the CPU).
CudaOpOrError prepareFill(const Node &n) {
  auto params = paramsOf<FillParams>(parseConstantOfShape(n));
  if (!params)
    return params.takeError();
  unsigned bytes = unsigned(params->bytes.size());
  if (params->dtype == DType::String || !dataElementBytesOk(bytes))
    return none();
  uint64_t bits = 0;
  std::memcpy(&bits, params->bytes.data(), bytes);
  return std::make_unique<FillOp>(bytes, bits);
}

/// OneHot: the axis split of the output, made in launch from the output
/// shape the executor planned (depth is a value it read on the host).
class OneHotOp final : public CudaOp {
public:
  explicit OneHotOp(int64_t axis) : axis(axis) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &ind = call.inputs[0], &vals = call.inputs[2], &y = call.outputs[0];
    int64_t a = axis;
    if (!shapes::normalizeAxis(a, int64_t(y.shape.size())))
      return "axis out of range for " + formatShape(y.shape);
    kernels::AxisSplit split = splitAt(y.shape, a);
    return launchText(launchOneHot(int32_t(ind.dtype), elementBytes(vals.dtype), ind.data,
                                   vals.data, y.data, split,
                                   ctx.geometry(y.numElements()), s));
  }

private:
  int64_t axis;
};

CudaOpOrError prepareOneHot(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<AxisParams>(parseAxisMinus1(n));
  if (!params)
    return params.takeError();
  if (in.size() != 3 || !dataElementBytesOk(elementBytes(in[2].dtype)) ||
      in[2].dtype == DType::String)
    return none();
  return std::make_unique<OneHotOp>(params->axis);
}

/// Trilu: k from input 1 when it is known before running (else the node
/// runs on the CPU, which reads it).
CudaOpOrError prepareTrilu(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<AxisParams>(parseTrilu(n));
  if (!params)
    return params.takeError();
  llvm::ArrayRef<int64_t> shape = in[0].shape;
  int64_t k = 0;
  if (in.size() > 1 && in[1].dtype != DType::Undefined) {
    std::vector<int64_t> ints;
    if (!knownInputInts(n, in, 1, ints) || ints.size() != 1)
      return none();
    k = ints[0];
  }
  if (shape.size() < 2)
    return none();
  int64_t rows = shape[shape.size() - 2], cols = shape[shape.size() - 1];
  return std::make_unique<TriluOp>(std::max<int64_t>(rows, 1), std::max<int64_t>(cols, 1), k,
                                   params->flagA);
}

/// CumSum/CumProd: the axis input must be known before running.
CudaOpOrError prepareScan(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<AxisParams>(parseCumulative(n));
  if (!params)
    return params.takeError();
  std::vector<int64_t> ints;
  if (in.size() < 2 || !knownInputInts(n, in, 1, ints) || ints.size() != 1)
    return none();
  int64_t axis = ints[0];
  if (!shapes::normalizeAxis(axis, int64_t(in[0].shape.size())))
    return none(); // the CPU reports it
  return std::make_unique<ScanOp>(n.opType == "CumSum", splitAt(in[0].shape, axis),
                                  params->flagA, params->flagB);
}

CudaOpOrError prepareGatherElements(const Node &n, llvm::ArrayRef<TensorDesc> in) {
  auto params = paramsOf<AxisParams>(parseAxis0(n));
  if (!params)
    return params.takeError();
  if (in.size() != 2 || in[0].shape.size() != in[1].shape.size())
    return none();
  int64_t axis = params->axis;
  int rank = int(in[0].shape.size());
  kernels::ElementIndexPlan plan;
  if (!shapes::normalizeAxis(axis, rank) ||
      !kernels::makeElementIndexPlan(in[0].shape.data(), in[1].shape.data(), rank, int(axis),
                                     plan))
    return none();
  return std::make_unique<GatherElementsOp>(plan);
}

} // namespace

CudaOpOrError cuda::prepareIndexOp(const Node &n, const CudaKernel &row,
                                   llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  if (inputs.empty())
    return none();
  switch (row.kind) {
  case CudaKernelKind::Logical: {
    llvm::SmallVector<int64_t, 6> out;
    if (inputs.size() != 2 || !kernels::broadcastShapes(inputs[0].shape, inputs[1].shape, out))
      return none();
    return std::make_unique<LogicalOp>(LogicalOpId(row.op),
                                       kernels::makeBroadcastPlan(inputs[0].shape,
                                                                  inputs[1].shape));
  }
  case CudaKernelKind::LogicalNot:
    return std::make_unique<NotOp>();
  case CudaKernelKind::ArgReduce:
    return prepareArgReduce(n, inputs);
  case CudaKernelKind::ShapeOf:
    return prepareShapeOf(n, inputs);
  case CudaKernelKind::Range:
    if (inputs.size() != 3)
      return none();
    return std::make_unique<RangeOp>();
  case CudaKernelKind::Trilu:
    return prepareTrilu(n, inputs);
  case CudaKernelKind::Scan:
    return prepareScan(n, inputs);
  case CudaKernelKind::GatherElements:
    return prepareGatherElements(n, inputs);
  case CudaKernelKind::Fill:
    return prepareFill(n);
  case CudaKernelKind::OneHot:
    return prepareOneHot(n, inputs);
  default:
    return none();
  }
}
