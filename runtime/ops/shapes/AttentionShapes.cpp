//===- AttentionShapes.cpp - Registry shape functions -----------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): Attention and
// RotaryEmbedding, and the layouts (NodeGeometry.h) their kernels run on.
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../NodeGeometry.h"
#include "../ShapeFunctions.h"
#include "../ShapeHelpers.h"
#include "mpc/Support/Diagnostics.h"

using namespace mpc;
using namespace mpc::shapes;

static bool present(llvm::ArrayRef<ShapedType> ins, unsigned i) {
  return i < ins.size() && ins[i].dtype != DType::Undefined;
}

llvm::Expected<AttnLayout> shapes::attnLayout(const Node &n, const AttentionParams &p,
                                              llvm::ArrayRef<ShapedType> ins) {
  AttnLayout l;
  const auto &q = ins[kQ].shape, &kk = ins[kK].shape, &v = ins[kV].shape;
  if (q.size() != kk.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4))
    return nodeError(n, "Q " + formatShape(q) + ", K " + formatShape(kk) + " and V " +
                            formatShape(v) + " must all be 3-D or all 4-D");
  if (q.size() == 3) {
    l.threeD = true;
    l.qHeads = p.qNumHeads;
    l.kvHeads = p.kvNumHeads;
    if (l.qHeads <= 0 || l.kvHeads <= 0)
      return nodeError(n, "3-D inputs need positive q_num_heads and kv_num_heads");
    if (q[2] % l.qHeads || kk[2] % l.kvHeads || v[2] % l.kvHeads)
      return nodeError(n, "hidden sizes of Q " + formatShape(q) + ", K " + formatShape(kk) +
                              " and V " + formatShape(v) + " must be multiples of q_num_heads " +
                              std::to_string(l.qHeads) + " and kv_num_heads " +
                              std::to_string(l.kvHeads));
    l.batch = q[0];
    l.qSeq = q[1];
    l.headSize = q[2] / l.qHeads;
    l.kvSeq = kk[1];
    if (kk[2] / l.kvHeads != l.headSize)
      return nodeError(n, "K " + formatShape(kk) + " does not have Q's head size " +
                              std::to_string(l.headSize));
    l.vHeadSize = v[2] / l.kvHeads;
    if (kk[0] != l.batch || v[0] != l.batch || v[1] != l.kvSeq)
      return nodeError(n, "K " + formatShape(kk) + " and V " + formatShape(v) + " do not match Q " +
                              formatShape(q));
  } else {
    l.batch = q[0];
    l.qHeads = q[1];
    l.qSeq = q[2];
    l.headSize = q[3];
    l.kvHeads = kk[1];
    l.kvSeq = kk[2];
    l.vHeadSize = v[3];
    if (kk[0] != l.batch || kk[3] != l.headSize || v[0] != l.batch || v[1] != l.kvHeads ||
        v[2] != l.kvSeq)
      return nodeError(n, "K " + formatShape(kk) + " and V " + formatShape(v) + " do not match Q " +
                              formatShape(q));
  }
  if (l.kvHeads <= 0 || l.qHeads % l.kvHeads)
    return nodeError(n, "q heads " + std::to_string(l.qHeads) + " are not a multiple of kv heads " +
                            std::to_string(l.kvHeads));
  bool pk = present(ins, kPastKey), pv = present(ins, kPastValue);
  if (pk != pv)
    return nodeError(n, "past_key and past_value must be given together");
  if (pk) {
    const auto &a = ins[kPastKey].shape, &b = ins[kPastValue].shape;
    std::vector<int64_t> wantK = {l.batch, l.kvHeads, a.size() == 4 ? a[2] : -1, l.headSize};
    std::vector<int64_t> wantV = {l.batch, l.kvHeads, wantK[2], l.vHeadSize};
    if (a != wantK || b != wantV)
      return nodeError(n, "past_key " + formatShape(a) + " and past_value " + formatShape(b) +
                              " must be [batch, kv_heads, past, head_size] and [batch, "
                              "kv_heads, past, v_head_size]");
    l.hasPast = true;
    l.past = a[2];
  }
  l.total = l.past + l.kvSeq;
  if (present(ins, kMask)) {
    const ShapedType &m = ins[kMask];
    if (m.dtype != DType::Bool && !isFloatType(m.dtype))
      return nodeError(n, "attn_mask must be bool or floating-point");
    if (m.shape.empty() || m.shape.size() > 4)
      return nodeError(n, "attn_mask " + formatShape(m.shape) + " must have rank 1 to 4");
    l.mask.assign(4 - m.shape.size(), 1);
    l.mask.insert(l.mask.end(), m.shape.begin(), m.shape.end());
    const int64_t full[3] = {l.batch, l.qHeads, l.qSeq};
    bool ok = l.mask[3] >= 1 && l.mask[3] <= l.total;
    for (int d = 0; d < 3; ++d)
      ok = ok && (l.mask[d] == 1 || l.mask[d] == full[d]);
    if (!ok)
      return nodeError(n, "attn_mask " + formatShape(m.shape) + " does not broadcast to " +
                              formatShape({l.batch, l.qHeads, l.qSeq, l.total}));
  }
  if (present(ins, kNonpad)) {
    const ShapedType &s = ins[kNonpad];
    if ((s.dtype != DType::I64 && s.dtype != DType::I32) || s.shape.size() != 1 ||
        s.shape[0] != l.batch)
      return nodeError(n, "nonpad_kv_seqlen " + formatShape(s.shape) +
                              " must be an integer vector of length batch " +
                              std::to_string(l.batch));
  }
  return l;
}

MPC_DEFINED_BELOW(shapes::shapeAttention)
llvm::Error shapes::shapeAttention(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto p = attentionParamsOf(q.node);
  if (!p)
    return p.takeError();
  llvm::Expected<AttnLayout> lay = attnLayout(q.node, *p, q.inputs);
  if (!lay)
    return lay.takeError();
  const AttnLayout &l = *lay;
  if (q.inputs[kK].dtype != q.inputs[kQ].dtype)
    return nodeError(q.node, "K must have Q's element type");
  DType t = q.inputs[kQ].dtype, tv = q.inputs[kV].dtype;
  std::vector<int64_t> y = l.threeD ? std::vector<int64_t>{l.batch, l.qSeq, l.qHeads * l.vHeadSize}
                                    : std::vector<int64_t>{l.batch, l.qHeads, l.qSeq, l.vHeadSize};
  out = {ShapedType{t, y}, ShapedType{t, {l.batch, l.kvHeads, l.total, l.headSize}},
         ShapedType{tv, {l.batch, l.kvHeads, l.total, l.vHeadSize}},
         ShapedType{t, {l.batch, l.qHeads, l.qSeq, l.total}}};
  out.resize(q.node.numOutputs());
  return llvm::Error::success();
}

llvm::Expected<Rotary> shapes::rotaryLayout(const Node &n, const RotaryParams &p,
                                            llvm::ArrayRef<int64_t> x,
                                            llvm::ArrayRef<int64_t> cache, bool hasPositions) {
  Rotary r;
  r.interleaved = p.interleaved;
  r.hasPositions = hasPositions;
  int64_t numHeads = p.numHeads;
  if (x.size() == 4) {
    r.fourD = true;
    r.batch = x[0];
    r.heads = x[1];
    r.seq = x[2];
    r.headSize = x[3];
  } else if (x.size() == 3) {
    if (numHeads <= 0 || x[2] % numHeads != 0)
      return nodeError(n, "a 3-D input " + formatShape(x.vec()) +
                              " needs num_heads dividing its last dimension");
    r.batch = x[0];
    r.seq = x[1];
    r.heads = numHeads;
    r.headSize = x[2] / numHeads;
  } else {
    return nodeError(n, "input must be 3-D or 4-D, not " + formatShape(x.vec()));
  }
  r.dim = p.rotaryDim;
  if (r.dim == 0)
    r.dim = r.headSize;
  if (r.dim < 0 || r.dim > r.headSize || r.dim % 2)
    return nodeError(n, "rotary_embedding_dim " + std::to_string(r.dim) +
                            " must be even and at most the head size " +
                            std::to_string(r.headSize));
  bool cacheOk = hasPositions ? cache.size() == 2 && cache[1] == r.dim / 2
                              : cache.size() == 3 && cache[0] == r.batch &&
                                    cache[1] == r.seq && cache[2] == r.dim / 2;
  if (!cacheOk)
    return nodeError(n, "cos/sin cache " + formatShape(cache.vec()) + " must be " +
                            (hasPositions ? "[max_position, " : "[batch, seq, ") +
                            std::to_string(r.dim / 2) + "]");
  return r;
}

MPC_DEFINED_BELOW(shapes::shapeRotaryEmbedding)
llvm::Error shapes::shapeRotaryEmbedding(const ShapeQuery &q, std::vector<ShapedType> &out) {
  bool positions = q.inputs.size() > 3 && q.inputs[3].dtype != DType::Undefined;
  if (q.inputs[1].shape != q.inputs[2].shape)
    return nodeError(q.node, "cos_cache " + formatShape(q.inputs[1].shape) + " and sin_cache " +
                                 formatShape(q.inputs[2].shape) + " differ");
  if (q.inputs[1].dtype != q.inputs[0].dtype || q.inputs[2].dtype != q.inputs[0].dtype)
    return nodeError(q.node, "the caches must have the input's element type");
  if (positions &&
      (q.inputs[3].shape.size() != 2 || q.inputs[3].shape[0] != q.inputs[0].shape[0]))
    return nodeError(q.node, "position_ids " + formatShape(q.inputs[3].shape) +
                                 " must be [batch, seq]");
  auto p = rotaryParamsOf(q.node);
  if (!p)
    return p.takeError();
  llvm::Expected<Rotary> r =
      rotaryLayout(q.node, *p, q.inputs[0].shape, q.inputs[1].shape, positions);
  if (!r)
    return r.takeError();
  if (positions && q.inputs[3].shape[1] != r->seq)
    return nodeError(q.node, "position_ids " + formatShape(q.inputs[3].shape) +
                                 " must be [batch, seq]");
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}
