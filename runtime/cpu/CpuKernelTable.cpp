//===- CpuKernelTable.cpp - The CPU backend's kernel table ------------------===//
//
// One row per kernel: op type, domain, opset range, supported dtypes of
// input 0, run function (the op's other facts are its registry row's,
// runtime/ops). Element-wise rows come from ElementwiseOps.def
// (ElementwiseKernels.cpp). Also CpuBackend and CpuCaps, which are thin
// layers over the table.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include <cstdlib>
#include <cstring>

using namespace mpc;
using namespace mpc::cpuk;

namespace mpc {
namespace cpuk {
std::vector<CpuKernel> elementwiseRows();
std::vector<CpuKernel> trainingRows();
std::vector<CpuKernel> contribRows();
} // namespace cpuk
} // namespace mpc

static constexpr DTypeSet kReduceTypes =
    kFloatTypes | dtypeBit(DType::I32) | dtypeBit(DType::I64);

static const CpuKernel kRows[] = {
    MPC_CPU_KERNEL("ArgMax", "", 1, kFloatTypes | kIntTypes, runArgReduce),
    MPC_CPU_KERNEL("ArgMin", "", 1, kFloatTypes | kIntTypes, runArgReduce),
    MPC_CPU_KERNEL("Attention", "", 23, kFloatTypes, runAttention),
    MPC_CPU_KERNEL("AveragePool", "", 7, kFloatTypes, runAveragePool),
    MPC_CPU_KERNEL("BatchNormalization", "", 9, kFloatTypes, runBatchNorm),
    MPC_CPU_KERNEL("Compress", "", 9, kAllTypes, runCompress),
    MPC_CPU_KERNEL("Concat", "", 4, kAllTypes, runConcat),
    MPC_CPU_KERNEL("Constant", "", 9, kAllTypes, runConstant),
    MPC_CPU_KERNEL("ConstantOfShape", "", 9, kIntTypes, runConstantOfShape),
    MPC_CPU_KERNEL("Conv", "", 1, kFloatTypes, runConv),
    MPC_CPU_KERNEL("ConvTranspose", "", 1, kFloatTypes, runConvTranspose),
    MPC_CPU_KERNEL("CumProd", "", 26, kFloatTypes | kIntTypes | kUnsignedTypes, runCumProd),
    MPC_CPU_KERNEL("CumSum", "", 11, kFloatTypes | kIntTypes, runCumSum),
    MPC_CPU_KERNEL("DepthToSpace", "", 1, kAllTypes, runDepthToSpace),
    MPC_CPU_KERNEL("Dropout", "", 1, kFloatTypes, runDropout),
    MPC_CPU_KERNEL("Einsum", "", 12, kFloatTypes | kIntTypes, runEinsum),
    MPC_CPU_KERNEL("Expand", "", 8, kAllTypes, runExpand),
    MPC_CPU_KERNEL("EyeLike", "", 9, kAllTypes, runEyeLike),
    MPC_CPU_KERNEL("Flatten", "", 1, kAllTypes, runCopy),
    MPC_CPU_KERNEL("Gather", "", 1, kAllTypes, runGather),
    MPC_CPU_KERNEL("GatherElements", "", 11, kAllTypes, runGatherElements),
    MPC_CPU_KERNEL("GatherND", "", 11, kAllTypes, runGatherND),
    MPC_CPU_KERNEL("Gemm", "", 7, kFloatTypes, runGemm),
    MPC_CPU_KERNEL("GlobalAveragePool", "", 1, kFloatTypes, runGlobalAveragePool),
    MPC_CPU_KERNEL("GlobalMaxPool", "", 1, kFloatTypes, runGlobalMaxPool),
    MPC_CPU_KERNEL("GlobalLpPool", "", 1, kFloatTypes, runGlobalLpPool),
    MPC_CPU_KERNEL("GroupNormalization", "", 18, kFloatTypes, runGroupNorm),
    MPC_CPU_KERNEL("GRU", "", 7, kFloatTypes, runGRU),
    MPC_CPU_KERNEL("Hardmax", "", 1, kFloatTypes, runHardmax),
    MPC_CPU_KERNEL("Identity", "", 1, kAllTypes, runCopy),
    MPC_CPU_KERNEL("InstanceNormalization", "", 6, kFloatTypes, runInstanceNorm),
    MPC_CPU_KERNEL("LayerNormalization", "", 17, kFloatTypes, runLayerNorm),
    MPC_CPU_KERNEL("LogSoftmax", "", 1, kFloatTypes, runLogSoftmax),
    MPC_CPU_KERNEL("LpNormalization", "", 1, kFloatTypes, runLpNorm),
    MPC_CPU_KERNEL("LpPool", "", 1, kFloatTypes, runLpPool),
    MPC_CPU_KERNEL("LRN", "", 1, kFloatTypes, runLRN),
    MPC_CPU_KERNEL("LSTM", "", 7, kFloatTypes, runLSTM),
    MPC_CPU_KERNEL("MatMul", "", 1, kFloatTypes, runMatMul),
    MPC_CPU_KERNEL("MaxPool", "", 8, kFloatTypes, runMaxPool),
    MPC_CPU_KERNEL("Mean", "", 8, kFloatTypes, runMean),
    MPC_CPU_KERNEL("NonMaxSuppression", "", 10, dtypeBit(DType::F32), runNonMaxSuppression),
    MPC_CPU_KERNEL("NonZero", "", 9, kNumericTypes | dtypeBit(DType::Bool), runNonZero),
    MPC_CPU_KERNEL("OneHot", "", 9, kFloatTypes | kIntTypes, runOneHot),
    MPC_CPU_KERNEL("Pad", "", 2, kAllTypes, runPad),
    MPC_CPU_KERNEL("RMSNormalization", "", 23, kFloatTypes, runRMSNorm),
    MPC_CPU_KERNEL("Range", "", 11, kFloatTypes | kIntTypes, runRangeOp),
    MPC_CPU_KERNEL("ReduceL1", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceL2", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceLogSum", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceLogSumExp", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceMax", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceMean", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceMin", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceProd", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceSum", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("ReduceSumSquare", "", 1, kReduceTypes, runReduce),
    MPC_CPU_KERNEL("Reshape", "", 5, kAllTypes, runCopy),
    MPC_CPU_KERNEL("Resize", "", 10, kFloatTypes, runResize),
    MPC_CPU_KERNEL("QuantizeLinear", "", 10,
                   dtypeBit(DType::F32) | dtypeBit(DType::F16) | dtypeBit(DType::BF16),
                   runQuantizeLinear),
    MPC_CPU_KERNEL("DequantizeLinear", "", 10,
                   dtypeBit(DType::U8) | dtypeBit(DType::I8) | dtypeBit(DType::U16) |
                       dtypeBit(DType::I16) | dtypeBit(DType::I32),
                   runDequantizeLinear),
    MPC_CPU_KERNEL("RoiAlign", "", 10, kFloatTypes, runRoiAlign),
    MPC_CPU_KERNEL("Upsample", "", 7, kFloatTypes, runResize),
    MPC_CPU_KERNEL("ReverseSequence", "", 10, kAllTypes, runReverseSequence),
    MPC_CPU_KERNEL("RNN", "", 7, kFloatTypes, runRNN),
    MPC_CPU_KERNEL("RotaryEmbedding", "", 23, kFloatTypes, runRotaryEmbedding),
    MPC_CPU_KERNEL("ScatterElements", "", 11, kAllTypes, runScatterElements),
    MPC_CPU_KERNEL("Scatter", "", 9, kAllTypes, runScatterElements),
    MPC_CPU_KERNEL("ScatterND", "", 11, kAllTypes, runScatterND),
    MPC_CPU_KERNEL("Shape", "", 1, kAllTypes, runShape),
    MPC_CPU_KERNEL("Size", "", 1, kAllTypes, runSize),
    MPC_CPU_KERNEL("Slice", "", 10, kAllTypes, runSlice),
    MPC_CPU_KERNEL("Softmax", "", 1, kFloatTypes, runSoftmax),
    MPC_CPU_KERNEL("SpaceToDepth", "", 1, kAllTypes, runSpaceToDepth),
    MPC_CPU_KERNEL("Split", "", 2, kAllTypes, runSplit),
    MPC_CPU_KERNEL("Squeeze", "", 1, kAllTypes, runCopy),
    MPC_CPU_KERNEL("Sum", "", 8, kFloatTypes, runSum),
    MPC_CPU_KERNEL("Tile", "", 6, kAllTypes, runTile),
    MPC_CPU_KERNEL("TopK", "", 1, kFloatTypes | kIntTypes, runTopK),
    MPC_CPU_KERNEL("Transpose", "", 1, kAllTypes, runTranspose),
    MPC_CPU_KERNEL("Trilu", "", 14, kAllTypes, runTrilu),
    MPC_CPU_KERNEL("Unsqueeze", "", 1, kAllTypes, runCopy),
};

llvm::ArrayRef<CpuKernel> mpc::cpuKernelTable() {
  // Built on first use (not by a global constructor): the fixed rows above
  // followed by the element-wise rows, the training rows (domain
  // ai.mpc.training, TrainingKernels.cpp) and the onnxruntime contrib rows
  // (domain com.microsoft, ContribKernels.cpp).
  static const std::vector<CpuKernel> table = [] {
    std::vector<CpuKernel> t(std::begin(kRows), std::end(kRows));
    std::vector<CpuKernel> ew = elementwiseRows();
    t.insert(t.end(), ew.begin(), ew.end());
    std::vector<CpuKernel> tr = trainingRows();
    t.insert(t.end(), tr.begin(), tr.end());
    std::vector<CpuKernel> co = contribRows();
    t.insert(t.end(), co.begin(), co.end());
    return t;
  }();
  return table;
}

const CpuKernel *mpc::findCpuKernel(llvm::StringRef opType, llvm::StringRef domain,
                                    int64_t opset) {
  // Indexed by op type once (a hash instead of a scan of every row's name).
  static const OpRowIndex<CpuKernel> index(cpuKernelTable());
  return index.find(opType, domain, opset);
}

const CpuKernel *mpc::findCpuKernel(const Node &n) {
  return findCpuKernel(n.opType, n.domain, n.opsetVersion());
}

HostKernelFn mpc::cpuHostKernel(const Node &n) {
  const CpuKernel *k = findCpuKernel(n);
  return k ? k->run : nullptr;
}

/// The dtype the row's mask is checked against: input 0, else output 0.
static DType keyDType(const Node &n, llvm::ArrayRef<DType> inputDTypes) {
  if (!inputDTypes.empty())
    return inputDTypes[0];
  if (n.numOutputs() && n.output(0))
    return n.output(0)->type.elem;
  return DType::Undefined;
}


CpuBackend::CpuBackend(int numThreads) {
  if (numThreads > 0)
    cpu::setGemmThreads(numThreads);
}

CpuBackend::~CpuBackend() = default;

llvm::Expected<DeviceBuffer> CpuBackend::allocate(size_t bytes, BufferKind kind) {
  size_t size = allocationSize(bytes);
  if (llvm::Error e = checkBudget(bytes))
    return std::move(e);
  // Without --max-memory, the memory the machine has: past it the kernel
  // kills the process when the pages are touched (a 2^31-element Range and
  // the window built from it: SIGKILL, no message).
  uint64_t avail = availableHostBytes();
  if (!memoryBudget() && (size > avail || currentBytes > avail - size))
    return inputError("host memory: {0} more bytes on top of the {1} this run holds exceed "
                      "the {2} bytes available on this machine (--max-memory sets another "
                      "limit)",
                      size, currentBytes, avail);
  void *p = std::aligned_alloc(256, size);
  if (!p)
    return inputError("cannot allocate {0} bytes of host memory", size);
  currentBytes += size;
  peakBytes = std::max(peakBytes, currentBytes);
  return DeviceBuffer{p, size, kind};
}

void CpuBackend::release(DeviceBuffer b) {
  if (!b.data)
    return;
  currentBytes -= b.size;
  std::free(b.data);
}

void CpuBackend::copyToDevice(void *dst, const void *src, size_t bytes, Stream) {
  if (bytes)
    std::memcpy(dst, src, bytes);
}

void CpuBackend::copyToHost(void *dst, const void *src, size_t bytes, Stream) {
  if (bytes)
    std::memcpy(dst, src, bytes);
}

/// True when the CPU runs `n` with these input dtypes: its row lists the
/// type-determining operand's dtype, and a cast's target type is storable.
static bool cpuRuns(const Node &n, llvm::ArrayRef<DType> inputDTypes) {
  const CpuKernel *k = findCpuKernel(n);
  if (!k)
    return false;
  DType key = keyDType(n, inputDTypes);
  if (!(k->dtypes & dtypeBit(key)))
    return false;
  // Cast, CastLike: the target type must be storable too (CastLike's is
  // input 1's, checked again by its shape function where not yet known).
  if (n.opType == "Cast")
    return runtimeElementSize(DType(n.intAttr("to", 0))) != 0;
  if (n.opType == "CastLike")
    return inputDTypes.size() < 2 || inputDTypes[1] == DType::Undefined ||
           runtimeElementSize(inputDTypes[1]) != 0;
  return true;
}

bool mpc::supportsPainted(const Node &n, DType t,
                          llvm::function_ref<bool(const Node &, llvm::ArrayRef<DType>)> runs) {
  // The executor runs control flow and sequence ops on values of any type.
  const OpDef *op = findOp(n);
  if (op && op->runByExecutor())
    return true;
  // The node as painted: its fp32 operands in `t`; the row's mask is checked
  // against the type-determining operand (Where's condition stays bool,
  // ConstantOfShape's shape int64), an unknown one taken as `t`.
  llvm::SmallVector<DType, 4> dts;
  for (const Value *v : n.inputs()) {
    DType d = v ? v->type.elem : DType::Undefined;
    dts.push_back(d == DType::F32 || (d == DType::Undefined && dts.empty()) ? t : d);
  }
  if (dts.empty() && (!n.numOutputs() || !n.output(0) || n.output(0)->type.elem == DType::F32))
    dts.push_back(t);
  return runs(n, dts);
}

bool CpuCaps::supportsLowPrecision(const Node &n, DType t) const {
  return supportsPainted(n, t, cpuRuns);
}

bool CpuBackend::supportsOp(const Node &n, llvm::ArrayRef<DType> inputDTypes) const {
  return cpuRuns(n, inputDTypes);
}

PreparedKernel CpuBackend::prepare(const Node &n, llvm::ArrayRef<TensorDesc>) {
  // The row serves every shape; the CPU kernels need no workspace.
  return PreparedKernel{findCpuKernel(n), 0};
}

void CpuBackend::launch(const KernelCall &call, Stream) {
  // The executor prepares every node: its row comes with the call.
  const CpuKernel *k = static_cast<const CpuKernel *>(call.kernel);
  if (!k)
    k = findCpuKernel(*call.node);
  assert(k && "launch of a node without a kernel (checked at plan time)");
  llvm::Error e = k->run(call);
  if (!e)
    return;
  if (!call.errors || call.errors->code != 0) {
    llvm::consumeError(std::move(e)); // an earlier error wins
    return;
  }
  recordKernelError(call, KernelErrorCode::Message);
  messages.put(call.errors, std::move(e), /*replace=*/true);
}

void CpuBackend::runPlan(const LaunchPlan &plan, Stream stream) {
  for (const KernelCall &call : plan.calls) {
    launch(call, stream);
    if (plan.errors && plan.errors->code != 0)
      return;
  }
}

llvm::Error CpuBackend::takeMessageError(const KernelErrorRecord *record) {
  return messages.take(record);
}
