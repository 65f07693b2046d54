//===- NormOps.cpp - Softmax and normalization nodes on CUDA ----------------===//
//
// The slice family: Softmax/LogSoftmax, SoftmaxGrad/LogSoftmaxGrad,
// LayerNormalization, RMSNormalization and LayerNormalizationGrad. prepare
// reads the node's attributes (the same parse functions as the CPU rows),
// splits the shape around the normalized axes and plans the slices
// (SlicePlan.h); launch queues the kernels of SoftmaxKernels.cu or
// NormKernels.cu. What the launchers do not take (an axis out of range, a
// scale that does not cover the normalized axes, statistics of a type other
// than f32/f64, empty rows whose statistics are still written) prepares no op,
// so the node runs on the CPU, which reports or computes it.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "NormLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpParams.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

/// axis in [-rank, rank) made non-negative; false when out of range.
bool normalizedAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

SliceShape split(const TensorDesc &d, size_t first, size_t last) {
  return splitAxes(d.shape.data(), d.shape.size(), first, last);
}

int64_t numElements(const TensorDesc &d) {
  int64_t n = 1;
  for (int64_t v : d.shape)
    n *= v;
  return n;
}

bool present(llvm::ArrayRef<TensorDesc> in, unsigned i) {
  return i < in.size() && in[i].dtype != DType::Undefined;
}

/// The element type of output i of the node, Undefined when absent.
DType outputType(const Node &n, unsigned i) {
  return i < n.numOutputs() && n.output(i) ? n.output(i)->type.elem : DType::Undefined;
}

/// A parameter type the norm launchers take for data of type `t`.
bool paramTypeOk(DType p, DType t) { return p == t || p == DType::F32; }

class SoftmaxOp final : public CudaOp {
public:
  SoftmaxOp(SlicePlan plan, bool log, bool grad) : plan(plan), log(log), grad(grad) {}
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    const TensorRef &a = call.inputs[0];
    int32_t type = int32_t(a.dtype);
    void *out = call.outputs[0].data;
    return launchText(grad ? launchSoftmaxGrad(type, log, a.data, call.inputs[1].data, out, plan, s)
                           : launchSoftmax(type, log, a.data, out, plan, s));
  }

private:
  SlicePlan plan;
  bool log, grad;
};

class NormOp final : public CudaOp {
public:
  NormOp(SlicePlan plan, NormArgs args) : plan(plan), args(args) {}
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    NormArgs a = args;
    a.x = call.inputs[0].data;
    a.scale = call.inputs[1].data;
    a.bias = call.inputs.size() > 2 ? call.inputs[2].data : nullptr;
    a.y = call.outputs[0].data;
    if (!a.rms) {
      for (unsigned i = 1; i < 3; ++i) {
        const TensorRef *o = i < call.outputs.size() ? &call.outputs[i] : nullptr;
        void *data = o ? o->data : nullptr;
        bool f64 = o && o->dtype == DType::F64;
        (i == 1 ? a.mean : a.invStdDev) = data;
        (i == 1 ? a.meanF64 : a.invStdDevF64) = f64;
      }
    }
    return launchText(launchNorm(a, plan, s));
  }

private:
  SlicePlan plan;
  NormArgs args;
};

class NormGradOp final : public CudaOp {
public:
  NormGradOp(SlicePlan rows, SlicePlan columns, NormGradArgs args)
      : rows(rows), columns(columns), args(args) {}
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &) const override {
    NormGradArgs a = args;
    a.dy = call.inputs[0].data;
    a.x = call.inputs[1].data;
    a.scale = call.inputs[2].data;
    a.mean = static_cast<const float *>(call.inputs[3].data);
    a.invStdDev = static_cast<const float *>(call.inputs[4].data);
    void **outs[3] = {&a.dx, &a.dScale, &a.dBias};
    for (unsigned i = 0; i < 3; ++i)
      *outs[i] = i < call.outputs.size() ? call.outputs[i].data : nullptr;
    return launchText(launchNormGrad(a, rows, columns, s));
  }

private:
  SlicePlan rows, columns;
  NormGradArgs args;
};

CudaOpOrError none() { return std::unique_ptr<CudaOp>(); }

CudaOpOrError prepareSoftmax(const Node &n, llvm::ArrayRef<TensorDesc> in,
                             const CudaContext &ctx, bool grad) {
  // SoftmaxGrad(dY, Y): the shape is Y's, which dY must match.
  if (grad && (in.size() < 2 || in[0] != in[1]))
    return none();
  const TensorDesc &x = in[grad ? 1 : 0];
  int64_t rank = int64_t(x.shape.size());
  int64_t axis;
  if (grad) {
    auto p = paramsOf<AxisParams>(parseAxisMinus1(n));
    if (!p)
      return p.takeError();
    axis = p->axis;
  } else {
    auto p = paramsOf<SoftmaxParams>(parseSoftmax(n));
    if (!p)
      return p.takeError();
    axis = p->axis;
  }
  if (!normalizedAxis(axis, std::max<int64_t>(rank, 1)))
    return none();
  // Before opset 13, Softmax and LogSoftmax flatten the input to 2-D at axis.
  bool coerced = !grad && n.opsetVersion() < 13;
  size_t last = coerced ? size_t(std::max<int64_t>(rank, axis + 1)) : size_t(axis + 1);
  SliceShape s = split(x, size_t(axis), std::min(last, x.shape.size()));
  bool log = n.opType == "LogSoftmax" || n.opType == "LogSoftmaxGrad";
  return std::make_unique<SoftmaxOp>(planSlices(s, ctx.smCount), log, grad);
}

CudaOpOrError prepareNorm(const Node &n, llvm::ArrayRef<TensorDesc> in, const CudaContext &ctx) {
  bool rms = n.opType == "RMSNormalization";
  if (in.size() < 2 || !present(in, 1))
    return none();
  const TensorDesc &x = in[0];
  int64_t axis;
  NormArgs a;
  a.rms = rms;
  if (rms) {
    auto p = paramsOf<NormParams>(parseNorm(n));
    if (!p)
      return p.takeError();
    axis = p->axis;
    a.epsilon = p->epsilon;
  } else {
    auto p = paramsOf<LayerNormParams>(parseLayerNorm(n));
    if (!p)
      return p.takeError();
    axis = p->axis;
    a.epsilon = p->epsilon;
  }
  if (!normalizedAxis(axis, int64_t(x.shape.size())))
    return none();
  SliceShape s = split(x, size_t(axis), x.shape.size());
  // Statistics of empty rows are still written (mean 0): the CPU's case.
  if (s.axisDim == 0 && s.outer != 0)
    return none();
  // The parameters cover the normalized axes element for element (the CPU
  // expands a smaller RMSNormalization scale; that stays on the CPU).
  a.type = int32_t(x.dtype);
  a.paramType = int32_t(in[1].dtype);
  if (!paramTypeOk(in[1].dtype, x.dtype) || (rms && in[1].dtype != x.dtype) ||
      numElements(in[1]) != s.axisDim)
    return none();
  if (present(in, 2) && (in[2].dtype != in[1].dtype || numElements(in[2]) != s.axisDim))
    return none();
  for (unsigned i = 1; !rms && i < 3; ++i) {
    DType t = outputType(n, i);
    if (t != DType::Undefined && t != DType::F32 && t != DType::F64)
      return none();
  }
  return std::make_unique<NormOp>(planSlices(s, ctx.smCount), a);
}

CudaOpOrError prepareNormGrad(const Node &n, llvm::ArrayRef<TensorDesc> in,
                              const CudaContext &ctx) {
  // LayerNormalizationGrad(dY, X, scale, mean, invStdDev) -> dX, dScale, dBias.
  if (in.size() < 5 || in[0] != in[1])
    return none();
  const TensorDesc &x = in[1];
  auto params = paramsOf<AxisParams>(parseAxisMinus1(n));
  if (!params)
    return params.takeError();
  int64_t axis = params->axis;
  if (!normalizedAxis(axis, int64_t(x.shape.size())))
    return none();
  SliceShape s = split(x, size_t(axis), x.shape.size());
  int64_t rows = s.outer, cols = s.axisDim;
  // No rows: dScale and dBias are zeros, which only the CPU writes.
  if (rows == 0 && cols != 0)
    return none();
  if (!paramTypeOk(in[2].dtype, x.dtype) || numElements(in[2]) != cols)
    return none();
  for (unsigned i = 3; i < 5; ++i)
    if (in[i].dtype != DType::F32 || numElements(in[i]) != rows)
      return none();
  for (unsigned i = 1; i < 3; ++i) {
    DType t = outputType(n, i);
    if (t != DType::Undefined && t != in[2].dtype)
      return none();
  }
  NormGradArgs a;
  a.type = int32_t(x.dtype);
  a.paramType = int32_t(in[2].dtype);
  SliceShape columns;
  columns.axisDim = rows;
  columns.inner = cols;
  return std::make_unique<NormGradOp>(planSlices(s, ctx.smCount),
                                      planSlices(columns, ctx.smCount), a);
}

} // namespace

CudaOpOrError cuda::prepareNormOp(const Node &n, const CudaKernel &row,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  if (inputs.empty())
    return none();
  switch (row.kind) {
  case CudaKernelKind::Softmax:
    return prepareSoftmax(n, inputs, ctx, false);
  case CudaKernelKind::SoftmaxGrad:
    return prepareSoftmax(n, inputs, ctx, true);
  case CudaKernelKind::Norm:
    return prepareNorm(n, inputs, ctx);
  case CudaKernelKind::NormGrad:
    return prepareNormGrad(n, inputs, ctx);
  default:
    return none();
  }
}
