//===- OpParams.h - Parsed attributes of the ops that have them -*- C++ -*-===//
//
// Plain structs, one per op (or family), filled once per node by the
// registry row's parser when the executor prepares the node; every backend's
// kernel reads them from KernelCall::params instead of the attribute list.
// The ops whose kernels still read attributes at launch are listed in
// docs/op-registry.md (a test keeps that list exact).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPPARAMS_H
#define MPC_RUNTIME_OPPARAMS_H

#include "mpc/Ops/GemmBiasAct.h"
#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/OpRegistry.h"
#include <cassert>
#include <string>
#include <vector>

namespace mpc {

/// The parsers' error for an attribute value that breaks a rule the parser
/// can check without shapes, as one line:
/// "node 'c1' (Conv): attribute 'group' is 0; it must be at least 1".
/// `value` is the value as the message shows it (a number, [1, 2], 'text').
llvm::Error attributeError(const Node &n, llvm::StringRef attr, const llvm::Twine &value,
                           const llvm::Twine &rule);

/// Gemm: Y = alpha * op(A) * op(B) + beta * C.
struct GemmParams final : OpParams {
  bool transA = false, transB = false;
  float alpha = 1.0f, beta = 1.0f;
};
ParsedParams parseGemm(const Node &n);

/// Softmax and LogSoftmax: the axis (default 1 before opset 13, else -1).
struct SoftmaxParams final : OpParams {
  int64_t axis = -1;
};
ParsedParams parseSoftmax(const Node &n);

/// LayerNormalization: the first normalized axis and epsilon.
struct LayerNormParams final : OpParams {
  int64_t axis = -1;
  float epsilon = 1e-5f;
};
ParsedParams parseLayerNorm(const Node &n);

/// An integer-list attribute that may be absent. Absent and empty differ: a
/// window op given an empty `strides` has one of the wrong length.
struct IntList {
  bool present = false;
  std::vector<int64_t> values;
  /// The values, or `n` copies of `dflt` when the attribute is absent.
  std::vector<int64_t> orDefault(size_t n, int64_t dflt) const {
    return present ? values : std::vector<int64_t>(n, dflt);
  }
};

/// auto_pad of the window ops (an unknown string reads as NOTSET).
enum class AutoPadMode : uint8_t { NotSet, SameUpper, SameLower, Valid };

/// Conv, ConvTranspose, MaxPool, AveragePool, LpPool and GlobalLpPool and
/// the gradients (ConvGrad, MaxPoolGrad, AveragePoolGrad): the window attributes. The
/// geometry (resolved pads, output sizes) depends on shapes too, so kernels
/// derive it from these and the input shapes.
struct WindowParams final : OpParams {
  IntList kernelShape, strides, dilations, pads, outputPadding, outputShape;
  AutoPadMode autoPad = AutoPadMode::NotSet;
  int64_t group = 1;
  bool ceilMode = false;
  bool storageColumnMajor = false; ///< MaxPool storage_order = 1
  bool countIncludePad = false;    ///< AveragePool(Grad)
  double p = 2;                    ///< LpPool, GlobalLpPool: the norm's order
};
ParsedParams parseWindow(const Node &n);
/// The same struct, filled from a node (shape functions that parse per call),
/// or parseWindow's error.
llvm::Expected<WindowParams> windowParamsOf(const Node &n);

/// LSTM, GRU, RNN and their gradients.
struct RecurrentParams final : OpParams {
  enum class Direction : uint8_t { Forward, Reverse, Bidirectional };
  Direction direction = Direction::Forward;
  int64_t numDirections() const { return direction == Direction::Bidirectional ? 2 : 1; }
  bool reverse() const { return direction == Direction::Reverse; }
  bool batchMajor = false; ///< layout = 1
  bool hasClip = false;
  float clip = 0.0f;
  bool hasHiddenSize = false;
  int64_t hiddenSize = 0;
  bool linearBeforeReset = false; ///< GRU
  /// activations as written (empty: the op's defaults), activation_alpha
  /// and activation_beta.
  std::vector<std::string> activations;
  std::vector<float> activationAlpha, activationBeta;
};
ParsedParams parseRecurrent(const Node &n);

/// com.microsoft FusedMatMul: Y = alpha * op(A) * op(B), where transBatchX
/// moves X's first axis behind its batch axes and transX then swaps the two
/// matrix axes (NodeGeometry.h: fusedOperands).
struct FusedMatMulParams final : OpParams {
  float alpha = 1.0f;
  bool transA = false, transB = false, transBatchA = false, transBatchB = false;
};
ParsedParams parseFusedMatMul(const Node &n);
/// The same struct, filled from a node (the shape function, per call).
FusedMatMulParams fusedMatMulParamsOf(const Node &n);

/// ai.mpc.training GemmBiasAct (mpc/Ops/GemmBiasAct.h): its attributes,
/// checked (a known activation, a known `to`).
struct GemmBiasActParams final : OpParams {
  GemmBiasActAttrs attrs;
};
ParsedParams parseGemmBiasAct(const Node &n);

/// The Reduce* ops: axes from the attribute (opsets before axes became an
/// input), keepdims and noop_with_empty_axes.
struct ReduceParams final : OpParams {
  std::vector<int64_t> axes;
  bool keepdims = true;
  bool noopWithEmptyAxes = false;
};
ParsedParams parseReduce(const Node &n);

/// Transpose: perm (absent: reverse the axes).
struct TransposeParams final : OpParams {
  IntList perm;
};
ParsedParams parseTranspose(const Node &n);

/// An axis and up to two flags: Concat, Split, Gather, GatherElements,
/// GatherGrad (axis, default 0), the softmax and LayerNorm gradients (axis,
/// default -1), ArgMax/ArgMin (axis; flagA select_last_index), TopK (axis,
/// default -1; flagA largest), CumSum/CumProd (flagA exclusive, flagB
/// reverse) and Trilu (flagA upper).
struct AxisParams final : OpParams {
  int64_t axis = 0;
  bool flagA = false, flagB = false;
};
ParsedParams parseAxis0(const Node &n);
ParsedParams parseAxisMinus1(const Node &n);
ParsedParams parseArgReduce(const Node &n);
ParsedParams parseTopK(const Node &n);
ParsedParams parseCumulative(const Node &n);
ParsedParams parseTrilu(const Node &n);

/// DepthToSpace and SpaceToDepth: the block size (its range is the shape
/// function's check) and DepthToSpace's mode (CRD rather than the default DCR).
struct BlockParams final : OpParams {
  int64_t blocksize = 0;
  bool crd = false;
};
ParsedParams parseDepthToSpace(const Node &n);
ParsedParams parseSpaceToDepth(const Node &n);

/// How ScatterElements and ScatterND combine an update with the data.
enum class ScatterReduction : uint8_t { None, Add, Mul, Max, Min };
/// ScatterElements (axis, default 0) and ScatterND (no axis): the reduction.
struct ScatterParams final : OpParams {
  int64_t axis = 0;
  ScatterReduction reduction = ScatterReduction::None;
};
ParsedParams parseScatter(const Node &n);

/// One integer attribute, default 0: EyeLike's k, GatherND's batch_dims.
struct IntParams final : OpParams {
  int64_t value = 0;
};
ParsedParams parseEyeLike(const Node &n);
/// QuantizeLinear and DequantizeLinear: the axis of a per-axis or blocked
/// scale (default 1) and the block size (0: not blocked).
struct QuantParams final : OpParams {
  int64_t axis = 1, blockSize = 0;
};
ParsedParams parseQuantAxis(const Node &n);
/// NonMaxSuppression's center_point_box (IntParams).
ParsedParams parseNonMaxSuppression(const Node &n);
ParsedParams parseGatherND(const Node &n);

/// Pad: the mode, and before opset 11 the pads (or paddings) and value
/// attributes (later opsets take them as inputs).
struct PadParams final : OpParams {
  std::string mode = "constant";
  std::vector<int64_t> pads;
  float value = 0.0f;
};
ParsedParams parsePad(const Node &n);

/// InstanceNormalization (epsilon), GroupNormalization (num_groups,
/// epsilon), RMSNormalization (axis, epsilon) and LpNormalization (axis, p).
struct NormParams final : OpParams {
  int64_t axis = -1;
  float epsilon = 1e-5f;
  int64_t numGroups = 1;
  int64_t p = 2;
};
ParsedParams parseNorm(const Node &n);

/// BatchNormalization and BatchNormalizationGrad.
struct BatchNormParams final : OpParams {
  float epsilon = 1e-5f;
  float momentum = 0.9f;
  /// training_mode = 1 at opset 14 or later: batch statistics.
  bool training = false;
};
ParsedParams parseBatchNorm(const Node &n);

/// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and the gradient.
struct LossParams final : OpParams {
  std::string reduction = "mean";
  bool hasIgnoreIndex = false;
  int64_t ignoreIndex = 0;
};
ParsedParams parseLoss(const Node &n);

/// Compress: the axis, when given (flagA); without one the input is
/// flattened.
ParsedParams parseCompress(const Node &n);

/// ReverseSequence: batch_axis and time_axis, 0 and 1 in either order.
struct ReverseSequenceParams final : OpParams {
  int64_t batchAxis = 1, timeAxis = 0;
};
ParsedParams parseReverseSequence(const Node &n);
llvm::Expected<ReverseSequenceParams> reverseSequenceParamsOf(const Node &n);

/// LRN: the channel window `size` (required, at least 1) and the
/// normalization's alpha, beta and bias.
struct LRNParams final : OpParams {
  int64_t size = 1;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
};
ParsedParams parseLRN(const Node &n);
llvm::Expected<LRNParams> lrnParamsOf(const Node &n);

/// RoiAlign: max or average pooling, the half-pixel offset (opset 16's
/// default; opset 10 and output_half_pixel have none and stretch a region
/// to at least one pixel), the output size, the samples per bin (0: as many
/// as the region covers) and the scale from ROI to X coordinates.
struct RoiAlignParams final : OpParams {
  bool max = false, halfPixel = true;
  int64_t outH = 1, outW = 1, samplingRatio = 0;
  float spatialScale = 1.0f;
};
ParsedParams parseRoiAlign(const Node &n);
llvm::Expected<RoiAlignParams> roiAlignParamsOf(const Node &n);

/// Einsum: the equation, spaces removed (required).
struct EinsumParams final : OpParams {
  std::string equation;
};
ParsedParams parseEinsum(const Node &n);
EinsumParams einsumParamsOf(const Node &n);

/// Attention (opset 23): the head counts of 3-D inputs, the scale (absent:
/// 1 / sqrt(head size)), the soft cap, the causal mask and which stage of
/// the scores the optional output 3 holds (qk_matmul_output_mode 0..3).
struct AttentionParams final : OpParams {
  int64_t qNumHeads = 0, kvNumHeads = 0;
  bool isCausal = false;
  bool hasScale = false;
  float scale = 1.0f;
  float softcap = 0.0f;
  int64_t qkOutputMode = 0;
};
ParsedParams parseAttention(const Node &n);
llvm::Expected<AttentionParams> attentionParamsOf(const Node &n);

/// RotaryEmbedding (opset 23): interleaved pairs, num_heads of a 3-D input
/// and the rotated part of each head (0: all of it).
struct RotaryParams final : OpParams {
  bool interleaved = false;
  int64_t numHeads = 0;
  int64_t rotaryDim = 0;
};
ParsedParams parseRotaryEmbedding(const Node &n);
llvm::Expected<RotaryParams> rotaryParamsOf(const Node &n);

/// Resize (opsets 10 to 19). Opset 10 has only `mode` (nearest or linear):
/// its coordinates are asymmetric and its nearest rounding is `Simple`.
namespace resizing {
enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize
};
/// Simple is opset 10's rule: ceil when downscaling, floor otherwise.
enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };
enum class AspectPolicy { Stretch, NotLarger, NotSmaller };
} // namespace resizing

struct ResizeParams final : OpParams {
  resizing::Mode mode = resizing::Mode::Nearest;
  resizing::Coord coord = resizing::Coord::HalfPixel;
  resizing::Nearest nearest = resizing::Nearest::RoundPreferFloor;
  resizing::AspectPolicy policy = resizing::AspectPolicy::Stretch;
  double cubicA = -0.75, extrapolation = 0;
  bool excludeOutside = false, antialias = false;
  std::vector<int64_t> axes;
};
ParsedParams parseResize(const Node &n);
llvm::Expected<ResizeParams> resizeParamsOf(const Node &n);

/// Element-wise ops with attributes: up to two numbers and two flags, named
/// per op (LeakyRelu/ThresholdedRelu/Elu/Celu/Swish alpha; Selu alpha and
/// gamma (as beta); HardSigmoid alpha, beta; Shrink lambd (alpha) and bias
/// (beta); Clip-6 min (alpha) and max (beta); Gelu approximate = tanh
/// (flagA); IsInf detect_negative (flagA), detect_positive (flagB); Mod fmod
/// (flagA); BitShift direction = LEFT (flagA); ai.mpc.training GeluGrad
/// like Gelu).
struct ElementwiseParams final : OpParams {
  float alpha = 0.0f, beta = 0.0f;
  bool flagA = false, flagB = false;
  /// Gelu/GeluGrad: approximate as written (GeluGrad rejects other values).
  std::string text;
};
/// The parser of an element-wise op with attributes, or null.
ParseFn elementwiseParser(llvm::StringRef opType, const char **name);

/// The parsed attributes of a prepared call (the executor prepares every
/// node it launches or folds).
template <typename P> const P &paramsOf(const KernelCall &c) {
  assert(c.params && "kernel launched without its prepared parameters");
  return static_cast<const P &>(*c.params);
}

} // namespace mpc

#endif // MPC_RUNTIME_OPPARAMS_H
