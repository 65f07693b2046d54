//===- CudaOp.h - A node prepared for the CUDA backend ----------*- C++ -*-===//
//
// The CUDA backend's extension point. Each launcher family (element-wise,
// GEMM, ...) has a prepare function, in its own file, that turns a node, its
// kernel-table row and its input shapes into a CudaOp: the descriptors,
// plans and algorithm choices of that shape signature, made once. launch()
// then only queues work on a stream. CudaBackend.cpp owns the device, the
// handles and the prepare cache, and dispatches on the row's kind in one
// place (prepareCudaOp, CudaOps.cpp). Host code, compiled by the C++
// compiler; the kernels themselves are behind CudaLaunch.h.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CUDAOP_H
#define MPC_RUNTIME_CUDA_CUDAOP_H

#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "llvm/Support/Error.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

namespace mpc {
namespace cuda {

/// What the backend knows about its device and the library handles it
/// owns; a prepared op may read them at prepare and at launch.
struct CudaContext {
  unsigned smCount = 1;
  int computeMajor = 0;
  /// `mpc run --tf32`: fp32 matrix products and convolutions in TF32.
  bool tf32 = false;
  /// The most workspace a cuBLASLt algorithm may ask for.
  size_t gemmWorkspaceCap = size_t(4) << 20;
  cublasLtHandle_t lt = nullptr;
  /// The convolution family's cudnnHandle_t, made by the first node it
  /// prepares (ConvOps.cpp) and destroyed with the backend (releaseDnn);
  /// null until then and in a build without cuDNN.
  mutable void *dnn = nullptr;

  LaunchGeometry geometry(int64_t n) const { return elementwiseGeometry(n, smCount); }
};

/// A node prepared for one shape signature.
class CudaOp {
public:
  virtual ~CudaOp();
  /// Scratch the executor provides at launch (KernelCall::workspace).
  virtual size_t workspaceBytes() const { return 0; }
  /// Queues the node's work on `s`: no allocation, no synchronization, no
  /// device read on the host. Returns what failed, or "" when all of it was
  /// queued (the backend records a failure against the node).
  virtual std::string launch(const KernelCall &call, cudaStream_t s,
                             const CudaContext &ctx) const = 0;
};

using CudaOpOrError = llvm::Expected<std::unique_ptr<CudaOp>>;

/// Prepares `n` (whose row is `row`) for these inputs, by the row's kind.
/// A null op with no error: the row cannot take these inputs, and the node
/// is reported unsupported; an error says what a library refused.
CudaOpOrError prepareCudaOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

/// The families' prepare functions (ElementwiseOps.cpp, GemmOps.cpp).
CudaOpOrError prepareElementwiseOp(const Node &n, const CudaKernel &row,
                                   llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
CudaOpOrError prepareGemmOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
/// Softmax and normalization (NormOps.cpp).
CudaOpOrError prepareNormOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
/// Reductions and BiasGrad (ReduceOps.cpp).
CudaOpOrError prepareReduceOp(const Node &n, const CudaKernel &row,
                              llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
/// The sum over axis 0 of a [K, L] tensor into L elements (of its type, or
/// float32 with `toF32` over a 16-bit x): launched with the tensor as input 0
/// and the vector as output 0. GemmBiasAct's bias_grad where cuBLASLt's
/// BGRAD epilogue is not available (ReduceOps.cpp).
CudaOpOrError prepareColumnSum(const TensorDesc &x, bool toF32, const CudaContext &ctx);
/// Activation gradients (GradOps.cpp).
CudaOpOrError prepareGradOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

// Convolutions through cuDNN (ConvOps.cpp): Conv, ConvTranspose, ConvGrad.
CudaOpOrError prepareConvOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
/// Destroys the context's cuDNN handle, if one was made.
void releaseDnn(CudaContext &ctx);
// Pooling and its gradients (PoolOps.cpp).
CudaOpOrError preparePoolOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
// Inference BatchNormalization (BatchNormOps.cpp).
CudaOpOrError prepareBatchNormOp(const Node &n, const CudaKernel &row,
                                 llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

/// Data movement (DataOps.cpp): a null op where the node's bounds are not
/// initializers or its plan has too many dimensions (it then runs on the CPU).
CudaOpOrError prepareDataOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

// Losses and their gradients (LossOps.cpp): SoftmaxCrossEntropyLoss,
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLossGrad, MSELossGrad.
CudaOpOrError prepareLossOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

// Fused optimizer steps, skip flag read on the device (OptimizerOps.cpp).
CudaOpOrError prepareOptimizerStepOp(const Node &n, const CudaKernel &row,
                                     llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
// ai.mpc.training MultiTensorUnscale, one launch over every gradient (UnscaleOps.cpp).
CudaOpOrError prepareUnscaleOp(const Node &n, const CudaKernel &row,
                               llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

// Clip with its bounds read on the device (ClipOps.cpp).
CudaOpOrError prepareClipOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

// Training batch normalization (BatchNormTrainOps.cpp): BatchNormalization
// with training_mode = 1 (the BatchNorm row's node when isTrainingBatchNorm)
// and BatchNormalizationGrad.
bool isTrainingBatchNorm(const Node &n);
CudaOpOrError prepareBatchNormTrainOp(const Node &n, const CudaKernel &row,
                                      llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

// Instance, group and Lp normalization (StatNormOps.cpp).
CudaOpOrError prepareStatNormOp(const Node &n, const CudaKernel &row,
                                llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

// TopK (TopKOps.cpp).
CudaOpOrError prepareTopKOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

// LSTM, GRU and RNN (RnnOps.cpp): a prepare error where sequence_lens is
// not a graph constant or cuBLASLt refuses a product (the node then runs on
// the CPU).
CudaOpOrError prepareRecurrentOp(const Node &n, const CudaKernel &row,
                                 llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
// ai.mpc.training LSTMGrad (RnnOps.cpp), refused likewise.
CudaOpOrError prepareLstmGradOp(const Node &n, const CudaKernel &row,
                                llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
// ai.mpc.training GRUGrad (RnnOps.cpp), refused likewise.
CudaOpOrError prepareGruGradOp(const Node &n, const CudaKernel &row,
                               llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
/// Index, logic and shape ops (IndexOps.cpp): And/Or/Xor/Not, ArgMax/ArgMin,
/// Shape, Size, Range, ConstantOfShape, Trilu, CumSum/CumProd, GatherElements,
/// OneHot.
CudaOpOrError prepareIndexOp(const Node &n, const CudaKernel &row,
                             llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

/// Data-movement index ops (MoveOps.cpp): DepthToSpace, SpaceToDepth,
/// GatherND, ScatterND, ScatterElements, ReverseSequence, EyeLike, Compress,
/// NonZero.
CudaOpOrError prepareMoveOp(const Node &n, const CudaKernel &row,
                            llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
// Transformer ops: RotaryEmbedding (RotaryOps.cpp); Einsum (EinsumOps.cpp),
// a null op for an equation EinsumPlan.h does not lower.
CudaOpOrError prepareRotaryOp(const Node &n, const CudaKernel &row,
                              llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
CudaOpOrError prepareEinsumOp(const Node &n, const CudaKernel &row,
                              llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
// Attention (AttentionOps.cpp): a null op for what the launcher does not take.
CudaOpOrError prepareAttentionOp(const Node &n, const CudaKernel &row,
                                 llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);
// Image ops (ImageOps.cpp): Resize, LRN, and Pad with mode edge, reflect
// or wrap (a DataMove row's node for which isPadMapNode holds).
bool isPadMapNode(const Node &n);
CudaOpOrError prepareImageOp(const Node &n, const CudaKernel &row,
                             llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx);

/// "an illegal memory access was encountered (cudaErrorIllegalAddress)".
std::string cudaText(cudaError_t e);
/// "" for cudaSuccess, else "kernel launch failed: <cudaText>".
std::string launchText(cudaError_t e);
/// The bits of the value 1 in `t`, in the low bytes (EyeLike's diagonal,
/// Dropout's mask); false for a type the data launchers do not move.
bool oneBits(DType t, uint64_t &bits);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_CUDAOP_H
