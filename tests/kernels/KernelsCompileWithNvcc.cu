//===- KernelsCompileWithNvcc.cu - The op bodies as device code -----------===//
//
// Built by nvcc only, when CMake finds it (tests/kernels/CMakeLists.txt):
// includes every header of runtime/kernels and instantiates each element-wise
// body of ElementwiseOps.def in a __global__ function, for every storage type
// the CPU backend runs it with (float, double, Half, BFloat16 and the
// integers of its row kind), plus the bodies outside the table (attribute
// variants, activation slopes, casts, pooling windows, batch normalization,
// the index bodies).
// A body that calls host-only code, or is not MPC_HD, fails this build. The object is never linked or run: no
// GPU is needed.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/ActivationGrad.h"
#include "mpc/Runtime/Kernels/AttentionBodies.h"
#include "mpc/Runtime/Kernels/BatchNormBodies.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/BroadcastPlan.h"
#include "mpc/Runtime/Kernels/CopyPlan.h"
#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/ImageBodies.h"
#include "mpc/Runtime/Kernels/LossBodies.h"
#include "mpc/Runtime/Kernels/IndexBodies.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"
#include "mpc/Runtime/Kernels/MoveBodies.h"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include "mpc/Runtime/Kernels/OptimizerBodies.h"
#include "mpc/Runtime/Kernels/RecurrentBodies.h"
#include "mpc/Runtime/Kernels/ReduceBodies.h"
#include "mpc/Runtime/Kernels/RotaryBodies.h"
#include "mpc/Runtime/Kernels/StatNormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/Kernels/StorageTypes.h"
#include "mpc/Runtime/Kernels/TopKBodies.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"
#include "mpc/Runtime/Kernels/UnscaleBody.h"
#include "mpc/Runtime/Kernels/WindowBodies.h"

namespace mpc {
namespace kernels {
namespace nvcccheck {

template <typename Op, typename T, typename Out>
__global__ void unaryBody(Op op, const T *in, Out *out, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    out[i] = store<Out>(op(load(in[i])));
}

template <typename Op, typename T, typename Out>
__global__ void binaryBody(Op op, const T *a, const T *b, Out *out, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    out[i] = store<Out>(op(load(a[i]), load(b[i])));
}

#define MPC_DEVICE_UNARY(T, OP, OUT)                                           \
  template __global__ void unaryBody<OP, T, OUT(T)>(OP, const T *, OUT(T) *, int);
#define MPC_DEVICE_BINARY(T, OP, OUT)                                          \
  template __global__ void binaryBody<OP, T, OUT(T)>(OP, const T *, const T *, \
                                                     OUT(T) *, int);
#define MPC_UNARY_FLOAT(OP) MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_SIGNED(OP) MPC_SIGNED_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_ARITHMETIC(OP)                                               \
  MPC_ARITHMETIC_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_INTEGER(OP) MPC_INTEGER_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_PREDICATE(OP) MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_BOOL_TYPE)
#define MPC_BINARY_SIGNED(OP) MPC_SIGNED_STORAGE_TYPES(MPC_DEVICE_BINARY, OP, MPC_SAME_TYPE)
#define MPC_BINARY_INTEGER(OP) MPC_INTEGER_STORAGE_TYPES(MPC_DEVICE_BINARY, OP, MPC_SAME_TYPE)
#define MPC_BINARY_COMPARE(OP) MPC_SIGNED_STORAGE_TYPES(MPC_DEVICE_BINARY, OP, MPC_BOOL_TYPE)
#include "mpc/Runtime/Kernels/ElementwiseOps.def"

// Bodies outside the table: Gelu's two variants and ThresholdedRelu's
// siblings the table reaches through attributes.
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_UNARY, GeluErf, MPC_SAME_TYPE)
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_UNARY, GeluTanh, MPC_SAME_TYPE)

#undef MPC_DEVICE_UNARY
#undef MPC_DEVICE_BINARY

// The gradient ops' slopes (ReluGrad, SigmoidGrad, TanhGrad, ErfGrad, GeluGrad).
template <typename T>
__global__ void activationGradBody(ActivationGrad kind, const T *dy, const T *v, T *dx, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    dx[i] = store<T>(load(dy[i]) * activationSlope(kind, load(v[i])));
}
#define MPC_DEVICE_ACTIVATION_GRAD(T, OP, OUT)                                 \
  template __global__ void activationGradBody<T>(ActivationGrad, const T *, const T *, T *, int);
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_ACTIVATION_GRAD, , )
#undef MPC_DEVICE_ACTIVATION_GRAD

// The pooling window bodies (WindowBodies.h): forward and gradient per
// element, as the CPU runs them and PoolKernels.cu launches them.
template <typename T>
__global__ void windowBodies(WindowShape w, const T *x, const T *dy, T *y, int64_t *idx, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n)
    return;
  int64_t arg;
  y[i] = store<T>(windowMax(w, x, i, arg) + windowAverage(w, x, i, true) +
                  maxPoolGradAt(w, x, dy, i) + averagePoolGradAt(w, dy, i, false));
  idx[i] = windowIndex(w, arg, true) + windowGradArgmax(w, x, i);
}
#define MPC_DEVICE_WINDOW(T, OP, OUT)                                          \
  template __global__ void windowBodies<T>(WindowShape, const T *, const T *, T *, int64_t *, int);
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_WINDOW, , )
#undef MPC_DEVICE_WINDOW

// Inference batch normalization (BatchNormBodies.h), as BatchNormKernels.cu.
template <typename T>
__global__ void batchNormBody(const T *x, T *y, float scale, float var, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  using S = AccumType<T>;
  if (i < n)
    y[i] = store<T>(batchNormApply(batchNormChannel(S(scale), S(1), S(0), S(var), 1e-5f),
                                   S(load(x[i]))));
}
#define MPC_DEVICE_BATCH_NORM(T, OP, OUT)                                      \
  template __global__ void batchNormBody<T>(const T *, T *, float, float, int);
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_BATCH_NORM, , )
#undef MPC_DEVICE_BATCH_NORM
// The softmax and normalization formulas (NormBodies.h) in both
// accumulation types.
template <typename S> __global__ void normBodies(const S *x, S *out, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n)
    return;
  S v = x[i], m = maxKeepNaN(x[0], v), e = softmaxExp(v, m);
  S inv = invStdDevOf(squaredDeviation(v, m), S(1e-5));
  out[i] = e + logSoftmaxValue(v, m, e) + softmaxGradTerm(v, e, true) +
           softmaxGradValue(v, e, m, false) + layerNormValue(v, m, inv, e) +
           rmsNormValue(v, inv, e) +
           layerNormGradValue(v, normalizedInput(v, m, inv), inv, m, e);
}
template __global__ void normBodies<float>(const float *, float *, int);
template __global__ void normBodies<double>(const double *, double *, int);

// The reduction steps (ReduceBodies.h) for every kind, in the accumulation
// types of the float and integer reductions.
template <typename A, ReduceKind K> __device__ A reduceAll(const A *x, int n) {
  using Step = ReduceStep<A, combineOf(K), mapOf(K)>;
  A acc = Step::identity();
  for (int i = 0; i < n; ++i)
    acc = Step::combine(acc, Step::map(x[i], A(0)));
  return reduceFinish(K, acc, A(0), n);
}
template <typename A> __global__ void reduceBodies(const A *x, A *out, int n) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  out[0] = reduceAll<A, ReduceKind::Sum>(x, n) + reduceAll<A, ReduceKind::Mean>(x, n) +
           reduceAll<A, ReduceKind::Max>(x, n) + reduceAll<A, ReduceKind::Min>(x, n) +
           reduceAll<A, ReduceKind::Prod>(x, n) + reduceAll<A, ReduceKind::SumSquare>(x, n) +
           reduceAll<A, ReduceKind::L1>(x, n) + reduceAll<A, ReduceKind::L2>(x, n) +
           reduceAll<A, ReduceKind::LogSum>(x, n);
  if constexpr (!std::is_integral<A>::value)
    out[0] += reduceAll<A, ReduceKind::LogSumExp>(x, n) + logSumExpShift(x[0]);
}
template __global__ void reduceBodies<float>(const float *, float *, int);
template __global__ void reduceBodies<double>(const double *, double *, int);
template __global__ void reduceBodies<int64_t>(const int64_t *, int64_t *, int);

// The element-wise gradient ops' bodies in their storage types.
template <typename T>
__global__ void activationGradValues(ActivationGrad kind, const T *dy, const T *v, T *dx, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    dx[i] = activationGradValue(kind, dy[i], v[i]);
}
#define MPC_DEVICE_ACTIVATION_GRAD_VALUE(T, OP, OUT)                           \
  template __global__ void activationGradValues<T>(ActivationGrad, const T *, const T *, T *, int);
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_ACTIVATION_GRAD_VALUE, , )
#undef MPC_DEVICE_ACTIVATION_GRAD_VALUE

// Cast (castValue) between every pair of storage types.
template <typename From, typename To>
__global__ void castBody(const From *in, To *out, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    out[i] = castValue<To>(in[i]);
}

template <typename... Ts> struct AllCasts {
  template <typename From> static void from() {
    const void *kernels[] = {reinterpret_cast<const void *>(&castBody<From, Ts>)...};
    (void)kernels;
  }
  static void all() {
    void (*froms[])() = {&from<Ts>...};
    (void)froms;
  }
};

// The recurrent cells and their gradients (RecurrentBodies.h), in both
// compute types, as RnnKernels.cu and the CPU kernels run them.
template <typename A>
__global__ void recurrentBodies(RecurrentActivation act, RecurrentSizes s, const A *x, A *y,
                                int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n)
    return;
  A c = x[i], dg[4], dz, da;
  A h = lstmCell(x[i], x[i], x[i], x[i], true, A(1), A(1), A(1), c);
  h += recurrentGate(act, A(3), gruBlend(x[i], gruCandidatePreLbr(x[i], h, c, c),
                                         gruGatePre(x[i], h, c)));
  h += lstmGradState(gradSigmoid(x[i]), h, h, h, c, c);
  h += lstmCellGrad(h, h, h, h, c, c, h, c, dg, 1) + dg[3];
  h += gruBlendGrad(h, c, c, h, dz, da) + dz + da;
  h += gruResetGradLbr(h, c, c) + gruResetGrad(h, c, c);
  int64_t at = recurrentOutputOffset(s, 0, 0, 0) + recurrentStateOffset(s, 0, 0) +
               recurrentInputRow(s, 0, 0) + recurrentTimeAt(true, 1, 0);
  y[i + at] = h;
}
template __global__ void recurrentBodies<float>(RecurrentActivation, RecurrentSizes,
                                                const float *, float *, int);
template __global__ void recurrentBodies<double>(RecurrentActivation, RecurrentSizes,
                                                 const double *, double *, int);
// The index bodies (ArgMax/ArgMin, CumSum/CumProd, Range, Trilu, OneHot,
// GatherElements' plan).
template <typename T>
__global__ void indexBodies(const T *x, T *y, int64_t *pos, AxisSplit a, ElementIndexPlan p) {
  int64_t s = int64_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (s >= a.outer * a.inner)
    return;
  pos[s] = argReduceSlice(x, a, s, true, false) + oneHotPosition(x[s], a.dim) +
           elementIndexOffset(p, s, 0) + int64_t(triluKeeps(s, 0, 1, true));
  scanSlice<Add>(x, y, a, s, 0, false, true);
  scanSlice<Mul>(x, y, a, s, 1, true, false);
  y[s] = rangeValue(x[0], x[1], s);
}
#define MPC_DEVICE_INDEX(T, OP, OUT)                                           \
  template __global__ void indexBodies<T>(const T *, T *, int64_t *, AxisSplit,       \
                                          ElementIndexPlan);
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_INDEX, , )
template __global__ void indexBodies<int32_t>(const int32_t *, int32_t *, int64_t *, AxisSplit,
                                              ElementIndexPlan);
template __global__ void indexBodies<int64_t>(const int64_t *, int64_t *, int64_t *, AxisSplit,
                                              ElementIndexPlan);
#undef MPC_DEVICE_INDEX
// The data-movement index bodies (MoveBodies.h).
template <typename T>
__global__ void moveBodies(const T *x, T *y, int64_t *pos, BlockMovePlan b, TupleIndexPlan t,
                           ElementIndexPlan p, ReverseSequencePlan r, AxisSplit a) {
  int64_t s = int64_t(blockIdx.x * blockDim.x + threadIdx.x);
  int64_t off = 0, bad = 0;
  bool ok = tupleOffset(t, pos, s, off, bad);
  pos[s] = blockDepthOffset(b, s) + off + bad + lineElement(elementLines(p), s, 0) +
           reverseSequenceSource(r, s, reverseSequenceBatch(r, s)) +
           compressSource(a, 1, pos, s) + int64_t(eyeLikeOne(s, s, 0)) +
           int64_t(isNonZero(x[s])) + int64_t(ok);
  writeCoordinates(pos, 2, s, pos, 1, 0);
  y[s] = scatterCombine(x[s], y[s], ScatterCombine::Max);
}
#define MPC_DEVICE_MOVE(T, OP, OUT)                                            \
  template __global__ void moveBodies<T>(const T *, T *, int64_t *, BlockMovePlan,           \
                                         TupleIndexPlan, ElementIndexPlan,                   \
                                         ReverseSequencePlan, AxisSplit);
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_MOVE, , )
MPC_DEVICE_MOVE(int32_t, , )
MPC_DEVICE_MOVE(int64_t, , )
MPC_DEVICE_MOVE(bool, , )
#undef MPC_DEVICE_MOVE

// RotaryEmbedding's slots (RotaryBodies.h), as RotaryKernels.cu.
template <typename T>
__global__ void rotaryBodies(RotaryShape r, const T *x, const T *cs, const T *sn, T *y) {
  int64_t i = int64_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < rotarySlots(r))
    rotarySlot(r, x + rotaryHeadOffset(r, 0, 0, 0), y, cs, sn, i);
}
#define MPC_DEVICE_ROTARY(T, OP, OUT)                                          \
  template __global__ void rotaryBodies<T>(RotaryShape, const T *, const T *, const T *, T *);
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_ROTARY, , )
#undef MPC_DEVICE_ROTARY

// Attention's score bias and soft cap (AttentionBodies.h), as
// AttentionKernels.cu, in both compute types.
template <typename C>
__global__ void attentionBodies(AttentionMaskShape m, const C *x, C *y, int64_t n) {
  int64_t j = int64_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (j < n)
    y[j] = attentionSoftcap(x[j], C(30)) +
           attentionCausalBias(true, 0, j, 1,
                               attentionMaskBias(m, j, x[attentionMaskRow(m, 0, 0, 0) + j]));
}
template __global__ void attentionBodies<float>(AttentionMaskShape, const float *, float *,
                                                int64_t);
template __global__ void attentionBodies<double>(AttentionMaskShape, const double *, double *,
                                                 int64_t);

// The image bodies (ImageBodies.h): Pad's source index, LRN's window and
// value, Resize's taps for every mode, as ImageKernels.cu calls them.
template <typename C>
__global__ void imageBodies(const C *x, C *y, ResizeAxis a, int32_t padMode, int64_t n) {
  int64_t s = int64_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (s >= n)
    return;
  int64_t first, last;
  lrnWindow(s, n, 3, &first, &last);
  C acc = lrnValue<C>(x[first], x[last], C(1), C(1e-4), C(3), C(0.75));
  if (!resizeTaps(a, s, [&](int64_t i, double w) { acc += C(w) * x[i]; }))
    acc = C(0);
  y[s] = acc + x[padSource(s - 2, n, padMode)];
}
template __global__ void imageBodies<float>(const float *, float *, ResizeAxis, int32_t, int64_t);
template __global__ void imageBodies<double>(const double *, double *, ResizeAxis, int32_t,
                                             int64_t);

void instantiateCasts() {
  AllCasts<bool, float, double, Half, BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t,
           uint16_t, uint32_t, uint64_t>::all();
}

} // namespace nvcccheck
} // namespace kernels
} // namespace mpc
