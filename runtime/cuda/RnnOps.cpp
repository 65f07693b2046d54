//===- RnnOps.cpp - LSTM, GRU and RNN through cuBLASLt and gate kernels -----===//
//
// The recurrent family (RnnPlan.h has the plan, RnnLaunch.h the kernels):
// one cuBLASLt GEMM for every step's input projection, then per step a
// strided-batch GEMM over the directions for H R^T and a gate kernel over
// RecurrentBodies.h's cells (GRU without linear_before_reset: gates, the
// (r . H) R_h^T GEMM, then the candidate). Algorithms are chosen here, in
// prepare; launch only queues work. The state is fp32 (as on the CPU, which
// widens everything to fp32); X and W enter the projection in their storage
// type with fp32 compute, R is widened to fp32 once per launch.
//
//===----------------------------------------------------------------------===//
#include "../ops/NodeGeometry.h"
#include "../ops/ShapeHelpers.h"
#include "CudaLaunch.h"
#include "CudaOp.h"
#include "RnnLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/RnnPlan.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Support/Diagnostics.h"

using namespace mpc;
using namespace mpc::cuda;
using kernels::RecurrentSizes;

namespace {

cudaDataType_t ltType(DType t) {
  return t == DType::F16 ? CUDA_R_16F : t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// One planned cuBLASLt product D = A . B^T (user's view, GemmPlan.h) with
/// operands of `in` and D of fp32, its algorithm chosen once.
class LtProduct {
public:
  LtGemm gemm;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  size_t workspace = 0;

  LtProduct() = default;
  LtProduct(const LtProduct &) = delete;
  LtProduct &operator=(const LtProduct &) = delete;
  ~LtProduct() {
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }

  /// "" or what cuBLASLt refused.
  std::string prepare(const LtGemm &g, DType in, const CudaContext &ctx) {
    gemm = g;
    cublasComputeType_t compute =
        in == DType::F32 && ctx.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
      return "cublasLtMatmulDescCreate failed";
    cublasOperation_t ta = g.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = g.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    auto layout = [&](const LtOperand &o, cudaDataType_t t, cublasLtMatrixLayout_t &l) {
      if (cublasLtMatrixLayoutCreate(&l, t, uint64_t(o.rows), uint64_t(o.cols), o.ld) !=
          CUBLAS_STATUS_SUCCESS)
        return false;
      if (g.batchCount > 1) {
        int32_t count = int32_t(g.batchCount);
        int64_t stride = o.batchStride;
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                         sizeof(count));
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                         sizeof(stride));
      }
      return true;
    };
    if (!layout(g.a, ltType(in), a) || !layout(g.b, ltType(in), b) || !layout(g.d, CUDA_R_32F, d))
      return "cublasLtMatrixLayoutCreate failed";
    cublasLtMatmulPreference_t pref = nullptr;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
      return "cublasLtMatmulPreferenceCreate failed";
    uint64_t cap = ctx.gemmWorkspaceCap;
    uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    uint32_t alignA = g.a.alignment, alignB = g.b.alignment, alignD = g.d.alignment;
    struct {
      cublasLtMatmulPreferenceAttributes_t what;
      const void *value;
      size_t bytes;
    } prefs[] = {{CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof(cap)},
                 {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)},
                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof(alignA)},
                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof(alignB)},
                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD, sizeof(alignD)},
                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, sizeof(alignD)}};
    for (const auto &p : prefs)
      cublasLtMatmulPreferenceSetAttribute(pref, p.what, p.value, p.bytes);
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc, a, b, d, d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS)
      return std::string("cublasLtMatmulAlgoGetHeuristic failed: ") + cublasLtGetStatusString(s);
    if (found == 0)
      return "cuBLASLt has no algorithm for a " + std::to_string(g.m) + " x " +
             std::to_string(g.n) + " x " + std::to_string(g.k) + " product";
    algo = result.algo;
    workspace = result.workspaceSize;
    return "";
  }

  /// Queues D = A . B^T + beta D; userA/userB/out are the user's operands.
  std::string run(const CudaContext &ctx, const void *userA, const void *userB, float *out,
                  unsigned inBytes, void *scratch, size_t scratchBytes, cudaStream_t s,
                  float beta = 0) const {
    const float alpha = 1;
    for (const LtGemm::Offsets &o : gemm.offsets) {
      float *dst = out + o.d;
      cublasStatus_t st =
          cublasLtMatmul(ctx.lt, desc, &alpha, static_cast<const char *>(userB) + o.userB * inBytes,
                         a, static_cast<const char *>(userA) + o.userA * inBytes, b, &beta, dst, d,
                         dst, d, &algo, scratch, scratch ? scratchBytes : 0, s);
      if (st != CUBLAS_STATUS_SUCCESS)
        return std::string("cublasLtMatmul failed: ") + cublasLtGetStatusString(st);
    }
    return "";
  }
};

/// A prepared LSTM, GRU or RNN node.
class RecurrentOp final : public CudaOp {
public:
  RecurrentCell cell = RecurrentCell::Rnn;
  bool gruSplit = false;
  DType type = DType::F32;
  RecurrentArgs args; ///< sizes and constants; launch fills the pointers
  RecurrentWorkspace ws;
  LtProduct input, recurrent, reset;

  size_t workspaceBytes() const override { return ws.total; }
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &ctx) const override;
};

/// A prepared LSTMGrad node (RnnPlan.h: LstmGradGemms, LstmGradWorkspace).
class LstmGradOp final : public CudaOp {
public:
  LstmGradArgs args;
  LstmGradWorkspace ws;
  LtProduct input, recurrent, backState, dX, dW, dR;

  size_t workspaceBytes() const override { return ws.total; }
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &ctx) const override;
};

/// The node refused, with why (it then runs on the CPU).
llvm::Error refused(const Node &n, const std::string &why) {
  return inputError("{0}: {1}; the node runs on the CPU", describeNode(n), why);
}

/// sequence_lens (input `port`, absent or a graph constant with one value
/// per batch entry in [lo, seq]): its type number (0 when absent), or why
/// the node is refused.
llvm::Expected<int32_t> lensTypeOf(const Node &n, llvm::ArrayRef<TensorDesc> inputs, unsigned port,
                                   const RecurrentSizes &s, int64_t lo) {
  if (inputs.size() <= port || inputs[port].dtype == DType::Undefined)
    return 0;
  std::vector<int64_t> lens;
  if (!knownInputInts(n, inputs, port, lens))
    return refused(n, "sequence_lens is not a constant of the graph");
  if (int64_t(lens.size()) != s.batch)
    return refused(n, "sequence_lens does not have one value per batch entry");
  for (int64_t l : lens)
    if (l < lo || l > s.seq)
      return refused(n, "a sequence_lens value is outside [" + std::to_string(lo) + ", " +
                            std::to_string(s.seq) + "]");
  return int32_t(inputs[port].dtype);
}

} // namespace

CudaOpOrError cuda::prepareRecurrentOp(const Node &n, const CudaKernel &row,
                                       llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  auto parsed = parseRecurrent(n);
  if (!parsed)
    return parsed.takeError();
  const RecurrentParams &params = static_cast<const RecurrentParams &>(**parsed);
  auto op = std::make_unique<RecurrentOp>();
  bool lstm = n.opType == "LSTM", gru = n.opType == "GRU";
  if (inputs.size() < 3 || inputs[0].shape.size() != 3 || inputs[2].shape.size() != 3)
    return std::unique_ptr<CudaOp>();
  DType t = inputs[0].dtype;
  // Every float operand of X's type (the launchers read them as one type).
  for (unsigned i : {1u, 2u, 3u, 5u, 6u, 7u})
    if (i < inputs.size() && inputs[i].dtype != DType::Undefined && inputs[i].dtype != t)
      return std::unique_ptr<CudaOp>();
  RecurrentSizes &s = op->args.s;
  s.batchMajor = params.batchMajor;
  s.seq = inputs[0].shape[s.batchMajor ? 1 : 0];
  s.batch = inputs[0].shape[s.batchMajor ? 0 : 1];
  s.input = inputs[0].shape[2];
  s.hidden = inputs[2].shape[2];
  s.dirs = params.numDirections();
  s.gates = lstm ? 4 : gru ? 3 : 1;
  if (s.seq * s.batch * s.hidden * s.input == 0)
    return refused(n, "an empty sequence, batch, input or state");
  op->type = t;
  op->args.type = int32_t(t);
  op->args.reverse = params.reverse();
  op->args.clip = params.hasClip ? params.clip : 0.0f;
  op->gruSplit = gru && !params.linearBeforeReset;
  op->cell = lstm  ? RecurrentCell::Lstm
             : gru ? (op->gruSplit ? RecurrentCell::GruGates : RecurrentCell::Gru)
                   : RecurrentCell::Rnn;
  if (!lstm) {
    static const char *const gruActs[2] = {"Sigmoid", "Tanh"}, *const rnnActs[1] = {"Tanh"};
    auto acts = shapes::parseActivations(n, params,
                                         gru ? llvm::ArrayRef<const char *>(gruActs)
                                             : llvm::ArrayRef<const char *>(rnnActs),
                                         s.dirs);
    if (!acts)
      return acts.takeError();
    for (size_t i = 0; i < acts->size() && i < 4; ++i)
      op->args.acts[i] = (*acts)[i];
  }
  // sequence_lens: the gate kernels read it on the device, but its range is
  // checked here, so it must be a constant of the graph.
  auto lens = lensTypeOf(n, inputs, 4, s, 0);
  if (!lens)
    return lens.takeError();
  op->args.lensType = *lens;
  unsigned eb = unsigned(runtimeElementSize(t));
  auto gemms = planRecurrentGemms(s, op->gruSplit, eb);
  if (!gemms)
    return refused(n, llvm::toString(gemms.takeError()));
  std::string why = op->input.prepare(gemms->input.gemm, t, ctx);
  if (why.empty())
    why = op->recurrent.prepare(gemms->recurrent.gemm, DType::F32, ctx);
  if (why.empty() && op->gruSplit)
    why = op->reset.prepare(gemms->reset.gemm, DType::F32, ctx);
  if (!why.empty())
    return refused(n, why);
  RecurrentOptions o;
  o.lstm = lstm;
  o.gruSplit = op->gruSplit;
  o.widenR = t != DType::F32;
  o.gemmBytes = std::max({op->input.workspace, op->recurrent.workspace, op->reset.workspace});
  op->ws = recurrentWorkspace(s, o);
  (void)row;
  return std::unique_ptr<CudaOp>(std::move(op));
}

CudaOpOrError cuda::prepareLstmGradOp(const Node &n, const CudaKernel &row,
                                      llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  (void)row;
  using shapes::kLstmPorts;
  std::vector<ShapedType> types;
  for (const TensorDesc &d : inputs)
    types.push_back(ShapedType{d.dtype, std::vector<int64_t>(d.shape.begin(), d.shape.end())});
  std::vector<const HostTensor *> values(types.size(), nullptr);
  auto shape =
      shapes::recurrentGradShape(ShapeQuery{n, types, values}, kLstmPorts, shapes::checkLstmAttrs);
  if (!shape)
    return shape.takeError();
  auto op = std::make_unique<LstmGradOp>();
  LstmGradArgs &a = op->args;
  RecurrentSizes &s = a.s;
  s.seq = shape->seq;
  s.batch = shape->batch;
  s.input = shape->input;
  s.hidden = shape->hidden;
  s.dirs = shape->directions;
  s.gates = 4;
  a.reverse = shape->reverse;
  DType t = inputs[kLstmPorts.x].dtype;
  a.type = int32_t(t);
  if (s.seq * s.batch * s.hidden * s.input == 0)
    return refused(n, "an empty sequence, batch, input or state");
  auto lens = lensTypeOf(n, inputs, kLstmPorts.lens, s, 1);
  if (!lens)
    return lens.takeError();
  a.lensType = *lens;
  auto gemms = planLstmGradGemms(s);
  if (!gemms)
    return refused(n, llvm::toString(gemms.takeError()));
  std::string why;
  std::pair<LtProduct *, const MatmulPlan *> products[] = {{&op->input, &gemms->input},
                                                           {&op->recurrent, &gemms->recurrent},
                                                           {&op->backState, &gemms->backState},
                                                           {&op->dX, &gemms->dX},
                                                           {&op->dW, &gemms->dW},
                                                           {&op->dR, &gemms->dR}};
  size_t gemmBytes = 0;
  for (auto &p : products) {
    if (why.empty())
      why = p.first->prepare(p.second->gemm, DType::F32, ctx);
    gemmBytes = std::max(gemmBytes, p.first->workspace);
  }
  if (!why.empty())
    return refused(n, why);
  op->ws = lstmGradWorkspace(s, t != DType::F32, gemmBytes);
  return std::unique_ptr<CudaOp>(std::move(op));
}

std::string LstmGradOp::launch(const KernelCall &call, cudaStream_t s,
                               const CudaContext &ctx) const {
  using shapes::kLstmPorts;
  char *base = static_cast<char *>(call.workspace);
  auto f32 = [&](size_t off) { return reinterpret_cast<float *>(base + off); };
  auto given = [&](unsigned i) { return call.hasInput(i) ? call.inputs[i].data : nullptr; };
  LstmGradArgs a = args;
  const RecurrentSizes &z = a.s;
  const int64_t rows = z.seq * z.batch, g4 = 4 * z.hidden, hid = z.hidden;
  a.lens = given(kLstmPorts.lens);
  a.bias = given(kLstmPorts.b);
  a.dY = given(shapes::kDY);
  a.dYh = given(shapes::kDYh);
  a.dYc = given(shapes::kDYc);
  a.h0 = given(shapes::kH0);
  a.c0 = given(shapes::kC0);
  a.projection = f32(ws.projection);
  a.recurrent = f32(ws.recurrent);
  a.gates = f32(ws.gates);
  a.cells = f32(ws.cells);
  a.hiddens = f32(ws.hiddens);
  a.previous = f32(ws.previous);
  a.gateGrads = f32(ws.gateGrads);
  a.stepGrads = f32(ws.stepGrads);
  a.backState = f32(ws.backState);
  a.backCell = f32(ws.backCell);
  void *scratch = base + ws.gemm;
  size_t scratchBytes = ws.total - ws.gemm;
  LaunchGeometry g = ctx.geometry(z.dirs * z.batch * hid);
  auto failed = [](const char *what, cudaError_t e) {
    return std::string(what) + ": " + cudaText(e);
  };

  // X, W and R in fp32.
  const void *x = given(shapes::kX), *w = given(shapes::kW), *r = given(shapes::kR);
  if (a.type != kOnnxF32) {
    std::pair<const void **, size_t> wide[] = {{&x, ws.wideX}, {&w, ws.wideW}, {&r, ws.wideR}};
    int64_t counts[] = {rows * z.input, z.dirs * g4 * z.input, z.dirs * g4 * hid};
    for (int i = 0; i < 3; ++i) {
      if (cudaError_t e = launchCast(a.type, kOnnxF32, *wide[i].first, f32(wide[i].second),
                                     counts[i], ctx.geometry(counts[i]), s))
        return launchText(e);
      *wide[i].first = f32(wide[i].second);
    }
  }
  if (cudaError_t e = cudaMemsetAsync(a.previous, 0, size_t(z.dirs * rows * hid) * 4, s))
    return failed("clearing the previous states", e);
  if (cudaError_t e = cudaMemsetAsync(a.gateGrads, 0, size_t(z.dirs * rows * g4) * 4, s))
    return failed("clearing the gate gradients", e);
  if (cudaError_t e = launchLstmGradInit(a, g, s))
    return launchText(e);
  std::string why = input.run(ctx, x, w, f32(ws.projection), 4, scratch, scratchBytes, s);
  if (!why.empty())
    return "input projection: " + why;
  for (int64_t step = 0; step < z.seq; ++step) {
    a.step = step;
    why = recurrent.run(ctx, a.hiddens + step * z.batch * hid, r, f32(ws.recurrent), 4, scratch,
                        scratchBytes, s);
    if (!why.empty())
      return "recurrent product: " + why;
    if (cudaError_t e = launchLstmGradForward(a, g, s))
      return launchText(e);
  }
  for (int64_t step = z.seq; step-- > 0;) {
    a.step = step;
    if (cudaError_t e = launchLstmGradBackward(a, g, s))
      return launchText(e);
    why = backState.run(ctx, a.stepGrads, r, a.backState, 4, scratch, scratchBytes, s);
    if (!why.empty())
      return "state gradient product: " + why;
  }

  // The outputs: fp32 products, then one cast each.
  auto out = [&](unsigned i) { return i < call.outputs.size() ? call.outputs[i].data : nullptr; };
  auto castOut = [&](const float *from, unsigned i, int64_t count) -> std::string {
    if (!out(i))
      return "";
    return launchText(launchCast(kOnnxF32, a.type, from, out(i), count, ctx.geometry(count), s));
  };
  if (out(0)) {
    for (int64_t d = 0; d < z.dirs && why.empty(); ++d)
      why =
          dX.run(ctx, a.gateGrads + d * rows * g4, static_cast<const float *>(w) + d * g4 * z.input,
                 f32(ws.dX), 4, scratch, scratchBytes, s, d == 0 ? 0.0f : 1.0f);
    if (!why.empty())
      return "dX product: " + why;
  }
  if (out(1) &&
      !(why = dW.run(ctx, a.gateGrads, x, f32(ws.dW), 4, scratch, scratchBytes, s)).empty())
    return "dW product: " + why;
  if (out(2) &&
      !(why = dR.run(ctx, a.gateGrads, a.previous, f32(ws.dR), 4, scratch, scratchBytes, s))
           .empty())
    return "dR product: " + why;
  std::pair<const float *, int64_t> results[] = {{f32(ws.dX), rows * z.input},
                                                 {f32(ws.dW), z.dirs * g4 * z.input},
                                                 {f32(ws.dR), z.dirs * g4 * hid}};
  for (unsigned i = 0; i < 3; ++i)
    if (std::string e = castOut(results[i].first, i, results[i].second); !e.empty())
      return e;
  if (out(3))
    if (cudaError_t e = launchLstmGradBias(a, out(3), ctx.geometry(z.dirs * g4), s))
      return launchText(e);
  int64_t state = z.dirs * z.batch * hid;
  if (std::string e = castOut(a.backState, 4, state); !e.empty())
    return e;
  return castOut(a.backCell, 5, state);
}

std::string RecurrentOp::launch(const KernelCall &call, cudaStream_t s,
                                const CudaContext &ctx) const {
  char *base = static_cast<char *>(call.workspace);
  auto f32 = [&](size_t off) { return reinterpret_cast<float *>(base + off); };
  RecurrentArgs a = args;
  const RecurrentSizes &z = a.s;
  auto given = [&](unsigned i) { return call.hasInput(i) ? call.inputs[i].data : nullptr; };
  auto wanted = [&](unsigned i) {
    return i < call.outputs.size() ? call.outputs[i].data : nullptr;
  };
  a.lens = given(4);
  a.bias = given(3);
  a.peep = cell == RecurrentCell::Lstm ? given(7) : nullptr;
  a.projection = f32(ws.projection);
  a.recurrent = f32(ws.recurrent);
  a.hidden = f32(ws.hidden);
  a.cell = cell == RecurrentCell::Lstm ? f32(ws.cell) : nullptr;
  if (gruSplit) {
    a.update = f32(ws.update);
    a.resetState = f32(ws.resetState);
    a.resetRecurrent = f32(ws.resetRecurrent);
  }
  a.y = wanted(0);
  void *scratch = base + ws.gemm;
  size_t scratchBytes = ws.total - ws.gemm;
  unsigned eb = unsigned(runtimeElementSize(type));
  LaunchGeometry g = ctx.geometry(z.dirs * z.batch * z.hidden);

  std::string why = input.run(ctx, call.inputs[0].data, call.inputs[1].data, f32(ws.projection), eb,
                              scratch, scratchBytes, s);
  if (!why.empty())
    return "input projection: " + why;
  const void *r = call.inputs[2].data;
  if (type != DType::F32) {
    int64_t n = z.dirs * z.gates * z.hidden * z.hidden;
    if (cudaError_t e =
            launchCast(int32_t(type), kOnnxF32, r, f32(ws.wideR), n, ctx.geometry(n), s))
      return launchText(e);
    r = f32(ws.wideR);
  }
  if (cudaError_t e =
          launchRecurrentInit(a, given(5), cell == RecurrentCell::Lstm ? given(6) : nullptr, g, s))
    return launchText(e);
  if (a.y && a.lens)
    if (cudaError_t e = cudaMemsetAsync(a.y, 0, size_t(call.outputs[0].numElements()) * eb, s))
      return "clearing Y: " + cudaText(e);
  for (int64_t step = 0; step < z.seq; ++step) {
    a.step = step;
    why = recurrent.run(ctx, a.hidden, r, f32(ws.recurrent), 4, scratch, scratchBytes, s);
    if (!why.empty())
      return "recurrent product: " + why;
    if (cudaError_t e = launchRecurrentStep(cell, a, g, s))
      return launchText(e);
    if (!gruSplit)
      continue;
    // R_h: the rows [2H, 3H) of each direction's R (the plan's strides).
    const float *rh = static_cast<const float *>(r) + 2 * z.hidden * z.hidden;
    why = reset.run(ctx, a.resetState, rh, f32(ws.resetRecurrent), 4, scratch, scratchBytes, s);
    if (!why.empty())
      return "reset product: " + why;
    if (cudaError_t e = launchRecurrentStep(RecurrentCell::GruFinish, a, g, s))
      return launchText(e);
  }
  if (cudaError_t e = launchRecurrentFinal(a, wanted(1),
                                           cell == RecurrentCell::Lstm ? wanted(2) : nullptr, g, s))
    return launchText(e);
  return "";
}
