//===- TrainingOps.h - Gradient and loss kernels for training ---*- C++ -*-===//
//
// The math of the ai.mpc.training gradient ops (docs/training.md), of the
// default-domain losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss)
// and of training-mode BatchNormalization. T is float, double, Half or
// BFloat16; A = kernels::AccumType<T> (float, double for double) is the type
// every sum and statistic is computed in. Outputs are rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_TRAININGOPS_H
#define MPC_RUNTIME_CPU_TRAININGOPS_H

#include "mpc/Runtime/Cpu/Conv.h"
#include "mpc/Runtime/Cpu/Pool.h"
#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/ActivationGrad.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "llvm/ADT/ArrayRef.h"
#include <cstdint>

namespace mpc {
namespace cpu {

/// The element-wise gradients: dx = dy * f'(v), with v the forward input X
/// (Relu, Erf, Gelu) or output Y (Sigmoid, Tanh); f' is the shared body
/// kernels::activationSlope.
using ActivationGrad = kernels::ActivationGrad;

template <typename T>
void activationGrad(ActivationGrad kind, const T *dy, const T *v, T *dx, int64_t n);

/// BiasGrad: dy summed over the axes along which bShape broadcasts to
/// dyShape (numpy rules, right-aligned). db has the elements of bShape. The
/// sums are kept in AccumType<U> and rounded once into U: dy's type, or float
/// for a 16-bit dy (`to` = float32), which gives the bits of BiasGrad over
/// dy widened to float first.
template <typename T, typename U = T>
void biasGrad(const T *dy, llvm::ArrayRef<int64_t> dyShape, llvm::ArrayRef<int64_t> bShape,
              U *db);

/// SoftmaxGrad (y the softmax) or, with log, LogSoftmaxGrad (y the
/// log-softmax) over the middle axis of [outer, axisDim, inner].
template <typename T>
void softmaxGrad(const T *dy, const T *y, T *dx, int64_t outer, int64_t axisDim,
                 int64_t inner, bool log);

/// LayerNormalizationGrad on [outer, inner] rows with the saved per-row
/// statistics. dScale and dBias (inner elements, may be null) are
/// accumulated into (callers zero them).
template <typename T>
void layerNormGrad(const T *dy, const T *x, const kernels::AccumType<T> *scale,
                   const kernels::AccumType<T> *mean, const kernels::AccumType<T> *invStdDev,
                   T *dx, kernels::AccumType<T> *dScale, kernels::AccumType<T> *dBias,
                   int64_t outer, int64_t inner);

/// BatchNormalizationGrad on x [batch, channels, spatial] with the batch
/// statistics recomputed (biased variance). dx, dScale, dBias may be null.
template <typename T>
void batchNormGrad(const T *dy, const T *x, const kernels::AccumType<T> *scale,
                   float epsilon, T *dx, kernels::AccumType<T> *dScale,
                   kernels::AccumType<T> *dBias, int64_t batch, int64_t channels,
                   int64_t spatial);

/// Training-mode BatchNormalization: y normalized by the batch statistics
/// (biased variance); runMean/runVar (may be null) receive
/// inMean * momentum + batchMean * (1 - momentum) and likewise for the
/// variance, the biased batch variance (as onnx.reference computes it).
template <typename T>
void batchNormTraining(const T *x, const kernels::AccumType<T> *scale,
                       const kernels::AccumType<T> *bias, const kernels::AccumType<T> *inMean,
                       const kernels::AccumType<T> *inVar, float epsilon, float momentum, T *y,
                       kernels::AccumType<T> *runMean, kernels::AccumType<T> *runVar,
                       int64_t batch, int64_t channels, int64_t spatial);

/// ConvGrad: dx [N, C, in...], dw [M, C/group, k...], db [M] for a Conv with
/// geometry g (outSpatial = the spatial shape of dy). Null outputs are
/// skipped. Matrix products go through cpu::gemm with fp32 (fp64) results.
template <typename T>
void convGrad(const ConvGeometry &g, const T *dy, const T *x, const T *w, T *dx, T *dw,
              T *db);

/// MaxPoolGrad: dy routed to the first maximum of each window (padding never
/// wins); overlapping windows add.
template <typename T>
void maxPoolGrad(const PoolGeometry &g, const T *dy, const T *x, T *dx);

/// AveragePoolGrad: dy divided by the window's count (AveragePool's divisor)
/// and added to each tap inside the input.
template <typename T>
void averagePoolGrad(const PoolGeometry &g, bool countIncludePad, const T *dy, T *dx);

/// GlobalAveragePoolGrad over planes of planeSize elements.
template <typename T>
void globalAveragePoolGrad(const T *dy, T *dx, int64_t planes, int64_t planeSize);

using mpc::LstmShape;

/// Buffers of LSTMGrad. Inputs other than x, w, r and outputs may be null
/// (absent); lens (batch entries, each in [1, seq]) null means all seq.
template <typename T> struct LstmGradBuffers {
  const T *dY = nullptr, *dYh = nullptr, *dYc = nullptr;
  const T *x = nullptr, *w = nullptr, *r = nullptr, *b = nullptr;
  const T *h0 = nullptr, *c0 = nullptr;
  const int64_t *lens = nullptr;
  T *dX = nullptr, *dW = nullptr, *dR = nullptr, *dB = nullptr;
  T *dH0 = nullptr, *dC0 = nullptr;
};

/// LSTMGrad: backpropagation through time of LSTM (sigmoid/tanh/tanh, no
/// peepholes). The forward pass is recomputed in AccumType<T>; steps at or
/// beyond a batch entry's length contribute nothing. Outputs are rounded
/// once; dB has both halves (Wb, Rb) even when b is null.
template <typename T> void lstmGrad(const LstmShape &s, const LstmGradBuffers<T> &io);

/// Sizes of an ONNX GRU (layout 0): those of LstmShape with 3 gate blocks
/// (W [dirs, 3H, input], R [dirs, 3H, H], B [dirs, 6H], gates z, r, h) and
/// the forward's linear_before_reset.
struct GruShape : LstmShape {
  bool linearBeforeReset = false;
};

/// Buffers of GRUGrad; null means absent, as for LstmGradBuffers.
template <typename T> struct GruGradBuffers {
  const T *dY = nullptr, *dYh = nullptr;
  const T *x = nullptr, *w = nullptr, *r = nullptr, *b = nullptr, *h0 = nullptr;
  const int64_t *lens = nullptr;
  T *dX = nullptr, *dW = nullptr, *dR = nullptr, *dB = nullptr, *dH0 = nullptr;
};

/// GRUGrad: backpropagation through time of GRU (sigmoid/tanh), either
/// linear_before_reset. Recomputes the forward in AccumType<T> like lstmGrad;
/// dB is [dirs, 6H] (Wb and Rb halves, equal for z and r) even when b is null.
template <typename T> void gruGrad(const GruShape &s, const GruGradBuffers<T> &io);

using mpc::LossReduction;

/// Labels of a classification loss on [batch, classes, inner] scores.
template <typename I> struct LossLabels {
  const I *labels = nullptr; ///< [batch, inner]
  bool hasIgnoreIndex = false;
  int64_t ignoreIndex = 0;
};

/// Index of the first label outside [0, classes) that is not the ignored
/// value, or -1.
template <typename I>
int64_t findBadLabel(const LossLabels<I> &l, int64_t count, int64_t classes);

/// SoftmaxCrossEntropyLoss (fromLogProb false: scores are logits) or
/// NegativeLogLikelihoodLoss (fromLogProb true: scores are log-probabilities)
/// with optional class weights. loss has batch*inner elements for None, one
/// otherwise; logProb (may be null) receives the log-softmax.
template <typename T, typename I>
void classificationLoss(const T *scores, const LossLabels<I> &labels, const T *weights,
                        LossReduction reduction, bool fromLogProb, T *loss, T *logProb,
                        int64_t batch, int64_t classes, int64_t inner);

/// SoftmaxCrossEntropyLossGrad: dLoss * (softmax - onehot) (zero for ignored
/// labels), divided by the number of counted labels for Mean. dLoss has
/// batch*inner elements for None, one otherwise.
template <typename T, typename I>
void softmaxCrossEntropyLossGrad(const T *dLoss, const T *logProb, const LossLabels<I> &labels,
                                 LossReduction reduction, T *dScores, int64_t batch,
                                 int64_t classes, int64_t inner);

/// MSELossGrad: dLoss * 2 * (pred - target) / N (N = n for Mean, else 1);
/// dLoss has n elements for None, one otherwise.
template <typename T>
void mseLossGrad(const T *dLoss, const T *pred, const T *target, LossReduction reduction,
                 T *dPred, int64_t n);

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_TRAININGOPS_H
