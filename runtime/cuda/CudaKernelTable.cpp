//===- CudaKernelTable.cpp - The CUDA backend's kernel table ----------------===//
//
// Host code only (no CUDA header): the rows, CudaCaps and the prepare-cache
// signature. The element-wise rows come from ElementwiseOps.def, limited to
// the row kinds the launchers instantiate (ElementwiseKernels.cu).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/CudaOps.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/GemmBiasAct.h"
#include "mpc/Ops/OptimizerStep.h"
#include "mpc/Runtime/ElementwiseFunctors.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Runtime/Kernels/CopyPlan.h"
#include "mpc/Runtime/OpRegistry.h"
#include "mpc/Runtime/Kernels/ActivationGrad.h"
#include "mpc/Runtime/Kernels/ReduceBodies.h"
#include "../ops/NodeGeometry.h"
#include "../ops/ShapeHelpers.h"
#include "llvm/ADT/StringRef.h"
#include <cstring>
#include <type_traits>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

// The launchers take ONNX type numbers; they are mpc::DType's values.
static_assert(kOnnxF32 == int32_t(DType::F32) && kOnnxU8 == int32_t(DType::U8) &&
                  kOnnxI8 == int32_t(DType::I8) && kOnnxI32 == int32_t(DType::I32) &&
                  kOnnxI64 == int32_t(DType::I64) && kOnnxBool == int32_t(DType::Bool) &&
                  kOnnxF16 == int32_t(DType::F16) && kOnnxF64 == int32_t(DType::F64) &&
                  kOnnxBF16 == int32_t(DType::BF16) && kOnnxU16 == int32_t(DType::U16) &&
                  kOnnxI16 == int32_t(DType::I16) && kOnnxU32 == int32_t(DType::U32) &&
                  kOnnxU64 == int32_t(DType::U64),
              "OnnxType and DType agree");

namespace {
#define MPC_CUDA_ROW(Op, Types, Kind, Id)                                      \
  CudaKernel{#Op, "", 1, kMaxOpsetVersion, Types, CudaKernelKind::Kind, int32_t(Id)}
/// A float row of another domain (the gradient ops).
#define MPC_CUDA_DOMAIN_ROW(Domain, Op, Kind)                                  \
  CudaKernel{#Op, Domain, 1, kMaxOpsetVersion, kCudaFloatTypes, CudaKernelKind::Kind}
#define MPC_CUDA_TRAINING_ROW(Op, Types, Kind)                                 \
  CudaKernel{#Op, "ai.mpc.training", 1, kMaxOpsetVersion, Types, CudaKernelKind::Kind, 0}
#define MPC_CUDA_GRAD_ROW(Op, Kind)                                            \
  CudaKernel{#Op, "ai.mpc.training", 1, kMaxOpsetVersion, kCudaFloatTypes,     \
             CudaKernelKind::ActivationGrad, int32_t(kernels::ActivationGrad::Kind)}

std::vector<CudaKernel> buildTable() {
  std::vector<CudaKernel> rows = {
  // Unary bodies over the float types. Clip reads its bounds from inputs
  // (device values), so it has no row yet.
#define MPC_UNARY_FLOAT(Op) MPC_CUDA_ROW(Op, kCudaElementwiseFloatTypes, Unary, UnaryOpId::Op),
#define MPC_UNARY_SIGNED(Op) MPC_CUDA_ROW(Op, kCudaElementwiseFloatTypes, Unary, UnaryOpId::Op),
#define MPC_UNARY_ARITHMETIC(Op) MPC_CUDA_ROW(Op, kCudaElementwiseFloatTypes, Unary, UnaryOpId::Op),
#define MPC_UNARY_PREDICATE(Op) MPC_CUDA_ROW(Op, kCudaElementwiseFloatTypes, Predicate, UnaryOpId::Op),
#define MPC_BINARY_SIGNED(Op) MPC_CUDA_ROW(Op, kCudaElementwiseBinaryTypes, Binary, BinaryOpId::Op),
#define MPC_BINARY_COMPARE(Op) MPC_CUDA_ROW(Op, kCudaElementwiseBinaryTypes, Compare, BinaryOpId::Op),
  // The bitwise rows over the integer types (index/logic family).
#define MPC_UNARY_INTEGER(Op) MPC_CUDA_ROW(Op, kCudaIntegerTypes, Unary, UnaryOpId::Op),
#define MPC_BINARY_INTEGER(Op) MPC_CUDA_ROW(Op, kCudaIntegerTypes, Binary, BinaryOpId::Op),
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
      MPC_CUDA_ROW(Cast, kCudaCastTypes, Cast, 0),
      MPC_CUDA_ROW(CastLike, kCudaCastTypes, Cast, 0),
      MPC_CUDA_ROW(MatMul, kCudaFloatTypes, MatMul, 0),
      MPC_CUDA_ROW(Gemm, kCudaFloatTypes, Gemm, 0),
      CudaKernel{"FusedMatMul", "com.microsoft", 1, kMaxOpsetVersion, kCudaFloatTypes,
                 CudaKernelKind::FusedMatMul, 0},
      MPC_CUDA_TRAINING_ROW(GemmBiasAct, kCudaFloatTypes, GemmBiasAct),
      // Convolutions (cuDNN; ConvOps.cpp).
      MPC_CUDA_ROW(Conv, kCudaFloatTypes, Conv, 0),
      MPC_CUDA_ROW(ConvTranspose, kCudaFloatTypes, ConvTranspose, 0),
      MPC_CUDA_DOMAIN_ROW("ai.mpc.training", ConvGrad, ConvGrad),
      MPC_CUDA_DOMAIN_ROW("com.microsoft", ConvGrad, ConvGrad),
      // Pooling (window bodies; PoolOps.cpp).
      MPC_CUDA_ROW(MaxPool, kCudaFloatTypes, Pool, 0),
      MPC_CUDA_ROW(AveragePool, kCudaFloatTypes, Pool, 0),
      MPC_CUDA_ROW(GlobalMaxPool, kCudaFloatTypes, GlobalPool, 0),
      MPC_CUDA_ROW(GlobalAveragePool, kCudaFloatTypes, GlobalPool, 0),
      MPC_CUDA_ROW(LpPool, kCudaFloatTypes, Pool, 0),
      MPC_CUDA_ROW(GlobalLpPool, kCudaFloatTypes, GlobalPool, 0),
      MPC_CUDA_DOMAIN_ROW("ai.mpc.training", MaxPoolGrad, PoolGrad),
      MPC_CUDA_DOMAIN_ROW("ai.mpc.training", AveragePoolGrad, PoolGrad),
      MPC_CUDA_DOMAIN_ROW("ai.mpc.training", GlobalAveragePoolGrad, GlobalPoolGrad),
      // Batch normalization, inference (BatchNormOps.cpp).
      MPC_CUDA_ROW(BatchNormalization, kCudaFloatTypes, BatchNorm, 0),
      // Softmax and normalization (NormOps.cpp).
      MPC_CUDA_ROW(Softmax, kCudaFloatTypes, Softmax, 0),
      MPC_CUDA_ROW(LogSoftmax, kCudaFloatTypes, Softmax, 0),
      MPC_CUDA_TRAINING_ROW(SoftmaxGrad, kCudaFloatTypes, SoftmaxGrad),
      MPC_CUDA_TRAINING_ROW(LogSoftmaxGrad, kCudaFloatTypes, SoftmaxGrad),
      MPC_CUDA_ROW(LayerNormalization, kCudaFloatTypes, Norm, 0),
      MPC_CUDA_ROW(RMSNormalization, kCudaFloatTypes, Norm, 0),
      MPC_CUDA_TRAINING_ROW(LayerNormalizationGrad, kCudaFloatTypes, NormGrad),
      // Reductions (ReduceOps.cpp).
      MPC_CUDA_ROW(ReduceSum, kCudaFloatTypes, Reduce, kernels::ReduceKind::Sum),
      MPC_CUDA_ROW(ReduceMean, kCudaFloatTypes, Reduce, kernels::ReduceKind::Mean),
      MPC_CUDA_ROW(ReduceMax, kCudaFloatTypes, Reduce, kernels::ReduceKind::Max),
      MPC_CUDA_ROW(ReduceMin, kCudaFloatTypes, Reduce, kernels::ReduceKind::Min),
      MPC_CUDA_ROW(ReduceProd, kCudaFloatTypes, Reduce, kernels::ReduceKind::Prod),
      MPC_CUDA_ROW(ReduceSumSquare, kCudaFloatTypes, Reduce, kernels::ReduceKind::SumSquare),
      MPC_CUDA_ROW(ReduceL1, kCudaFloatTypes, Reduce, kernels::ReduceKind::L1),
      MPC_CUDA_ROW(ReduceL2, kCudaFloatTypes, Reduce, kernels::ReduceKind::L2),
      MPC_CUDA_ROW(ReduceLogSum, kCudaFloatTypes, Reduce, kernels::ReduceKind::LogSum),
      MPC_CUDA_ROW(ReduceLogSumExp, kCudaFloatTypes, Reduce, kernels::ReduceKind::LogSumExp),
      MPC_CUDA_TRAINING_ROW(BiasGrad, kCudaFloatTypes, BiasGrad),
      // Activation gradients (GradOps.cpp).
      MPC_CUDA_GRAD_ROW(ReluGrad, Relu),
      MPC_CUDA_GRAD_ROW(SigmoidGrad, Sigmoid),
      MPC_CUDA_GRAD_ROW(TanhGrad, Tanh),
      MPC_CUDA_GRAD_ROW(ErfGrad, Erf),
      MPC_CUDA_GRAD_ROW(GeluGrad, Gelu),
      // Recurrent ops (RnnOps.cpp).
      MPC_CUDA_ROW(LSTM, kCudaFloatTypes, Recurrent, 0),
      MPC_CUDA_ROW(GRU, kCudaFloatTypes, Recurrent, 0),
      MPC_CUDA_ROW(RNN, kCudaFloatTypes, Recurrent, 0),
      MPC_CUDA_TRAINING_ROW(LSTMGrad, kCudaFloatTypes, LstmGrad),
      MPC_CUDA_TRAINING_ROW(GRUGrad, kCudaFloatTypes, GruGrad),
  };
  // Data movement (DataOps.cpp): every dtype of 1, 2, 4 or 8 bytes that the
  // CPU row of the op lists (masked below).
  for (const char *op : {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout",
                         "Transpose", "Expand", "Concat", "Split", "Slice", "Tile", "Pad"})
    rows.push_back(CudaKernel{op, "", 1, kMaxOpsetVersion, kCudaDataTypes,
                              CudaKernelKind::DataMove});
  rows.push_back(CudaKernel{"SliceGrad", "ai.mpc.training", 1, kMaxOpsetVersion,
                            kCudaDataTypes, CudaKernelKind::DataMove});
  // Where's row is keyed by its bool condition (as the CPU's); the values'
  // dtype is checked in dataRowTakes.
  rows.push_back(CudaKernel{"Where", "", 1, kMaxOpsetVersion, dtypeBit(DType::Bool),
                            CudaKernelKind::DataMove});
  rows.push_back(CudaKernel{"Gather", "", 1, kMaxOpsetVersion, kCudaDataTypes,
                            CudaKernelKind::DataMove});
  rows.push_back(CudaKernel{"GatherGrad", "ai.mpc.training", 1, kMaxOpsetVersion,
                            kCudaFloatTypes | dtypeBit(DType::F64), CudaKernelKind::DataMove});
  for (const char *op : {"Sum", "Mean"})
    rows.push_back(CudaKernel{op, "", 1, kMaxOpsetVersion, kCudaFloatTypes | dtypeBit(DType::F64),
                              CudaKernelKind::DataMove});
  // Training batch normalization's gradient (BatchNormTrainOps.cpp).
  rows.push_back(CudaKernel{"BatchNormalizationGrad", "ai.mpc.training", 1, kMaxOpsetVersion,
                            kCudaFloatTypes, CudaKernelKind::BatchNormGrad});
  // Instance, group and Lp normalization (StatNormOps.cpp).
  for (const char *op : {"InstanceNormalization", "GroupNormalization", "LpNormalization"})
    rows.push_back(CudaKernel{op, "", 1, kMaxOpsetVersion, kCudaFloatTypes,
                              CudaKernelKind::StatNorm});
  // TopK (TopKOps.cpp): k from the planned output shape.
  rows.push_back(CudaKernel{"TopK", "", 1, kMaxOpsetVersion, kCudaBinaryTypes,
                            CudaKernelKind::TopK});
  // Losses and their gradients (LossOps.cpp).
  for (const char *op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
    rows.push_back(CudaKernel{op, "", 1, kMaxOpsetVersion, kCudaFloatTypes, CudaKernelKind::Loss});
  for (const char *op : {"SoftmaxCrossEntropyLossGrad", "MSELossGrad"})
    rows.push_back(CudaKernel{op, "ai.mpc.training", 1, kMaxOpsetVersion, kCudaFloatTypes,
                              CudaKernelKind::Loss});
  // Loss scaling's unscale and check, keyed by inv_scale (UnscaleOps.cpp).
  rows.push_back(CudaKernel{"MultiTensorUnscale", "ai.mpc.training", 1, kMaxOpsetVersion,
                            dtypeBit(DType::F32), CudaKernelKind::MultiTensorUnscale});
  // Index, logic and shape ops (IndexOps.cpp).
  rows.push_back(MPC_CUDA_ROW(And, dtypeBit(DType::Bool), Logical, LogicalOpId::And));
  rows.push_back(MPC_CUDA_ROW(Or, dtypeBit(DType::Bool), Logical, LogicalOpId::Or));
  rows.push_back(MPC_CUDA_ROW(Xor, dtypeBit(DType::Bool), Logical, LogicalOpId::Xor));
  rows.push_back(MPC_CUDA_ROW(Not, dtypeBit(DType::Bool), LogicalNot, 0));
  rows.push_back(MPC_CUDA_ROW(ArgMax, kCudaBinaryTypes, ArgReduce, 0));
  rows.push_back(MPC_CUDA_ROW(ArgMin, kCudaBinaryTypes, ArgReduce, 0));
  rows.push_back(MPC_CUDA_ROW(Shape, kCudaDataTypes, ShapeOf, 0));
  rows.push_back(MPC_CUDA_ROW(Size, kCudaDataTypes, ShapeOf, 0));
  rows.push_back(MPC_CUDA_ROW(Range, kCudaBinaryTypes, Range, 0));
  rows.push_back(MPC_CUDA_ROW(Trilu, kCudaDataTypes, Trilu, 0));
  rows.push_back(MPC_CUDA_ROW(CumSum, kCudaBinaryTypes, Scan, 0));
  rows.push_back(MPC_CUDA_ROW(CumProd, kCudaBinaryTypes, Scan, 0));
  rows.push_back(MPC_CUDA_ROW(GatherElements, kCudaDataTypes, GatherElements, 0));
  // Keyed by the shape input (int64), as the CPU row.
  rows.push_back(MPC_CUDA_ROW(ConstantOfShape, kCudaBinaryTypes, Fill, 0));
  rows.push_back(MPC_CUDA_ROW(OneHot, kCudaBinaryTypes, OneHot, 0)); // keyed by the indices
  // Data-movement index ops (MoveOps.cpp); Compress and NonZero are shaped
  // by the executor from their inputs' values on the host (dynamic mode).
  rows.push_back(MPC_CUDA_ROW(DepthToSpace, kCudaDataTypes, BlockMove, 0));
  rows.push_back(MPC_CUDA_ROW(SpaceToDepth, kCudaDataTypes, BlockMove, 0));
  rows.push_back(MPC_CUDA_ROW(GatherND, kCudaDataTypes, GatherND, 0));
  rows.push_back(MPC_CUDA_ROW(ScatterElements, kCudaDataTypes, Scatter, 0));
  rows.push_back(MPC_CUDA_ROW(ScatterND, kCudaDataTypes, Scatter, 0));
  rows.push_back(MPC_CUDA_ROW(ReverseSequence, kCudaDataTypes, ReverseSequence, 0));
  rows.push_back(MPC_CUDA_ROW(EyeLike, kCudaDataTypes, EyeLike, 0));
  rows.push_back(MPC_CUDA_ROW(Compress, kCudaDataTypes, Compress, 0));
  rows.push_back(MPC_CUDA_ROW(NonZero, kCudaCastTypes, NonZero, 0));
  // Transformer ops: RotaryEmbedding (RotaryOps.cpp), Einsum (EinsumOps.cpp),
  // Attention (AttentionOps.cpp).
  rows.push_back(MPC_CUDA_ROW(RotaryEmbedding, kCudaFloatTypes, Rotary, 0));
  rows.push_back(MPC_CUDA_ROW(Einsum, kCudaFloatTypes, Einsum, 0));
  rows.push_back(MPC_CUDA_ROW(Attention, kCudaFloatTypes, Attention, 0));
  // Image ops (ImageOps.cpp).
  rows.push_back(MPC_CUDA_ROW(Resize, kCudaFloatTypes, Image, 0));
  rows.push_back(MPC_CUDA_ROW(LRN, kCudaFloatTypes, Image, 0));
  // Fused optimizer steps (OptimizerOps.cpp).
  // Their multi-tensor forms: one launch over every parameter, keyed by lr.
  for (const char *op : {"SGDStep", "MomentumStep", "AdamStep", "MultiTensorSGDStep",
                         "MultiTensorMomentumStep", "MultiTensorAdamStep"})
    rows.push_back(CudaKernel{op, "ai.mpc.training", 1, kMaxOpsetVersion, dtypeBit(DType::F32),
                              CudaKernelKind::OptimizerStep});
  // Clip, its bounds read on the device (ClipOps.cpp); the unary rows of
  // ElementwiseOps.def leave it out below.
  std::vector<CudaKernel> out{
      CudaKernel{"Clip", "", 1, kMaxOpsetVersion, kCudaBinaryTypes, CudaKernelKind::Clip}};
  for (CudaKernel r : rows) {
    if (llvm::StringRef(r.opType) == "Clip")
      continue;
    // The same opset range as the CPU row of the op (the CPU backend is the
    // reference: a CUDA row never claims an opset the CPU does not run).
    if (const CpuKernel *c = findCpuKernel(r.opType, r.domain, kMaxOpsetVersion)) {
      r.minOpset = c->minOpset;
      r.maxOpset = c->maxOpset;
      // Never a dtype the CPU reference does not run (the data rows list
      // every raw element size; BitShift's CPU row takes the unsigned types
      // only).
      r.dtypes &= c->dtypes;
    }
    out.push_back(r);
  }
  return out;
}
#undef MPC_CUDA_ROW
#undef MPC_CUDA_DOMAIN_ROW
#undef MPC_CUDA_TRAINING_ROW
#undef MPC_CUDA_GRAD_ROW
} // namespace

llvm::ArrayRef<CudaKernel> cuda::cudaKernelTable() {
  static const std::vector<CudaKernel> table = buildTable();
  return table;
}

const CudaKernel *cuda::findCudaKernel(const Node &n) {
  static const OpRowIndex<CudaKernel> index(cudaKernelTable());
  return index.find(n.opType, n.domain, n.opsetVersion());
}

OpBlob cuda::opBlobOf(const OpParams *params, const CudaKernel &row) {
  using kernels::makeOp;
  switch (row.kind) {
  case CudaKernelKind::Unary:
  case CudaKernelKind::Predicate:
    switch (UnaryOpId(row.op)) {
#define MPC_CUDA_BLOB(Op)                                                      \
  case UnaryOpId::Op:                                                          \
    return blobOf(makeOp<kernels::Op>(params));
#define MPC_UNARY_FLOAT(Op) MPC_CUDA_BLOB(Op)
#define MPC_UNARY_SIGNED(Op) MPC_CUDA_BLOB(Op)
#define MPC_UNARY_ARITHMETIC(Op) MPC_CUDA_BLOB(Op)
#define MPC_UNARY_INTEGER(Op) MPC_CUDA_BLOB(Op)
#define MPC_UNARY_PREDICATE(Op) MPC_CUDA_BLOB(Op)
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
#undef MPC_CUDA_BLOB
    default:
      break;
    }
    break;
  case CudaKernelKind::Binary:
  case CudaKernelKind::Compare:
    switch (BinaryOpId(row.op)) {
#define MPC_CUDA_BLOB(Op)                                                      \
  case BinaryOpId::Op:                                                         \
    return blobOf(makeOp<kernels::Op>(params));
#define MPC_BINARY_SIGNED(Op) MPC_CUDA_BLOB(Op)
#define MPC_BINARY_INTEGER(Op) MPC_CUDA_BLOB(Op)
#define MPC_BINARY_COMPARE(Op) MPC_CUDA_BLOB(Op)
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
#undef MPC_CUDA_BLOB
    default:
      break;
    }
    break;
  default:
    break;
  }
  return OpBlob();
}

llvm::Expected<OpBlob> cuda::makeOpBlob(const Node &n, const CudaKernel &row) {
  // The registry row's parser: what the executor gives the CPU kernel.
  const OpDef *def = findOp(n);
  if (!def || !def->parse)
    return opBlobOf(nullptr, row);
  ParsedParams parsed = def->parse(n);
  if (!parsed)
    return parsed.takeError();
  return opBlobOf(parsed->get(), row);
}

/// Calls read(t) with input `i` of `n` when its value is known before
/// anything runs: an in-memory initializer (a Tensor) or a Constant node's
/// value (a HostTensor), of an integer type when `intsOnly`.
template <typename Read>
static bool readConstantInput(const Node &n, unsigned i, bool intsOnly, Read &&read) {
  const Value *v = i < n.numInputs() ? n.input(i) : nullptr;
  if (!v)
    return false;
  auto typeOk = [&](DType t) { return !intsOnly || t == DType::I64 || t == DType::I32; };
  if (v->isConstant()) {
    const Tensor *t = v->initializer();
    if (!t || t->isExternal() || !typeOk(t->dtype))
      return false;
    read(*t);
    return true;
  }
  const Node *p = v->producer();
  if (!p || p->opType != "Constant" || !p->domain.empty())
    return false;
  llvm::Expected<HostTensor> c = shapes::constantValue(*p);
  if (!c) {
    llvm::consumeError(c.takeError());
    return false;
  }
  if (!typeOk(c->dtype))
    return false;
  read(*c);
  return true;
}

bool cuda::constantInputInts(const Node &n, unsigned i, std::vector<int64_t> &out) {
  out.clear();
  return readConstantInput(n, i, true, [&](const auto &t) {
    for (int64_t k = 0; k < t.numElements(); ++k)
      out.push_back(t.getAsInt64(k));
  });
}

// Image family: constant float operands (Resize's scales and roi).
bool cuda::constantInputDoubles(const Node &n, unsigned i, std::vector<double> &out) {
  out.clear();
  return readConstantInput(n, i, false, [&](const auto &t) {
    for (int64_t k = 0; k < t.numElements(); ++k)
      out.push_back(t.getAsDouble(k));
  });
}

/// Resize's roi (tf_crop_and_resize only), scales and sizes must be graph
/// constants: ImageOps.cpp plans the resize from their values.
static bool resizeRowTakes(const Node &n) {
  int roi, scales, sizes;
  shapes::resizing::operandIndices(n, roi, scales, sizes);
  std::vector<double> values;
  auto known = [&](int i) {
    return i < 0 || unsigned(i) >= n.numInputs() || !n.input(unsigned(i)) ||
           constantInputDoubles(n, unsigned(i), values);
  };
  bool crop = n.stringAttr("coordinate_transformation_mode", "") == "tf_crop_and_resize";
  return (!crop || known(roi)) && known(scales) && known(sizes);
}

bool cuda::knownInputInts(const Node &n, llvm::ArrayRef<TensorDesc> inputs, unsigned i,
                          std::vector<int64_t> &out) {
  if (i < inputs.size() && inputs[i].hasValues) {
    out.assign(inputs[i].values.begin(), inputs[i].values.end());
    return true;
  }
  return constantInputInts(n, i, out);
}

/// The dtype a row's mask is checked against: input 0, else output 0.
static DType keyDType(const Node &n, llvm::ArrayRef<DType> inputDTypes) {
  if (!inputDTypes.empty())
    return inputDTypes[0];
  if (n.numOutputs() && n.output(0))
    return n.output(0)->type.elem;
  return DType::Undefined;
}

/// What a data-movement row cannot take, known from the node alone (the
/// rest, such as bounds that are not initializers, is refused by
/// prepareDataOp, and the node then runs on the CPU): Dropout with a
/// training_mode input (opset 12 and later), Pad modes other than
/// constant, Where values of other sizes, Gather indices other than i32/i64.
/// (Sum and Mean take any number of operands.)
static bool dataRowTakes(const Node &n, llvm::ArrayRef<DType> dts) {
  auto given = [&](unsigned i) { return i < dts.size() && dts[i] != DType::Undefined; };
  if (n.opType == "Where")
    return !given(1) || (kCudaDataTypes & dtypeBit(dts[1])) != 0;
  if (n.opType == "Gather")
    return !given(1) || dts[1] == DType::I32 || dts[1] == DType::I64;
  if (n.opType == "Sum" || n.opType == "Mean")
    return n.numInputs() >= 1; // more than kMaxNaryInputs: runs (DataOps.cpp)
  if (n.opType == "GatherGrad")
    return !given(2) || dts[2] == DType::I32 || dts[2] == DType::I64;
  if (n.opType == "Dropout")
    return n.numInputs() < 3 || !n.input(2);
  if (n.opType == "Pad") { // edge, reflect, wrap: the image family's
    llvm::StringRef mode = n.stringAttr("mode", "constant");
    return mode == "constant" || mode == "edge" || mode == "reflect" || mode == "wrap";
  }
  return true;
}

/// What a loss row cannot take: labels other than i32/i64 (the labels'
/// port: 1 for the losses, 2 for SoftmaxCrossEntropyLossGrad), float
/// operands (weights, log_prob, pred, target) of another type than the key.
static bool lossRowTakes(const Node &n, DType key, llvm::ArrayRef<DType> dts) {
  llvm::StringRef op = n.opType;
  unsigned labels = op == "MSELossGrad" ? ~0u : op == "SoftmaxCrossEntropyLossGrad" ? 2 : 1;
  for (unsigned i = 0; i < dts.size(); ++i) {
    if (dts[i] == DType::Undefined)
      continue;
    bool ok = i == labels ? (dts[i] == DType::I32 || dts[i] == DType::I64) : dts[i] == key;
    if (!ok)
      return false;
  }
  return true;
}

/// An index operand the data-movement launchers take (absent: not yet known).
static bool isIndexType(DType t) {
  return t == DType::Undefined || t == DType::I32 || t == DType::I64;
}

/// ScatterElements/ScatterND: i32/i64 indices, updates of the data's type,
/// and a reduction only over the arithmetic launcher types.
static bool scatterRowTakes(const Node &n, DType key, llvm::ArrayRef<DType> dts) {
  if (dts.size() != 3 || !isIndexType(dts[1]) ||
      (dts[2] != DType::Undefined && dts[2] != key))
    return false;
  auto p = paramsOf<ScatterParams>(parseScatter(n));
  if (!p) {
    llvm::consumeError(p.takeError());
    return false;
  }
  return p->reduction == ScatterReduction::None || (kCudaBinaryTypes & dtypeBit(key)) != 0;
}
/// The operands a data-movement kernel takes as constants of the node:
/// Slice's bounds (1..4), SliceGrad's (2..5), constant Pad's pads and axes
/// (1 and 3, from opset 11). Each absent or known.
static bool dataValuesKnown(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  llvm::SmallVector<unsigned, 4> ports;
  if (n.opType == "Slice" && n.domain.empty())
    ports = {1, 2, 3, 4};
  else if (n.opType == "SliceGrad")
    ports = {2, 3, 4, 5};
  else if (n.opType == "Pad" && n.opsetVersion() >= 11)
    ports = {1, 3};
  std::vector<int64_t> ints;
  for (unsigned i : ports)
    if (i < n.numInputs() && n.input(i) && !knownInputInts(n, inputs, i, ints))
      return false;
  return true;
}

/// A fused optimizer step (per-parameter or multi-tensor): f32 operands,
/// the skip flag bool or f32, absent optional inputs allowed.
static bool optimizerStepRowTakes(const Node &n, llvm::ArrayRef<DType> dts) {
  const OptimizerStepLayout *multi = findMultiTensorStep(n.opType, n.domain);
  const OptimizerStepLayout *l = multi ? multi : findOptimizerStep(n.opType, n.domain);
  if (!l)
    return false;
  for (unsigned i = 0; i < dts.size(); ++i) {
    bool skip = i == (multi ? l->multiSkipInput() : l->skipInput());
    if (dts[i] != DType::Undefined && dts[i] != DType::F32 && !(skip && dts[i] == DType::Bool))
      return false;
  }
  return true;
}

bool cuda::cudaVariadicRow(const CudaKernel &row, size_t numInputs) {
  bool maxMin = row.kind == CudaKernelKind::Binary &&
                (BinaryOpId(row.op) == BinaryOpId::Max || BinaryOpId(row.op) == BinaryOpId::Min);
  return maxMin && numInputs >= 1 && numInputs <= size_t(kernels::kMaxNaryInputs);
}

/// Where rowTakes finds the operands a kernel takes as constants (a Slice's
/// bounds, a reduction's axes): in the node alone (constantInputInts: what
/// the painting asks), assumed known (what supportsOp answers before any
/// value is: prepare checks them), or in the signature (knownInputInts).
enum class ValuesFrom { Node, Assumed, Signature };

/// True when the row takes these dtypes: its mask lists the key dtype, and
/// what its launcher cannot take is absent, the operands it takes as
/// constants included (`from`; `shaped` is the signature).
static bool rowTakes(const Node &n, const CudaKernel &k, llvm::ArrayRef<DType> dts,
                     ValuesFrom from = ValuesFrom::Node,
                     llvm::ArrayRef<TensorDesc> shaped = {}) {
  auto constantInts = [&](unsigned i, std::vector<int64_t> &out) {
    if (from == ValuesFrom::Assumed)
      return true;
    return from == ValuesFrom::Signature ? knownInputInts(n, shaped, i, out)
                                         : constantInputInts(n, i, out);
  };
  DType key = keyDType(n, dts);
  // LSTMGrad and GRUGrad are keyed by X (dY may be absent): checked in their case.
  bool recurrentGrad = k.kind == CudaKernelKind::LstmGrad || k.kind == CudaKernelKind::GruGrad;
  if (!recurrentGrad && !(k.dtypes & dtypeBit(key)))
    return false;
  auto castable = [](DType t) { return (kCudaCastTypes & dtypeBit(t)) != 0; };
  switch (k.kind) {
  case CudaKernelKind::Cast:
    // The target type: Cast's attribute, CastLike's second input (unknown
    // until shapes are: checked again in prepare).
    if (n.opType == "Cast")
      return castable(DType(n.intAttr("to", 0)));
    return dts.size() < 2 || dts[1] == DType::Undefined || castable(dts[1]);
  case CudaKernelKind::Binary:
  case CudaKernelKind::Compare:
    // The launchers read every operand as the key type (Pow's exponent too).
    for (DType t : dts)
      if (t != DType::Undefined && t != key)
        return false;
    return n.numInputs() == 2 || cudaVariadicRow(k, n.numInputs());
  case CudaKernelKind::DataMove:
    return dataRowTakes(n, dts) &&
           (from != ValuesFrom::Signature || dataValuesKnown(n, shaped));
  case CudaKernelKind::Loss:
    return lossRowTakes(n, key, dts);
  case CudaKernelKind::StatNorm:
    // Scale and bias (instance/group) of X's type, or both f32 with 16-bit X.
    if (dts.size() >= 3)
      return dts[1] == dts[2] && (dts[1] == key || (dts[1] == DType::F32 && key != DType::F32));
    return llvm::StringRef(n.opType) == "LpNormalization";
  case CudaKernelKind::BatchNormGrad:
    // dY and X of one type, scale of theirs or f32 with 16-bit data.
    return dts.size() >= 3 && dts[1] == key &&
           (dts[2] == key || (dts[2] == DType::F32 && key != DType::F32));
  case CudaKernelKind::Clip:
    // The bounds (inputs 1 and 2) are of X's type, as the kernel reads them.
    for (size_t i = 1; i < dts.size(); ++i)
      if (dts[i] != DType::Undefined && dts[i] != key)
        return false;
    return true;
  // Index family: a k or axis input known before running; i32/i64 indices.
  case CudaKernelKind::Trilu: {
    std::vector<int64_t> ints;
    return n.numInputs() < 2 || !n.input(1) || constantInts(1, ints);
  }
  case CudaKernelKind::Scan: {
    std::vector<int64_t> ints;
    return constantInts(1, ints);
  }
  case CudaKernelKind::GatherElements:
    return dts.size() < 2 || dts[1] == DType::Undefined || dts[1] == DType::I32 ||
           dts[1] == DType::I64;
  case CudaKernelKind::OneHot: // values of a raw element size
    return dts.size() < 3 || dts[2] == DType::Undefined ||
           (kCudaDataTypes & dtypeBit(dts[2])) != 0;
  // Data-movement index ops: index/length operands of i32/i64, a condition
  // of bool, updates of the data's type; a scatter reduction on the
  // arithmetic types only; EyeLike's output type one the launchers move.
  case CudaKernelKind::GatherND:
  case CudaKernelKind::ReverseSequence:
    return dts.size() < 2 || isIndexType(dts[1]);
  case CudaKernelKind::Scatter:
    return scatterRowTakes(n, key, dts);
  case CudaKernelKind::Compress:
    return dts.size() < 2 || dts[1] == DType::Undefined || dts[1] == DType::Bool;
  case CudaKernelKind::EyeLike: {
    int64_t to = n.intAttr("dtype", int64_t(key));
    return isKnownDType(to) && (kCudaDataTypes & dtypeBit(DType(to))) != 0;
  }
  case CudaKernelKind::GemmBiasAct: {
    // The op's type rule (mixed bias and output types: GemmPlan.h; an
    // absent bias is Undefined, which the rule takes).
    GemmBiasActAttrs at = gemmBiasActAttrsOf(n);
    DType bias = dts.size() > 2 ? dts[2] : DType::Undefined;
    DType b = dts.size() > 1 ? dts[1] : DType::Undefined;
    return at.actKnown && (b == DType::Undefined ||
                           gemmBiasActTypeError(key, b, bias, at.outputType(key)).empty());
  }
  case CudaKernelKind::FusedMatMul: // transBatchA/B too (planFusedMatmul)
  case CudaKernelKind::MatMul:
  case CudaKernelKind::Gemm:
  case CudaKernelKind::Conv:
  case CudaKernelKind::ConvTranspose:
  case CudaKernelKind::ConvGrad:
  case CudaKernelKind::PoolGrad:
  case CudaKernelKind::GlobalPoolGrad:
    for (DType t : dts)
      if (t != DType::Undefined && t != key)
        return false;
    return true;
  case CudaKernelKind::BatchNorm: {
    // Either mode (training: BatchNormTrainOps.cpp); scale, bias, mean and
    // var of one type: X's, or f32 with 16-bit X.
    auto p = paramsOf<BatchNormParams>(parseBatchNorm(n));
    if (!p) {
      llvm::consumeError(p.takeError());
      return false;
    }
    if (dts.size() < 5)
      return false;
    DType pt = dts[1];
    if (pt != key && !(pt == DType::F32 && key != DType::F32))
      return false;
    for (size_t i = 2; i < 5; ++i)
      if (dts[i] != pt)
        return false;
    return true;
  }
  // Softmax and normalization: parameters of the data's type or f32
  // (RMSNormalization: the data's type only), f32 statistics into
  // LayerNormalizationGrad; shapes are checked in prepare.
  case CudaKernelKind::Norm:
  case CudaKernelKind::NormGrad: {
    bool grad = k.kind == CudaKernelKind::NormGrad;
    bool rms = llvm::StringRef(n.opType) == "RMSNormalization";
    for (size_t i = grad ? 2 : 1; i < dts.size(); ++i) {
      DType t = dts[i];
      bool stat = grad && i >= 3;
      if (t != DType::Undefined && t != (stat ? DType::F32 : key) &&
          (stat || rms || t != DType::F32))
        return false;
    }
    return true;
  }
  // Reductions: axes given as an input must be known before running.
  case CudaKernelKind::Reduce:
  case CudaKernelKind::BiasGrad: {
    std::vector<int64_t> ints;
    bool second = n.numInputs() > 1 && n.input(1);
    if (k.kind == CudaKernelKind::Reduce)
      return !second || constantInts(1, ints);
    return second;
  }
  // Transformer ops. RotaryEmbedding: caches of X's type, i32/i64
  // position ids.
  case CudaKernelKind::Rotary:
    for (size_t i = 1; i < dts.size() && i < 3; ++i)
      if (dts[i] != DType::Undefined && dts[i] != key)
        return false;
    return dts.size() < 4 || dts[3] == DType::Undefined || dts[3] == DType::I32 ||
           dts[3] == DType::I64;
  // Einsum: one or two operands of one type (the planner refuses the rest
  // in prepare: the node then runs on the CPU).
  case CudaKernelKind::Einsum:
    for (DType t : dts)
      if (t != key)
        return false;
    return n.numInputs() >= 1 && n.numInputs() <= 2;
  // Attention: K and V of Q's type, a bool mask or one of Q's type; no KV
  // cache (past_key, past_value, their present_* outputs), no
  // nonpad_kv_seqlen and no qk output: those run on the CPU.
  case CudaKernelKind::Attention: {
    auto given = [&](unsigned i) { return i < dts.size() && dts[i] != DType::Undefined; };
    if (!given(1) || !given(2) || dts[1] != key || dts[2] != key)
      return false;
    if (given(3) && dts[3] != key && dts[3] != DType::Bool)
      return false;
    for (unsigned i = 4; i < 7; ++i)
      if (given(i))
        return false;
    for (unsigned i = 1; i < n.numOutputs(); ++i)
      if (n.output(i))
        return false;
    return true;
  }
  // Recurrent ops: every float operand of X's type; sequence_lens (input 4)
  // a constant of the graph (its range is checked in prepare).
  // LSTMGrad likewise, keyed by X (input 3), sequence_lens its input 7;
  // GRUGrad keyed by X (input 2), sequence_lens its input 6.
  case CudaKernelKind::Recurrent:
  case CudaKernelKind::LstmGrad:
  case CudaKernelKind::GruGrad: {
    bool lstmGrad = k.kind == CudaKernelKind::LstmGrad, gruGrad = k.kind == CudaKernelKind::GruGrad;
    unsigned x = lstmGrad ? 3 : gruGrad ? 2 : 0, lensPort = lstmGrad ? 7 : gruGrad ? 6 : 4;
    if (dts.size() <= x || !(k.dtypes & dtypeBit(dts[x])))
      return false;
    for (size_t i = 0; i < dts.size(); ++i)
      if (i != lensPort && dts[i] != DType::Undefined && dts[i] != dts[x])
        return false;
    std::vector<int64_t> lens;
    return n.numInputs() <= lensPort || !n.input(lensPort) ||
           constantInts(lensPort, lens);
  }
  // Image ops: Resize's operands known before running.
  case CudaKernelKind::Image:
    return n.opType != "Resize" || resizeRowTakes(n);
  // Fused optimizer steps: every operand f32 but the skip flag (bool or f32).
  case CudaKernelKind::OptimizerStep:
    return optimizerStepRowTakes(n, dts);
  // MultiTensorUnscale: gradients of the float launcher types.
  case CudaKernelKind::MultiTensorUnscale:
    for (size_t i = 1; i < dts.size(); ++i)
      if (dts[i] != DType::Undefined && !(kCudaFloatTypes & dtypeBit(dts[i])))
        return false;
    return dts.size() >= 2;
  default:
    return true;
  }
}

bool cuda::cudaRuns(const Node &n, llvm::ArrayRef<DType> inputDTypes) {
  const CudaKernel *k = findCudaKernel(n);
  return k && rowTakes(n, *k, inputDTypes);
}

bool cuda::cudaRunsShaped(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  const CudaKernel *k = findCudaKernel(n);
  if (!k)
    return false;
  llvm::SmallVector<DType, 4> dts;
  for (const TensorDesc &d : inputs)
    dts.push_back(d.dtype);
  return rowTakes(n, *k, dts, ValuesFrom::Signature, inputs);
}

bool cuda::cudaRunsIfKnown(const Node &n, llvm::ArrayRef<DType> inputDTypes) {
  const CudaKernel *k = findCudaKernel(n);
  return k && rowTakes(n, *k, inputDTypes, ValuesFrom::Assumed);
}

bool CudaCaps::supportsLowPrecision(const Node &n, DType t) const {
  return supportsPainted(n, t, cudaRuns);
}

std::string cuda::shapeSignature(llvm::ArrayRef<TensorDesc> inputs) {
  std::string s;
  for (const TensorDesc &d : inputs) {
    if (!s.empty())
      s += ' ';
    if (d.dtype == DType::Undefined) {
      s += '-';
      continue;
    }
    s += dtypeName(d.dtype).str();
    s += formatShape(d.shape);
    if (d.hasValues)
      s += "=" + formatShape(d.values);
  }
  return s;
}
