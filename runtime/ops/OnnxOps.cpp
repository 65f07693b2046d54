//===- OnnxOps.cpp - Registry rows of the default (ai.onnx) domain ---------===//
//
// Sorted by op type, then the element-wise rows of ElementwiseOps.def, the
// boolean and cast rows, the losses of training graphs and the ops the
// executor runs itself (control flow, sequences, optionals: no shape
// function, shaped while running in dynamic mode).
//
//===----------------------------------------------------------------------===//
#include "OpRows.h"
#include "mpc/Runtime/IndexParams.h"
#include "llvm/ADT/StringRef.h"

using namespace mpc;
using namespace mpc::shapes;
using namespace mpc::ops;

/// The first opset of the element-wise ops added to ONNX after opset 1
/// (ElementwiseOps.def rows start at 1 otherwise: these ops changed only in
/// attributes and types the kernels already cover).
static const struct {
  const char *opType;
  int64_t since;
} kFirstOpset[] = {
    {"Acos", 7},        {"Acosh", 9},      {"Asin", 7},       {"Asinh", 9},
    {"Atan", 7},        {"Atanh", 9},      {"BitShift", 11},  {"BitwiseAnd", 18},
    {"BitwiseNot", 18}, {"BitwiseOr", 18}, {"BitwiseXor", 18}, {"Cosh", 9},
    {"Shrink", 9},      {"Sinh", 9},       {"Swish", 24},     {"Tan", 7},
};

// Element-wise rows: binary ops may run in place over an operand (the
// compiled binary loops allow the alias). Unary rows do not: with out == in
// the compiled unary loops fail their runtime alias check and run scalar
// (the transformer's Erf took 2x longer), so they keep separate buffers.
#define UNARY_OP(Op) MPC_OP(#Op, "", 1, shapeSameAsInput0, Elementwise),
#define MPC_UNARY_FLOAT(Op) UNARY_OP(Op)
#define MPC_UNARY_SIGNED(Op) UNARY_OP(Op)
#define MPC_UNARY_ARITHMETIC(Op) UNARY_OP(Op)
#define MPC_UNARY_INTEGER(Op) UNARY_OP(Op)
#define MPC_UNARY_PREDICATE(Op) MPC_OP(#Op, "", 1, shapePredicate, Elementwise),
#define BINARY_OP(Op)                                                          \
  withInPlace(MPC_OP(#Op, "", 1, shapeBroadcast, Elementwise), InPlace::Operands),
#define MPC_BINARY_SIGNED(Op) BINARY_OP(Op)
#define MPC_BINARY_INTEGER(Op) BINARY_OP(Op)
#define MPC_BINARY_COMPARE(Op) MPC_OP(#Op, "", 1, shapeCompare, Elementwise),

std::vector<OpDef> mpc::ops::onnxOps() {
  std::vector<OpDef> rows = {
      withParams(MPC_OP("ArgMax", "", 1, shapeArgReduce, Data), parseArgReduce),
      withParams(MPC_OP("ArgMin", "", 1, shapeArgReduce, Data), parseArgReduce),
      withParams(MPC_OP("Attention", "", 23, shapeAttention, Elementwise), parseAttention),
      withParams(MPC_OP("AveragePool", "", 7, shapePool, Window), parseWindow),
      withParams(MPC_OP("BatchNormalization", "", 9, shapeBatchNorm, Elementwise), parseBatchNorm),
      withParams(withValueDependentShape(MPC_OP("Compress", "", 9, shapeCompress, Data)),
                 parseCompress),
      withParams(MPC_OP("Concat", "", 4, shapeConcat, Data), parseAxis0),
      MPC_OP("Constant", "", 9, shapeConstant, Data),
      withParams(MPC_OP("ConstantOfShape", "", 9, shapeConstantOfShape, Data),
                 parseConstantOfShape),
      withParams(MPC_OP("Conv", "", 1, shapeConv, Gemm), parseWindow),
      withParams(MPC_OP("ConvTranspose", "", 1, shapeConvTranspose, Gemm), parseWindow),
      withParams(MPC_OP("CumProd", "", 26, shapeSameAsInput0, Elementwise), parseCumulative),
      withParams(MPC_OP("CumSum", "", 11, shapeSameAsInput0, Elementwise), parseCumulative),
      withParams(MPC_OP("DepthToSpace", "", 1, shapeDepthToSpace, Data), parseDepthToSpace),
      withParams(MPC_OP("DequantizeLinear", "", 10, shapeDequantizeLinear, Elementwise),
                 parseQuantAxis),
      MPC_OP("Dropout", "", 1, shapeDropout, Data),
      withParams(MPC_OP("Einsum", "", 12, shapeEinsum, Gemm), parseEinsum),
      MPC_OP("Expand", "", 8, shapeExpand, Data),
      withParams(MPC_OP("EyeLike", "", 9, shapeEyeLike, Data), parseEyeLike),
      withInPlace(MPC_OP("Flatten", "", 1, shapeFlatten, Data), InPlace::Data),
      withParams(MPC_OP("Gather", "", 1, shapeGather, Data), parseAxis0),
      withParams(MPC_OP("GatherElements", "", 11, shapeGatherElements, Data), parseAxis0),
      withParams(MPC_OP("GatherND", "", 11, shapeGatherND, Data), parseGatherND),
      withParams(MPC_OP("Gemm", "", 7, shapeGemm, Gemm), parseGemm),
      MPC_OP("GlobalAveragePool", "", 1, shapeGlobalPool, Reduction),
      MPC_OP("GlobalMaxPool", "", 1, shapeGlobalPool, Reduction),
      withParams(MPC_OP("GlobalLpPool", "", 1, shapeGlobalPool, Reduction), parseWindow),
      withParams(MPC_OP("GroupNormalization", "", 18, shapeGroupNorm, Elementwise), parseNorm),
      withParams(MPC_OP("GRU", "", 7, shapeGRU, Gemm), parseRecurrent),
      withParams(MPC_OP("Hardmax", "", 1, shapeSameAsInput0, Elementwise), parseSoftmax),
      withInPlace(MPC_OP("Identity", "", 1, shapeSameAsInput0, Data), InPlace::Data),
      withParams(MPC_OP("InstanceNormalization", "", 6, shapeInstanceNorm, Elementwise), parseNorm),
      withParams(MPC_OP("LayerNormalization", "", 17, shapeLayerNorm, Elementwise), parseLayerNorm),
      withParams(MPC_OP("LogSoftmax", "", 1, shapeSameAsInput0, Elementwise), parseSoftmax),
      withParams(MPC_OP("LpNormalization", "", 1, shapeLpNorm, Elementwise), parseNorm),
      withParams(MPC_OP("LpPool", "", 1, shapePool, Window), parseWindow),
      withParams(MPC_OP("LRN", "", 1, shapeLRN, Elementwise), parseLRN),
      withParams(MPC_OP("LSTM", "", 7, shapeLSTM, Gemm), parseRecurrent),
      MPC_OP("MatMul", "", 1, shapeMatMul, Gemm),
      withParams(MPC_OP("MaxPool", "", 8, shapePool, Window), parseWindow),
      MPC_OP("Mean", "", 8, shapeVariadicBroadcast, Elementwise),
      withParams(withValueDependentShape(
                     MPC_OP("NonMaxSuppression", "", 10, shapeNonMaxSuppression, Data)),
                 parseNonMaxSuppression),
      withValueDependentShape(MPC_OP("NonZero", "", 9, shapeNonZero, Data)),
      withParams(MPC_OP("OneHot", "", 9, shapeOneHot, Data), parseAxisMinus1),
      withParams(MPC_OP("Pad", "", 2, shapePad, Data), parsePad),
      withParams(MPC_OP("RMSNormalization", "", 23, shapeRMSNorm, Elementwise), parseNorm),
      MPC_OP("Range", "", 11, shapeRangeOp, Data),
      withParams(MPC_OP("QuantizeLinear", "", 10, shapeQuantizeLinear, Elementwise),
                 parseQuantAxis),
      withParams(MPC_OP("ReduceL1", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceL2", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceLogSum", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceLogSumExp", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceMax", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceMean", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceMin", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceProd", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceSum", "", 1, shapeReduce, Reduction), parseReduce),
      withParams(MPC_OP("ReduceSumSquare", "", 1, shapeReduce, Reduction), parseReduce),
      withInPlace(MPC_OP("Reshape", "", 5, shapeReshape, Data), InPlace::Data),
      withParams(withValueDependentShape(MPC_OP("Resize", "", 10, shapeResize, Elementwise)),
                 parseResize),
      withParams(MPC_OP("ReverseSequence", "", 10, shapeReverseSequence, Data),
                 parseReverseSequence),
      withParams(MPC_OP("RNN", "", 7, shapeRNN, Gemm), parseRecurrent),
      withParams(MPC_OP("RoiAlign", "", 10, shapeRoiAlign, Window), parseRoiAlign),
      withParams(MPC_OP("RotaryEmbedding", "", 23, shapeRotaryEmbedding, Elementwise),
                 parseRotaryEmbedding),
      withParams(MPC_OP("ScatterElements", "", 11, shapeScatterElements, Data), parseScatter),
      withParams(MPC_OP("ScatterND", "", 11, shapeScatterND, Data), parseScatter),
      // ScatterElements without a reduction, under its name before opset 11.
      withParams(MPC_OP("Scatter", "", 9, shapeScatterElements, Data), parseScatter),
      withParams(MPC_OP("Shape", "", 1, shapeShape, Data), parseShape),
      MPC_OP("Size", "", 1, shapeSize, Data),
      MPC_OP("Slice", "", 10, shapeSlice, Data),
      withParams(MPC_OP("Softmax", "", 1, shapeSameAsInput0, Elementwise), parseSoftmax),
      withParams(MPC_OP("SpaceToDepth", "", 1, shapeSpaceToDepth, Data), parseSpaceToDepth),
      withParams(MPC_OP("Split", "", 2, shapeSplit, Data), parseAxis0),
      withInPlace(MPC_OP("Squeeze", "", 1, shapeSqueeze, Data), InPlace::Data),
      MPC_OP("Sum", "", 8, shapeVariadicBroadcast, Elementwise),
      MPC_OP("Tile", "", 6, shapeTile, Data),
      withParams(MPC_OP("TopK", "", 1, shapeTopK, Elementwise), parseTopK),
      withParams(MPC_OP("Transpose", "", 1, shapeTranspose, Data), parseTranspose),
      withParams(MPC_OP("Trilu", "", 14, shapeTrilu, Data), parseTrilu),
      withInPlace(MPC_OP("Unsqueeze", "", 1, shapeUnsqueeze, Data), InPlace::Data),
      // Resize-10 under its earlier name (scales an attribute before opset 9).
      withParams(withValueDependentShape(MPC_OP("Upsample", "", 7, shapeResize, Elementwise)),
                 parseResize),

#include "mpc/Runtime/Kernels/ElementwiseOps.def"
      MPC_OP("And", "", 7, shapeCompare, Elementwise),
      MPC_OP("Or", "", 7, shapeCompare, Elementwise),
      MPC_OP("Xor", "", 7, shapeCompare, Elementwise),
      MPC_OP("Not", "", 1, shapeSameAsInput0, Elementwise),
      // In place over the "else" operand: a training step's skip guard
      // Where(found_inf, old, new) then costs nothing on a clean step.
      withInPlace(MPC_OP("Where", "", 9, shapeBroadcast, Elementwise), InPlace::WhereBranches),
      MPC_OP("Cast", "", 6, shapeCast, Data),
      // The target type is input 1's: Cast's conversions, to y's dtype.
      MPC_OP("CastLike", "", 15, shapeCastLike, Data),

      // Losses of training graphs (TrainingKernels.cpp).
      withParams(MPC_OP("NegativeLogLikelihoodLoss", "", 12, shapeClassificationLoss, Elementwise), parseLoss),
      withParams(MPC_OP("SoftmaxCrossEntropyLoss", "", 12, shapeClassificationLoss, Elementwise), parseLoss),

      // Run by the executor on the host, on every backend, for every stored
      // type (runtime/core/ControlFlow.cpp, SequenceOps.cpp).
      withValueDependentShape(MPC_OP("If", "", 1, nullptr, Data)),
      withValueDependentShape(MPC_OP("Loop", "", 1, nullptr, Data)),
      withValueDependentShape(MPC_OP("Scan", "", 8, nullptr, Data)),
      withValueDependentShape(MPC_OP("SequenceAt", "", 11, nullptr, Data)),
      withValueDependentShape(MPC_OP("SequenceConstruct", "", 11, nullptr, Data)),
      withValueDependentShape(MPC_OP("SequenceEmpty", "", 11, nullptr, Data)),
      withValueDependentShape(MPC_OP("SequenceErase", "", 11, nullptr, Data)),
      withValueDependentShape(MPC_OP("SequenceInsert", "", 11, nullptr, Data)),
      withValueDependentShape(MPC_OP("SequenceLength", "", 11, nullptr, Data)),
      withValueDependentShape(MPC_OP("ConcatFromSequence", "", 11, nullptr, Data)),
      withValueDependentShape(MPC_OP("SplitToSequence", "", 11, nullptr, Data)),
      withValueDependentShape(MPC_OP("SequenceMap", "", 17, nullptr, Data)),
      withValueDependentShape(MPC_OP("Optional", "", 15, nullptr, Data)),
      withValueDependentShape(MPC_OP("OptionalGetElement", "", 15, nullptr, Data)),
      withValueDependentShape(MPC_OP("OptionalHasElement", "", 15, nullptr, Data)),
  };
  for (OpDef &d : rows) {
    for (const auto &f : kFirstOpset)
      if (llvm::StringRef(d.opType) == f.opType)
        d.minOpset = f.since;
    const char *name = nullptr;
    if (ParseFn parse = elementwiseParser(d.opType, &name))
      d = withParamsNamed(d, parse, name);
  }
  return rows;
}
