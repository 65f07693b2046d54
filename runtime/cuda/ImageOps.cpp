//===- ImageOps.cpp - Resize, LRN and Pad (edge/reflect/wrap) on CUDA -------===//
//
// The image family. Resize's scales, sizes and (tf_crop_and_resize) roi
// must be graph constants: prepare plans the resize from their values with
// the shape rule's planResize, as the CPU kernel does while running, and the
// row does not take a node whose values are computed (it runs on the CPU).
// Pad's edge, reflect and wrap modes are the Pad row's (DataMove) nodes with
// those modes, routed here by prepareCudaOp; their pads are constants too.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "ImageLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/ImagePlan.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "../ops/NodeGeometry.h"

using namespace mpc;
using namespace mpc::cuda;
using namespace mpc::shapes;

namespace {

/// A node the launchers cannot take: it runs on the CPU.
CudaOpOrError refuse() { return std::unique_ptr<CudaOp>(); }

class PadMapOp final : public CudaOp {
public:
  PadMap map;
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &y = call.outputs[0];
    int64_t count = y.numElements();
    return launchText(launchPadMap(unsigned(runtimeElementSize(y.dtype)), call.inputs[0].data, y.data,
                                   map, count, ctx.geometry(count), s));
  }
};

class LrnOp final : public CudaOp {
public:
  LRNParams p;
  int64_t batch = 0, channels = 0, inner = 0;
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    int64_t count = batch * channels * inner;
    return launchText(launchLrn(int32_t(call.inputs[0].dtype), call.inputs[0].data,
                                call.outputs[0].data, batch, channels, inner, p.size, p.alpha,
                                p.beta, p.bias, ctx.geometry(count), s));
  }
};

class ResizeOp final : public CudaOp {
public:
  ResizePasses plan;
  std::vector<int64_t> outShape;
  double extrapolation = 0;

  /// The second buffer's offset: the first's bytes rounded up to 256.
  size_t secondBuffer() const {
    return (size_t(plan.bufferElements) * sizeof(float) + 255) / 256 * 256;
  }
  size_t workspaceBytes() const override {
    return plan.bufferElements ? 2 * secondBuffer() : 0;
  }
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0], &y = call.outputs[0];
    if (!std::equal(y.shape.begin(), y.shape.end(), outShape.begin(), outShape.end()))
      return "the output shape " + formatShape(y.shape) + " is not the planned " +
             formatShape(outShape);
    if (plan.passes.empty()) {
      if (y.data == x.data)
        return std::string();
      return launchText(cudaMemcpyAsync(y.data, x.data, y.numElements() * runtimeElementSize(y.dtype),
                                        cudaMemcpyDeviceToDevice, s));
    }
    char *work = static_cast<char *>(call.workspace);
    void *buffers[2] = {work, work ? work + secondBuffer() : nullptr};
    size_t count = plan.passes.size();
    for (size_t i = 0; i < count; ++i) {
      const ResizePass &pass = plan.passes[i];
      ResizePassIO io = resizePassIO(i, count);
      const void *in = io.in < 0 ? x.data : buffers[io.in];
      void *out = io.out < 0 ? y.data : buffers[io.out];
      cudaError_t e = launchResizePass(int32_t(x.dtype), io.in >= 0, io.out >= 0, in, out, pass,
                                       extrapolation, ctx.geometry(pass.outElements()), s);
      if (e != cudaSuccess)
        return launchText(e);
    }
    return std::string();
  }
};

/// Floating-point values of input `i` when it is a graph constant (an
/// absent input gives none).
bool constantDoubles(const Node &n, int i, std::vector<double> &out) {
  out.clear();
  if (i < 0 || unsigned(i) >= n.numInputs() || !n.input(unsigned(i)))
    return true;
  return constantInputDoubles(n, unsigned(i), out);
}

CudaOpOrError prepareResize(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  auto a = resizeParamsOf(n);
  if (!a) {
    llvm::consumeError(a.takeError()); // the CPU reports it
    return refuse();
  }
  int roi, scales, sizes;
  shapes::resizing::operandIndices(n, roi, scales, sizes);
  shapes::resizing::ResizeOperands ops;
  std::vector<double> sizeValues;
  bool crop = a->coord == shapes::resizing::Coord::TfCropAndResize;
  if ((crop && !constantDoubles(n, roi, ops.roi)) || !constantDoubles(n, scales, ops.scales) ||
      !constantDoubles(n, sizes, sizeValues))
    return refuse();
  for (double v : sizeValues)
    ops.sizes.push_back(int64_t(v));
  llvm::ArrayRef<int64_t> x = inputs[0].shape;
  auto p = shapes::resizing::planResize(n, *a, x, ops);
  if (!p) {
    llvm::consumeError(p.takeError());
    return refuse();
  }
  std::vector<kernels::ResizeAxis> axes;
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] == 0 && p->outShape[d] != 0)
      return refuse(); // nothing to interpolate from
    axes.push_back(shapes::resizing::resizeAxisOf(*a, *p, x, d));
  }
  auto op = std::make_unique<ResizeOp>();
  op->plan = planResizePasses(std::vector<int64_t>(x.begin(), x.end()), axes);
  op->outShape = p->outShape;
  op->extrapolation = a->extrapolation;
  if (kernels::numElements(p->outShape) == 0)
    op->plan.passes.clear(), op->plan.bufferElements = 0;
  return std::unique_ptr<CudaOp>(std::move(op));
}

CudaOpOrError prepareLrn(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  auto p = lrnParamsOf(n);
  if (!p) {
    llvm::consumeError(p.takeError());
    return refuse();
  }
  llvm::ArrayRef<int64_t> x = inputs[0].shape;
  if (x.size() < 2)
    return refuse();
  auto op = std::make_unique<LrnOp>();
  op->p = *p;
  op->batch = x[0];
  op->channels = x[1];
  op->inner = 1;
  for (size_t d = 2; d < x.size(); ++d)
    op->inner *= x[d];
  return std::unique_ptr<CudaOp>(std::move(op));
}

CudaOpOrError preparePadMap(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  auto mode = padMode(n, n.stringAttr("mode", "constant"));
  if (!mode) {
    llvm::consumeError(mode.takeError());
    return refuse();
  }
  std::vector<int64_t> pads, axes, begin, end;
  if (n.opsetVersion() < 11) {
    if (const Attribute *a = n.attr("pads"))
      pads = a->ints;
  } else if (!constantInputInts(n, 1, pads) ||
             (n.numInputs() > 3 && n.input(3) && !constantInputInts(n, 3, axes))) {
    return refuse();
  }
  if (auto e = padAmounts(n, inputs[0].shape, pads, axes, begin, end)) {
    llvm::consumeError(std::move(e)); // the shape function reports it
    return refuse();
  }
  auto op = std::make_unique<PadMapOp>();
  std::vector<int64_t> x(inputs[0].shape.begin(), inputs[0].shape.end());
  if (!planPadMap(x, begin, end, int32_t(*mode), op->map))
    return refuse();
  return std::unique_ptr<CudaOp>(std::move(op));
}

} // namespace

bool cuda::isPadMapNode(const Node &n) {
  return n.opType == "Pad" && n.stringAttr("mode", "constant") != "constant";
}

CudaOpOrError cuda::prepareImageOp(const Node &n, const CudaKernel &,
                                   llvm::ArrayRef<TensorDesc> inputs, const CudaContext &) {
  if (inputs.empty())
    return refuse();
  if (n.opType == "Resize")
    return prepareResize(n, inputs);
  if (n.opType == "LRN")
    return prepareLrn(n, inputs);
  if (isPadMapNode(n))
    return preparePadMap(n, inputs);
  return refuse();
}
