//===- ConvOps.cpp - Conv, ConvTranspose and ConvGrad through cuDNN ----------===//
//
// The convolution family over cuDNN 9's convolution API (cudnn_cnn.h):
// NCHW/NCDHW tensor and filter descriptors from the shape rule's geometry
// (ConvPlan.h: planDnnConv), cross-correlation with fp32 compute, and the
// algorithms chosen once per node and shape signature in prepare from
// cuDNN's heuristics (the _v7 queries), keeping only deterministic ones that
// fit the workspace cap and whose math type dnnMathAccepted allows. launch
// only sets the handle's stream and queues the calls.
//
// - Conv: cudnnConvolutionForward, then the bias with cudnnAddTensor.
// - ConvTranspose: cudnnConvolutionBackwardData of the forward convolution
//   from ConvTranspose's output to its input (forwardOfTranspose), then the
//   bias.
// - ConvGrad (ai.mpc.training, com.microsoft): dX by backward data, dW by
//   backward filter, dB by launchChannelSum (ConvKernels.cu), each only when
//   the node has that output.
// - A Conv whose end pads cuDNN's symmetric pad cannot express (SAME_UPPER
//   with an odd total pad, say) runs on a zero-padded copy of X made in the
//   workspace (cudaMemsetAsync, then the data family's launchCopyPlan) with
//   pad 0 (ConvPlan.h: explicitlyPadded). A ConvTranspose or ConvGrad with
//   such pads runs over their symmetric part (ConvPlan.h: repadForDnn):
//   ConvTranspose's output is computed grown in the workspace, the bias
//   added there, and its crop copied out; ConvGrad copies X into a zeroed
//   grown buffer for dW and computes dX grown, then copies out its crop.
//
// What cuDNN cannot run (ConvPlan.h's refusals, no deterministic algorithm)
// is an error from prepare: the backend prints it as a note and the node
// runs on the CPU. A build without cuDNN refuses every node of the family
// the same way.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "mpc/IR/Graph.h"
#include "mpc/Support/Diagnostics.h"

#if MPC_HAVE_CUDNN
#include "../ops/NodeGeometry.h"
#include "ConvLaunch.h"
#include "DataLaunch.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "mpc/Runtime/Cuda/ConvPlan.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/OpParams.h"

#include <cudnn.h>

#include <vector>
#endif

using namespace mpc;
using namespace mpc::cuda;

#if !MPC_HAVE_CUDNN

CudaOpOrError cuda::prepareConvOp(const Node &n, const CudaKernel &,
                                  llvm::ArrayRef<TensorDesc>, const CudaContext &) {
  return inputError("{0}: this build of mpc has no cuDNN (runtime/cuda/README.md); the node "
                    "runs on the CPU",
                    describeNode(n));
}

void cuda::releaseDnn(CudaContext &) {}

#else

static_assert(int(DnnMath::Default) == CUDNN_DEFAULT_MATH &&
                  int(DnnMath::TensorOp) == CUDNN_TENSOR_OP_MATH &&
                  int(DnnMath::TensorOpAllowConversion) == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
                  int(DnnMath::Fma) == CUDNN_FMA_MATH,
              "DnnMath mirrors cudnnMathType_t");

namespace {

/// The most workspace one cuDNN algorithm of a node may ask for.
constexpr size_t kDnnWorkspaceCap = size_t(256) << 20;

cudnnDataType_t dnnTypeOf(DType t) {
  switch (t) {
  case DType::F16: return CUDNN_DATA_HALF;
  case DType::BF16: return CUDNN_DATA_BFLOAT16;
  default: return CUDNN_DATA_FLOAT;
  }
}

std::string dnnText(cudnnStatus_t s) { return cudnnGetErrorString(s); }

/// Fully packed strides of `dims`.
void packedStrides(const int *dims, int nb, int *strides) {
  strides[nb - 1] = 1;
  for (int d = nb - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dims[d + 1];
}

enum class ConvRole { Forward, Transpose, Grad };

/// One convolution direction with the descriptor its algorithm was chosen
/// under (each direction may settle on a different math type).
template <typename Algo> struct Pass {
  bool on = false;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Algo algo{};
  size_t workspace = 0;
};

class ConvOp final : public CudaOp {
public:
  ConvRole role = ConvRole::Forward;
  DType type = DType::F32;
  DnnConvPlan plan;
  /// The forward convolution's X, Y and W, and a [1, channels, 1, ...]
  /// bias against the tensor the bias is added to.
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  Pass<cudnnConvolutionFwdAlgo_t> forward;
  Pass<cudnnConvolutionBwdDataAlgo_t> backwardData;
  Pass<cudnnConvolutionBwdFilterAlgo_t> backwardFilter;
  bool hasBias = false, biasGrad = false;
  /// Asymmetric pads: X is copied by `padCopy` into the first `paddedBytes`
  /// of the workspace (zeroed first; Conv, and ConvGrad's dW); cuDNN's
  /// workspace after.
  bool padX = false;
  kernels::CopyPlan padCopy;
  size_t paddedBytes = 0;
  /// Asymmetric pads (ConvTranspose's output, ConvGrad's dX): backward data
  /// writes the grown tensor into `croppedBytes` of the workspace (after
  /// `paddedBytes`), `crop` copies the node's output out of it.
  bool cropOut = false;
  kernels::CopyPlan crop;
  size_t croppedBytes = 0;

  size_t workspaceBytes() const override {
    return paddedBytes + croppedBytes +
           std::max({forward.workspace, backwardData.workspace, backwardFilter.workspace});
  }
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override;

  ~ConvOp() override {
    for (cudnnTensorDescriptor_t t : {x, y, bias})
      if (t)
        cudnnDestroyTensorDescriptor(t);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    for (cudnnConvolutionDescriptor_t c : {forward.conv, backwardData.conv, backwardFilter.conv})
      if (c)
        cudnnDestroyConvolutionDescriptor(c);
  }
};

/// Prepare-time checks of cuDNN calls: an error naming the node and call.
struct Checker {
  const Node &n;
  llvm::Error operator()(cudnnStatus_t s, const char *what) const {
    if (s == CUDNN_STATUS_SUCCESS)
      return llvm::Error::success();
    return inputError("{0}: {1} failed: {2}", describeNode(n), what, dnnText(s));
  }
};

cudnnHandle_t handleOf(const CudaContext &ctx) { return static_cast<cudnnHandle_t>(ctx.dnn); }

/// Makes the pass's convolution descriptor (`makeConv`) and chooses its
/// algorithm: the first heuristic result that is deterministic, within the
/// workspace cap, of an accepted math type, and whose workspace size cuDNN
/// confirms under the descriptor it will run with. `query(conv, perf, count,
/// found)` fills the results; `size(conv, algo, bytes)` asks the workspace
/// of one.
template <typename Perf, typename Algo, typename MakeConv, typename Query, typename Size>
llvm::Error choose(const Node &n, const char *direction, DType t, bool tf32, MakeConv makeConv,
                   Query query, Size size, Pass<Algo> &pass) {
  if (auto e = makeConv(pass.conv))
    return e;
  cudnnConvolutionDescriptor_t conv = pass.conv;
  Checker check{n};
  std::vector<Perf> perf(32);
  int found = 0;
  if (auto e = check(query(conv, perf.data(), int(perf.size()), &found), direction))
    return e;
  DnnMath requested = dnnRequestedMath(t, tf32);
  for (int i = 0; i < found; ++i) {
    const Perf &p = perf[size_t(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC ||
        p.memory > kDnnWorkspaceCap || !dnnMathAccepted(t, tf32, DnnMath(int(p.mathType))))
      continue;
    // Strict fp32 stays under the FMA descriptor; otherwise the result's own
    // math type (Tensor Core where the algorithm uses it).
    cudnnMathType_t math = requested == DnnMath::Fma ? CUDNN_FMA_MATH : p.mathType;
    if (cudnnSetConvolutionMathType(conv, math) != CUDNN_STATUS_SUCCESS)
      continue;
    size_t bytes = 0;
    if (size(conv, p.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kDnnWorkspaceCap)
      continue;
    pass.on = true;
    pass.algo = p.algo;
    pass.workspace = bytes;
    return llvm::Error::success();
  }
  return inputError("{0}: cuDNN has no deterministic {1} algorithm for these shapes in {2}; "
                    "the node runs on the CPU",
                    describeNode(n), direction, dtypeName(t));
}

} // namespace

void cuda::releaseDnn(CudaContext &ctx) {
  if (ctx.dnn)
    cudnnDestroy(handleOf(ctx));
  ctx.dnn = nullptr;
}

CudaOpOrError cuda::prepareConvOp(const Node &n, const CudaKernel &row,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  auto op = std::make_unique<ConvOp>();
  ConvOp &c = *op;
  c.role = row.kind == CudaKernelKind::ConvTranspose ? ConvRole::Transpose
           : row.kind == CudaKernelKind::ConvGrad    ? ConvRole::Grad
                                                     : ConvRole::Forward;
  // The geometry the shape rule resolved (the CPU kernels run the same).
  auto parsed = windowParamsOf(n);
  if (!parsed)
    return parsed.takeError();
  const WindowParams &params = *parsed;
  auto geometry = [&]() -> llvm::Expected<ConvGeometry> {
    if (c.role == ConvRole::Grad)
      return shapes::convGradGeometry(n, params, inputs[0].shape, inputs[1].shape,
                                      inputs[2].shape);
    if (c.role == ConvRole::Forward)
      return shapes::convGeometry(n, params, inputs[0].shape, inputs[1].shape);
    auto d = shapes::deconvGeometry(n, params, inputs[0].shape, inputs[1].shape);
    if (!d)
      return d.takeError();
    return forwardOfTranspose(*d);
  };
  auto geo = geometry();
  if (!geo)
    return geo.takeError();
  auto wants = [&](unsigned i) { return i < n.numOutputs() && n.output(i) != nullptr; };
  auto plan = planDnnConv(*geo);
  if (!plan && c.role != ConvRole::Forward && dnnNeedsExplicitPad(*geo)) {
    // ConvTranspose, ConvGrad: cuDNN over the symmetric part of the pads.
    llvm::consumeError(plan.takeError());
    auto repad = repadForDnn(*geo);
    if (!repad)
      return inputError("{0}: {1}; the node runs on the CPU", describeNode(n),
                        llvm::toString(repad.takeError()));
    plan = planDnnConv(repad->dnn);
    std::vector<int64_t> node = {geo->batch, geo->inChannels}, cropAt;
    node.insert(node.end(), geo->inSpatial.begin(), geo->inSpatial.end());
    for (int64_t o : repad->offset)
      cropAt.push_back(-o);
    size_t grownBytes =
        (size_t(kernels::numElements(repad->grown)) * runtimeElementSize(inputs[0].dtype) + 255) /
        256 * 256;
    bool ok = true;
    if (c.role == ConvRole::Transpose || wants(0)) { // the output or dX, grown then cropped
      ok = kernels::padInteriorPlan(repad->grown, node, cropAt, c.crop);
      c.cropOut = true;
      c.croppedBytes = grownBytes;
    }
    if (c.role == ConvRole::Grad && wants(1)) { // dW reads X grown
      ok = ok && kernels::padInteriorPlan(node, repad->grown, repad->offset, c.padCopy);
      c.padX = true;
      c.paddedBytes = grownBytes;
    }
    if (!ok)
      return inputError("{0}: cannot plan the copies around cuDNN's symmetric pads; the node "
                        "runs on the CPU",
                        describeNode(n));
  }
  if (!plan && c.role == ConvRole::Forward && dnnNeedsExplicitPad(*geo)) {
    // End pads cuDNN's symmetric pad cannot express: pad X explicitly.
    llvm::consumeError(plan.takeError());
    ConvGeometry padded = explicitlyPadded(*geo);
    plan = planDnnConv(padded);
    std::vector<int64_t> xPadded = {geo->batch, geo->inChannels}, begin = {0, 0};
    xPadded.insert(xPadded.end(), padded.inSpatial.begin(), padded.inSpatial.end());
    begin.insert(begin.end(), geo->padsBegin.begin(), geo->padsBegin.end());
    if (plan && !kernels::padInteriorPlan(inputs[0].shape, xPadded, begin, c.padCopy))
      return inputError("{0}: cannot plan the padded copy of X; the node runs on the CPU",
                        describeNode(n));
    c.padX = true;
    c.paddedBytes = (size_t(kernels::numElements(xPadded)) * runtimeElementSize(inputs[0].dtype) +
                     255) / 256 * 256;
  }
  if (!plan)
    return inputError("{0}: {1}; the node runs on the CPU", describeNode(n),
                      llvm::toString(plan.takeError()));
  c.plan = *plan;
  c.type = inputs[0].dtype;
  if (c.role == ConvRole::Grad)
    c.biasGrad = wants(2);
  else
    c.hasBias = inputs.size() > 2 && inputs[2].dtype != DType::Undefined;

  if (!ctx.dnn) {
    cudnnHandle_t h = nullptr;
    if (cudnnStatus_t s = cudnnCreate(&h))
      return inputError("{0}: cudnnCreate failed: {1}", describeNode(n), dnnText(s));
    ctx.dnn = h;
  }
  cudnnHandle_t h = handleOf(ctx);
  Checker check{n};
  const DnnConvPlan &p = c.plan;
  cudnnDataType_t dt = dnnTypeOf(c.type);
  auto tensor = [&](cudnnTensorDescriptor_t &d, const int *dims) -> llvm::Error {
    if (auto e = check(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor"))
      return e;
    int strides[5];
    packedStrides(dims, p.nbDims, strides);
    return check(cudnnSetTensorNdDescriptor(d, dt, p.nbDims, dims, strides),
                 "cudnnSetTensorNdDescriptor");
  };
  if (auto e = tensor(c.x, p.x))
    return e;
  if (auto e = tensor(c.y, p.y))
    return e;
  if (c.hasBias) {
    // Conv adds the bias to Y (channels K), ConvTranspose to its output, the
    // forward convolution's X.
    int dims[5] = {1, c.role == ConvRole::Transpose ? p.x[1] : p.y[1], 1, 1, 1};
    if (auto e = tensor(c.bias, dims))
      return e;
  }
  if (auto e = check(cudnnCreateFilterDescriptor(&c.w), "cudnnCreateFilterDescriptor"))
    return e;
  if (auto e = check(cudnnSetFilterNdDescriptor(c.w, dt, CUDNN_TENSOR_NCHW, p.nbDims, p.w),
                     "cudnnSetFilterNdDescriptor"))
    return e;
  auto convDesc = [&](cudnnConvolutionDescriptor_t &d) -> llvm::Error {
    if (auto e = check(cudnnCreateConvolutionDescriptor(&d), "cudnnCreateConvolutionDescriptor"))
      return e;
    // fp32 compute for every storage type (fp16/bf16: PSEUDO_HALF/BF16).
    if (auto e = check(cudnnSetConvolutionNdDescriptor(d, p.spatialDims(), p.pads, p.strides,
                                                       p.dilations, CUDNN_CROSS_CORRELATION,
                                                       CUDNN_DATA_FLOAT),
                       "cudnnSetConvolutionNdDescriptor"))
      return e;
    if (auto e = check(cudnnSetConvolutionGroupCount(d, p.group), "cudnnSetConvolutionGroupCount"))
      return e;
    cudnnMathType_t math = dnnRequestedMath(c.type, ctx.tf32) == DnnMath::Fma
                               ? CUDNN_FMA_MATH
                               : CUDNN_TENSOR_OP_MATH;
    return check(cudnnSetConvolutionMathType(d, math), "cudnnSetConvolutionMathType");
  };

  bool tf32 = ctx.tf32;
  using Conv = cudnnConvolutionDescriptor_t;
  if (c.role == ConvRole::Forward)
    if (auto e = choose<cudnnConvolutionFwdAlgoPerf_t>(
            n, "forward", c.type, tf32, convDesc,
            [&](Conv d, cudnnConvolutionFwdAlgoPerf_t *r, int want, int *got) {
              return cudnnGetConvolutionForwardAlgorithm_v7(h, c.x, c.w, d, c.y, want, got, r);
            },
            [&](Conv d, cudnnConvolutionFwdAlgo_t a, size_t *bytes) {
              return cudnnGetConvolutionForwardWorkspaceSize(h, c.x, c.w, d, c.y, a, bytes);
            },
            c.forward))
      return e;
  if (c.role == ConvRole::Transpose || (c.role == ConvRole::Grad && wants(0)))
    if (auto e = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
            n, "backward-data", c.type, tf32, convDesc,
            [&](Conv d, cudnnConvolutionBwdDataAlgoPerf_t *r, int want, int *got) {
              return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, c.w, c.y, d, c.x, want, got,
                                                                 r);
            },
            [&](Conv d, cudnnConvolutionBwdDataAlgo_t a, size_t *bytes) {
              return cudnnGetConvolutionBackwardDataWorkspaceSize(h, c.w, c.y, d, c.x, a, bytes);
            },
            c.backwardData))
      return e;
  if (c.role == ConvRole::Grad && wants(1))
    if (auto e = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
            n, "backward-filter", c.type, tf32, convDesc,
            [&](Conv d, cudnnConvolutionBwdFilterAlgoPerf_t *r, int want, int *got) {
              return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, c.x, c.y, d, c.w, want,
                                                                   got, r);
            },
            [&](Conv d, cudnnConvolutionBwdFilterAlgo_t a, size_t *bytes) {
              return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, c.x, c.y, d, c.w, a,
                                                                    bytes);
            },
            c.backwardFilter))
      return e;
  return std::unique_ptr<CudaOp>(std::move(op));
}

std::string ConvOp::launch(const KernelCall &call, cudaStream_t s, const CudaContext &ctx) const {
  cudnnHandle_t h = handleOf(ctx);
  if (cudnnStatus_t st = cudnnSetStream(h, s))
    return "cudnnSetStream failed: " + dnnText(st);
  const float one = 1.0f, zero = 0.0f;
  void *ws = call.workspace;
  size_t wsBytes = call.workspace ? call.workspaceBytes : 0;
  auto failed = [](const char *what, cudnnStatus_t st) {
    return st == CUDNN_STATUS_SUCCESS ? std::string()
                                      : std::string(what) + " failed: " + dnnText(st);
  };
  auto addBias = [&](cudnnTensorDescriptor_t to, void *data) {
    if (!hasBias)
      return std::string();
    return failed("cudnnAddTensor (bias)",
                  cudnnAddTensor(h, &one, bias, call.inputs[2].data, &one, to, data));
  };
  unsigned elementBytes = unsigned(runtimeElementSize(type));
  // Asymmetric pads: X copied into zeros at the front of the workspace, and
  // the grown result (ConvTranspose's output, ConvGrad's dX) after it;
  // cuDNN's own workspace follows both.
  void *paddedX = nullptr, *grown = nullptr;
  if (padX || cropOut) {
    if (!ws || wsBytes < paddedBytes + croppedBytes)
      return "no workspace for the copies around cuDNN's pads";
    char *base = static_cast<char *>(ws);
    paddedX = padX ? base : nullptr;
    grown = cropOut ? base + paddedBytes : nullptr;
    ws = base + paddedBytes + croppedBytes;
    wsBytes -= paddedBytes + croppedBytes;
    if (!wsBytes)
      ws = nullptr;
  }
  const void *xIn = call.inputs[role == ConvRole::Grad ? 1 : 0].data;
  if (padX) { // zeros, then X inside them
    cudaError_t e = cudaMemsetAsync(paddedX, 0, paddedBytes, s);
    if (e == cudaSuccess)
      e = launchCopyPlan(elementBytes, xIn, paddedX, padCopy, ctx.geometry(padCopy.numElements),
                         s);
    if (e != cudaSuccess)
      return "padded copy of X: " + launchText(e);
    xIn = paddedX;
  }
  auto cropTo = [&](void *to) -> std::string {
    cudaError_t e =
        launchCopyPlan(elementBytes, grown, to, crop, ctx.geometry(crop.numElements), s);
    return e == cudaSuccess ? std::string() : "cropped copy: " + launchText(e);
  };
  switch (role) {
  case ConvRole::Forward: {
    void *out = call.outputs[0].data;
    std::string what = failed(
        "cudnnConvolutionForward",
        cudnnConvolutionForward(h, &one, x, xIn, w, call.inputs[1].data,
                                forward.conv, forward.algo, ws, wsBytes, &zero, y, out));
    return what.empty() ? addBias(y, out) : what;
  }
  case ConvRole::Transpose: {
    // ConvTranspose's X is the forward convolution's Y, its output the X
    // (grown, then cropped, where cuDNN cannot take its pads).
    void *out = cropOut ? grown : call.outputs[0].data;
    std::string what = failed(
        "cudnnConvolutionBackwardData",
        cudnnConvolutionBackwardData(h, &one, w, call.inputs[1].data, y, call.inputs[0].data,
                                     backwardData.conv, backwardData.algo, ws, wsBytes, &zero,
                                     x, out));
    if (what.empty())
      what = addBias(x, out);
    return what.empty() && cropOut ? cropTo(call.outputs[0].data) : what;
  }
  case ConvRole::Grad: {
    // Inputs dY, X, W; outputs dX, dW, dB (each optional).
    const void *dy = call.inputs[0].data;
    auto out = [&](unsigned i) { return i < call.outputs.size() ? call.outputs[i].data : nullptr; };
    if (backwardData.on && out(0)) {
      if (cudnnStatus_t st = cudnnConvolutionBackwardData(
              h, &one, w, call.inputs[2].data, y, dy, backwardData.conv, backwardData.algo, ws,
              wsBytes, &zero, x, cropOut ? grown : out(0)))
        return failed("cudnnConvolutionBackwardData", st);
      if (cropOut) {
        std::string what = cropTo(out(0));
        if (!what.empty())
          return what;
      }
    }
    if (backwardFilter.on && out(1))
      if (cudnnStatus_t st = cudnnConvolutionBackwardFilter(
              h, &one, x, xIn, y, dy, backwardFilter.conv, backwardFilter.algo, ws, wsBytes,
              &zero, w, out(1)))
        return failed("cudnnConvolutionBackwardFilter", st);
    if (biasGrad && out(2)) {
      int64_t inner = 1;
      for (int d = 2; d < plan.nbDims; ++d)
        inner *= plan.y[d];
      if (cudaError_t e = launchChannelSum(int32_t(type), dy, out(2), plan.y[0], plan.y[1],
                                           inner, s))
        return "bias gradient: " + launchText(e);
    }
    return std::string();
  }
  }
  return std::string();
}

#endif // MPC_HAVE_CUDNN
