//===- CpuKernels.h - Internal helpers of the CPU kernel glue --*- C++ -*-===//
//
// Attribute access and the run functions the table in CpuKernelTable.cpp
// lists; the type dispatch is the runtime's (mpc/Runtime/DTypeDispatch.h).
// Private to runtime/cpu.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_LIB_CPUKERNELS_H
#define MPC_RUNTIME_LIB_CPUKERNELS_H

#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Conv.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/DTypeDispatch.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Runtime/Float16.h"
#include "../ops/ShapeFunctions.h"
#include "../ops/ShapeHelpers.h"
#include "../ops/NodeGeometry.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mpc {
namespace cpuk {

// The shape functions and their helpers (nodeError, knownInts, sliceParams,
// convGeometry, ...).
using namespace shapes;

/// The unsigned integer types, and with them every integer or non-bool type.
constexpr DTypeSet kUnsignedTypes = dtypeBit(DType::U8) | dtypeBit(DType::U16) |
                                    dtypeBit(DType::U32) | dtypeBit(DType::U64);
constexpr DTypeSet kIntegerTypes = kIntTypes | kUnsignedTypes;
constexpr DTypeSet kArithmeticTypes = kNumericTypes | kUnsignedTypes;

/// A kernel table row: `Run` (last: it may hold commas) with its name and
/// the row's source location.
#define MPC_CPU_KERNEL(Op, Domain, Since, Types, ...)                          \
  ::mpc::CpuKernel {                                                           \
    Op, Domain, Since, ::mpc::kMaxOpsetVersion, Types, __VA_ARGS__, #__VA_ARGS__, \
        MPC_SOURCE_LOCATION                                                    \
  }

/// Integer values of an input at run time.
std::vector<int64_t> readInts(const TensorRef &t);
/// Maps indices in [-dim, dim) to [0, dim) (Gather's rule). False after
/// recording an IndexOutOfRange error (recordKernelError) naming the first
/// one out of range and the shape of `operand` (KernelErrorRecord::operand);
/// the kernel then returns without writing its outputs.
bool normalizeIndices(const KernelCall &c, std::vector<int64_t> &idx, int64_t dim,
                      int32_t operand);


// Run functions.
llvm::Error runCast(const KernelCall &);
llvm::Error runWhere(const KernelCall &);
llvm::Error runNot(const KernelCall &);
llvm::Error runLogical(const KernelCall &);
llvm::Error runGemm(const KernelCall &);
llvm::Error runMatMul(const KernelCall &);
llvm::Error runGemmBiasAct(const KernelCall &);
llvm::Error runConv(const KernelCall &);
llvm::Error runMaxPool(const KernelCall &);
llvm::Error runAveragePool(const KernelCall &);
llvm::Error runGlobalAveragePool(const KernelCall &);
llvm::Error runGlobalMaxPool(const KernelCall &);
llvm::Error runLpPool(const KernelCall &);
llvm::Error runGlobalLpPool(const KernelCall &);
llvm::Error runBatchNorm(const KernelCall &);
llvm::Error runLayerNorm(const KernelCall &);
llvm::Error runSoftmax(const KernelCall &);
llvm::Error runLogSoftmax(const KernelCall &);
llvm::Error runHardmax(const KernelCall &);
llvm::Error runReduce(const KernelCall &);
llvm::Error runLSTM(const KernelCall &);
llvm::Error runCopy(const KernelCall &);
llvm::Error runTranspose(const KernelCall &);
llvm::Error runShape(const KernelCall &);
llvm::Error runSize(const KernelCall &);
llvm::Error runGather(const KernelCall &);
llvm::Error runConcat(const KernelCall &);
llvm::Error runConstant(const KernelCall &);
llvm::Error runSlice(const KernelCall &);
llvm::Error runExpand(const KernelCall &);
llvm::Error runNonMaxSuppression(const KernelCall &);
llvm::Error runRoiAlign(const KernelCall &);
llvm::Error runQuantizeLinear(const KernelCall &);
llvm::Error runDequantizeLinear(const KernelCall &);
llvm::Error runNonZero(const KernelCall &);

// TensorKernels.cpp: fill, N-ary and layout ops.
llvm::Error runConstantOfShape(const KernelCall &);
llvm::Error runDropout(const KernelCall &);
llvm::Error runSum(const KernelCall &);
llvm::Error runMean(const KernelCall &);
llvm::Error runLRN(const KernelCall &);
llvm::Error runPad(const KernelCall &);
llvm::Error runSplit(const KernelCall &);
llvm::Error runTile(const KernelCall &);
llvm::Error runDepthToSpace(const KernelCall &);
llvm::Error runSpaceToDepth(const KernelCall &);
llvm::Error runTrilu(const KernelCall &);
llvm::Error runRangeOp(const KernelCall &);

// IndexKernels.cpp: indexing and selection ops.
llvm::Error runArgReduce(const KernelCall &);
llvm::Error runTopK(const KernelCall &);
llvm::Error runCumSum(const KernelCall &);
llvm::Error runCumProd(const KernelCall &);
llvm::Error runGatherElements(const KernelCall &);
llvm::Error runScatterElements(const KernelCall &);
llvm::Error runGatherND(const KernelCall &);
llvm::Error runScatterND(const KernelCall &);
llvm::Error runOneHot(const KernelCall &);

// NormKernels.cpp: instance, group and Lp normalization.
llvm::Error runInstanceNorm(const KernelCall &);
llvm::Error runGroupNorm(const KernelCall &);
llvm::Error runLpNorm(const KernelCall &);
llvm::Error runRMSNorm(const KernelCall &);
// AttentionKernel.cpp.
llvm::Error runAttention(const KernelCall &);
// RotaryEmbeddingKernel.cpp.
llvm::Error runRotaryEmbedding(const KernelCall &);

// MiscKernels.cpp: Einsum, Compress, ReverseSequence.
llvm::Error runEinsum(const KernelCall &);
llvm::Error runCompress(const KernelCall &);
llvm::Error runReverseSequence(const KernelCall &);
llvm::Error runEyeLike(const KernelCall &);

// ConvTransposeKernels.cpp.
llvm::Error runConvTranspose(const KernelCall &);

// RnnKernels.cpp: GRU and RNN.
llvm::Error runGRU(const KernelCall &);
llvm::Error runRNN(const KernelCall &);

// ResizeKernel.cpp.
llvm::Error runResize(const KernelCall &);

/// BatchNormalization in training mode (TrainingKernels.cpp), dispatched to
/// from the BatchNormalization row.
llvm::Error runBatchNormTraining(const KernelCall &c);

// The rows of the ai.mpc.training domain (TrainingKernels.cpp).
std::vector<CpuKernel> trainingRows();
/// ConvGrad of ai.mpc.training, also the com.microsoft row (TrainingKernels.cpp).
llvm::Error runConvGrad(const KernelCall &);

/// Recurrent kernels (LSTM, GRU, RNN) compute in fp32: a widened copy of
/// input `i` (empty when absent), and `v` rounded into `out` (skipped when
/// the output is absent) (LstmKernel.cpp).
template <typename A> std::vector<A> widenInput(const KernelCall &c, unsigned i);
template <typename A> void narrowFrom(const TensorRef &out, const std::vector<A> &v);

// The rows of the com.microsoft domain (ContribKernels.cpp).
std::vector<CpuKernel> contribRows();

} // namespace cpuk
} // namespace mpc

#endif // MPC_RUNTIME_LIB_CPUKERNELS_H
