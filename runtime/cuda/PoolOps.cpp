//===- PoolOps.cpp - Pooling and its gradients -------------------------------===//
//
// The pooling family: MaxPool (with its Indices output), AveragePool, LpPool,
// GlobalMaxPool, GlobalAveragePool, GlobalLpPool and the ai.mpc.training gradients
// MaxPoolGrad, AveragePoolGrad and GlobalAveragePoolGrad. prepare resolves
// the window geometry with the shape rule's helpers (what the CPU kernels
// run) into the shared window bodies' form (WindowBodies.h, up to 3 spatial
// axes; more run on the CPU with a note); launch queues one kernel
// (PoolKernels.cu).
//
//===----------------------------------------------------------------------===//
#include "../ops/NodeGeometry.h"
#include "CudaOp.h"
#include "PoolLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Pool.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Support/Diagnostics.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

class PoolOp final : public CudaOp {
public:
  CudaKernelKind kind = CudaKernelKind::Pool;
  DType type = DType::F32;
  bool max = false, countIncludePad = false, columnMajor = false;
  /// LpPool or GlobalLpPool, of order p.
  bool lp = false;
  float p = 2;
  kernels::WindowShape shape;
  /// Planes (N x C) and, for the global pools, their size.
  int64_t planes = 0, planeSize = 0;

  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override;
};

/// N x C planes of `x`, and the size of each (the global pools' rule).
void planesOf(llvm::ArrayRef<int64_t> x, int64_t &planes, int64_t &planeSize) {
  planes = x.size() >= 2 ? x[0] * x[1] : 1;
  int64_t n = 1;
  for (int64_t d : x)
    n *= d;
  planeSize = n / std::max<int64_t>(planes, 1);
}

} // namespace

CudaOpOrError cuda::preparePoolOp(const Node &n, const CudaKernel &row,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  auto op = std::make_unique<PoolOp>();
  PoolOp &p = *op;
  p.kind = row.kind;
  p.type = inputs[0].dtype;
  llvm::StringRef type = n.opType;
  p.max = type == "MaxPool" || type == "GlobalMaxPool" || type == "MaxPoolGrad";
  p.lp = type == "LpPool" || type == "GlobalLpPool";
  auto parsed = windowParamsOf(n);
  if (!parsed)
    return parsed.takeError();
  const WindowParams &params = *parsed;
  p.p = float(params.p);
  if (p.kind == CudaKernelKind::GlobalPool || p.kind == CudaKernelKind::GlobalPoolGrad) {
    // GlobalAveragePoolGrad's X (input 1) has the planes.
    planesOf(inputs[p.kind == CudaKernelKind::GlobalPool ? 0 : 1].shape, p.planes, p.planeSize);
    return std::unique_ptr<CudaOp>(std::move(op));
  }
  p.countIncludePad = params.countIncludePad;
  p.columnMajor = params.storageColumnMajor;
  auto geo = p.kind == CudaKernelKind::Pool
                 ? shapes::poolGeometry(n, params, inputs[0].shape)
                 : shapes::poolGradGeometry(n, params, inputs[0].shape, inputs[1].shape);
  if (!geo)
    return geo.takeError();
  if (!cpu::windowShapeOf(*geo, p.shape))
    return inputError("{0}: the CUDA pooling kernels take 1 to {1} spatial axes, not {2}; the "
                      "node runs on the CPU",
                      describeNode(n), kernels::kWindowAxes, geo->inSpatial.size());
  p.planes = geo->batch * geo->channels;
  return std::unique_ptr<CudaOp>(std::move(op));
}

std::string PoolOp::launch(const KernelCall &call, cudaStream_t s, const CudaContext &ctx) const {
  int32_t t = int32_t(type);
  const void *in0 = call.inputs[0].data;
  void *out = call.outputs[0].data;
  cudaError_t e = cudaSuccess;
  switch (kind) {
  case CudaKernelKind::Pool: {
    int64_t *indices =
        call.outputs.size() > 1 ? static_cast<int64_t *>(call.outputs[1].data) : nullptr;
    LaunchGeometry g = ctx.geometry(planes * kernels::windowOutSize(shape));
    e = lp ? launchWindowLpPool(t, shape, p, in0, out, planes, g, s)
           : launchWindowPool(t, max, shape, countIncludePad, columnMajor, in0, out, indices,
                              planes, g, s);
    break;
  }
  case CudaKernelKind::PoolGrad:
    // Inputs dY, X; output dX.
    e = launchWindowPoolGrad(t, max, shape, countIncludePad, in0, call.inputs[1].data, out,
                             planes, ctx.geometry(planes * kernels::windowInSize(shape)), s);
    break;
  case CudaKernelKind::GlobalPool:
    e = lp ? launchGlobalLpPool(t, p, in0, out, planes, planeSize, s)
           : launchGlobalPool(t, max, in0, out, planes, planeSize, s);
    break;
  case CudaKernelKind::GlobalPoolGrad:
    e = launchGlobalAveragePoolGrad(t, in0, out, planes, planeSize,
                                    ctx.geometry(planes * planeSize), s);
    break;
  default:
    return "not a pooling kernel";
  }
  return launchText(e);
}
