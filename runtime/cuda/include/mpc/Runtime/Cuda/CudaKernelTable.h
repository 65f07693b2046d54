//===- CudaKernelTable.h - The CUDA backend's kernel table ------*- C++ -*-===//
//
// One row per CUDA kernel, keyed like the CPU table (op type, domain, opset
// range, dtypes of the type-determining operand) plus what kind of launcher
// runs it and, for element-wise rows, the op number of its body. The table,
// the capability object built from it (CudaCaps), the prepare-cache key and
// the run-here decision are host code with no CUDA header, built on every
// machine, so CI tests what the CUDA backend will claim without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CUDAKERNELTABLE_H
#define MPC_RUNTIME_CUDA_CUDAKERNELTABLE_H

#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/CudaOps.h"
#include "mpc/Runtime/OpRegistry.h"
#include "mpc/Target/BackendCaps.h"
#include "llvm/ADT/ArrayRef.h"
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace mpc {
namespace cuda {

/// Which launcher runs a row.
enum class CudaKernelKind : uint8_t {
  Unary,     ///< same-type unary body (UnaryOpId)
  Predicate, ///< float -> bool unary body (UnaryOpId)
  Binary,    ///< same-type broadcast binary body (BinaryOpId)
  Compare,   ///< broadcast binary body -> bool (BinaryOpId)
  Cast,      ///< Cast / CastLike between the cast types
  MatMul,    ///< cuBLASLt
  Gemm,      ///< cuBLASLt, C through planGemmBias
  FusedMatMul, ///< cuBLASLt: com.microsoft FusedMatMul (alpha, transA/B)
  GemmBiasAct, ///< cuBLASLt with a bias/ReLU/GELU epilogue: ai.mpc.training GemmBiasAct
  // Convolutions: cuDNN (ConvOps.cpp), every operand of one float type.
  Conv,          ///< forward, bias added after
  ConvTranspose, ///< cuDNN's backward data of the forward convolution
  ConvGrad,      ///< dX, dW (cuDNN), dB (a channel sum)
  // Pooling: the window bodies of Kernels/WindowBodies.h (PoolOps.cpp).
  Pool,           ///< MaxPool (and Indices), AveragePool, LpPool
  PoolGrad,       ///< MaxPoolGrad, AveragePoolGrad
  GlobalPool,     ///< GlobalMaxPool, GlobalAveragePool, GlobalLpPool
  GlobalPoolGrad, ///< GlobalAveragePoolGrad
  // BatchNormalization with running statistics (BatchNormOps.cpp).
  BatchNorm, ///< either training_mode; parameters of X's type or f32
  // Softmax and normalization (NormOps.cpp): slices of SlicePlan.h.
  Softmax,     ///< Softmax, LogSoftmax
  SoftmaxGrad, ///< SoftmaxGrad, LogSoftmaxGrad (ai.mpc.training)
  Norm,        ///< LayerNormalization, RMSNormalization
  NormGrad,    ///< LayerNormalizationGrad (ai.mpc.training)
  // Reductions (ReduceOps.cpp): slices of SlicePlan.h.
  Reduce,   ///< Reduce* (op: kernels::ReduceKind)
  BiasGrad, ///< BiasGrad (ai.mpc.training): a sum over broadcast axes
  // Activation gradients (GradOps.cpp).
  ActivationGrad, ///< ReluGrad, ... (op: kernels::ActivationGrad)
  // Data movement (DataOps.cpp): byte copies, strided-copy plans, fills.
  DataMove, ///< Identity, Reshape, Transpose, Slice, Concat, ... (by op type)
  // Losses (LossOps.cpp): LossBodies.h over the slices of LossPlan.h.
  Loss, ///< SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, their gradients (by op type)
  // Clip (ClipOps.cpp): bounds read on the device.
  Clip, ///< Clip; min and max inputs of X's type
  // BatchNormalizationGrad (BatchNormTrainOps.cpp; training-mode
  // BatchNormalization is the BatchNorm row's).
  BatchNormGrad, ///< scale of X's type, or f32 with 16-bit X
  // Statistics in double (StatNormOps.cpp), by op type.
  StatNorm, ///< InstanceNormalization, GroupNormalization, LpNormalization
  // TopK (TopKOps.cpp): a selection per slice.
  TopK,
  // Recurrent ops (RnnOps.cpp): cuBLASLt products and RecurrentBodies.h cells.
  Recurrent, ///< LSTM, GRU, RNN
  LstmGrad,  ///< ai.mpc.training LSTMGrad: backward through time
  GruGrad,   ///< ai.mpc.training GRUGrad: backward through time
  // Index, logic and shape ops (IndexOps.cpp).
  Logical,    ///< And, Or, Xor over bool (op: LogicalOpId), numpy broadcasting
  LogicalNot, ///< Not over bool
  ArgReduce,  ///< ArgMax, ArgMin: one thread per slice (IndexBodies.h)
  ShapeOf,    ///< Shape, Size: values known at prepare, written by a kernel
  Range,      ///< Range: start and delta read on the device
  Trilu,      ///< Trilu over raw elements (k known at prepare)
  Scan,       ///< CumSum, CumProd (axis known at prepare): a thread per slice
  GatherElements, ///< GatherElements over raw elements, i32/i64 indices
  Fill,       ///< ConstantOfShape: the parsed value of 1, 2, 4 or 8 bytes
  OneHot,     ///< OneHot: indices of the arithmetic types, raw values
  // Data-movement index ops (MoveOps.cpp): MoveBodies.h over raw elements.
  BlockMove,       ///< DepthToSpace (DCR, CRD), SpaceToDepth
  GatherND,        ///< GatherND (batch_dims), i32/i64 indices
  Scatter,         ///< ScatterElements, ScatterND: None on raw elements, reductions
                   ///< on kCudaBinaryTypes, in the CPU's update order
  ReverseSequence, ///< ReverseSequence, i32/i64 lengths read on the device
  EyeLike,         ///< EyeLike into an output type of the data rows
  Compress,        ///< Compress: kept positions numbered in one block
  NonZero,         ///< NonZero over kCudaCastTypes: likewise
  // Transformer ops: RotaryEmbedding (RotaryOps.cpp), Einsum (EinsumOps.cpp),
  // Attention (AttentionOps.cpp).
  Rotary,    ///< RotaryEmbedding over Kernels/RotaryBodies.h
  Einsum,    ///< gathers and one cuBLASLt product (EinsumPlan.h)
  Attention, ///< two cuBLASLt products around a biased softmax
  // Image ops (ImageOps.cpp): ImageBodies.h; Pad's edge, reflect and wrap
  // modes are the DataMove row's, routed there by prepareCudaOp.
  Image, ///< Resize (constant scales/sizes/roi), LRN (by op type)
  // Fused optimizer steps (OptimizerOps.cpp): f32, skip flag bool or f32.
  OptimizerStep, ///< SGDStep, MomentumStep, AdamStep (ai.mpc.training)
  // Loss scaling (UnscaleOps.cpp): one launch over every gradient.
  MultiTensorUnscale, ///< ai.mpc.training MultiTensorUnscale: f32/f16/bf16 gradients
};

/// The element-wise types the launchers are instantiated for.
constexpr DTypeSet kCudaFloatTypes =
    dtypeBit(DType::F32) | dtypeBit(DType::F16) | dtypeBit(DType::BF16);
constexpr DTypeSet kCudaBinaryTypes =
    kCudaFloatTypes | dtypeBit(DType::I32) | dtypeBit(DType::I64);
/// The unary, predicate, binary and compare rows of ElementwiseOps.def also
/// take f64 (the same bodies in double, as on the CPU).
constexpr DTypeSet kCudaElementwiseFloatTypes = kCudaFloatTypes | dtypeBit(DType::F64);
constexpr DTypeSet kCudaElementwiseBinaryTypes = kCudaBinaryTypes | dtypeBit(DType::F64);
/// Cast and CastLike convert between any two of these.
constexpr DTypeSet kCudaCastTypes = kCudaBinaryTypes | dtypeBit(DType::F64) |
                                    dtypeBit(DType::Bool) | dtypeBit(DType::I8) |
                                    dtypeBit(DType::U8);

/// The bitwise rows (BitwiseAnd/Or/Xor/Not, BitShift) take every integer
/// type (BitShift: the unsigned ones, as the CPU row).
constexpr DTypeSet kCudaIntegerTypes =
    dtypeBit(DType::I8) | dtypeBit(DType::I16) | dtypeBit(DType::I32) | dtypeBit(DType::I64) |
    dtypeBit(DType::U8) | dtypeBit(DType::U16) | dtypeBit(DType::U32) | dtypeBit(DType::U64);

/// The data-movement rows move raw elements of 1, 2, 4 or 8 bytes: every
/// dtype of those sizes (not strings, sub-byte or 16-byte complex types).
constexpr DTypeSet kCudaDataTypes =
    kCudaCastTypes | dtypeBit(DType::I16) | dtypeBit(DType::U16) | dtypeBit(DType::U32) |
    dtypeBit(DType::U64);

struct CudaKernel {
  const char *opType;
  const char *domain;
  int64_t minOpset, maxOpset;
  DTypeSet dtypes;
  CudaKernelKind kind;
  /// UnaryOpId or BinaryOpId for element-wise rows; 0 otherwise.
  int32_t op = 0;
};

/// A node's parameters of type P from the registry's parse function
/// (`paramsOf<BatchNormParams>(parseBatchNorm(n))`), or the parse's error.
/// The executor has parsed every node before any backend sees it, so an
/// error here is not expected; callers still pass it on.
template <typename P> llvm::Expected<P> paramsOf(ParsedParams parsed) {
  if (!parsed)
    return parsed.takeError();
  return static_cast<const P &>(**parsed);
}

/// The whole table (opset ranges are the CPU rows' of the same op).
llvm::ArrayRef<CudaKernel> cudaKernelTable();
/// The row for a node at its model's opset, or null.
const CudaKernel *findCudaKernel(const Node &n);

/// True when a CUDA kernel runs `n` with these input dtypes: its row lists
/// the type-determining operand's dtype, and what the row cannot take is
/// absent (a Cast target outside kCudaCastTypes, Max/Min with more than
/// kMaxNaryInputs operands, operands of different float types in a GEMM).
bool cudaRuns(const Node &n, llvm::ArrayRef<DType> inputDTypes);

/// True when `row` is Max's or Min's and takes a node of `numInputs`
/// operands other than two through the variadic launcher (one to
/// kernels::kMaxNaryInputs operands; ElementwiseOps.cpp).
bool cudaVariadicRow(const CudaKernel &row, size_t numInputs);

/// The int64 values of input `i` of `n` when they are known before
/// anything runs (an in-memory integer initializer, or a Constant node's
/// value): the axes of a reduction, BiasGrad's shape. False otherwise.
bool constantInputInts(const Node &n, unsigned i, std::vector<int64_t> &out);

// Image family (ImageOps.cpp): Resize's scales, sizes and roi.
/// The values of input `i` of `n` as double (float or integer data), when
/// known before anything runs as constantInputInts's are. False otherwise.
bool constantInputDoubles(const Node &n, unsigned i, std::vector<double> &out);
/// The int64 values of input `i` of `n` in a static plan: those the
/// signature carries (TensorDesc::values: an initializer's, or a value the
/// executor folded while planning, such as a Slice bound computed from
/// Shape), else constantInputInts. False when only the device has them.
bool knownInputInts(const Node &n, llvm::ArrayRef<TensorDesc> inputs, unsigned i,
                    std::vector<int64_t> &out);

/// What prepare decides from the table for a node and its shape signature:
/// cudaRuns, and every operand a kernel must know before it runs is known
/// (knownInputInts: a Slice's or SliceGrad's bounds, Pad's pads and axes, a
/// reduction's axes, BiasGrad's shape, Trilu's k, CumSum's axis, the
/// recurrent ops' sequence_lens). A node refused here runs on the CPU under
/// FallbackBackend. The families' prepare functions may still refuse shapes
/// (a convolution's asymmetric pads): this is the table's part only.
bool cudaRunsShaped(const Node &n, llvm::ArrayRef<TensorDesc> inputs);

/// cudaRuns with every operand a kernel takes as a constant assumed known:
/// what the backend's supportsOp answers before any value is (prepare then
/// asks cudaRunsShaped, and a node whose constants are not known runs on the
/// CPU under FallbackBackend, or is refused with --no-fallback).
bool cudaRunsIfKnown(const Node &n, llvm::ArrayRef<DType> inputDTypes);

/// The bytes of a functor, as a launcher takes them.
template <typename Op> OpBlob blobOf(const Op &op) {
  static_assert(sizeof(Op) <= sizeof(OpBlob::bytes) && std::is_trivially_copyable<Op>::value,
                "an op functor travels as an OpBlob");
  OpBlob b;
  std::memcpy(b.bytes, static_cast<const void *>(&op), sizeof(Op));
  return b;
}

/// The functor of an element-wise row's body with the attributes of
/// `params` (kernels::makeOp, mpc/Runtime/ElementwiseFunctors.h: what the
/// CPU loops build from the same parameters), as a launcher's bytes. An
/// empty blob for a row that is not element-wise.
OpBlob opBlobOf(const OpParams *params, const CudaKernel &row);
/// The same for a node, parsed by its registry row (the executor's parse),
/// or the parser's error.
llvm::Expected<OpBlob> makeOpBlob(const Node &n, const CudaKernel &row);

/// The capabilities derived from the CUDA table: a 16-bit type is supported
/// where the node's row runs it.
class CudaCaps final : public BackendCaps {
public:
  std::string name() const override { return "cuda"; }
  bool supportsLowPrecision(const Node &n, DType t) const override;
  /// fp16/bf16 Tensor Core GEMMs want dimensions in multiples of 8.
  unsigned preferredDimMultiple() const override { return 8; }
};

/// The backend's prepare cache is keyed by node and shape signature; the
/// signature is the dtypes and shapes of the inputs, "-" for an absent
/// optional one, and the values a static plan knows (TensorDesc::values)
/// after "=": "f16[2, 3] f16[3] - i64[1]=[2]".
std::string shapeSignature(llvm::ArrayRef<TensorDesc> inputs);

struct PrepareKey {
  const Node *node = nullptr;
  std::string signature;
  bool operator==(const PrepareKey &o) const {
    return node == o.node && signature == o.signature;
  }
  bool operator<(const PrepareKey &o) const {
    return node != o.node ? node < o.node : signature < o.signature;
  }
};

inline PrepareKey prepareKey(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  return PrepareKey{&n, shapeSignature(inputs)};
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_CUDAKERNELTABLE_H
