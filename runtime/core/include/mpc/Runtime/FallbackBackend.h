//===- FallbackBackend.h - A device backend with the CPU behind it -*- C++ -*-===//
//
// `mpc run --device cuda` runs a model even where the device has no kernel
// for some of its nodes: FallbackBackend is one Backend to the executor that
// sends every node the device backend can run there, and runs the others on
// the CPU backend with explicit copies around them: the node's inputs are
// copied out of device memory into host buffers (after the device has
// finished what was queued), the CPU kernel runs, and its outputs are copied
// back to the device addresses the executor planned. Memory, streams, copies
// and capabilities are the device's; a host node asks the executor for no
// workspace (its own is host memory). A host kernel's data-dependent error is
// written into the device's error record unless an earlier one is there, so
// the executor reports the first error of the run by node as always.
// partition() says what ran where, for `mpc run`'s one line.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_FALLBACKBACKEND_H
#define MPC_RUNTIME_FALLBACKBACKEND_H

#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/Readback.h"
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

class FallbackBackend final : public Backend {
public:
  /// `device` runs what it can; `host` (the CPU backend) the rest.
  FallbackBackend(std::unique_ptr<Backend> device, std::unique_ptr<Backend> host);
  ~FallbackBackend() override;

  llvm::StringRef name() const override { return device->name(); }
  llvm::Error checkAvailable() const override { return device->checkAvailable(); }
  llvm::Expected<DeviceBuffer> allocate(size_t bytes, BufferKind kind) override {
    return device->allocate(bytes, kind);
  }
  void release(DeviceBuffer b) override { device->release(b); }
  void copyToDevice(void *dst, const void *src, size_t bytes, Stream s) override {
    device->copyToDevice(dst, src, bytes, s);
  }
  void copyToHost(void *dst, const void *src, size_t bytes, Stream s) override {
    device->copyToHost(dst, src, bytes, s);
  }
  Stream createStream() override { return device->createStream(); }
  void destroyStream(Stream s) override { device->destroyStream(s); }
  bool hasKernel(const Node &n) const override {
    return device->hasKernel(n) || host->hasKernel(n);
  }
  bool supportsOp(const Node &n, llvm::ArrayRef<DType> dts) const override {
    return device->supportsOp(n, dts) || host->supportsOp(n, dts);
  }
  PreparedKernel prepare(const Node &n, llvm::ArrayRef<TensorDesc> inputs) override;
  void unprepare(KernelHandle h) override;
  /// The host backend's (the CPU's), else the device's.
  HostKernelFn hostKernel(const Node &n) const override {
    if (HostKernelFn f = host->hostKernel(n))
      return f;
    return device->hostKernel(n);
  }
  void launch(const KernelCall &call, Stream s) override;
  /// A plan with no host node goes to the device whole (with the device's
  /// handles), so a device that captures plans (CUDA graphs) still can; a plan
  /// with host nodes runs launch by launch (a host node waits for the stream).
  void runPlan(const LaunchPlan &plan, Stream s) override;
  void synchronize(Stream s) override { device->synchronize(s); }
  /// The device's: its streams and memory.
  std::unique_ptr<ReadbackChannel> createReadback() override {
    return device->createReadback();
  }
  llvm::Error takeMessageError(const KernelErrorRecord *record) override;
  const BackendCaps &caps() const override { return device->caps(); }
  size_t peakAllocatedBytes() const override { return device->peakAllocatedBytes(); }
  /// The device's memory and budget (the host's staging is host memory).
  size_t allocatedBytes() const override { return device->allocatedBytes(); }
  void setMemoryBudget(uint64_t bytes) override { device->setMemoryBudget(bytes); }
  uint64_t memoryBudget() const override { return device->memoryBudget(); }
  bool deviceMemoryInfo(uint64_t &used, uint64_t &total) override {
    return device->deviceMemoryInfo(used, total);
  }
  bool isHostMemory() const override { return device->isHostMemory(); }

  /// The nodes prepared so far on each side (a node counts once, on the side
  /// of its last preparation), and the host nodes per op type.
  struct Partition {
    size_t deviceNodes = 0, hostNodes = 0;
    std::map<std::string, size_t> hostOps;
  };
  Partition partition() const;
  /// "cuda: 412 nodes; cpu fallback: 3 nodes (NonMaxSuppression x3)", or
  /// "cuda: 5 nodes; cpu fallback: none".
  std::string partitionLine() const;
  std::string placementLine() const override { return partitionLine(); }

  Backend &deviceBackend() { return *device; }

private:
  /// What prepare() hands the executor: which backend prepared the node, and
  /// that backend's handle.
  struct Routed {
    bool onHost = false;
    KernelHandle inner = nullptr;
    size_t hostWorkspace = 0;
  };
  void runOnHost(const KernelCall &call, const Routed &r, Stream s);

  /// The device's view of the last whole plan handed over: the calls with
  /// their device handles, rebuilt when (owner, version) changes.
  const void *planOwner = nullptr;
  uint64_t planVersion = 0;
  std::vector<KernelCall> devicePlan;

  std::unique_ptr<Backend> device, host;
  std::deque<Routed> routed; ///< stable addresses: the handles
  std::vector<Routed *> freeRouted;
  /// Side of each node's last preparation (by node, for partition()).
  std::map<const Node *, std::pair<bool, std::string>> sideOf;
  /// Host staging buffers (the host backend's aligned allocations), reused
  /// across launches, grown when a launch needs more.
  std::vector<DeviceBuffer> staging;
  DeviceBuffer hostWorkspace;
  /// Slot `i` of `staging` with at least `bytes`; null when allocation fails.
  void *stagingBuffer(size_t i, size_t bytes);
  /// Host nodes' Message errors moved into the device record, by record.
  KernelMessages messages;
};

} // namespace mpc

#endif // MPC_RUNTIME_FALLBACKBACKEND_H
