//===- ContribOps.cpp - Registry rows of the com.microsoft domain ----------===//
//
// The onnxruntime contrib ops mpc runs (CPU kernels in
// runtime/cpu/ContribKernels.cpp).
//
//===----------------------------------------------------------------------===//
#include "OpRows.h"

using namespace mpc;
using namespace mpc::shapes;
using namespace mpc::ops;

static const char *const kContrib = "com.microsoft";

std::vector<OpDef> mpc::ops::contribOps() {
  return {
      // onnxruntime training's ConvGrad: the contract of ai.mpc.training's.
      withParams(MPC_OP("ConvGrad", kContrib, 1, shapeConvGrad, Gemm), parseWindow),
      withParams(MPC_OP("FusedMatMul", kContrib, 1, shapeFusedMatMul, Gemm), parseFusedMatMul),
  };
}
