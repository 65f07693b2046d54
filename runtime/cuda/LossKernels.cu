//===- LossKernels.cu - Losses and their gradients -------------------------===//
//
// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss as slice bodies
// (SliceKernels.cuh) over the formulas of LossBodies.h, then one finishing
// block (the first bad label; the total and the weight sum of Mean and Sum
// in a fixed tree); SoftmaxCrossEntropyLossGrad as a finishing block (bad
// label, counted labels, the scale) and a grid-stride kernel; MSELossGrad as
// a grid-stride kernel. Statistics and sums in fp32, each output rounded
// once, as on the CPU. See LossPlan.h.
//
//===----------------------------------------------------------------------===//
#include "LossLaunch.h"
#include "SliceKernels.cuh"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/LossErrors.h"

namespace mpc {
namespace cuda {
namespace {

using kernels::load;
using kernels::LossLabelRule;
using kernels::store;

struct LossMaxOp {
  __device__ float operator()(float a, float b) const { return kernels::lossRowMax(a, b); }
};

struct MinOp {
  template <typename S> __device__ S operator()(S a, S b) const { return b < a ? b : a; }
};

/// The lowest position whose label is bad, or `positions` when none is
/// (every thread of the block gets it).
template <typename I>
__device__ long long firstBadLabel(const I *labels, int64_t positions, const LossLabelRule &rule,
                                   long long *shared) {
  long long first = positions;
  for (int64_t i = threadIdx.x; i < positions && first == positions; i += blockDim.x)
    if (rule.bad(int64_t(labels[i])))
      first = i;
  return blockCombine(first, MinOp(), (long long)positions, shared);
}

/// Writes kBadLabelError (LossErrors.h) for the label at `index` unless the run
/// has an error (the first wins); the CPU backend reports the same text.
template <typename I>
__device__ void recordBadLabel(const LossErrorSink &err, const I *labels, long long index) {
  IndexErrorRecord *r = err.record;
  if (!r || atomicCAS(&r->code, 0, kBadLabelError) != 0)
    return;
  r->call = err.call;
  r->operand = err.scoresOperand;
  r->reserved = int32_t(index);
  r->value = int64_t(labels[index]);
}

/// A position's row: its log-softmax (written to logProb when asked) and
/// its loss, into `loss` (None) or the workspace's values and weights.
template <typename T, typename I, bool FromLogProb> struct LossRowBody {
  const T *scores;
  const I *labels;
  const T *weights;
  T *logProb, *loss;
  float *values, *weightSums;
  LossLabelRule rule;

  __device__ float logProbOf(float v, float max, float logSum) const {
    return FromLogProb ? v : kernels::lossLogProb(v, max, logSum);
  }

  template <typename Ctx> __device__ void operator()(const Ctx &c, const SliceAt &s) const {
    float m = 0.0f, logSum = 0.0f;
    if (!FromLogProb) {
      m = -math::infinity<float>();
      for (int64_t a = c.first(); a < s.n; a += c.step())
        m = kernels::lossRowMax(m, float(load(scores[s.at(a)])));
      m = c.combine(m, LossMaxOp(), -math::infinity<float>());
      float sum = 0.0f;
      for (int64_t a = c.first(); a < s.n; a += c.step())
        sum += kernels::lossExpTerm(float(load(scores[s.at(a)])), m);
      sum = c.combine(sum, SumOp(), 0.0f);
      logSum = kernels::lossLogSum(sum);
    }
    if (logProb)
      for (int64_t a = c.first(); a < s.n; a += c.step())
        logProb[s.at(a)] = store<T>(logProbOf(float(load(scores[s.at(a)])), m, logSum));
    if (!c.leader())
      return;
    int64_t label = int64_t(labels[s.index]);
    float value = 0.0f, wt = 0.0f;
    if (!rule.ignored(label) && !rule.bad(label)) {
      wt = weights ? float(load(weights[label])) : 1.0f;
      value = kernels::lossValue(logProbOf(float(load(scores[s.at(label)])), m, logSum), wt);
    }
    if (loss) {
      loss[s.index] = store<T>(value);
    } else {
      values[s.index] = value;
      weightSums[s.index] = wt;
    }
  }
};

/// One block: the first bad label, then (values non-null) loss[0] from the
/// positions' losses and weights.
template <typename T, typename I>
__global__ void lossFinishKernel(const I *labels, int64_t positions, LossLabelRule rule,
                                 const float *values, const float *weightSums, T *loss,
                                 LossReduce reduce, LossErrorSink err) {
  __shared__ long long sharedI[32];
  __shared__ float sharedF[32];
  long long bad = firstBadLabel(labels, positions, rule, sharedI);
  float total = 0.0f, weightSum = 0.0f;
  if (values) {
    for (int64_t i = threadIdx.x; i < positions; i += blockDim.x) {
      total += values[i];
      weightSum += weightSums[i];
    }
    total = blockCombine(total, SumOp(), 0.0f, sharedF);
    weightSum = blockCombine(weightSum, SumOp(), 0.0f, sharedF);
  }
  if (threadIdx.x != 0)
    return;
  if (bad < positions) {
    recordBadLabel(err, labels, bad);
    return;
  }
  if (reduce == LossReduce::Sum)
    loss[0] = store<T>(total);
  else if (reduce == LossReduce::Mean)
    loss[0] = store<T>(kernels::lossMean(total, weightSum));
}

/// One block: the first bad label, then (scale non-null) the gradient's
/// factor for Mean and Sum.
template <typename T, typename I>
__global__ void lossGradFinishKernel(const I *labels, int64_t positions, LossLabelRule rule,
                                     const T *dLoss, float *scale, LossReduce reduce,
                                     LossErrorSink err) {
  __shared__ long long shared[32];
  long long bad = firstBadLabel(labels, positions, rule, shared);
  long long counted = 0;
  if (reduce == LossReduce::Mean) {
    for (int64_t i = threadIdx.x; i < positions; i += blockDim.x)
      counted += !rule.ignored(int64_t(labels[i]));
    counted = blockCombine(counted, SumOp(), 0ll, shared);
  }
  if (threadIdx.x != 0)
    return;
  if (bad < positions) {
    recordBadLabel(err, labels, bad);
    return;
  }
  if (scale)
    *scale = kernels::softmaxCrossEntropyScale(float(load(dLoss[0])),
                                               reduce == LossReduce::Mean, int64_t(counted));
}

template <typename T, typename I>
__global__ void lossGradKernel(const T *dLoss, const T *logProb, const I *labels,
                               const float *scale, T *dScores, SliceShape shape,
                               LossLabelRule rule) {
  int64_t row = shape.axisDim * shape.inner, n = shape.outer * row;
  for (int64_t k = gridStart(); k < n; k += gridStride()) {
    int64_t o = k / row, rest = k - o * row;
    int64_t c = rest / shape.inner, i = rest - c * shape.inner, li = o * shape.inner + i;
    int64_t label = int64_t(labels[li]);
    bool skip = rule.ignored(label) || rule.bad(label);
    float s = scale ? *scale : float(load(dLoss[li]));
    dScores[k] = store<T>(
        kernels::softmaxCrossEntropyGradValue(float(load(logProb[k])), c == label, skip, s));
  }
}

template <typename T>
__global__ void mseGradKernel(const T *dLoss, const T *pred, const T *target, T *dPred,
                              int64_t n, LossReduce reduce) {
  bool none = reduce == LossReduce::None;
  float scale =
      none ? 0.0f : kernels::mseGradScale(float(load(dLoss[0])), reduce == LossReduce::Mean, n);
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    float s = none ? kernels::mseGradScale(float(load(dLoss[i])), false, n) : scale;
    dPred[i] = store<T>(
        kernels::mseGradValue(s, float(load(pred[i])), float(load(target[i]))));
  }
}

/// Calls fn(I()) for the label type (i32 or i64).
template <typename Fn> cudaError_t dispatchLabel(int32_t type, Fn &&fn) {
  switch (type) {
  case kOnnxI32: return fn(int32_t());
  case kOnnxI64: return fn(int64_t());
  default: return cudaErrorInvalidValue;
  }
}

LaunchGeometry oneBlock(const LossPlan &p) {
  LaunchGeometry g;
  g.blocks = 1;
  g.threads = p.finishThreads;
  return g;
}

} // namespace

cudaError_t launchClassificationLoss(int32_t type, int32_t labelType, bool fromLogProb,
                                     LossReduce reduce, const LossLabelRule &rule,
                                     const LossTensors &t, const LossPlan &p, void *workspace,
                                     const LossErrorSink &err, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return dispatchLabel(labelType, [&](auto ltag) {
      using I = decltype(ltag);
      bool none = reduce == LossReduce::None;
      float *values = none ? nullptr : static_cast<float *>(workspace);
      float *weightSums = none ? nullptr : values + lossWeightOffset(p.shape.slices());
      auto rows = [&](auto body) {
        body.scores = static_cast<const T *>(t.scores);
        body.labels = static_cast<const I *>(t.labels);
        body.weights = static_cast<const T *>(t.weights);
        body.logProb = static_cast<T *>(t.logProb);
        body.loss = none ? static_cast<T *>(t.loss) : nullptr;
        body.values = values;
        body.weightSums = weightSums;
        body.rule = rule;
        return queueSlices(body, p.rows, stream);
      };
      cudaError_t e = fromLogProb ? rows(LossRowBody<T, I, true>()) : rows(LossRowBody<T, I, false>());
      if (e != cudaSuccess)
        return e;
      return queue(lossFinishKernel<T, I>, oneBlock(p), stream, static_cast<const I *>(t.labels),
                   p.shape.slices(), rule, static_cast<const float *>(values),
                   static_cast<const float *>(weightSums), static_cast<T *>(t.loss), reduce, err);
    });
  });
}

cudaError_t launchSoftmaxCrossEntropyLossGrad(int32_t type, int32_t labelType, LossReduce reduce,
                                              const LossLabelRule &rule, const void *dLoss,
                                              const void *logProb, const void *labels,
                                              void *dScores, const LossPlan &p,
                                              const LaunchGeometry &g, void *workspace,
                                              const LossErrorSink &err, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return dispatchLabel(labelType, [&](auto ltag) {
      using I = decltype(ltag);
      float *scale = reduce == LossReduce::None ? nullptr : static_cast<float *>(workspace);
      const I *l = static_cast<const I *>(labels);
      cudaError_t e = queue(lossGradFinishKernel<T, I>, oneBlock(p), stream, l, p.shape.slices(),
                            rule, static_cast<const T *>(dLoss), scale, reduce, err);
      if (e != cudaSuccess)
        return e;
      return queue(lossGradKernel<T, I>, g, stream, static_cast<const T *>(dLoss),
                   static_cast<const T *>(logProb), l, static_cast<const float *>(scale),
                   static_cast<T *>(dScores), p.shape, rule);
    });
  });
}

cudaError_t launchMSELossGrad(int32_t type, LossReduce reduce, const void *dLoss,
                              const void *pred, const void *target, void *dPred, int64_t n,
                              const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(mseGradKernel<T>, g, stream, static_cast<const T *>(dLoss),
                 static_cast<const T *>(pred), static_cast<const T *>(target),
                 static_cast<T *>(dPred), n, reduce);
  });
}

} // namespace cuda
} // namespace mpc
