//===- CpuKernelTable.cpp - The CPU backend's kernel table ------------------===//
//
// One row per op: op type, domain, opset range, supported dtypes of input 0,
// shape function, run function. Element-wise rows come from
// ElementwiseOps.def (ElementwiseKernels.cpp). Also CpuBackend and CpuCaps,
// which are thin layers over the table.
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

static constexpr int64_t kMax = 1000;
static constexpr DTypeSet kReduceTypes =
    kFloatTypes | dtypeBit(DType::I32) | dtypeBit(DType::I64);

static const CpuKernel kRows[] = {
    {"ArgMax", "", 1, kMax, kFloatTypes | kIntTypes, shapeArgReduce, runArgReduce},
    {"ArgMin", "", 1, kMax, kFloatTypes | kIntTypes, shapeArgReduce, runArgReduce},
    {"Attention", "", 23, kMax, kFloatTypes, shapeAttention, runAttention},
    {"AveragePool", "", 7, kMax, kFloatTypes, shapePool, runAveragePool},
    {"BatchNormalization", "", 9, kMax, kFloatTypes, shapeBatchNorm, runBatchNorm},
    {"Compress", "", 9, kMax, kAllTypes, shapeCompress, runCompress, /*dynamicShape=*/true},
    {"Concat", "", 4, kMax, kAllTypes, shapeConcat, runConcat},
    {"Constant", "", 9, kMax, kAllTypes, shapeConstant, runConstant},
    {"ConstantOfShape", "", 9, kMax, kIntTypes, shapeConstantOfShape, runConstantOfShape},
    {"Conv", "", 1, kMax, kFloatTypes, shapeConv, runConv},
    {"ConvTranspose", "", 1, kMax, kFloatTypes, shapeConvTranspose, runConvTranspose},
    {"CumProd", "", 26, kMax, kFloatTypes | kIntTypes | kUnsignedTypes, shapeSameAsInput0,
     runCumProd},
    {"CumSum", "", 11, kMax, kFloatTypes | kIntTypes, shapeSameAsInput0, runCumSum},
    {"DepthToSpace", "", 1, kMax, kAllTypes, shapeDepthToSpace, runDepthToSpace},
    {"Dropout", "", 1, kMax, kFloatTypes, shapeDropout, runDropout},
    {"Einsum", "", 12, kMax, kFloatTypes | kIntTypes, shapeEinsum, runEinsum},
    {"Expand", "", 8, kMax, kAllTypes, shapeExpand, runExpand},
    {"EyeLike", "", 9, kMax, kAllTypes, shapeEyeLike, runEyeLike},
    {"Flatten", "", 1, kMax, kAllTypes, shapeFlatten, runCopy, /*dynamicShape=*/false, InPlace::Data},
    {"Gather", "", 1, kMax, kAllTypes, shapeGather, runGather},
    {"GatherElements", "", 11, kMax, kAllTypes, shapeGatherElements, runGatherElements},
    {"GatherND", "", 11, kMax, kAllTypes, shapeGatherND, runGatherND},
    {"Gemm", "", 7, kMax, kFloatTypes, shapeGemm, runGemm},
    {"GlobalAveragePool", "", 1, kMax, kFloatTypes, shapeGlobalPool, runGlobalAveragePool},
    {"GlobalMaxPool", "", 1, kMax, kFloatTypes, shapeGlobalPool, runGlobalMaxPool},
    {"GroupNormalization", "", 18, kMax, kFloatTypes, shapeGroupNorm, runGroupNorm},
    {"GRU", "", 7, kMax, kFloatTypes, shapeGRU, runGRU},
    {"Identity", "", 1, kMax, kAllTypes, shapeSameAsInput0, runCopy, /*dynamicShape=*/false, InPlace::Data},
    {"InstanceNormalization", "", 6, kMax, kFloatTypes, shapeInstanceNorm, runInstanceNorm},
    {"LayerNormalization", "", 17, kMax, kFloatTypes, shapeLayerNorm, runLayerNorm},
    {"LogSoftmax", "", 1, kMax, kFloatTypes, shapeSameAsInput0, runLogSoftmax},
    {"LpNormalization", "", 1, kMax, kFloatTypes, shapeLpNorm, runLpNorm},
    {"LRN", "", 1, kMax, kFloatTypes, shapeLRN, runLRN},
    {"LSTM", "", 7, kMax, kFloatTypes, shapeLSTM, runLSTM},
    {"MatMul", "", 1, kMax, kFloatTypes, shapeMatMul, runMatMul},
    {"MaxPool", "", 8, kMax, kFloatTypes, shapePool, runMaxPool},
    {"Mean", "", 8, kMax, kFloatTypes, shapeVariadicBroadcast, runMean},
    {"NonZero", "", 9, kMax, kNumericTypes | dtypeBit(DType::Bool), shapeNonZero, runNonZero,
     /*dynamicShape=*/true},
    {"OneHot", "", 9, kMax, kFloatTypes | kIntTypes, shapeOneHot, runOneHot},
    {"Pad", "", 2, kMax, kAllTypes, shapePad, runPad},
    {"RMSNormalization", "", 23, kMax, kFloatTypes, shapeRMSNorm, runRMSNorm},
    {"Range", "", 11, kMax, kFloatTypes | kIntTypes, shapeRangeOp, runRangeOp},
    {"ReduceL1", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceL2", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceLogSum", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceLogSumExp", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceMax", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceMean", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceMin", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceProd", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceSum", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"ReduceSumSquare", "", 1, kMax, kReduceTypes, shapeReduce, runReduce},
    {"Reshape", "", 5, kMax, kAllTypes, shapeReshape, runCopy, /*dynamicShape=*/false, InPlace::Data},
    {"Resize", "", 10, kMax, kFloatTypes, shapeResize, runResize, /*dynamicShape=*/true},
    {"ReverseSequence", "", 10, kMax, kAllTypes, shapeReverseSequence, runReverseSequence},
    {"RNN", "", 7, kMax, kFloatTypes, shapeRNN, runRNN},
    {"RotaryEmbedding", "", 23, kMax, kFloatTypes, shapeRotaryEmbedding, runRotaryEmbedding},
    {"ScatterElements", "", 11, kMax, kAllTypes, shapeSameAsInput0, runScatterElements},
    {"ScatterND", "", 11, kMax, kAllTypes, shapeSameAsInput0, runScatterND},
    {"Shape", "", 1, kMax, kAllTypes, shapeShape, runShape},
    {"Size", "", 1, kMax, kAllTypes, shapeSize, runSize},
    {"Slice", "", 10, kMax, kAllTypes, shapeSlice, runSlice},
    {"Softmax", "", 1, kMax, kFloatTypes, shapeSameAsInput0, runSoftmax},
    {"SpaceToDepth", "", 1, kMax, kAllTypes, shapeSpaceToDepth, runSpaceToDepth},
    {"Split", "", 2, kMax, kAllTypes, shapeSplit, runSplit},
    {"Squeeze", "", 1, kMax, kAllTypes, shapeSqueeze, runCopy, /*dynamicShape=*/false, InPlace::Data},
    {"Sum", "", 8, kMax, kFloatTypes, shapeVariadicBroadcast, runSum},
    {"Tile", "", 6, kMax, kAllTypes, shapeTile, runTile},
    {"TopK", "", 1, kMax, kFloatTypes | kIntTypes, shapeTopK, runTopK},
    {"Transpose", "", 1, kMax, kAllTypes, shapeTranspose, runTranspose},
    {"Trilu", "", 14, kMax, kAllTypes, shapeTrilu, runTrilu},
    {"Unsqueeze", "", 1, kMax, kAllTypes, shapeUnsqueeze, runCopy, /*dynamicShape=*/false, InPlace::Data},
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
  // Launches look rows up per node and per run: index the table by op type
  // once (a hash instead of a scan of every row's name).
  static const llvm::StringMap<llvm::SmallVector<const CpuKernel *, 2>> index = [] {
    llvm::StringMap<llvm::SmallVector<const CpuKernel *, 2>> m;
    for (const CpuKernel &k : cpuKernelTable())
      m[k.opType].push_back(&k);
    return m;
  }();
  auto it = index.find(opType);
  if (it == index.end())
    return nullptr;
  llvm::StringRef dom = domain == "ai.onnx" ? "" : domain;
  for (const CpuKernel *k : it->second)
    if (dom == k->domain && opset >= k->minOpset && opset <= k->maxOpset)
      return k;
  return nullptr;
}

const CpuKernel *mpc::findCpuKernel(const Node &n) {
  return findCpuKernel(n.opType, n.domain, n.opsetVersion());
}

/// The dtype the row's mask is checked against: input 0, else output 0.
static DType keyDType(const Node &n, llvm::ArrayRef<DType> inputDTypes) {
  if (!inputDTypes.empty())
    return inputDTypes[0];
  if (n.numOutputs() && n.output(0))
    return n.output(0)->type.elem;
  return DType::Undefined;
}

bool CpuCaps::supportsLowPrecision(const Node &n, DType t) const {
  const CpuKernel *k = findCpuKernel(n);
  return k && (k->dtypes & dtypeBit(t));
}

CpuBackend::CpuBackend(int numThreads) {
  if (numThreads > 0)
    cpu::setGemmThreads(numThreads);
}

llvm::Expected<DeviceBuffer> CpuBackend::allocate(size_t bytes, BufferKind kind) {
  size_t size = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
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

bool CpuBackend::supportsOp(const Node &n, llvm::ArrayRef<DType> inputDTypes) const {
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

llvm::Error CpuBackend::launch(const KernelCall &call, Stream) {
  // Rows by node: a pointer hash instead of the op-type and opset lookups.
  const CpuKernel *&k = rowOf[call.node];
  if (!k)
    k = findCpuKernel(*call.node);
  assert(k && "launch of a node without a kernel (checked at plan time)");
  return k->run(call);
}

Backend::~Backend() = default;

llvm::Expected<std::unique_ptr<Backend>> mpc::createCudaBackend() {
  return inputError("--device cuda: this build has no CUDA backend (configure with "
                    "MPC_ENABLE_CUDA=ON on a machine with the CUDA toolkit)");
}
