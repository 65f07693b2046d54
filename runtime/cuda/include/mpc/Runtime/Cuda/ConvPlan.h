//===- ConvPlan.h - Convolutions as cuDNN descriptor numbers ----*- C++ -*-===//
//
// The host-side half of the CUDA backend's convolution family, as pure
// functions of the geometry the shape rule resolved (ConvGeometry, from
// runtime/ops): the dimensions, pads, strides, dilations and group count
// that go into cuDNN's tensor, filter and convolution descriptors, which
// cuDNN math types a result may use, and why a configuration is refused
// (the node then runs on the CPU). Nothing here includes a CUDA header, so
// CI (no GPU) tests every decision; ConvOps.cpp only copies these numbers
// into cuDNN calls.
//
// cuDNN's descriptors take one pad per spatial axis, applied at both ends,
// and derive the output size from it: out = (in + 2 pad - span) / stride + 1
// with span = (kernel - 1) dilation + 1. ONNX pads each end separately. A
// window reads input position o * stride - padBegin + k * dilation either
// way, so the plan gives cuDNN padBegin and is valid exactly when cuDNN's
// output size with it equals the ONNX output size on every axis (the end
// padding then only holds zeros no window of cuDNN's reads differently);
// otherwise a forward convolution pads X explicitly and ConvTranspose and
// ConvGrad run over the symmetric part of the pads (below). A 1-D convolution is planned as 2-D with a
// leading spatial axis of 1.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CONVPLAN_H
#define MPC_RUNTIME_CUDA_CONVPLAN_H

#include "mpc/IR/DType.h"
#include "mpc/Runtime/OpGeometry.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// One convolution as cuDNN's NCHW / NCDHW descriptors see it.
struct DnnConvPlan {
  /// Tensor rank handed to cuDNN: 4 (1-D and 2-D) or 5 (3-D).
  int nbDims = 4;
  /// Spatial axes of the convolution descriptor: nbDims - 2.
  int spatialDims() const { return nbDims - 2; }
  /// The forward convolution's input X [N, C, spatial...], filter W
  /// [K, C / group, kernel...] and output Y [N, K, out...], fully packed.
  int x[5] = {}, w[5] = {}, y[5] = {};
  /// Per spatial axis: cuDNN's symmetric pad, stride and dilation.
  int pads[3] = {}, strides[3] = {}, dilations[3] = {};
  int group = 1;
};

/// cuDNN's output length of one spatial axis (what
/// cudnnGetConvolutionNdForwardOutputDim computes): (in + 2 pad - span) /
/// stride + 1 for span <= in + 2 pad, else 0.
int64_t dnnConvOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                          int64_t pad);

/// The cuDNN plan of the forward convolution `g`, or an error saying why
/// cuDNN cannot run it: more than 3 spatial axes, an empty tensor, a size
/// beyond cuDNN's int, or end pads cuDNN's symmetric pad cannot express.
llvm::Expected<DnnConvPlan> planDnnConv(const ConvGeometry &g);

// Asymmetric pads (the image family's addition): a forward convolution
// whose end pads cuDNN's symmetric pad cannot express runs on an explicitly
// padded copy of X (zeros around it, in the workspace) with pad 0, whose
// windows read exactly the positions the ONNX windows read.
/// True when planDnnConv refuses `g` only for its end pads: some axis's
/// cuDNN output size with the begin pad differs from the ONNX one.
bool dnnNeedsExplicitPad(const ConvGeometry &g);
/// `g` over X padded explicitly: every spatial length grown by its begin
/// and end pads, the pads 0 (the output is unchanged).
ConvGeometry explicitlyPadded(const ConvGeometry &g);

// ConvTranspose and ConvGrad with such pads run over the symmetric part of
// the pads instead: on each axis cuDNN gets p = min(begin, end), and the
// forward convolution's input is grown by the rest, begin - p before it and
// end - p after it, so that cuDNN's windows over the grown input read the
// positions the ONNX windows read. ConvTranspose computes its output grown
// (into the workspace) and copies out the crop at `offset`; ConvGrad copies
// X into a zeroed grown buffer at `offset` (for dW) and computes dX grown,
// then copies out its crop. The copies are the CPU's padInteriorPlan over
// `grown` and the node's shape (a negative begin crops).
struct DnnRepad {
  /// What cuDNN runs: `g` with the grown input and the symmetric pads.
  ConvGeometry dnn;
  /// The grown input [N, C, spatial...] and where the original input lies
  /// in it (0 for N and C).
  std::vector<int64_t> grown, offset;
};
/// The repadding of the forward convolution `g`, or why it cannot run on
/// cuDNN (a negative pad, or what planDnnConv refuses in the result).
llvm::Expected<DnnRepad> repadForDnn(const ConvGeometry &g);

/// ConvTranspose as cuDNN's backward-data pass of the forward convolution
/// from its output Y (channels outChannels, spatial `out`) to its input X
/// (inChannels, spatial `in`), with ConvTranspose's W [C_in, C_out / group,
/// kernel...] as that convolution's filter. Its geometry, for planDnnConv,
/// from the shape rule's DeconvGeometry (runtime/ops, which this header does
/// not include: any type with its fields).
template <typename Deconv> ConvGeometry forwardOfTranspose(const Deconv &d) {
  ConvGeometry g;
  g.batch = d.batch;
  g.inChannels = d.outChannels;
  g.outChannels = d.inChannels;
  g.group = d.group;
  for (size_t i = 0; i < d.in.size(); ++i) {
    g.inSpatial.push_back(d.out[i]);
    g.outSpatial.push_back(d.in[i]);
    g.kernel.push_back(d.kernel[i]);
    g.strides.push_back(d.strides[i]);
    g.dilations.push_back(d.dilations[i]);
    g.padsBegin.push_back(d.padsBegin[i]);
    // The end pad of the full output s (in - 1) + output_padding + span:
    // the rest of the padding around `out`.
    int64_t full = d.strides[i] * (d.in[i] - 1) + d.outPad[i] +
                   (d.kernel[i] - 1) * d.dilations[i] + 1;
    g.padsEnd.push_back(full - d.padsBegin[i] - d.out[i]);
  }
  return g;
}

/// cuDNN's math types (cudnnMathType_t's values; ConvOps.cpp checks them).
enum class DnnMath : int { Default = 0, TensorOp = 1, TensorOpAllowConversion = 2, Fma = 3 };

/// The math type set on the convolution descriptor before the algorithm
/// query: Tensor Core math for fp16/bf16 (fp32 compute) and for fp32 with
/// `tf32`; FMA (strict fp32, no TF32) for fp32 otherwise.
DnnMath dnnRequestedMath(DType t, bool tf32);
/// Whether an algorithm result that reports math type `m` may run: never
/// one that converts operands to a narrower type (ALLOW_CONVERSION); for
/// strict fp32 only FMA or default math, kept under the FMA descriptor.
bool dnnMathAccepted(DType t, bool tf32, DnnMath m);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_CONVPLAN_H
