//===- CudaBackend.cpp - The CUDA backend ----------------------------------===//
//
// Backend over the CUDA runtime and cuBLASLt. Host code only: element-wise
// kernels are queued through the launchers of the .cu files (CudaLaunch.h),
// matrix products through cuBLASLt with descriptors, layouts and the
// algorithm chosen once per node and shape signature in prepare(). Every
// decision that does not need a device (kernel table, capabilities, launch
// geometry, broadcast plans, GEMM layouts) is a pure host function tested in
// tests/cuda_host; this file only hands their results to CUDA.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/CudaBackend.h"
#include "CudaLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/GemmPlan.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <map>
#include <memory>

using namespace mpc;
using namespace mpc::cuda;

// CastKernels.cu writes the error record through its own mirror of the
// first fields; keep the layout that it relies on.
static_assert(offsetof(KernelErrorRecord, code) == 0 &&
                  offsetof(KernelErrorRecord, call) == 4 &&
                  offsetof(KernelErrorRecord, value) == 16 && sizeof(KernelErrorRecord) == 24,
              "the device error record layout of CastKernels.cu");

namespace {

/// "an illegal memory access was encountered (cudaErrorIllegalAddress)".
std::string cudaText(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

std::string bytesText(size_t n) { return std::to_string(n) + " bytes"; }

std::string cublasText(cublasStatus_t s) { return cublasLtGetStatusString(s); }

/// A CUDA failure outside any node (a copy, a stream, a synchronization)
/// leaves nothing to return it through and the device's state unknown: say
/// so in one line and stop (no partial output is written).
[[noreturn]] void fatal(const std::string &what) {
  llvm::errs() << "mpc: error: CUDA: " << what << "\n";
  llvm::errs().flush();
  std::exit(1);
}

cudaStream_t streamOf(Stream s) { return static_cast<cudaStream_t>(s.handle); }

cudaDataType_t cudaTypeOf(DType t) {
  switch (t) {
  case DType::F16: return CUDA_R_16F;
  case DType::BF16: return CUDA_R_16BF;
  default: return CUDA_R_32F;
  }
}

/// cuBLASLt objects of one prepared matrix product.
struct GemmState {
  MatmulPlan plan;
  GemmBias bias = GemmBias::None;
  float alpha = 1, beta = 0;
  unsigned elementBytes = 4;
  /// ExpandToD: C broadcast into D's shape.
  kernels::BroadcastPlan expand;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  size_t workspace = 0;

  ~GemmState() {
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

/// What prepare() made for a node and signature (the KernelHandle).
struct Prepared {
  const CudaKernel *row = nullptr;
  OpBlob functor;
  kernels::BroadcastPlan broadcast;
  int32_t castTo = 0;
  std::unique_ptr<GemmState> gemm;
  PreparedKernel result;
  unsigned refs = 0;
};

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const CudaBackendOptions &o) : options(o) {}
  ~CudaBackend() override;
  llvm::StringRef name() const override { return "cuda"; }
  llvm::Error checkAvailable() const override;
  llvm::Expected<DeviceBuffer> allocate(size_t bytes, BufferKind kind) override;
  void release(DeviceBuffer buffer) override;
  void copyToDevice(void *dst, const void *src, size_t bytes, Stream stream) override;
  void copyToHost(void *dst, const void *src, size_t bytes, Stream stream) override;
  Stream createStream() override;
  void destroyStream(Stream s) override;
  bool hasKernel(const Node &node) const override { return findCudaKernel(node) != nullptr; }
  bool supportsOp(const Node &node, llvm::ArrayRef<DType> dts) const override {
    return cudaRuns(node, dts);
  }
  PreparedKernel prepare(const Node &node, llvm::ArrayRef<TensorDesc> inputs) override;
  void unprepare(KernelHandle h) override;
  HostKernelFn hostKernel(const Node &node) const override { return cpuHostKernel(node); }
  void launch(const KernelCall &call, Stream stream) override;
  void synchronize(Stream stream) override;
  llvm::Error takeMessageError(const KernelErrorRecord *record) override;
  const BackendCaps &caps() const override { return cudaCaps; }
  size_t peakAllocatedBytes() const override { return peakBytes; }

private:
  /// Selects the device and makes the cuBLASLt handle, once.
  void ensureReady();
  llvm::Error prepareGemm(const Node &n, llvm::ArrayRef<TensorDesc> inputs, Prepared &p);
  void launchGemm(const KernelCall &call, const Prepared &p, cudaStream_t s);
  /// Records a failed launch of `call`: a Message record written on the
  /// device, the text kept for takeMessageError.
  void failed(const KernelCall &call, const std::string &what, cudaStream_t s);
  LaunchGeometry geometry(int64_t n) const { return elementwiseGeometry(n, smCount); }

  CudaBackendOptions options;
  CudaCaps cudaCaps;
  bool ready = false;
  unsigned smCount = 1;
  size_t workspaceCap = size_t(4) << 20;
  cublasLtHandle_t lt = nullptr;
  std::map<PrepareKey, std::unique_ptr<Prepared>> cache;
  KernelMessages messages;
  size_t currentBytes = 0, peakBytes = 0;
  /// The last node queued, named when a later synchronization fails.
  std::string lastNode;
};

CudaBackend::~CudaBackend() {
  cache.clear();
  if (lt)
    cublasLtDestroy(lt);
}

llvm::Error CudaBackend::checkAvailable() const {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return inputError("no CUDA device found (cudaGetDeviceCount: {0})",
                      cudaText(e));
  if (count == 0)
    return inputError("no CUDA device found (cudaGetDeviceCount: 0 devices)");
  cudaDeviceProp prop;
  e = cudaGetDeviceProperties(&prop, 0);
  if (e != cudaSuccess)
    return inputError("cannot query CUDA device 0 (cudaGetDeviceProperties: "
                      "{0})",
                      cudaText(e));
  if (prop.major < 8)
    return inputError("CUDA device 0 '{0}' has compute capability {1}.{2}; "
                      "mpc's CUDA backend needs 8.0 or newer",
                      prop.name, prop.major, prop.minor);
  return llvm::Error::success();
}

void CudaBackend::ensureReady() {
  if (ready)
    return;
  if (llvm::Error e = checkAvailable()) {
    std::string text = llvm::toString(std::move(e));
    fatal(text);
  }
  if (cudaError_t e = cudaSetDevice(0))
    fatal("cudaSetDevice: " + cudaText(e));
  int sms = 0, major = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  smCount = sms > 0 ? unsigned(sms) : 1;
  // cuBLAS's advice: 32 MiB of workspace on sm_90 and newer, 4 MiB before.
  workspaceCap = size_t(major >= 9 ? 32 : 4) << 20;
  if (cublasStatus_t s = cublasLtCreate(&lt))
    fatal("cublasLtCreate: " + cublasText(s));
  ready = true;
}

llvm::Expected<DeviceBuffer> CudaBackend::allocate(size_t bytes, BufferKind kind) {
  ensureReady();
  // cudaMalloc returns 256-byte aligned memory; sizes are rounded to match
  // so that every buffer may be addressed in 256-byte steps.
  size_t size = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void *p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, size)) {
    cudaGetLastError(); // an allocation failure is not sticky
    size_t freeBytes = 0, total = 0;
    cudaMemGetInfo(&freeBytes, &total);
    return inputError("cannot allocate {0} of CUDA device memory ({1} free of {2}): {3}",
                      bytesText(size), bytesText(freeBytes), bytesText(total),
                      cudaText(e));
  }
  currentBytes += size;
  peakBytes = std::max(peakBytes, currentBytes);
  return DeviceBuffer{p, size, kind};
}

void CudaBackend::release(DeviceBuffer b) {
  if (!b.data)
    return;
  currentBytes -= b.size;
  if (cudaError_t e = cudaFree(b.data))
    fatal("cudaFree: " + cudaText(e));
}

void CudaBackend::copyToDevice(void *dst, const void *src, size_t bytes, Stream s) {
  // From pageable memory the call returns once `src` has been staged, so
  // the caller may reuse it at once.
  if (!bytes)
    return;
  if (!s.handle)
    synchronize(s); // the synchronous stream starts after every stream's work
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, streamOf(s)))
    fatal("copy of " + bytesText(bytes) + " to the device: " + cudaText(e));
  if (!s.handle)
    synchronize(s);
}

void CudaBackend::copyToHost(void *dst, const void *src, size_t bytes, Stream s) {
  // Into pageable memory the call returns once the bytes have landed.
  if (!bytes)
    return;
  if (!s.handle)
    synchronize(s);
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, streamOf(s)))
    fatal("copy of " + bytesText(bytes) + " to the host" +
          (lastNode.empty() ? "" : " after " + lastNode) + ": " + cudaText(e));
}

Stream CudaBackend::createStream() {
  ensureReady();
  cudaStream_t s = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))
    fatal("cudaStreamCreate: " + cudaText(e));
  return Stream{s};
}

void CudaBackend::destroyStream(Stream s) {
  if (s.handle)
    cudaStreamDestroy(streamOf(s));
}

void CudaBackend::synchronize(Stream s) {
  // Stream(): the synchronous stream, which waits for every stream (the
  // executors' are non-blocking, so the legacy default stream would not).
  if (cudaError_t e = s.handle ? cudaStreamSynchronize(streamOf(s)) : cudaDeviceSynchronize())
    fatal((lastNode.empty() ? std::string("cudaStreamSynchronize")
                            : "cudaStreamSynchronize after " + lastNode) +
          ": " + cudaText(e));
}

PreparedKernel CudaBackend::prepare(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  PrepareKey key = prepareKey(n, inputs);
  auto it = cache.find(key);
  if (it != cache.end()) {
    ++it->second->refs;
    return it->second->result;
  }
  llvm::SmallVector<DType, 4> dts;
  for (const TensorDesc &d : inputs)
    dts.push_back(d.dtype);
  const CudaKernel *row = findCudaKernel(n);
  if (!row || !cudaRuns(n, dts) || inputs.empty())
    return PreparedKernel();
  ensureReady();
  auto p = std::make_unique<Prepared>();
  p->row = row;
  switch (row->kind) {
  case CudaKernelKind::Unary:
  case CudaKernelKind::Predicate:
    p->functor = makeOpBlob(n, *row);
    break;
  case CudaKernelKind::Binary:
  case CudaKernelKind::Compare: {
    llvm::SmallVector<int64_t, 6> out;
    if (inputs.size() != 2 || !kernels::broadcastShapes(inputs[0].shape, inputs[1].shape, out))
      return PreparedKernel();
    p->functor = makeOpBlob(n, *row);
    p->broadcast = kernels::makeBroadcastPlan(inputs[0].shape, inputs[1].shape);
    break;
  }
  case CudaKernelKind::Cast:
    p->castTo = n.opType == "CastLike" ? int32_t(inputs[1].dtype) : int32_t(n.intAttr("to", 0));
    break;
  case CudaKernelKind::MatMul:
  case CudaKernelKind::Gemm:
    if (llvm::Error e = prepareGemm(n, inputs, *p)) {
      // The executor names the node as unsupported; say what cuBLASLt refused.
      llvm::errs() << "mpc: note: " << llvm::toString(std::move(e)) << "\n";
      return PreparedKernel();
    }
    p->result.workspaceBytes = p->gemm->workspace;
    break;
  }
  p->result.handle = p.get();
  p->refs = 1;
  PreparedKernel result = p->result;
  cache.emplace(std::move(key), std::move(p));
  return result;
}

void CudaBackend::unprepare(KernelHandle h) {
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it->second.get() == h) {
      if (--it->second->refs == 0)
        cache.erase(it);
      return;
    }
}

llvm::Error CudaBackend::prepareGemm(const Node &n, llvm::ArrayRef<TensorDesc> inputs,
                                     Prepared &p) {
  auto g = std::make_unique<GemmState>();
  DType t = inputs[0].dtype;
  g->elementBytes = unsigned(runtimeElementSize(t));
  MatmulProblem problem;
  problem.aShape = inputs[0].shape;
  problem.bShape = inputs[1].shape;
  problem.elementBytes = g->elementBytes;
  bool gemm = p.row->kind == CudaKernelKind::Gemm;
  if (gemm) {
    problem.transA = n.intAttr("transA", 0) != 0;
    problem.transB = n.intAttr("transB", 0) != 0;
    g->alpha = n.floatAttr("alpha", 1.0f);
    g->beta = n.floatAttr("beta", 1.0f);
  }
  auto plan = planMatmul(problem);
  if (!plan)
    return inputError("{0}: {1}", describeNode(n), llvm::toString(plan.takeError()));
  g->plan = std::move(*plan);
  const LtGemm &lg = g->plan.gemm;
  if (gemm) {
    bool hasC = inputs.size() > 2 && inputs[2].dtype != DType::Undefined;
    llvm::ArrayRef<int64_t> cShape = hasC ? llvm::ArrayRef<int64_t>(inputs[2].shape)
                                          : llvm::ArrayRef<int64_t>();
    auto bias = planGemmBias(lg.n, lg.m, hasC, cShape, g->beta);
    if (!bias)
      return inputError("{0}: {1}", describeNode(n), llvm::toString(bias.takeError()));
    g->bias = *bias;
    if (g->bias == GemmBias::ExpandToD)
      g->expand = kernels::makeBroadcastPlan(cShape, g->plan.outShape);
  } else {
    g->beta = 0;
  }

  auto check = [&](cublasStatus_t s, const char *what) -> llvm::Error {
    if (s == CUBLAS_STATUS_SUCCESS)
      return llvm::Error::success();
    return inputError("{0}: {1} failed: {2}", describeNode(n), what, cublasText(s));
  };
  cublasComputeType_t compute =
      t == DType::F32 && options.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (auto e = check(cublasLtMatmulDescCreate(&g->desc, compute, CUDA_R_32F),
                     "cublasLtMatmulDescCreate"))
    return e;
  cublasOperation_t ta = lg.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = lg.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (g->bias == GemmBias::Epilogue) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
  }
  cudaDataType_t type = cudaTypeOf(t);
  auto layout = [&](const LtOperand &o, cublasLtMatrixLayout_t &l) -> llvm::Error {
    if (auto e = check(cublasLtMatrixLayoutCreate(&l, type, uint64_t(o.rows), uint64_t(o.cols),
                                                  o.ld),
                       "cublasLtMatrixLayoutCreate"))
      return e;
    if (lg.batchCount > 1) {
      int32_t count = int32_t(lg.batchCount);
      int64_t stride = o.batchStride;
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                       sizeof(count));
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                       &stride, sizeof(stride));
    }
    return llvm::Error::success();
  };
  if (auto e = layout(lg.a, g->a))
    return e;
  if (auto e = layout(lg.b, g->b))
    return e;
  if (auto e = layout(lg.d, g->c))
    return e;
  if (auto e = layout(lg.d, g->d))
    return e;

  cublasLtMatmulPreference_t pref = nullptr;
  if (auto e = check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"))
    return e;
  uint64_t maxWorkspace = workspaceCap;
  // Split-K partial sums are reduced in the compute type (fp32), never in a
  // 16-bit output type.
  uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  uint32_t alignA = lg.a.alignment, alignB = lg.b.alignment, alignD = lg.d.alignment;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &maxWorkspace, sizeof(maxWorkspace));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                       &reduction, sizeof(reduction));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA,
                                       sizeof(alignA));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB,
                                       sizeof(alignB));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD,
                                       sizeof(alignD));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD,
                                       sizeof(alignD));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, g->desc, g->a, g->b, g->c, g->d, pref,
                                                    1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (auto e = check(s, "cublasLtMatmulAlgoGetHeuristic"))
    return e;
  if (found == 0)
    return inputError("{0}: cuBLASLt has no algorithm for {1} x {2} in {3}", describeNode(n),
                      formatShape(inputs[0].shape), formatShape(inputs[1].shape), dtypeName(t));
  g->algo = result.algo;
  g->workspace = result.workspaceSize;
  p.gemm = std::move(g);
  return llvm::Error::success();
}

void CudaBackend::launchGemm(const KernelCall &call, const Prepared &p, cudaStream_t s) {
  const GemmState &g = *p.gemm;
  const LtGemm &lg = g.plan.gemm;
  char *userA = static_cast<char *>(call.inputs[0].data);
  char *userB = static_cast<char *>(call.inputs[1].data);
  char *out = static_cast<char *>(call.outputs[0].data);
  const void *userC = call.hasInput(2) ? call.inputs[2].data : nullptr;
  float beta = 0;
  if (g.bias == GemmBias::Epilogue) {
    cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &userC,
                                   sizeof(userC));
  } else if (g.bias == GemmBias::Matrix) {
    beta = g.beta;
  } else if (g.bias == GemmBias::ExpandToD) {
    beta = g.beta;
    if (cudaError_t e = launchBroadcastCopy(g.elementBytes, userC, out, g.expand,
                                            geometry(g.expand.numElements), s))
      return failed(call, "broadcasting C: " + cudaText(e), s);
  }
  size_t eb = g.elementBytes;
  for (const LtGemm::Offsets &o : lg.offsets) {
    char *d = out + o.d * eb;
    const void *c = g.bias == GemmBias::Matrix ? static_cast<const char *>(userC) + o.d * eb : d;
    cublasStatus_t st =
        cublasLtMatmul(lt, g.desc, &g.alpha, userB + o.userB * eb, g.a, userA + o.userA * eb,
                       g.b, &beta, c, g.c, d, g.d, &g.algo, call.workspace,
                       call.workspace ? call.workspaceBytes : 0, s);
    if (st != CUBLAS_STATUS_SUCCESS)
      return failed(call, "cublasLtMatmul failed: " + cublasText(st), s);
  }
}

void CudaBackend::launch(const KernelCall &call, Stream stream) {
  cudaStream_t s = streamOf(stream);
  const Prepared *p = static_cast<const Prepared *>(call.kernel);
  if (!p)
    return failed(call, "launched without a prepared CUDA kernel", s);
  lastNode = describeNode(*call.node);
  const TensorRef &x = call.inputs[0];
  cudaError_t e = cudaSuccess;
  switch (p->row->kind) {
  case CudaKernelKind::Unary:
  case CudaKernelKind::Predicate:
    e = launchUnary(UnaryOpId(p->row->op), p->functor, int32_t(x.dtype), x.data,
                    call.outputs[0].data, x.numElements(), geometry(x.numElements()), s);
    break;
  case CudaKernelKind::Binary:
  case CudaKernelKind::Compare:
    e = launchBinary(BinaryOpId(p->row->op), p->functor, int32_t(x.dtype), x.data,
                     call.inputs[1].data, call.outputs[0].data, p->broadcast,
                     geometry(p->broadcast.numElements), s);
    break;
  case CudaKernelKind::Cast:
    e = launchCast(int32_t(x.dtype), p->castTo, x.data, call.outputs[0].data,
                   x.numElements(), geometry(x.numElements()), s);
    break;
  case CudaKernelKind::MatMul:
  case CudaKernelKind::Gemm:
    return launchGemm(call, *p, s);
  }
  if (e != cudaSuccess)
    failed(call, "kernel launch failed: " + cudaText(e), s);
}

void CudaBackend::failed(const KernelCall &call, const std::string &what, cudaStream_t s) {
  llvm::Error err = inputError("{0}: {1}", describeNode(*call.node), what);
  if (!call.errors) {
    fatal(llvm::toString(std::move(err)));
  }
  if (cudaError_t e = launchRecordError(call.errors, int32_t(KernelErrorCode::Message),
                                        call.index, s))
    fatal(llvm::toString(std::move(err)) + "; then recording it failed: " + cudaText(e));
  // As on the CPU: one pending message per record, the first error winning
  // (the device keeps the first record; a later message would not be read).
  messages.put(call.errors, std::move(err), /*replace=*/false);
}

llvm::Error CudaBackend::takeMessageError(const KernelErrorRecord *record) {
  return messages.take(record);
}

} // namespace

llvm::Expected<std::unique_ptr<Backend>>
mpc::createCudaBackend(const CudaBackendOptions &options) {
  return std::unique_ptr<Backend>(new CudaBackend(options));
}

llvm::Expected<std::unique_ptr<Backend>> mpc::createCudaBackend() {
  return createCudaBackend(CudaBackendOptions());
}
