//===- ShapeFunctions.h - The registry rows' shape functions ----*- C++ -*-===//
//
// Declarations of every shape function a registry row names (namespace
// mpc::shapes). Their bodies all live in runtime/ops/shapes/*.cpp, grouped by
// op family (tests/ops/test_shape_rules_layout.py keeps them there); the
// geometry a kernel shares with its shape function is in NodeGeometry.h.
// Nothing in any of them is CPU-specific. The executor's planner and the
// ShapeEstimator both call them. Private to runtime/ops and the backends.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPS_SHAPEFUNCTIONS_H
#define MPC_RUNTIME_OPS_SHAPEFUNCTIONS_H

#include "mpc/Runtime/OpRegistry.h"

namespace mpc {
namespace shapes {

/// Every shape function, in one list. Each is declared here together with
/// `<name>Where`, the location of its definition, which MPC_DEFINED_BELOW
/// (OpRegistry.h) on the line above the definition records; the registry
/// copies it into its rows for `mpc ops --op`, and tests/tools/test_ops.py
/// checks that the line it names defines the function.
#define MPC_SHAPE_FUNCTIONS(X) \
  X(shapeSameAsInput0) \
  X(shapeBroadcast) \
  X(shapeCompare) \
  X(shapePredicate) \
  X(shapeCast) \
  X(shapeCastLike) \
  X(shapeGemm) \
  X(shapeMatMul) \
  X(shapeConv) \
  X(shapePool) \
  X(shapeGlobalPool) \
  X(shapeLayerNorm) \
  X(shapeReduce) \
  X(shapeLSTM) \
  X(shapeReshape) \
  X(shapeFlatten) \
  X(shapeTranspose) \
  X(shapeSqueeze) \
  X(shapeUnsqueeze) \
  X(shapeShape) \
  X(shapeSize) \
  X(shapeGather) \
  X(shapeConcat) \
  X(shapeConstant) \
  X(shapeSlice) \
  X(shapeExpand) \
  X(shapeNonZero) \
  X(shapeNonMaxSuppression) \
  X(shapeBatchNorm) \
  X(shapeConstantOfShape) \
  X(shapeDropout) \
  X(shapeVariadicBroadcast) \
  X(shapeLRN) \
  X(shapeQuantizeLinear) \
  X(shapeDequantizeLinear) \
  X(shapeRoiAlign) \
  X(shapePad) \
  X(shapeSplit) \
  X(shapeTile) \
  X(shapeDepthToSpace) \
  X(shapeSpaceToDepth) \
  X(shapeTrilu) \
  X(shapeRangeOp) \
  X(shapeArgReduce) \
  X(shapeTopK) \
  X(shapeGatherElements) \
  X(shapeScatterElements) \
  X(shapeScatterND) \
  X(shapeGatherND) \
  X(shapeOneHot) \
  X(shapeInstanceNorm) \
  X(shapeGroupNorm) \
  X(shapeLpNorm) \
  X(shapeRMSNorm) \
  X(shapeAttention) \
  X(shapeRotaryEmbedding) \
  X(shapeEinsum) \
  X(shapeCompress) \
  X(shapeReverseSequence) \
  X(shapeEyeLike) \
  X(shapeConvTranspose) \
  X(shapeGRU) \
  X(shapeRNN) \
  X(shapeResize) \
  X(shapeFusedMatMul) \
  X(shapeUnaryGrad) \
  X(shapeBiasGrad) \
  X(shapeSoftmaxGrad) \
  X(shapeLayerNormGrad) \
  X(shapeBatchNormGrad) \
  X(shapeBatchNormTraining) \
  X(shapeConvGrad) \
  X(shapePoolGrad) \
  X(shapeGlobalAveragePoolGrad) \
  X(shapeGatherGrad) \
  X(shapeSliceGrad) \
  X(shapeLstmGrad) \
  X(shapeGruGrad) \
  X(shapeClassificationLoss) \
  X(shapeSoftmaxCrossEntropyLossGrad) \
  X(shapeMSELossGrad) \
  X(shapeOptimizerStep) \
  X(shapeMultiTensorStep) \
  X(shapeMultiTensorUnscale) \
  X(shapeGemmBiasAct)

#define MPC_DECLARE_SHAPE_FUNCTION(Fn)                                         \
  llvm::Error Fn(const ShapeQuery &, std::vector<ShapedType> &);               \
  extern const SourceLocation Fn##Where;
MPC_SHAPE_FUNCTIONS(MPC_DECLARE_SHAPE_FUNCTION)
#undef MPC_DECLARE_SHAPE_FUNCTION

} // namespace shapes
} // namespace mpc

#endif // MPC_RUNTIME_OPS_SHAPEFUNCTIONS_H
