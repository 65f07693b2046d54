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
#include <cstdlib>
#include <cstring>

using namespace mpc;
using namespace mpc::cpuk;

namespace mpc {
namespace cpuk {
std::vector<CpuKernel> elementwiseRows();
std::vector<CpuKernel> trainingRows();
} // namespace cpuk
} // namespace mpc

static constexpr int64_t kMax = 1000;
static constexpr DTypeSet kReduceTypes =
    kFloatTypes | dtypeBit(DType::I32) | dtypeBit(DType::I64);

static const CpuKernel kRows[] = {
    {"AveragePool", "", 7, kMax, kFloatTypes, shapePool, runAveragePool},
    {"BatchNormalization", "", 9, kMax, kFloatTypes, shapeBatchNorm, runBatchNorm},
    {"Concat", "", 4, kMax, kAllTypes, shapeConcat, runConcat},
    {"Constant", "", 9, kMax, kAllTypes, shapeConstant, runConstant},
    {"Conv", "", 1, kMax, kFloatTypes, shapeConv, runConv},
    {"Expand", "", 8, kMax, kAllTypes, shapeExpand, runExpand},
    {"Flatten", "", 1, kMax, kAllTypes, shapeFlatten, runCopy},
    {"Gather", "", 1, kMax, kAllTypes, shapeGather, runGather},
    {"Gemm", "", 7, kMax, kFloatTypes, shapeGemm, runGemm},
    {"GlobalAveragePool", "", 1, kMax, kFloatTypes, shapeGlobalPool, runGlobalAveragePool},
    {"GlobalMaxPool", "", 1, kMax, kFloatTypes, shapeGlobalPool, runGlobalMaxPool},
    {"Identity", "", 1, kMax, kAllTypes, shapeSameAsInput0, runCopy},
    {"LayerNormalization", "", 17, kMax, kFloatTypes, shapeLayerNorm, runLayerNorm},
    {"LogSoftmax", "", 1, kMax, kFloatTypes, shapeSameAsInput0, runLogSoftmax},
    {"LSTM", "", 7, kMax, kFloatTypes, shapeLSTM, runLSTM},
    {"MatMul", "", 1, kMax, kFloatTypes, shapeMatMul, runMatMul},
    {"MaxPool", "", 8, kMax, kFloatTypes, shapePool, runMaxPool},
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
    {"NonZero", "", 9, kMax, kNumericTypes | dtypeBit(DType::Bool), shapeNonZero, runNonZero,
     /*dynamicShape=*/true},
    {"Reshape", "", 5, kMax, kAllTypes, shapeReshape, runCopy},
    {"Shape", "", 1, kMax, kAllTypes, shapeShape, runShape},
    {"Size", "", 1, kMax, kAllTypes, shapeSize, runSize},
    {"Slice", "", 10, kMax, kAllTypes, shapeSlice, runSlice},
    {"Softmax", "", 1, kMax, kFloatTypes, shapeSameAsInput0, runSoftmax},
    {"Squeeze", "", 1, kMax, kAllTypes, shapeSqueeze, runCopy},
    {"Transpose", "", 1, kMax, kAllTypes, shapeTranspose, runTranspose},
    {"Unsqueeze", "", 1, kMax, kAllTypes, shapeUnsqueeze, runCopy},
};

llvm::ArrayRef<CpuKernel> mpc::cpuKernelTable() {
  // Built on first use (not by a global constructor): the fixed rows above
  // followed by the element-wise rows and the training rows (domain
  // ai.mpc.training, TrainingKernels.cpp).
  static const std::vector<CpuKernel> table = [] {
    std::vector<CpuKernel> t(std::begin(kRows), std::end(kRows));
    std::vector<CpuKernel> ew = elementwiseRows();
    t.insert(t.end(), ew.begin(), ew.end());
    std::vector<CpuKernel> tr = trainingRows();
    t.insert(t.end(), tr.begin(), tr.end());
    return t;
  }();
  return table;
}

const CpuKernel *mpc::findCpuKernel(llvm::StringRef opType, llvm::StringRef domain,
                                    int64_t opset) {
  llvm::StringRef dom = domain == "ai.onnx" ? "" : domain;
  for (const CpuKernel &k : cpuKernelTable())
    if (opType == k.opType && dom == k.domain && opset >= k.minOpset &&
        opset <= k.maxOpset)
      return &k;
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
  // Cast: the target type must be storable too.
  if (n.opType == "Cast")
    return runtimeElementSize(DType(n.intAttr("to", 0))) != 0;
  return true;
}

llvm::Error CpuBackend::launch(const KernelCall &call, Stream) {
  const CpuKernel *k = findCpuKernel(*call.node);
  assert(k && "launch of a node without a kernel (checked at plan time)");
  return k->run(call);
}

Backend::~Backend() = default;

llvm::Expected<std::unique_ptr<Backend>> mpc::createCudaBackend() {
  return inputError("--device cuda: this build has no CUDA backend (configure with "
                    "MPC_ENABLE_CUDA=ON on a machine with the CUDA toolkit)");
}
