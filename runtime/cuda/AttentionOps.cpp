//===- AttentionOps.cpp - Attention nodes on CUDA ---------------------------===//
//
// ONNX Attention (opset 23) without a KV cache: the layout is parsed once
// (shapes::attnLayout, the CPU kernel's), then launch queues
//   1. Q, K and V gathered into fp32 workspace as [batch * qHeads, seq,
//      head] (EinsumLaunch.h's gather; K and V repeated over the query
//      heads of their group), Q and K times sqrt(scale) as the CPU does;
//   2. the scores S = Q K^T, one strided-batch cuBLASLt product (fp32);
//   3. the biased softmax of each row of S in place (AttentionLaunch.h);
//   4. Y = S V, a second product, and Y gathered into the output's layout
//      and type (rounded once).
// Everything is fp32 after the input gathers, as the CPU computes it. What
// the launcher does not take gives a null op (the node runs on the CPU):
// past_key/past_value, nonpad_kv_seqlen, the present_key/present_value and
// qk outputs, empty heads or key sequences.
//
//===----------------------------------------------------------------------===//
#include "../ops/NodeGeometry.h"
#include "AttentionLaunch.h"
#include "CudaOp.h"
#include "EinsumLaunch.h"
#include "LtProduct.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Support/Diagnostics.h"

#include <cmath>

using namespace mpc;
using namespace mpc::cuda;
using shapes::AttnLayout;
using shapes::kK;
using shapes::kMask;
using shapes::kNonpad;
using shapes::kPastKey;
using shapes::kPastValue;
using shapes::kQ;
using shapes::kV;

namespace {

EinsumGather gather(std::initializer_list<int64_t> dims, std::initializer_list<int64_t> strides,
                    float scale = 1.0f) {
  EinsumGather g;
  g.rank = int32_t(dims.size());
  std::copy(dims.begin(), dims.end(), g.dims);
  std::copy(strides.begin(), strides.end(), g.strides);
  g.scale = scale;
  return g;
}

class AttentionOp final : public CudaOp {
public:
  AttentionRows rows;
  SlicePlan softmax;
  EinsumGather q, k, v, y;
  LtProduct scores, values;
  /// Workspace: Q', K', V', S, Y' (fp32), then the products' scratch.
  size_t qBytes = 0, kBytes = 0, vBytes = 0, sBytes = 0, yBytes = 0;
  bool empty = false;

  size_t workspaceBytes() const override {
    return empty ? 0
                 : qBytes + kBytes + vBytes + sBytes + yBytes +
                       std::max(scores.workspace, values.workspace);
  }

  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    if (empty)
      return "";
    int32_t type = int32_t(call.inputs[kQ].dtype), f32 = int32_t(DType::F32);
    char *ws = static_cast<char *>(call.workspace);
    float *qw = reinterpret_cast<float *>(ws);
    float *kw = reinterpret_cast<float *>(ws + qBytes);
    float *vw = reinterpret_cast<float *>(ws + qBytes + kBytes);
    float *sw = reinterpret_cast<float *>(ws + qBytes + kBytes + vBytes);
    float *yw = reinterpret_cast<float *>(ws + qBytes + kBytes + vBytes + sBytes);
    char *scratch = ws + qBytes + kBytes + vBytes + sBytes + yBytes;
    size_t scratchBytes = std::max(scores.workspace, values.workspace);
    auto run = [&](int32_t from, int32_t to, const void *src, void *dst, const EinsumGather &g) {
      return launchEinsumGather(from, to, src, dst, g, ctx.geometry(g.count()), s);
    };
    if (cudaError_t e = run(type, f32, call.inputs[kQ].data, qw, q))
      return launchText(e);
    if (cudaError_t e = run(type, f32, call.inputs[kK].data, kw, k))
      return launchText(e);
    if (cudaError_t e = run(type, f32, call.inputs[kV].data, vw, v))
      return launchText(e);
    std::string why = scores.run(ctx, qw, kw, sw, sizeof(float), scratch, scratchBytes, s);
    if (!why.empty())
      return why;
    const void *mask = call.hasInput(kMask) ? call.inputs[kMask].data : nullptr;
    int32_t maskType = call.hasInput(kMask) ? int32_t(call.inputs[kMask].dtype) : 0;
    if (cudaError_t e = launchAttentionSoftmax(sw, maskType, mask, rows, softmax, s))
      return launchText(e);
    why = values.run(ctx, sw, vw, yw, sizeof(float), scratch, scratchBytes, s);
    if (!why.empty())
      return why;
    return launchText(run(f32, type, yw, call.outputs[0].data, y));
  }
};

/// True when output i of `n` is produced.
bool producesOutput(const Node &n, unsigned i) { return i < n.numOutputs() && n.output(i); }

} // namespace

CudaOpOrError cuda::prepareAttentionOp(const Node &n, const CudaKernel &,
                                       llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  auto params = paramsOf<AttentionParams>(parseAttention(n));
  if (!params)
    return params.takeError();
  auto given = [&](unsigned i) { return i < inputs.size() && inputs[i].dtype != DType::Undefined; };
  if (!given(kQ) || !given(kK) || !given(kV) || given(kPastKey) || given(kPastValue) ||
      given(kNonpad))
    return std::unique_ptr<CudaOp>();
  for (unsigned i = 1; i < 4; ++i)
    if (producesOutput(n, i))
      return std::unique_ptr<CudaOp>();
  std::vector<ShapedType> ins(inputs.size());
  for (size_t i = 0; i < ins.size(); ++i)
    ins[i] = ShapedType{inputs[i].dtype,
                        std::vector<int64_t>(inputs[i].shape.begin(), inputs[i].shape.end())};
  auto lay = shapes::attnLayout(n, *params, ins);
  if (!lay)
    return lay.takeError();
  const AttnLayout &l = *lay;
  auto op = std::make_unique<AttentionOp>();
  int64_t bt = l.batch * l.qHeads, s = l.qSeq, t = l.total, d = l.headSize, vd = l.vHeadSize;
  if (bt * s * vd == 0) {
    op->empty = true;
    return std::unique_ptr<CudaOp>(std::move(op));
  }
  if (t == 0 || d == 0)
    return std::unique_ptr<CudaOp>();
  // The scale as the CPU computes it: both Q and K times its square root.
  float scale = params->hasScale ? params->scale : 1.0f / std::sqrt(float(d));
  float root = std::sqrt(scale);
  int64_t qh = l.qHeads, kvh = l.kvHeads, group = l.qHeads / l.kvHeads;
  if (l.threeD) {
    op->q = gather({l.batch, qh, s, d}, {s * qh * d, d, qh * d, 1}, root);
    op->k = gather({l.batch, kvh, group, t, d}, {t * kvh * d, d, 0, kvh * d, 1}, root);
    op->v = gather({l.batch, kvh, group, t, vd}, {t * kvh * vd, vd, 0, kvh * vd, 1});
    op->y = gather({l.batch, s, qh, vd}, {qh * s * vd, vd, s * vd, 1});
  } else {
    op->q = gather({l.batch, qh, s, d}, {qh * s * d, s * d, d, 1}, root);
    op->k = gather({l.batch, kvh, group, t, d}, {kvh * t * d, t * d, 0, d, 1}, root);
    op->v = gather({l.batch, kvh, group, t, vd}, {kvh * t * vd, t * vd, 0, vd, 1});
    op->y = gather({l.batch, qh, s, vd}, {qh * s * vd, s * vd, vd, 1});
  }
  AttentionRows &r = op->rows;
  r.qHeads = qh;
  r.qSeq = s;
  r.past = l.past;
  r.causal = params->isCausal;
  r.softcap = params->softcap;
  if (!l.mask.empty()) {
    r.mask.present = true;
    r.mask.isBool = inputs[kMask].dtype == DType::Bool;
    for (int i = 0; i < 4; ++i)
      r.mask.dims[i] = l.mask[size_t(i)];
  }
  op->softmax = planSlices(SliceShape{bt * s, t, 1}, ctx.smCount);
  op->qBytes = alignedBytes(size_t(bt * s * d) * sizeof(float));
  op->kBytes = alignedBytes(size_t(bt * t * d) * sizeof(float));
  op->vBytes = alignedBytes(size_t(bt * t * vd) * sizeof(float));
  op->sBytes = alignedBytes(size_t(bt * s * t) * sizeof(float));
  op->yBytes = alignedBytes(size_t(bt * s * vd) * sizeof(float));
  // S[bt, s, t] = Q'[bt, s, d] K'[bt, t, d]^T; Y'[bt, s, vd] = S V'[bt, t, vd].
  std::vector<int64_t> qShape = {bt, s, d}, kShape = {bt, t, d}, sShape = {bt, s, t},
                       vShape = {bt, t, vd};
  MatmulProblem first, second;
  first.aShape = qShape;
  first.bShape = kShape;
  first.transB = true;
  first.elementBytes = sizeof(float);
  second.aShape = sShape;
  second.bShape = vShape;
  second.elementBytes = sizeof(float);
  for (auto [problem, product] : {std::pair<MatmulProblem *, LtProduct *>{&first, &op->scores},
                                  {&second, &op->values}}) {
    auto mm = planMatmul(*problem);
    if (!mm)
      return inputError("{0}: {1}", describeNode(n), llvm::toString(mm.takeError()));
    std::string why = product->prepare(mm->gemm, DType::F32, ctx);
    if (!why.empty())
      return inputError("{0}: {1}", describeNode(n), why);
  }
  return std::unique_ptr<CudaOp>(std::move(op));
}
