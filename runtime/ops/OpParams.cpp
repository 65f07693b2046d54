//===- OpParams.cpp - Attribute parsers of the registry rows ---------------===//
#include "mpc/Runtime/OpParams.h"
#include "mpc/IR/Graph.h"
#include <limits>

using namespace mpc;

OpParams::~OpParams() = default;

std::unique_ptr<OpParams> mpc::parseGemm(const Node &n) {
  auto p = std::make_unique<GemmParams>();
  p->transA = n.intAttr("transA", 0) != 0;
  p->transB = n.intAttr("transB", 0) != 0;
  p->alpha = n.floatAttr("alpha", 1.0f);
  p->beta = n.floatAttr("beta", 1.0f);
  return p;
}

std::unique_ptr<OpParams> mpc::parseSoftmax(const Node &n) {
  auto p = std::make_unique<SoftmaxParams>();
  p->axis = n.intAttr("axis", n.opsetVersion() >= 13 ? -1 : 1);
  return p;
}

std::unique_ptr<OpParams> mpc::parseLayerNorm(const Node &n) {
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

WindowParams mpc::windowParamsOf(const Node &n) {
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
  return p;
}

std::unique_ptr<OpParams> mpc::parseWindow(const Node &n) {
  return std::make_unique<WindowParams>(windowParamsOf(n));
}

std::unique_ptr<OpParams> mpc::parseRecurrent(const Node &n) {
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

std::unique_ptr<OpParams> mpc::parseReduce(const Node &n) {
  auto p = std::make_unique<ReduceParams>();
  if (const Attribute *a = n.attr("axes"))
    p->axes = a->ints;
  p->keepdims = n.intAttr("keepdims", 1) != 0;
  p->noopWithEmptyAxes = n.intAttr("noop_with_empty_axes", 0) != 0;
  return p;
}

std::unique_ptr<OpParams> mpc::parseTranspose(const Node &n) {
  auto p = std::make_unique<TransposeParams>();
  p->perm = intList(n, "perm");
  return p;
}

static std::unique_ptr<OpParams> axisParams(const Node &n, int64_t dflt) {
  auto p = std::make_unique<AxisParams>();
  p->axis = n.intAttr("axis", dflt);
  return p;
}
std::unique_ptr<OpParams> mpc::parseAxis0(const Node &n) { return axisParams(n, 0); }
std::unique_ptr<OpParams> mpc::parseAxisMinus1(const Node &n) { return axisParams(n, -1); }

/// AxisParams with the flags read from the named int attributes.
static std::unique_ptr<OpParams> axisFlags(const Node &n, int64_t axisDefault,
                                           const char *a, int64_t aDefault,
                                           const char *b = nullptr) {
  auto p = std::make_unique<AxisParams>();
  p->axis = n.intAttr("axis", axisDefault);
  p->flagA = n.intAttr(a, aDefault) != 0;
  p->flagB = b && n.intAttr(b, 0) != 0;
  return p;
}
std::unique_ptr<OpParams> mpc::parseArgReduce(const Node &n) {
  return axisFlags(n, 0, "select_last_index", 0);
}
std::unique_ptr<OpParams> mpc::parseTopK(const Node &n) {
  return axisFlags(n, -1, "largest", 1);
}
std::unique_ptr<OpParams> mpc::parseCumulative(const Node &n) {
  return axisFlags(n, 0, "exclusive", 0, "reverse");
}
std::unique_ptr<OpParams> mpc::parseTrilu(const Node &n) { return axisFlags(n, 0, "upper", 1); }

std::unique_ptr<OpParams> mpc::parsePad(const Node &n) {
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

std::unique_ptr<OpParams> mpc::parseNorm(const Node &n) {
  auto p = std::make_unique<NormParams>();
  p->axis = n.intAttr("axis", -1);
  p->epsilon = n.floatAttr("epsilon", 1e-5f);
  p->numGroups = n.intAttr("num_groups", 1);
  p->p = n.intAttr("p", 2);
  return p;
}

std::unique_ptr<OpParams> mpc::parseBatchNorm(const Node &n) {
  auto p = std::make_unique<BatchNormParams>();
  p->epsilon = n.floatAttr("epsilon", 1e-5f);
  p->momentum = n.floatAttr("momentum", 0.9f);
  p->training = n.opsetVersion() >= 14 && n.intAttr("training_mode", 0) != 0;
  return p;
}

std::unique_ptr<OpParams> mpc::parseLoss(const Node &n) {
  auto p = std::make_unique<LossParams>();
  p->reduction = n.stringAttr("reduction", "mean").str();
  if (const Attribute *a = n.attr("ignore_index")) {
    p->hasIgnoreIndex = true;
    p->ignoreIndex = a->i;
  }
  return p;
}

//===----------------------------------------------------------------------===//
// Element-wise ops with attributes
//===----------------------------------------------------------------------===//


static std::unique_ptr<OpParams> floats(const Node &n, const char *a, float da,
                                        const char *b, float db) {
  auto p = std::make_unique<ElementwiseParams>();
  p->alpha = a ? n.floatAttr(a, da) : da;
  p->beta = b ? n.floatAttr(b, db) : db;
  return p;
}

static std::unique_ptr<OpParams> parseLeakyRelu(const Node &n) {
  return floats(n, "alpha", 0.01f, nullptr, 0.0f);
}
static std::unique_ptr<OpParams> parseAlpha1(const Node &n) {
  return floats(n, "alpha", 1.0f, nullptr, 0.0f);
}
static std::unique_ptr<OpParams> parseSelu(const Node &n) {
  // The spec's defaults, as float32 (what the kernel computes with).
  return floats(n, "alpha", 1.67326319217681884765625f, "gamma",
                1.05070102214813232421875f);
}
static std::unique_ptr<OpParams> parseHardSigmoid(const Node &n) {
  return floats(n, "alpha", 0.2f, "beta", 0.5f);
}
static std::unique_ptr<OpParams> parseShrink(const Node &n) {
  return floats(n, "lambd", 0.5f, "bias", 0.0f);
}
static std::unique_ptr<OpParams> parseClip6(const Node &n) {
  return floats(n, "min", -std::numeric_limits<float>::infinity(), "max",
                std::numeric_limits<float>::infinity());
}
static std::unique_ptr<OpParams> parseGelu(const Node &n) {
  auto p = std::make_unique<ElementwiseParams>();
  p->text = n.stringAttr("approximate", "none").str();
  p->flagA = p->text == "tanh";
  return p;
}
static std::unique_ptr<OpParams> parseIsInf(const Node &n) {
  auto p = std::make_unique<ElementwiseParams>();
  p->flagA = n.intAttr("detect_negative", 1) != 0;
  p->flagB = n.intAttr("detect_positive", 1) != 0;
  return p;
}
static std::unique_ptr<OpParams> parseMod(const Node &n) {
  auto p = std::make_unique<ElementwiseParams>();
  p->flagA = n.intAttr("fmod", 0) != 0;
  return p;
}
static std::unique_ptr<OpParams> parseBitShift(const Node &n) {
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
