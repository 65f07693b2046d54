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

llvm::Error shapeSameAsInput0(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeBroadcast(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeCompare(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapePredicate(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeCast(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeCastLike(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGemm(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeMatMul(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeConv(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapePool(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGlobalPool(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeLayerNorm(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeReduce(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeLSTM(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeReshape(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeFlatten(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeTranspose(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeSqueeze(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeUnsqueeze(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeShape(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeSize(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGather(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeConcat(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeConstant(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeSlice(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeExpand(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeNonZero(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeBatchNorm(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeConstantOfShape(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeDropout(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeVariadicBroadcast(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeLRN(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapePad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeSplit(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeTile(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeDepthToSpace(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeSpaceToDepth(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeTrilu(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeRangeOp(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeArgReduce(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeTopK(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGatherElements(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGatherND(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeOneHot(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeInstanceNorm(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGroupNorm(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeLpNorm(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeRMSNorm(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeAttention(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeRotaryEmbedding(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeEinsum(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeCompress(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeReverseSequence(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeEyeLike(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeConvTranspose(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGRU(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeRNN(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeResize(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeFusedMatMul(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeUnaryGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeBiasGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeSoftmaxGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeLayerNormGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeBatchNormGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeBatchNormTraining(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeConvGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapePoolGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGlobalAveragePoolGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGatherGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeSliceGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeLstmGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeGruGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeClassificationLoss(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeSoftmaxCrossEntropyLossGrad(const ShapeQuery &, std::vector<ShapedType> &);
llvm::Error shapeMSELossGrad(const ShapeQuery &, std::vector<ShapedType> &);

} // namespace shapes
} // namespace mpc

#endif // MPC_RUNTIME_OPS_SHAPEFUNCTIONS_H
