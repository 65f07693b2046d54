//===- OpParams.cpp - Attribute parsers of the registry rows ---------------===//
//
// Each parser reads a node's attributes once into its op's struct and
// rejects, with attributeError, the values no input shape could make valid
// (a stride of 0, an unknown auto_pad or direction). Rules that need shapes
// (a group that divides the channels, an axis within the rank) stay with
// the shape functions.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/OpParams.h"
#include "Parsers.h"
#include "mpc/IR/Graph.h"
#include "mpc/Support/Diagnostics.h"
#include <cmath>
#include <limits>
#include <sstream>

using namespace mpc;

OpParams::~OpParams() = default;

llvm::Error mpc::attributeError(const Node &n, llvm::StringRef attr, const llvm::Twine &value,
                                const llvm::Twine &rule) {
  return inputError("{0}: attribute {1} is {2}; {3}", describeNode(n), quoteName(attr),
                    value.str(), rule.str());
}

/// An error unless the int attribute `name`, when present, is at least `min`.
static llvm::Error checkAtLeast(const Node &n, llvm::StringRef name, int64_t min) {
  const Attribute *a = n.attr(name);
  if (!a || a->i >= min)
    return llvm::Error::success();
  return attributeError(n, name, llvm::Twine(a->i), "it must be at least " + llvm::Twine(min));
}

/// An error unless every value of the ints attribute `name` is at least `min`.
static llvm::Error checkAllAtLeast(const Node &n, llvm::StringRef name, int64_t min) {
  const Attribute *a = n.attr(name);
  if (!a)
    return llvm::Error::success();
  // A list given empty is not one left out: the window ops' lists hold one
  // value per spatial axis (two for pads), and an empty kernel_shape ran as if
  // absent (ONNX's inference and onnxruntime refuse it).
  if (a->ints.empty())
    return attributeError(n, name, "[]", "it lists one value per spatial axis");
  for (int64_t v : a->ints)
    if (v < min)
      return attributeError(n, name,
                            formatShape(std::vector<int64_t>(a->ints.begin(), a->ints.end())),
                            "every value must be at least " + llvm::Twine(min));
  return llvm::Error::success();
}

/// An error unless the attribute `name`, when present (or always, with
/// `required`), is one of `allowed`: strings for a string attribute, else
/// the int values' decimal text. `rule` lists them for the message.
static llvm::Error checkOneOf(const Node &n, llvm::StringRef name,
                              std::initializer_list<llvm::StringRef> allowed,
                              llvm::StringRef rule, bool required = false) {
  const Attribute *a = n.attr(name);
  if (!a) {
    if (!required)
      return llvm::Error::success();
    return inputError("{0}: attribute {1} is missing; {2}", describeNode(n), quoteName(name),
                      rule);
  }
  bool isString = a->kind == AttrKind::String;
  std::string text = isString ? a->s : std::to_string(a->i);
  for (llvm::StringRef ok : allowed)
    if (text == ok)
      return llvm::Error::success();
  return attributeError(n, name, isString ? quoteName(text) : text, rule);
}

MPC_DEFINED_BELOW(mpc::parseGemm)
ParsedParams mpc::parseGemm(const Node &n) {
  auto p = std::make_unique<GemmParams>();
  p->transA = n.intAttr("transA", 0) != 0;
  p->transB = n.intAttr("transB", 0) != 0;
  p->alpha = n.floatAttr("alpha", 1.0f);
  p->beta = n.floatAttr("beta", 1.0f);
  return p;
}

MPC_DEFINED_BELOW(mpc::parseSoftmax)
ParsedParams mpc::parseSoftmax(const Node &n) {
  auto p = std::make_unique<SoftmaxParams>();
  p->axis = n.intAttr("axis", n.opsetVersion() >= 13 ? -1 : 1);
  return p;
}

MPC_DEFINED_BELOW(mpc::parseLayerNorm)
ParsedParams mpc::parseLayerNorm(const Node &n) {
  auto p = std::make_unique<LayerNormParams>();
  p->axis = n.intAttr("axis", -1);
  p->epsilon = n.floatAttr("epsilon", 1e-5f);
  return p;
}

static IntList intList(const Node &n, llvm::StringRef name) {
  IntList l;
  if (const Attribute *a = n.attr(name)) {
    l.present = true;
    l.values = a->ints;
  }
  return l;
}

/// LpPool's and GlobalLpPool's p into `p` when present: an int from opset 2,
/// a float in the first versions (any positive value; the kernels raise to
/// a real power).
static llvm::Error readLpOrder(const Node &n, double &p) {
  const Attribute *a = n.attr("p");
  if (!a)
    return llvm::Error::success();
  bool isFloat = a->kind == AttrKind::Float;
  p = isFloat ? double(a->f) : double(a->i);
  if (p > 0 && std::isfinite(p))
    return llvm::Error::success();
  std::ostringstream value; // a float as written: -1.5
  if (isFloat)
    value << a->f;
  else
    value << a->i;
  return attributeError(n, "p", value.str(), "it must be positive");
}

llvm::Expected<WindowParams> mpc::windowParamsOf(const Node &n) {
  if (auto e = checkOneOf(n, "auto_pad", {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"},
                          "it must be NOTSET, SAME_UPPER, SAME_LOWER or VALID"))
    return std::move(e);
  if (auto e = checkAtLeast(n, "group", 1))
    return std::move(e);
  // ConvTranspose's output_shape: a size below 1 was taken as none given.
  for (const char *name : {"kernel_shape", "strides", "dilations", "output_shape"})
    if (auto e = checkAllAtLeast(n, name, 1))
      return std::move(e);
  for (const char *name : {"pads", "output_padding"})
    if (auto e = checkAllAtLeast(n, name, 0))
      return std::move(e);
  if (auto e = checkOneOf(n, "storage_order", {"0", "1"},
                          "it must be 0 (row-major) or 1 (column-major)"))
    return std::move(e);
  WindowParams p;
  p.kernelShape = intList(n, "kernel_shape");
  p.strides = intList(n, "strides");
  p.dilations = intList(n, "dilations");
  p.pads = intList(n, "pads");
  p.outputPadding = intList(n, "output_padding");
  p.outputShape = intList(n, "output_shape");
  llvm::StringRef ap = n.stringAttr("auto_pad", "NOTSET");
  p.autoPad = ap == "SAME_UPPER"   ? AutoPadMode::SameUpper
              : ap == "SAME_LOWER" ? AutoPadMode::SameLower
              : ap == "VALID"      ? AutoPadMode::Valid
                                   : AutoPadMode::NotSet;
  p.group = n.intAttr("group", 1);
  p.ceilMode = n.intAttr("ceil_mode", 0) != 0;
  p.storageColumnMajor = n.intAttr("storage_order", 0) != 0;
  p.countIncludePad = n.intAttr("count_include_pad", 0) != 0;
  if (auto e = readLpOrder(n, p.p))
    return std::move(e);
  return p;
}

MPC_DEFINED_BELOW(mpc::parseWindow)
ParsedParams mpc::parseWindow(const Node &n) {
  auto p = windowParamsOf(n);
  if (!p)
    return p.takeError();
  return std::make_unique<WindowParams>(std::move(*p));
}

FusedMatMulParams mpc::fusedMatMulParamsOf(const Node &n) {
  FusedMatMulParams p;
  p.alpha = n.floatAttr("alpha", 1.0f);
  p.transA = n.intAttr("transA", 0) != 0;
  p.transB = n.intAttr("transB", 0) != 0;
  p.transBatchA = n.intAttr("transBatchA", 0) != 0;
  p.transBatchB = n.intAttr("transBatchB", 0) != 0;
  return p;
}

MPC_DEFINED_BELOW(mpc::parseFusedMatMul)
ParsedParams mpc::parseFusedMatMul(const Node &n) {
  return std::make_unique<FusedMatMulParams>(fusedMatMulParamsOf(n));
}

MPC_DEFINED_BELOW(mpc::parseGemmBiasAct)
ParsedParams mpc::parseGemmBiasAct(const Node &n) {
  auto p = std::make_unique<GemmBiasActParams>();
  p->attrs = gemmBiasActAttrsOf(n);
  if (!p->attrs.actKnown)
    return inputError("{0}: activation '{1}' is not none, relu, gelu or gelu_tanh",
                      describeNode(n), n.stringAttr("activation", ""));
  if (n.attr("to") && p->attrs.to == DType::Undefined)
    return inputError("{0}: to {1} is not an element type", describeNode(n),
                      n.intAttr("to", 0));
  return std::unique_ptr<OpParams>(std::move(p));
}

MPC_DEFINED_BELOW(mpc::parseRecurrent)
ParsedParams mpc::parseRecurrent(const Node &n) {
  if (auto e = checkOneOf(n, "direction", {"forward", "reverse", "bidirectional"},
                          "it must be forward, reverse or bidirectional"))
    return std::move(e);
  if (auto e = checkOneOf(n, "layout", {"0", "1"}, "it must be 0 or 1"))
    return std::move(e);
  if (auto e = checkAtLeast(n, "hidden_size", 1))
    return std::move(e);
  auto p = std::make_unique<RecurrentParams>();
  llvm::StringRef d = n.stringAttr("direction", "forward");
  p->direction = d == "bidirectional" ? RecurrentParams::Direction::Bidirectional
                 : d == "reverse"     ? RecurrentParams::Direction::Reverse
                                      : RecurrentParams::Direction::Forward;
  p->batchMajor = n.intAttr("layout", 0) == 1;
  if (n.attr("clip")) {
    p->hasClip = true;
    p->clip = n.floatAttr("clip", 0.0f);
  }
  if (const Attribute *a = n.attr("hidden_size")) {
    p->hasHiddenSize = true;
    p->hiddenSize = a->i;
  }
  p->linearBeforeReset = n.intAttr("linear_before_reset", 0) != 0;
  if (const Attribute *a = n.attr("activations"))
    p->activations = a->strings;
  if (const Attribute *a = n.attr("activation_alpha"))
    p->activationAlpha = a->floats;
  if (const Attribute *a = n.attr("activation_beta"))
    p->activationBeta = a->floats;
  return p;
}

MPC_DEFINED_BELOW(mpc::parseReduce)
ParsedParams mpc::parseReduce(const Node &n) {
  auto p = std::make_unique<ReduceParams>();
  if (const Attribute *a = n.attr("axes"))
    p->axes = a->ints;
  p->keepdims = n.intAttr("keepdims", 1) != 0;
  p->noopWithEmptyAxes = n.intAttr("noop_with_empty_axes", 0) != 0;
  return p;
}

MPC_DEFINED_BELOW(mpc::parseTranspose)
ParsedParams mpc::parseTranspose(const Node &n) {
  auto p = std::make_unique<TransposeParams>();
  p->perm = intList(n, "perm");
  return p;
}

static ParsedParams axisParams(const Node &n, int64_t dflt) {
  auto p = std::make_unique<AxisParams>();
  p->axis = n.intAttr("axis", dflt);
  return p;
}
MPC_DEFINED_BELOW(mpc::parseAxis0)
ParsedParams mpc::parseAxis0(const Node &n) { return axisParams(n, 0); }
MPC_DEFINED_BELOW(mpc::parseAxisMinus1)
ParsedParams mpc::parseAxisMinus1(const Node &n) { return axisParams(n, -1); }

/// AxisParams with the flags read from the named int attributes.
static ParsedParams axisFlags(const Node &n, int64_t axisDefault,
                                           const char *a, int64_t aDefault,
                                           const char *b = nullptr) {
  auto p = std::make_unique<AxisParams>();
  p->axis = n.intAttr("axis", axisDefault);
  p->flagA = n.intAttr(a, aDefault) != 0;
  p->flagB = b && n.intAttr(b, 0) != 0;
  return p;
}
MPC_DEFINED_BELOW(mpc::parseArgReduce)
ParsedParams mpc::parseArgReduce(const Node &n) {
  return axisFlags(n, 0, "select_last_index", 0);
}
MPC_DEFINED_BELOW(mpc::parseTopK)
ParsedParams mpc::parseTopK(const Node &n) {
  return axisFlags(n, -1, "largest", 1);
}
MPC_DEFINED_BELOW(mpc::parseCumulative)
ParsedParams mpc::parseCumulative(const Node &n) {
  return axisFlags(n, 0, "exclusive", 0, "reverse");
}
MPC_DEFINED_BELOW(mpc::parseTrilu)
ParsedParams mpc::parseTrilu(const Node &n) { return axisFlags(n, 0, "upper", 1); }

static ParsedParams blockParams(const Node &n, bool withMode) {
  if (withMode)
    if (auto e = checkOneOf(n, "mode", {"DCR", "CRD"}, "it must be DCR or CRD"))
      return std::move(e);
  auto p = std::make_unique<BlockParams>();
  p->blocksize = n.intAttr("blocksize", 0);
  p->crd = withMode && n.stringAttr("mode", "DCR") == "CRD";
  return p;
}
MPC_DEFINED_BELOW(mpc::parseDepthToSpace)
ParsedParams mpc::parseDepthToSpace(const Node &n) { return blockParams(n, true); }
MPC_DEFINED_BELOW(mpc::parseSpaceToDepth)
ParsedParams mpc::parseSpaceToDepth(const Node &n) { return blockParams(n, false); }

MPC_DEFINED_BELOW(mpc::parseScatter)
ParsedParams mpc::parseScatter(const Node &n) {
  if (auto e = checkOneOf(n, "reduction", {"none", "add", "mul", "max", "min"},
                          "it must be none, add, mul, max or min"))
    return std::move(e);
  auto p = std::make_unique<ScatterParams>();
  p->axis = n.intAttr("axis", 0);
  llvm::StringRef r = n.stringAttr("reduction", "none");
  p->reduction = r == "add"   ? ScatterReduction::Add
                 : r == "mul" ? ScatterReduction::Mul
                 : r == "max" ? ScatterReduction::Max
                 : r == "min" ? ScatterReduction::Min
                              : ScatterReduction::None;
  return p;
}

static ParsedParams intParams(const Node &n, const char *name) {
  auto p = std::make_unique<IntParams>();
  p->value = n.intAttr(name, 0);
  return p;
}
MPC_DEFINED_BELOW(mpc::parseEyeLike)
ParsedParams mpc::parseEyeLike(const Node &n) { return intParams(n, "k"); }
MPC_DEFINED_BELOW(mpc::parseQuantAxis)
ParsedParams mpc::parseQuantAxis(const Node &n) {
  auto p = std::make_unique<QuantParams>();
  p->axis = n.intAttr("axis", 1);
  p->blockSize = n.intAttr("block_size", 0);
  return p;
}
MPC_DEFINED_BELOW(mpc::parseNonMaxSuppression)
ParsedParams mpc::parseNonMaxSuppression(const Node &n) {
  return intParams(n, "center_point_box");
}
MPC_DEFINED_BELOW(mpc::parseGatherND)
ParsedParams mpc::parseGatherND(const Node &n) { return intParams(n, "batch_dims"); }

MPC_DEFINED_BELOW(mpc::parsePad)
ParsedParams mpc::parsePad(const Node &n) {
  auto p = std::make_unique<PadParams>();
  p->mode = n.stringAttr("mode", "constant").str();
  if (n.opsetVersion() < 11) {
    const Attribute *a = n.attr("pads");
    if (!a)
      a = n.attr("paddings");
    if (a)
      p->pads = a->ints;
    p->value = n.floatAttr("value", 0.0f);
  }
  return p;
}

MPC_DEFINED_BELOW(mpc::parseNorm)
ParsedParams mpc::parseNorm(const Node &n) {
  if (auto e = checkAtLeast(n, "num_groups", 1))
    return std::move(e);
  if (auto e = checkOneOf(n, "p", {"1", "2"}, "it must be 1 or 2"))
    return std::move(e);
  auto p = std::make_unique<NormParams>();
  p->axis = n.intAttr("axis", -1);
  p->epsilon = n.floatAttr("epsilon", 1e-5f);
  p->numGroups = n.intAttr("num_groups", 1);
  p->p = n.intAttr("p", 2);
  return p;
}

MPC_DEFINED_BELOW(mpc::parseBatchNorm)
ParsedParams mpc::parseBatchNorm(const Node &n) {
  auto p = std::make_unique<BatchNormParams>();
  p->epsilon = n.floatAttr("epsilon", 1e-5f);
  p->momentum = n.floatAttr("momentum", 0.9f);
  p->training = n.opsetVersion() >= 14 && n.intAttr("training_mode", 0) != 0;
  return p;
}

MPC_DEFINED_BELOW(mpc::parseLoss)
ParsedParams mpc::parseLoss(const Node &n) {
  auto p = std::make_unique<LossParams>();
  p->reduction = n.stringAttr("reduction", "mean").str();
  if (const Attribute *a = n.attr("ignore_index")) {
    p->hasIgnoreIndex = true;
    p->ignoreIndex = a->i;
  }
  return p;
}

/// Wraps a parsed struct (or its error) as a row parser's result.
template <typename P> static ParsedParams boxed(llvm::Expected<P> p) {
  if (!p)
    return p.takeError();
  return std::make_unique<P>(std::move(*p));
}

MPC_DEFINED_BELOW(mpc::parseCompress)
ParsedParams mpc::parseCompress(const Node &n) {
  auto p = std::make_unique<AxisParams>();
  if (const Attribute *a = n.attr("axis")) {
    p->flagA = true;
    p->axis = a->i;
  }
  return p;
}

llvm::Expected<ReverseSequenceParams> mpc::reverseSequenceParamsOf(const Node &n) {
  for (const char *name : {"batch_axis", "time_axis"})
    if (auto e = checkOneOf(n, name, {"0", "1"}, "it must be 0 or 1"))
      return std::move(e);
  ReverseSequenceParams p;
  p.batchAxis = n.intAttr("batch_axis", 1);
  p.timeAxis = n.intAttr("time_axis", 0);
  if (p.batchAxis == p.timeAxis)
    return attributeError(n, "time_axis", llvm::Twine(p.timeAxis),
                          "it must differ from batch_axis");
  return p;
}
MPC_DEFINED_BELOW(mpc::parseReverseSequence)
ParsedParams mpc::parseReverseSequence(const Node &n) {
  return boxed(reverseSequenceParamsOf(n));
}

llvm::Expected<LRNParams> mpc::lrnParamsOf(const Node &n) {
  if (!n.attr("size"))
    return inputError("{0}: attribute {1} is missing; it must be at least 1", describeNode(n),
                      quoteName("size"));
  if (auto e = checkAtLeast(n, "size", 1))
    return std::move(e);
  LRNParams p;
  p.size = n.intAttr("size", 1);
  p.alpha = n.floatAttr("alpha", 1e-4f);
  p.beta = n.floatAttr("beta", 0.75f);
  p.bias = n.floatAttr("bias", 1.0f);
  return p;
}
MPC_DEFINED_BELOW(mpc::parseLRN)
ParsedParams mpc::parseLRN(const Node &n) { return boxed(lrnParamsOf(n)); }

llvm::Expected<RoiAlignParams> mpc::roiAlignParamsOf(const Node &n) {
  if (auto e = checkOneOf(n, "mode", {"avg", "max"}, "it must be avg or max"))
    return std::move(e);
  bool opset16 = n.opsetVersion() >= 16;
  if (opset16) {
    if (auto e = checkOneOf(n, "coordinate_transformation_mode",
                            {"half_pixel", "output_half_pixel"},
                            "it must be half_pixel or output_half_pixel"))
      return std::move(e);
  }
  for (const char *a : {"output_height", "output_width"})
    if (auto e = checkAtLeast(n, a, 1))
      return std::move(e);
  if (auto e = checkAtLeast(n, "sampling_ratio", 0))
    return std::move(e);
  RoiAlignParams p;
  p.max = n.stringAttr("mode", "avg") == "max";
  p.halfPixel = opset16 && n.stringAttr("coordinate_transformation_mode", "half_pixel") ==
                               "half_pixel";
  p.outH = n.intAttr("output_height", 1);
  p.outW = n.intAttr("output_width", 1);
  p.samplingRatio = n.intAttr("sampling_ratio", 0);
  p.spatialScale = n.floatAttr("spatial_scale", 1.0f);
  return p;
}
MPC_DEFINED_BELOW(mpc::parseRoiAlign)
ParsedParams mpc::parseRoiAlign(const Node &n) { return boxed(roiAlignParamsOf(n)); }

EinsumParams mpc::einsumParamsOf(const Node &n) {
  EinsumParams p;
  for (char ch : n.stringAttr("equation", ""))
    if (ch != ' ')
      p.equation += ch;
  return p;
}
MPC_DEFINED_BELOW(mpc::parseEinsum)
ParsedParams mpc::parseEinsum(const Node &n) {
  return std::make_unique<EinsumParams>(einsumParamsOf(n));
}

llvm::Expected<AttentionParams> mpc::attentionParamsOf(const Node &n) {
  if (auto e = checkOneOf(n, "qk_matmul_output_mode", {"0", "1", "2", "3"},
                          "it must be 0, 1, 2 or 3"))
    return std::move(e);
  AttentionParams p;
  p.qNumHeads = n.intAttr("q_num_heads", 0);
  p.kvNumHeads = n.intAttr("kv_num_heads", 0);
  p.isCausal = n.intAttr("is_causal", 0) != 0;
  p.hasScale = n.attr("scale") != nullptr;
  p.scale = n.floatAttr("scale", 1.0f);
  p.softcap = n.floatAttr("softcap", 0.0f);
  p.qkOutputMode = n.intAttr("qk_matmul_output_mode", 0);
  return p;
}
MPC_DEFINED_BELOW(mpc::parseAttention)
ParsedParams mpc::parseAttention(const Node &n) { return boxed(attentionParamsOf(n)); }

llvm::Expected<RotaryParams> mpc::rotaryParamsOf(const Node &n) {
  if (auto e = checkAtLeast(n, "rotary_embedding_dim", 0))
    return std::move(e);
  RotaryParams p;
  p.interleaved = n.intAttr("interleaved", 0) != 0;
  p.numHeads = n.intAttr("num_heads", 0);
  p.rotaryDim = n.intAttr("rotary_embedding_dim", 0);
  if (p.rotaryDim % 2)
    return attributeError(n, "rotary_embedding_dim", llvm::Twine(p.rotaryDim),
                          "it must be even");
  return p;
}
MPC_DEFINED_BELOW(mpc::parseRotaryEmbedding)
ParsedParams mpc::parseRotaryEmbedding(const Node &n) { return boxed(rotaryParamsOf(n)); }

/// The value named by string attribute `name` (or `dflt` when absent) in
/// `names`, or an error listing the names as `rule`.
template <typename E>
static llvm::Error lookupAttr(const Node &n, llvm::StringRef name, llvm::StringRef dflt,
                              std::initializer_list<std::pair<const char *, E>> names,
                              llvm::StringRef rule, E &out) {
  llvm::StringRef s = n.stringAttr(name, dflt);
  for (const auto &p : names)
    if (s == p.first) {
      out = p.second;
      return llvm::Error::success();
    }
  return attributeError(n, name, quoteName(s), rule);
}

llvm::Expected<ResizeParams> mpc::resizeParamsOf(const Node &n) {
  using namespace resizing;
  ResizeParams a;
  // Opset 10 has no cubic mode and none of the later attributes: its
  // coordinates are asymmetric and its nearest rounding its own.
  bool opset10 = n.opsetVersion() < 11;
  if (opset10) {
    if (auto e = lookupAttr(n, "mode", "nearest",
                            {{"nearest", Mode::Nearest}, {"linear", Mode::Linear}},
                            "it must be nearest or linear (opset 10)", a.mode))
      return std::move(e);
    a.coord = Coord::Asymmetric;
    a.nearest = Nearest::Simple;
  } else {
    if (auto e = lookupAttr(n, "mode", "nearest",
                            {{"nearest", Mode::Nearest},
                             {"linear", Mode::Linear},
                             {"cubic", Mode::Cubic}},
                            "it must be nearest, linear or cubic", a.mode))
      return std::move(e);
    if (auto e = lookupAttr(n, "coordinate_transformation_mode", "half_pixel",
                            {{"half_pixel", Coord::HalfPixel},
                             {"half_pixel_symmetric", Coord::HalfPixelSymmetric},
                             {"pytorch_half_pixel", Coord::PytorchHalfPixel},
                             {"align_corners", Coord::AlignCorners},
                             {"asymmetric", Coord::Asymmetric},
                             {"tf_half_pixel_for_nn", Coord::TfHalfPixelForNn},
                             {"tf_crop_and_resize", Coord::TfCropAndResize}},
                            "it must be half_pixel, half_pixel_symmetric, "
                            "pytorch_half_pixel, align_corners, asymmetric, "
                            "tf_half_pixel_for_nn or tf_crop_and_resize",
                            a.coord))
      return std::move(e);
    if (auto e = lookupAttr(n, "nearest_mode", "round_prefer_floor",
                            {{"round_prefer_floor", Nearest::RoundPreferFloor},
                             {"round_prefer_ceil", Nearest::RoundPreferCeil},
                             {"floor", Nearest::Floor},
                             {"ceil", Nearest::Ceil}},
                            "it must be round_prefer_floor, round_prefer_ceil, floor or ceil",
                            a.nearest))
      return std::move(e);
  }
  if (auto e = lookupAttr(n, "keep_aspect_ratio_policy", "stretch",
                          {{"stretch", AspectPolicy::Stretch},
                           {"not_larger", AspectPolicy::NotLarger},
                           {"not_smaller", AspectPolicy::NotSmaller}},
                          "it must be stretch, not_larger or not_smaller", a.policy))
    return std::move(e);
  a.cubicA = n.floatAttr("cubic_coeff_a", -0.75f);
  a.extrapolation = n.floatAttr("extrapolation_value", 0.0f);
  a.excludeOutside = n.intAttr("exclude_outside", 0) != 0;
  a.antialias = n.intAttr("antialias", 0) != 0;
  if (const Attribute *axes = n.attr("axes"))
    a.axes = axes->ints;
  return a;
}
MPC_DEFINED_BELOW(mpc::parseResize)
ParsedParams mpc::parseResize(const Node &n) { return boxed(resizeParamsOf(n)); }

//===----------------------------------------------------------------------===//
// Element-wise ops with attributes
//===----------------------------------------------------------------------===//


static ParsedParams floats(const Node &n, const char *a, float da,
                                        const char *b, float db) {
  auto p = std::make_unique<ElementwiseParams>();
  p->alpha = a ? n.floatAttr(a, da) : da;
  p->beta = b ? n.floatAttr(b, db) : db;
  return p;
}

MPC_DEFINED_BELOW(mpc::parseLeakyRelu)
ParsedParams mpc::parseLeakyRelu(const Node &n) {
  return floats(n, "alpha", 0.01f, nullptr, 0.0f);
}
MPC_DEFINED_BELOW(mpc::parseAlpha1)
ParsedParams mpc::parseAlpha1(const Node &n) {
  return floats(n, "alpha", 1.0f, nullptr, 0.0f);
}
MPC_DEFINED_BELOW(mpc::parseSelu)
ParsedParams mpc::parseSelu(const Node &n) {
  // The spec's defaults, as float32 (what the kernel computes with).
  return floats(n, "alpha", 1.67326319217681884765625f, "gamma",
                1.05070102214813232421875f);
}
MPC_DEFINED_BELOW(mpc::parseHardSigmoid)
ParsedParams mpc::parseHardSigmoid(const Node &n) {
  return floats(n, "alpha", 0.2f, "beta", 0.5f);
}
MPC_DEFINED_BELOW(mpc::parseShrink)
ParsedParams mpc::parseShrink(const Node &n) {
  return floats(n, "lambd", 0.5f, "bias", 0.0f);
}
MPC_DEFINED_BELOW(mpc::parseClip6)
ParsedParams mpc::parseClip6(const Node &n) {
  return floats(n, "min", -std::numeric_limits<float>::infinity(), "max",
                std::numeric_limits<float>::infinity());
}
MPC_DEFINED_BELOW(mpc::parseGelu)
ParsedParams mpc::parseGelu(const Node &n) {
  if (auto e = checkOneOf(n, "approximate", {"none", "tanh"}, "it must be none or tanh"))
    return std::move(e);
  auto p = std::make_unique<ElementwiseParams>();
  p->text = n.stringAttr("approximate", "none").str();
  p->flagA = p->text == "tanh";
  return p;
}
MPC_DEFINED_BELOW(mpc::parseIsInf)
ParsedParams mpc::parseIsInf(const Node &n) {
  auto p = std::make_unique<ElementwiseParams>();
  p->flagA = n.intAttr("detect_negative", 1) != 0;
  p->flagB = n.intAttr("detect_positive", 1) != 0;
  return p;
}
MPC_DEFINED_BELOW(mpc::parseMod)
ParsedParams mpc::parseMod(const Node &n) {
  auto p = std::make_unique<ElementwiseParams>();
  p->flagA = n.intAttr("fmod", 0) != 0;
  return p;
}
MPC_DEFINED_BELOW(mpc::parseBitShift)
ParsedParams mpc::parseBitShift(const Node &n) {
  if (auto e = checkOneOf(n, "direction", {"LEFT", "RIGHT"}, "it must be LEFT or RIGHT",
                          /*required=*/true))
    return std::move(e);
  auto p = std::make_unique<ElementwiseParams>();
  p->flagA = n.stringAttr("direction", "") == "LEFT";
  return p;
}

ParseFn mpc::elementwiseParser(llvm::StringRef opType, const char **name) {
#define MPC_PARSER(Op, Fn)                                                     \
  {Op, Fn, #Fn}
  static const struct {
    const char *opType;
    ParseFn parse;
    const char *name;
  } kParsers[] = {
      MPC_PARSER("LeakyRelu", parseLeakyRelu),   MPC_PARSER("ThresholdedRelu", parseAlpha1),
      MPC_PARSER("Elu", parseAlpha1),            MPC_PARSER("Celu", parseAlpha1),
      MPC_PARSER("Swish", parseAlpha1),          MPC_PARSER("Selu", parseSelu),
      MPC_PARSER("HardSigmoid", parseHardSigmoid), MPC_PARSER("Shrink", parseShrink),
      MPC_PARSER("Clip", parseClip6),            MPC_PARSER("Gelu", parseGelu),
      MPC_PARSER("GeluGrad", parseGelu),         MPC_PARSER("IsInf", parseIsInf),
      MPC_PARSER("Mod", parseMod),               MPC_PARSER("BitShift", parseBitShift),
  };
#undef MPC_PARSER
  for (const auto &p : kParsers)
    if (opType == p.opType) {
      if (name)
        *name = p.name;
      return p.parse;
    }
  return nullptr;
}
