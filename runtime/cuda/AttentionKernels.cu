//===- AttentionKernels.cu - Attention's biased softmax rows ----------------===//
//
// See AttentionLaunch.h. The first pass writes each row's biased scores in
// place and folds their maximum; the second sums softmaxExp; the third
// writes the probabilities. Each thread revisits only its own elements.
//
//===----------------------------------------------------------------------===//
#include "AttentionLaunch.h"
#include "SliceKernels.cuh"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

__device__ inline float maskValue(const bool *m, int64_t k) { return m[k] ? 1.0f : 0.0f; }
template <typename T> __device__ inline float maskValue(const T *m, int64_t k) {
  return float(kernels::load(m[k]));
}

template <typename M> struct AttentionSoftmaxBody {
  float *scores;
  const M *mask;
  AttentionRows rows;

  template <typename Ctx> __device__ void operator()(const Ctx &c, const SliceAt &s) const {
    const kernels::AttentionMaskShape &ms = rows.mask;
    int64_t i = s.index % rows.qSeq, bh = s.index / rows.qSeq;
    int64_t h = bh % rows.qHeads, b = bh / rows.qHeads;
    int64_t maskRow = ms.present ? kernels::attentionMaskRow(ms, b, h, i) : 0;
    float m = -math::infinity<float>();
    for (int64_t a = c.first(); a < s.n; a += c.step()) {
      float v = ms.present && a < ms.dims[3] ? maskValue(mask, maskRow + a) : 0.0f;
      float bias = kernels::attentionCausalBias(rows.causal, i, a, rows.past,
                                                kernels::attentionMaskBias(ms, a, v));
      float score = kernels::attentionSoftcap(scores[s.at(a)], rows.softcap) + bias;
      scores[s.at(a)] = score;
      m = kernels::maxKeepNaN(m, score);
    }
    m = c.combine(m, MaxKeepNaNOp(), -math::infinity<float>());
    float sum = 0.0f;
    for (int64_t a = c.first(); a < s.n; a += c.step())
      sum += kernels::softmaxExp(scores[s.at(a)], m);
    sum = c.combine(sum, SumOp(), 0.0f);
    for (int64_t a = c.first(); a < s.n; a += c.step())
      scores[s.at(a)] = kernels::softmaxExp(scores[s.at(a)], m) / sum;
  }
};

template <typename M>
cudaError_t queueRows(float *scores, const void *mask, const AttentionRows &rows,
                      const SlicePlan &plan, cudaStream_t stream) {
  return queueSlices(AttentionSoftmaxBody<M>{scores, static_cast<const M *>(mask), rows}, plan,
                     stream);
}

} // namespace

cudaError_t launchAttentionSoftmax(float *scores, int32_t maskType, const void *mask,
                                   const AttentionRows &rows, const SlicePlan &plan,
                                   cudaStream_t stream) {
  if (!rows.mask.present || maskType == kOnnxBool)
    return queueRows<bool>(scores, mask, rows, plan, stream);
  return dispatchFloat(maskType, [&](auto tag) {
    return queueRows<decltype(tag)>(scores, mask, rows, plan, stream);
  });
}

} // namespace cuda
} // namespace mpc
