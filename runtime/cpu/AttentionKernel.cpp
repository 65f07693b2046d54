//===- AttentionKernel.cpp - ONNX Attention on the CPU ----------------------===//
//
// Attention (opset 23; 24 adds nonpad_kv_seqlen) is softmax(QK^T*scale +
// bias)V per query head, where the bias comes from attn_mask, is_causal and
// nonpad_kv_seqlen, past_key/past_value are prepended to K/V (and returned as
// present_key/present_value), and each query head h reads the key/value head
// h / (q_heads / kv_heads). Everything is computed in fp32 (double for f64
// inputs) from widened inputs and each output is rounded once. The soft cap,
// the mask and causal bias and the softmax steps are the shared bodies of
// Kernels/AttentionBodies.h and NormBodies.h, which the CUDA launcher runs.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Kernels/AttentionBodies.h"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cmath>
#include <limits>

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

/// A tensor widened to C (any float or integer element type; bool as 0/1).
template <typename C> static std::vector<C> widen(const TensorRef &t) {
  std::vector<C> v(static_cast<size_t>(t.numElements()));
  dispatchAll(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = t.as<T>();
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = k::castValue<C>(p[i]);
  });
  return v;
}

/// Rounds `v` once into output `i` when the node produces it.
template <typename C>
static void narrowInto(const KernelCall &c, unsigned i, const std::vector<C> &v) {
  if (i >= c.outputs.size() || !c.outputs[i].data)
    return;
  const TensorRef &o = c.outputs[i];
  dispatchFloat(o.dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = o.as<T>();
    for (size_t j = 0; j < v.size(); ++j)
      p[j] = k::castValue<T>(v[j]);
  });
}

/// Concatenates past [b, g, past, d] and new rows (3-D [b, s, g*d] or 4-D
/// [b, g, s, d]) into [b, g, total, d].
template <typename C>
static std::vector<C> concatCache(const AttnLayout &l, const std::vector<C> &past,
                                  const std::vector<C> &cur, int64_t d) {
  std::vector<C> out(static_cast<size_t>(l.batch * l.kvHeads * l.total * d));
  for (int64_t b = 0; b < l.batch; ++b)
    for (int64_t g = 0; g < l.kvHeads; ++g) {
      C *dst = out.data() + (b * l.kvHeads + g) * l.total * d;
      if (l.hasPast)
        std::copy_n(past.data() + (b * l.kvHeads + g) * l.past * d, l.past * d, dst);
      for (int64_t s = 0; s < l.kvSeq; ++s) {
        int64_t src = l.threeD ? ((b * l.kvSeq + s) * l.kvHeads + g) * d
                               : ((b * l.kvHeads + g) * l.kvSeq + s) * d;
        std::copy_n(cur.data() + src, d, dst + (l.past + s) * d);
      }
    }
  return out;
}

/// attn_mask's shape for the shared bodies (not present without a mask).
static k::AttentionMaskShape maskShapeOf(const KernelCall &c, const AttnLayout &l) {
  k::AttentionMaskShape m;
  if (l.mask.empty())
    return m;
  m.present = true;
  m.isBool = c.inputs[kMask].dtype == DType::Bool;
  for (int d = 0; d < 4; ++d)
    m.dims[d] = l.mask[static_cast<size_t>(d)];
  return m;
}

/// The additive bias of row (b, h, i) (AttentionBodies.h: attn_mask and
/// the causal triangle shifted by the past length), then the
/// nonpad_kv_seqlen padding.
template <typename C>
static void biasRow(const KernelCall &c, const AttnLayout &l, const std::vector<C> &mask,
                    const std::vector<int64_t> &nonpad, int64_t b, int64_t h, int64_t i, C *bias) {
  const C negInf = -std::numeric_limits<C>::infinity();
  k::AttentionMaskShape m = maskShapeOf(c, l);
  int64_t off = m.present ? k::attentionMaskRow(m, b, h, i) : 0;
  bool causal = paramsOf<AttentionParams>(c).isCausal;
  for (int64_t j = 0; j < l.total; ++j) {
    C v = m.present && j < m.dims[3] ? mask[static_cast<size_t>(off + j)] : C(0);
    bias[j] = k::attentionCausalBias(causal, i, j, l.past, k::attentionMaskBias(m, j, v));
  }
  if (!nonpad.empty())
    for (int64_t j = nonpad[static_cast<size_t>(b)]; j < l.total; ++j)
      bias[j] += negInf;
}

template <typename C> static void attend(const KernelCall &c, const AttnLayout &l) {
  const AttentionParams &p = paramsOf<AttentionParams>(c);
  std::vector<C> q = widen<C>(c.inputs[kQ]), kNew = widen<C>(c.inputs[kK]),
                 vNew = widen<C>(c.inputs[kV]), pastK, pastV, mask;
  if (l.hasPast) {
    pastK = widen<C>(c.inputs[kPastKey]);
    pastV = widen<C>(c.inputs[kPastValue]);
  }
  if (!l.mask.empty())
    mask = widen<C>(c.inputs[kMask]);
  std::vector<int64_t> nonpad;
  if (c.hasInput(kNonpad))
    nonpad = readInts(c.inputs[kNonpad]);
  std::vector<C> keys = concatCache(l, pastK, kNew, l.headSize);
  std::vector<C> values = concatCache(l, pastV, vNew, l.vHeadSize);
  narrowInto(c, 1, keys);
  narrowInto(c, 2, values);

  // Q and K are both scaled by sqrt(scale) before the product, as the spec's
  // diagram does (it keeps 16-bit products in range).
  C scale = p.hasScale ? C(p.scale) : C(1) / std::sqrt(C(l.headSize));
  C rootScale = std::sqrt(scale);
  for (C &x : keys)
    x *= rootScale;
  C softcap = C(p.softcap);
  int64_t mode = p.qkOutputMode;
  bool wantQk = c.outputs.size() > 3 && c.outputs[3].data;

  int64_t group = l.qHeads / l.kvHeads, hs = l.headSize, vs = l.vHeadSize;
  std::vector<C> y(static_cast<size_t>(l.batch * l.qHeads * l.qSeq * vs));
  std::vector<C> qk(wantQk ? static_cast<size_t>(l.batch * l.qHeads * l.qSeq * l.total) : 0);
  std::vector<C> qRow(hs), score(l.total), bias(l.total), acc(vs);
  for (int64_t b = 0; b < l.batch; ++b)
    for (int64_t h = 0; h < l.qHeads; ++h) {
      int64_t g = h / group;
      const C *kb = keys.data() + (b * l.kvHeads + g) * l.total * hs;
      const C *vb = values.data() + (b * l.kvHeads + g) * l.total * vs;
      for (int64_t i = 0; i < l.qSeq; ++i) {
        int64_t qOff = l.threeD ? ((b * l.qSeq + i) * l.qHeads + h) * hs
                                : ((b * l.qHeads + h) * l.qSeq + i) * hs;
        for (int64_t d = 0; d < hs; ++d)
          qRow[d] = q[static_cast<size_t>(qOff + d)] * rootScale;
        C *qkRow = wantQk ? qk.data() + ((b * l.qHeads + h) * l.qSeq + i) * l.total : nullptr;
        for (int64_t j = 0; j < l.total; ++j) {
          C s = 0;
          for (int64_t d = 0; d < hs; ++d)
            s += qRow[d] * kb[j * hs + d];
          if (qkRow && mode == 0)
            qkRow[j] = s;
          s = k::attentionSoftcap(s, softcap);
          if (qkRow && mode == 1)
            qkRow[j] = s;
          score[j] = s;
        }
        biasRow(c, l, mask, nonpad, b, h, i, bias.data());
        // Softmax with numpy's IEEE behavior: a row that is all -inf (or
        // holds a NaN) gives NaN everywhere, as the reference does
        // (NormBodies.h, the CUDA launcher's row too).
        C mx = -std::numeric_limits<C>::infinity();
        for (int64_t j = 0; j < l.total; ++j) {
          score[j] += bias[j];
          if (qkRow && mode == 2)
            qkRow[j] = score[j];
          mx = k::maxKeepNaN(mx, score[j]);
        }
        C sum = 0;
        for (int64_t j = 0; j < l.total; ++j) {
          score[j] = k::softmaxExp(score[j], mx);
          sum += score[j];
        }
        for (int64_t j = 0; j < l.total; ++j) {
          score[j] /= sum;
          if (qkRow && mode == 3)
            qkRow[j] = score[j];
        }
        std::fill(acc.begin(), acc.end(), C(0));
        for (int64_t j = 0; j < l.total; ++j)
          for (int64_t d = 0; d < vs; ++d)
            acc[d] += score[j] * vb[j * vs + d];
        int64_t yOff = l.threeD ? ((b * l.qSeq + i) * l.qHeads + h) * vs
                                : ((b * l.qHeads + h) * l.qSeq + i) * vs;
        std::copy(acc.begin(), acc.end(), y.begin() + yOff);
      }
    }
  narrowInto(c, 0, y);
  if (wantQk)
    narrowInto(c, 3, qk);
}

llvm::Error cpuk::runAttention(const KernelCall &c) {
  std::vector<ShapedType> ins(c.inputs.size());
  for (size_t i = 0; i < ins.size(); ++i)
    ins[i] = ShapedType{c.inputs[i].dtype,
                        std::vector<int64_t>(c.inputs[i].shape.begin(), c.inputs[i].shape.end())};
  llvm::Expected<AttnLayout> lay = attnLayout(*c.node, paramsOf<AttentionParams>(c), ins);
  if (!lay)
    return lay.takeError();
  // A count of valid key positions: outside [0, total] it counts nothing
  // (onnxruntime refuses it too).
  if (c.hasInput(kNonpad))
    for (int64_t v : readInts(c.inputs[kNonpad]))
      if (v < 0 || v > lay->total)
        return nodeError(*c.node, "nonpad_kv_seqlen value " + std::to_string(v) +
                                      " is outside [0, " + std::to_string(lay->total) +
                                      "] (the key sequence's length)");
  if (c.inputs[kQ].dtype == DType::F64)
    attend<double>(c, *lay);
  else
    attend<float>(c, *lay);
  return llvm::Error::success();
}
