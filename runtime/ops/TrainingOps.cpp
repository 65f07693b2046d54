//===- TrainingOps.cpp - Registry rows of the ai.mpc.training domain -------===//
//
// The gradient and optimizer-side ops training graphs use (docs/training.md);
// CPU kernels in runtime/cpu/TrainingKernels.cpp.
//
//===----------------------------------------------------------------------===//
#include "OpRows.h"

using namespace mpc;
using namespace mpc::shapes;
using namespace mpc::ops;

static const char *const kTraining = "ai.mpc.training";

std::vector<OpDef> mpc::ops::trainingOps() {
  std::vector<OpDef> rows = {
      withParams(MPC_OP("AveragePoolGrad", kTraining, 1, shapePoolGrad, Elementwise), parseWindow),
      withParams(MPC_OP("BatchNormalizationGrad", kTraining, 1, shapeBatchNormGrad, Elementwise), parseBatchNorm),
      MPC_OP("BiasGrad", kTraining, 1, shapeBiasGrad, Reduction),
      withParams(MPC_OP("ConvGrad", kTraining, 1, shapeConvGrad, Gemm), parseWindow),
      MPC_OP("ErfGrad", kTraining, 1, shapeUnaryGrad, Elementwise),
      withParams(MPC_OP("GatherGrad", kTraining, 1, shapeGatherGrad, Elementwise), parseAxis0),
      MPC_OP("GeluGrad", kTraining, 1, shapeUnaryGrad, Elementwise),
      withParams(MPC_OP("GemmBiasAct", kTraining, 1, shapeGemmBiasAct, Gemm), parseGemmBiasAct),
      MPC_OP("GlobalAveragePoolGrad", kTraining, 1, shapeGlobalAveragePoolGrad, Elementwise),
      withParams(MPC_OP("GRUGrad", kTraining, 1, shapeGruGrad, Gemm), parseRecurrent),
      withParams(MPC_OP("LayerNormalizationGrad", kTraining, 1, shapeLayerNormGrad, Elementwise), parseAxisMinus1),
      withParams(MPC_OP("LogSoftmaxGrad", kTraining, 1, shapeSoftmaxGrad, Elementwise), parseAxisMinus1),
      withParams(MPC_OP("LSTMGrad", kTraining, 1, shapeLstmGrad, Gemm), parseRecurrent),
      withParams(MPC_OP("MaxPoolGrad", kTraining, 1, shapePoolGrad, Elementwise), parseWindow),
      withParams(MPC_OP("MSELossGrad", kTraining, 1, shapeMSELossGrad, Elementwise), parseLoss),
      MPC_OP("MultiTensorUnscale", kTraining, 1, shapeMultiTensorUnscale, Elementwise),
      MPC_OP("ReluGrad", kTraining, 1, shapeUnaryGrad, Elementwise),
      MPC_OP("SigmoidGrad", kTraining, 1, shapeUnaryGrad, Elementwise),
      MPC_OP("SliceGrad", kTraining, 1, shapeSliceGrad, Data),
      withParams(MPC_OP("SoftmaxGrad", kTraining, 1, shapeSoftmaxGrad, Elementwise), parseAxisMinus1),
      MPC_OP("TanhGrad", kTraining, 1, shapeUnaryGrad, Elementwise),
      // Fused optimizer steps (mpc/Ops/OptimizerStep.h).
      MPC_OP("SGDStep", kTraining, 1, shapeOptimizerStep, Elementwise),
      MPC_OP("MomentumStep", kTraining, 1, shapeOptimizerStep, Elementwise),
      MPC_OP("AdamStep", kTraining, 1, shapeOptimizerStep, Elementwise),
      // Their multi-tensor forms: N parameters in one node.
      MPC_OP("MultiTensorSGDStep", kTraining, 1, shapeMultiTensorStep, Elementwise),
      MPC_OP("MultiTensorMomentumStep", kTraining, 1, shapeMultiTensorStep, Elementwise),
      MPC_OP("MultiTensorAdamStep", kTraining, 1, shapeMultiTensorStep, Elementwise),
      withParams(MPC_OP("SoftmaxCrossEntropyLossGrad", kTraining, 1, shapeSoftmaxCrossEntropyLossGrad, Elementwise), parseLoss),
  };
  for (OpDef &d : rows) {
    const char *name = nullptr;
    if (ParseFn parse = elementwiseParser(d.opType, &name))
      d = withParamsNamed(d, parse, name);
  }
  return rows;
}
