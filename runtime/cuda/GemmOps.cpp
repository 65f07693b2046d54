//===- GemmOps.cpp - MatMul and Gemm through cuBLASLt -----------------------===//
//
// The GEMM family: the row-major product planned as column-major cuBLASLt
// calls (GemmPlan.h), the matmul descriptor, four layouts (C shares D's),
// the preference and one heuristic query per node and shape signature, kept
// with the algorithm and its workspace size; launch issues the planned
// cublasLtMatmul calls (and Gemm's C broadcast into D first, where planned).
//
//===----------------------------------------------------------------------===//
#include "CudaLaunch.h"
#include "CudaOp.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/GemmBiasAct.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cuda/GemmPlan.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Support/Diagnostics.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

std::string cublasText(cublasStatus_t s) { return cublasLtGetStatusString(s); }

cudaDataType_t cudaTypeOf(DType t) {
  switch (t) {
  case DType::F16: return CUDA_R_16F;
  case DType::BF16: return CUDA_R_16BF;
  default: return CUDA_R_32F;
  }
}

/// cuBLASLt objects of one prepared matrix product.
class GemmOp final : public CudaOp {
public:
  MatmulPlan plan;
  GemmBias bias = GemmBias::None;
  float alpha = 1, beta = 0;
  unsigned elementBytes = 4;
  /// ExpandToD: C broadcast into D's shape.
  kernels::BroadcastPlan expand;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  size_t workspace = 0;
  /// GemmBiasAct: its epilogue plan, cuBLASLt's part of the workspace (the
  /// plan's regions follow it), Y's and the bias's ONNX types, D's element
  /// size and Y's element count.
  bool fusedEpilogue = false;
  EpiloguePlan epi;
  size_t ltWorkspace = 0;
  int32_t yType = 1, biasType = 1;
  unsigned dElementBytes = 4;
  int64_t count = 0;
  /// GemmBiasAct's bias_grad (output 1): the operand it sums (0 A, 1 B; -1
  /// none); whether cuBLASLt's BGRADA/BGRADB epilogue writes it, else the
  /// column sum below runs after the product (also for an empty Y), with its
  /// workspace at sumOffset.
  int biasGradOf = -1;
  bool bgradEpilogue = false;
  std::unique_ptr<CudaOp> columnSum;
  size_t sumOffset = 0;

  size_t workspaceBytes() const override { return workspace; }
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override;
  /// GemmBiasAct: the bias cast (when planned), the product with its
  /// epilogue, then the planned Gelu and Y casts, and the column sum.
  std::string launchEpilogue(const KernelCall &call, cudaStream_t s,
                             const CudaContext &ctx) const;
  /// bias_grad through the column sum (the epilogue could not write it).
  std::string launchColumnSum(const KernelCall &call, cudaStream_t s,
                              const CudaContext &ctx) const;

  ~GemmOp() override {
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

} // namespace

CudaOpOrError cuda::prepareGemmOp(const Node &n, const CudaKernel &row,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  auto g = std::make_unique<GemmOp>();
  DType t = inputs[0].dtype;
  g->elementBytes = unsigned(runtimeElementSize(t));
  MatmulProblem problem;
  problem.aShape = inputs[0].shape;
  problem.bShape = inputs[1].shape;
  problem.elementBytes = g->elementBytes;
  bool gemm = row.kind == CudaKernelKind::Gemm;
  g->fusedEpilogue = row.kind == CudaKernelKind::GemmBiasAct;
  GemmBiasActAttrs epilogueAttrs;
  if (g->fusedEpilogue) {
    epilogueAttrs = gemmBiasActAttrsOf(n);
    problem.transA = epilogueAttrs.transA;
    problem.transB = epilogueAttrs.transB;
  }
  bool fused = row.kind == CudaKernelKind::FusedMatMul;
  FusedMatmulProblem fusedProblem;
  if (fused) {
    // alpha * op(A) @ op(B) with MatMul's batching and transBatchA/B
    // (planFusedMatmul; a vector is not transposed, as on the CPU).
    FusedMatMulParams fp = fusedMatMulParamsOf(n);
    fusedProblem = {problem.aShape, problem.bShape, fp.transA,      fp.transB,
                    fp.transBatchA, fp.transBatchB, g->elementBytes};
    g->alpha = fp.alpha;
  }
  if (gemm) {
    problem.transA = n.intAttr("transA", 0) != 0;
    problem.transB = n.intAttr("transB", 0) != 0;
    g->alpha = n.floatAttr("alpha", 1.0f);
    g->beta = n.floatAttr("beta", 1.0f);
  }
  auto plan = fused ? planFusedMatmul(fusedProblem) : planMatmul(problem);
  if (!plan)
    return inputError("{0}: {1}", describeNode(n), llvm::toString(plan.takeError()));
  g->plan = std::move(*plan);
  const LtGemm &lg = g->plan.gemm;
  // K = 0 with a non-empty Y (zeros, or beta C for Gemm): cuBLASLt takes no
  // empty operand (its heuristic refuses the layouts, seen on an H200), so
  // the node is left to the CPU like any input the row cannot take.
  if (lg.k == 0 && lg.m != 0 && lg.n != 0)
    return std::unique_ptr<CudaOp>();
  if (gemm) {
    bool hasC = inputs.size() > 2 && inputs[2].dtype != DType::Undefined;
    llvm::ArrayRef<int64_t> cShape = hasC ? llvm::ArrayRef<int64_t>(inputs[2].shape)
                                          : llvm::ArrayRef<int64_t>();
    auto bias = planGemmBias(lg.n, lg.m, hasC, cShape, g->beta);
    if (!bias)
      return inputError("{0}: {1}", describeNode(n), llvm::toString(bias.takeError()));
    g->bias = *bias;
    if (g->bias == GemmBias::ExpandToD)
      g->expand = kernels::makeBroadcastPlan(cShape, g->plan.outShape);
  } else {
    g->beta = 0;
  }
  cudaDataType_t dDataType = cudaTypeOf(t);
  if (g->fusedEpilogue) {
    EpilogueProblem ep;
    ep.aType = int32_t(t);
    ep.yType = int32_t(epilogueAttrs.outputType(t));
    ep.hasBias = inputs.size() > 2 && inputs[2].dtype != DType::Undefined;
    ep.biasType = ep.hasBias ? int32_t(inputs[2].dtype) : ep.yType;
    ep.act = EpilogueAct(uint8_t(epilogueAttrs.act));
    if (n.numOutputs() > 1 && n.output(1))
      ep.biasGradOf = int8_t(epilogueAttrs.biasGradOf);
    // Y's element count from the result shape: an empty batch leaves the
    // plan's M unfolded, and nothing may be written then.
    int64_t count = 1;
    for (int64_t d : g->plan.outShape)
      count *= d;
    ep.n = lg.m;
    ep.m = ep.n ? count / ep.n : 0;
    ep.biasElements = ep.hasBias ? 1 : 0;
    if (ep.hasBias)
      for (int64_t d : inputs[2].shape)
        ep.biasElements *= d;
    auto epi = planGemmEpilogue(ep);
    if (!epi)
      return inputError("{0}: {1}", describeNode(n), llvm::toString(epi.takeError()));
    g->epi = *epi;
    g->yType = ep.yType;
    g->biasType = ep.biasType;
    g->dElementBytes = unsigned(runtimeElementSize(DType(g->epi.dType)));
    g->count = ep.m * ep.n;
    dDataType = cudaTypeOf(DType(g->epi.dType));
    if (ep.biasGradOf >= 0) {
      // The column sum is planned in every case: it writes bias_grad where
      // the heuristic has no BGRAD algorithm, and for an empty Y.
      g->biasGradOf = ep.biasGradOf;
      const TensorDesc &x = inputs[ep.biasGradOf == 0 ? 0 : 1];
      auto sum = prepareColumnSum(x, ep.yType == 1 && t != DType::F32, ctx);
      if (!sum)
        return sum.takeError();
      if (!*sum) // an empty k with a non-empty bias_grad (zeros): the CPU runs it
        return std::unique_ptr<CudaOp>();
      g->columnSum = std::move(*sum);
      g->bgradEpilogue = true;
    }
  }

  auto check = [&](cublasStatus_t s, const char *what) -> llvm::Error {
    if (s == CUBLAS_STATUS_SUCCESS)
      return llvm::Error::success();
    return inputError("{0}: {1} failed: {2}", describeNode(n), what, cublasText(s));
  };
  cublasComputeType_t compute =
      t == DType::F32 && ctx.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (auto e = check(cublasLtMatmulDescCreate(&g->desc, compute, CUDA_R_32F),
                     "cublasLtMatmulDescCreate"))
    return e;
  cublasOperation_t ta = lg.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = lg.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (g->bias == GemmBias::Epilogue || g->fusedEpilogue) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    if (g->fusedEpilogue)
      switch (g->epi.epilogue) {
      case LtEpilogue::Bias: epi = CUBLASLT_EPILOGUE_BIAS; break;
      case LtEpilogue::ReluBias: epi = CUBLASLT_EPILOGUE_RELU_BIAS; break;
      case LtEpilogue::GeluBias: epi = CUBLASLT_EPILOGUE_GELU_BIAS; break;
      case LtEpilogue::Default: epi = CUBLASLT_EPILOGUE_DEFAULT; break;
      case LtEpilogue::Relu: epi = CUBLASLT_EPILOGUE_RELU; break;
      case LtEpilogue::Gelu: epi = CUBLASLT_EPILOGUE_GELU; break;
      case LtEpilogue::BGradA: epi = CUBLASLT_EPILOGUE_BGRADA; break;
      case LtEpilogue::BGradB: epi = CUBLASLT_EPILOGUE_BGRADB; break;
      }
    cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
  }
  cudaDataType_t operandType = cudaTypeOf(t);
  auto layout = [&](const LtOperand &o, cublasLtMatrixLayout_t &l,
                    cudaDataType_t type) -> llvm::Error {
    if (auto e = check(cublasLtMatrixLayoutCreate(&l, type, uint64_t(o.rows), uint64_t(o.cols),
                                                  o.ld),
                       "cublasLtMatrixLayoutCreate"))
      return e;
    if (lg.batchCount > 1) {
      int32_t count = int32_t(lg.batchCount);
      int64_t stride = o.batchStride;
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                       sizeof(count));
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                       &stride, sizeof(stride));
    }
    return llvm::Error::success();
  };
  if (auto e = layout(lg.a, g->a, operandType))
    return e;
  if (auto e = layout(lg.b, g->b, operandType))
    return e;
  if (auto e = layout(lg.d, g->c, dDataType))
    return e;
  if (auto e = layout(lg.d, g->d, dDataType))
    return e;

  cublasLtMatmulPreference_t pref = nullptr;
  if (auto e = check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"))
    return e;
  uint64_t maxWorkspace = ctx.gemmWorkspaceCap;
  // Split-K partial sums are reduced in the compute type (fp32), never in a
  // 16-bit output type.
  uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  uint32_t alignA = lg.a.alignment, alignB = lg.b.alignment, alignD = lg.d.alignment;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &maxWorkspace, sizeof(maxWorkspace));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                       &reduction, sizeof(reduction));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA,
                                       sizeof(alignA));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB,
                                       sizeof(alignB));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD,
                                       sizeof(alignD));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD,
                                       sizeof(alignD));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(ctx.lt, g->desc, g->a, g->b, g->c, g->d, pref,
                                                    1, &result, &found);
  if (g->bgradEpilogue && (s != CUBLAS_STATUS_SUCCESS || found == 0)) {
    // No algorithm sums the operand in the epilogue for this layout: the
    // product alone, then the planned column sum.
    g->bgradEpilogue = false;
    cublasLtEpilogue_t plain = CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof(plain));
    found = 0;
    s = cublasLtMatmulAlgoGetHeuristic(ctx.lt, g->desc, g->a, g->b, g->c, g->d, pref, 1, &result,
                                       &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (auto e = check(s, "cublasLtMatmulAlgoGetHeuristic"))
    return e;
  if (found == 0)
    return inputError("{0}: cuBLASLt has no algorithm for {1} x {2} in {3}", describeNode(n),
                      formatShape(inputs[0].shape), formatShape(inputs[1].shape), dtypeName(t));
  g->algo = result.algo;
  g->workspace = result.workspaceSize;
  g->ltWorkspace = g->workspace;
  if (g->fusedEpilogue && g->epi.extraBytes)
    g->workspace = (g->ltWorkspace + 255) / 256 * 256 + g->epi.extraBytes;
  if (g->columnSum) {
    g->sumOffset = (g->workspace + 255) / 256 * 256;
    g->workspace = g->sumOffset + g->columnSum->workspaceBytes();
  }
  return std::unique_ptr<CudaOp>(std::move(g));
}

std::string GemmOp::launch(const KernelCall &call, cudaStream_t s, const CudaContext &ctx) const {
  const GemmOp &g = *this;
  const LtGemm &lg = g.plan.gemm;
  char *userA = static_cast<char *>(call.inputs[0].data);
  char *userB = static_cast<char *>(call.inputs[1].data);
  char *out = static_cast<char *>(call.outputs[0].data);
  const void *userC = call.hasInput(2) ? call.inputs[2].data : nullptr;
  if (g.fusedEpilogue)
    return g.launchEpilogue(call, s, ctx);
  float beta = 0;
  if (g.bias == GemmBias::Epilogue) {
    cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &userC,
                                   sizeof(userC));
  } else if (g.bias == GemmBias::Matrix) {
    beta = g.beta;
  } else if (g.bias == GemmBias::ExpandToD) {
    beta = g.beta;
    if (cudaError_t e = launchBroadcastCopy(g.elementBytes, userC, out, g.expand,
                                            ctx.geometry(g.expand.numElements), s))
      return "broadcasting C: " + cudaText(e);
  }
  size_t eb = g.elementBytes;
  for (const LtGemm::Offsets &o : lg.offsets) {
    char *d = out + o.d * eb;
    const void *c = g.bias == GemmBias::Matrix ? static_cast<const char *>(userC) + o.d * eb : d;
    cublasStatus_t st =
        cublasLtMatmul(ctx.lt, g.desc, &g.alpha, userB + o.userB * eb, g.a, userA + o.userA * eb,
                       g.b, &beta, c, g.c, d, g.d, &g.algo, call.workspace,
                       call.workspace ? call.workspaceBytes : 0, s);
    if (st != CUBLAS_STATUS_SUCCESS)
      return "cublasLtMatmul failed: " + cublasText(st);
  }
  return std::string();
}

std::string GemmOp::launchEpilogue(const KernelCall &call, cudaStream_t s,
                                   const CudaContext &ctx) const {
  const LtGemm &lg = plan.gemm;
  if (count == 0) // an empty Y: nothing to write but bias_grad
    return columnSum ? launchColumnSum(call, s, ctx) : std::string();
  char *extra = static_cast<char *>(call.workspace) + (ltWorkspace + 255) / 256 * 256;
  if (bgradEpilogue) {
    void *db = call.outputs[1].data;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof(db));
  } else if (call.hasInput(2)) {
    const void *bias = call.inputs[2].data;
    if (epi.castBias) {
      if (cudaError_t e = launchCast(biasType, epi.dType, bias, extra + epi.biasOffset, lg.m,
                                     ctx.geometry(lg.m), s))
        return "casting the bias: " + cudaText(e);
      bias = extra + epi.biasOffset;
    }
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  char *userA = static_cast<char *>(call.inputs[0].data);
  char *userB = static_cast<char *>(call.inputs[1].data);
  char *d = epi.stageD ? extra + epi.dOffset : static_cast<char *>(call.outputs[0].data);
  float beta = 0;
  for (const LtGemm::Offsets &o : lg.offsets) {
    char *dm = d + o.d * dElementBytes;
    cublasStatus_t st = cublasLtMatmul(ctx.lt, desc, &alpha, userB + o.userB * elementBytes, a,
                                       userA + o.userA * elementBytes, b, &beta, dm, c, dm, this->d,
                                       &algo, call.workspace, ltWorkspace, s);
    if (st != CUBLAS_STATUS_SUCCESS)
      return "cublasLtMatmul failed: " + cublasText(st);
  }
  if (epi.separateGelu)
    if (cudaError_t e = launchUnary(UnaryOpId::Gelu, blobOf(kernels::Gelu{false}), epi.dType, d, d,
                                    count, ctx.geometry(count), s))
      return "the GELU pass: " + cudaText(e);
  if (epi.stageD)
    if (cudaError_t e = launchCast(epi.dType, yType, d, call.outputs[0].data, count,
                                   ctx.geometry(count), s))
      return "casting Y: " + cudaText(e);
  if (columnSum && !bgradEpilogue)
    return launchColumnSum(call, s, ctx);
  return std::string();
}

std::string GemmOp::launchColumnSum(const KernelCall &call, cudaStream_t s,
                                    const CudaContext &ctx) const {
  if (call.outputs.size() < 2 || !call.outputs[1].data)
    return "bias_grad has no output buffer";
  KernelCall sum;
  sum.node = call.node;
  sum.inputs.push_back(call.inputs[biasGradOf == 0 ? 0 : 1]);
  sum.outputs.push_back(call.outputs[1]);
  sum.workspace = call.workspace ? static_cast<char *>(call.workspace) + sumOffset : nullptr;
  sum.workspaceBytes = columnSum->workspaceBytes();
  sum.errors = call.errors;
  sum.index = call.index;
  std::string e = columnSum->launch(sum, s, ctx);
  return e.empty() ? e : "the bias_grad column sum: " + e;
}
