//===- HostPlacement.cpp - The CUDA backend's placement without a GPU -----===//
#include "mpc/Runtime/Cuda/HostPlacement.h"

#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"

using namespace mpc;

namespace {

class HostPlacementBackend final : public Backend {
public:
  llvm::StringRef name() const override { return "cuda"; }
  llvm::Error checkAvailable() const override { return llvm::Error::success(); }
  llvm::Expected<DeviceBuffer> allocate(size_t bytes, BufferKind kind) override {
    return cpu.allocate(bytes, kind);
  }
  void release(DeviceBuffer b) override { cpu.release(b); }
  void copyToDevice(void *dst, const void *src, size_t bytes, Stream s) override {
    cpu.copyToDevice(dst, src, bytes, s);
  }
  void copyToHost(void *dst, const void *src, size_t bytes, Stream s) override {
    cpu.copyToHost(dst, src, bytes, s);
  }
  bool hasKernel(const Node &n) const override {
    return cuda::findCudaKernel(n) && cpu.hasKernel(n);
  }
  bool supportsOp(const Node &n, llvm::ArrayRef<DType> dts) const override {
    return cuda::cudaRunsIfKnown(n, dts) && cpu.supportsOp(n, dts);
  }
  PreparedKernel prepare(const Node &n, llvm::ArrayRef<TensorDesc> inputs) override {
    if (!cuda::cudaRunsShaped(n, inputs))
      return PreparedKernel();
    return cpu.prepare(n, inputs);
  }
  HostKernelFn hostKernel(const Node &n) const override { return cpu.hostKernel(n); }
  void launch(const KernelCall &call, Stream s) override { cpu.launch(call, s); }
  void runPlan(const LaunchPlan &plan, Stream s) override { cpu.runPlan(plan, s); }
  void synchronize(Stream s) override { cpu.synchronize(s); }
  llvm::Error takeMessageError(const KernelErrorRecord *record) override {
    return cpu.takeMessageError(record);
  }
  const BackendCaps &caps() const override { return cudaCaps; }
  size_t peakAllocatedBytes() const override { return cpu.peakAllocatedBytes(); }
  size_t allocatedBytes() const override { return cpu.allocatedBytes(); }
  void setMemoryBudget(uint64_t bytes) override { cpu.setMemoryBudget(bytes); }
  uint64_t memoryBudget() const override { return cpu.memoryBudget(); }
  bool isHostMemory() const override { return true; }

private:
  CpuBackend cpu;
  cuda::CudaCaps cudaCaps;
};

} // namespace

std::unique_ptr<Backend> cuda::createHostPlacementBackend() {
  return std::make_unique<HostPlacementBackend>();
}
