//===- QueueBackend.h - A fake asynchronous device for tests ----*- C++ -*-===//
//
// QueueBackend behaves like a device on the CPU: copies and launches are
// queued on the stream and run only when synchronize() drains it, so a
// launch cannot report anything; it prepares a handle per node and shape
// signature that asks for a workspace (which it scribbles on); runPlan
// captures a plan the first time it sees it and replays the capture
// afterwards (what CUDA graphs need). The kernels are the CPU backend's.
// `only` restricts the nodes it has kernels for: a device with gaps, for
// FallbackBackend. Its readback channel (createReadback) queues the copies
// like a device's pinned copies and lets the host wait for part of the
// queue only (up to a marker, as an event would). `waits` counts every time
// the host blocked on the device: a synchronize(), a copy on the
// synchronous stream, a release, a readback wait. Used by tests/runtime_exec
// and tests/trainer.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TESTS_RUNTIME_EXEC_QUEUEBACKEND_H
#define MPC_TESTS_RUNTIME_EXEC_QUEUEBACKEND_H

#include "mpc/IR/Graph.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Readback.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mpc {
namespace test {

class QueueBackend final : public Backend {
public:
  /// A prepared node: the CPU row and the workspace it asked for.
  struct Handle {
    const void *row;
    size_t workspace;
  };

  llvm::StringRef name() const override { return "queue"; }
  llvm::Error checkAvailable() const override { return llvm::Error::success(); }
  llvm::Expected<DeviceBuffer> allocate(size_t bytes, BufferKind kind) override {
    return cpu.allocate(bytes, kind);
  }
  // Like cudaFree: waits for queued work first.
  void release(DeviceBuffer b) override {
    drain();
    cpu.release(b);
  }
  Stream createStream() override {
    ++streams;
    return Stream{&queue};
  }
  void destroyStream(Stream s) override {
    EXPECT_EQ(s.handle, &queue);
    --streams;
  }
  // Like a copy from pageable host memory: the source is read now, the
  // device is written in stream order.
  void copyToDevice(void *d, const void *s, size_t n, Stream st) override {
    checkStream(st);
    if (!st.handle) { // the synchronous stream: after everything queued, done now
      drain();
      if (n)
        std::memcpy(d, s, n);
      return;
    }
    std::vector<char> bytes(static_cast<const char *>(s), static_cast<const char *>(s) + n);
    queue.push_back([d, bytes = std::move(bytes)] {
      if (!bytes.empty())
        std::memcpy(d, bytes.data(), bytes.size());
    });
  }
  void copyToHost(void *d, const void *s, size_t n, Stream st) override {
    checkStream(st);
    if (!st.handle) {
      drain();
      if (n)
        std::memcpy(d, s, n);
      return;
    }
    queue.push_back([=] { std::memcpy(d, s, n); });
  }
  bool hasKernel(const Node &n) const override { return runs(n) && cpu.hasKernel(n); }
  bool supportsOp(const Node &n, llvm::ArrayRef<DType> dts) const override {
    return runs(n) && cpu.supportsOp(n, dts);
  }
  /// The nodes this device has kernels for (all that the CPU runs when unset):
  /// a device with gaps, for FallbackBackend.
  std::function<bool(const Node &)> only;
  bool runs(const Node &n) const { return !only || only(n); }
  PreparedKernel prepare(const Node &n, llvm::ArrayRef<TensorDesc> in) override {
    if (!runs(n))
      return PreparedKernel();
    ++prepares;
    ++preparesOf[n.name];
    lastSignature[n.name] = in.empty() ? std::vector<int64_t>()
                                       : std::vector<int64_t>(in[0].shape.begin(),
                                                              in[0].shape.end());
    PreparedKernel cpuKernel = cpu.prepare(n, in);
    if (!cpuKernel.handle)
      return PreparedKernel();
    // A workspace as large as input 0 (256 bytes for an op without inputs).
    size_t ws = 256;
    if (!in.empty()) {
      int64_t elems = 1;
      for (int64_t d : in[0].shape)
        elems *= d;
      ws = std::max<size_t>(size_t(elems) * 8, 1);
    }
    handles.push_back(Handle{cpuKernel.handle, ws});
    ++live;
    return PreparedKernel{&handles.back(), ws};
  }
  void unprepare(KernelHandle) override { --live; }
  // Folds with the CPU rows, like a real device backend.
  HostKernelFn hostKernel(const Node &n) const override { return cpu.hostKernel(n); }
  void launch(const KernelCall &call, Stream st) override {
    checkStream(st);
    ++launches;
    queuedAtLaunch.push_back(queue.size());
    KernelCall c = call;
    queue.push_back([this, c]() mutable {
      const Handle *h = static_cast<const Handle *>(c.kernel);
      if (!h || c.workspaceBytes != h->workspace || !c.workspace) {
        ADD_FAILURE() << "launch without its prepared workspace";
        return;
      }
      std::memset(c.workspace, 0xab, c.workspaceBytes); // it is ours to scribble on
      c.kernel = h->row;
      cpu.launch(c, Stream());
    });
  }
  void runPlan(const LaunchPlan &plan, Stream st) override {
    auto key = std::make_pair(plan.owner, plan.version);
    auto it = captured.find(key);
    if (it == captured.end()) {
      ++captures;
      it = captured.emplace(key, std::vector<KernelCall>(plan.calls.begin(), plan.calls.end()))
               .first;
    } else {
      ++replays;
    }
    // A replay uses the capture, not the calls handed in.
    for (const KernelCall &c : it->second)
      launch(c, st);
    queuedAfterRunPlan = queue.size();
  }
  void synchronize(Stream st) override {
    checkStream(st);
    ++syncCalls;
    drain();
  }
  std::unique_ptr<ReadbackChannel> createReadback() override;
  llvm::Error takeMessageError(const KernelErrorRecord *r) override {
    return cpu.takeMessageError(r);
  }
  const BackendCaps &caps() const override { return cpu.caps(); }
  size_t peakAllocatedBytes() const override { return cpu.peakAllocatedBytes(); }
  size_t allocatedBytes() const override { return cpu.allocatedBytes(); }

  void drain() { runUntil(~uint64_t(0)); }
  /// Runs queued work until `count` items have run since the start (a host
  /// wait for an event), or the queue is empty.
  void runUntil(uint64_t count) {
    ++waits;
    while (!queue.empty() && ran < count) {
      auto f = std::move(queue.front());
      queue.pop_front();
      ++ran;
      f();
    }
  }
  /// The item count after which everything queued so far has run.
  uint64_t markNow() const { return ran + queue.size(); }
  /// The executor's stream, or the synchronous one (Stream(): no handle).
  void checkStream(Stream st) {
    if (st.handle && st.handle != &queue)
      ADD_FAILURE() << "work on a stream the executor did not create";
  }

  CpuBackend cpu;
  std::deque<std::function<void()>> queue;
  std::deque<Handle> handles;
  std::map<std::pair<const void *, uint64_t>, std::vector<KernelCall>> captured;
  std::map<std::string, unsigned> preparesOf;
  std::map<std::string, std::vector<int64_t>> lastSignature;
  unsigned prepares = 0, launches = 0, captures = 0, replays = 0;
  /// Host waits of any kind, synchronize() calls, items run.
  uint64_t waits = 0, syncCalls = 0, ran = 0;
  /// Copies queued from the readback channel's host memory (uploadAsync),
  /// and the host addresses they read.
  uint64_t uploads = 0;
  std::vector<const void *> uploadSources;
  int live = 0, streams = 0;
  size_t queuedAfterRunPlan = 0;
  /// The items still queued when each launch was queued (in launch order).
  std::vector<size_t> queuedAtLaunch;
};

/// The queue's readback: copies queued in stream order, markers counting
/// the items queued before them, a wait that runs the queue up to its marker.
class QueueReadback final : public ReadbackChannel {
public:
  explicit QueueReadback(QueueBackend &q) : q(q) {}
  void *allocateHost(size_t bytes) override { return std::calloc(1, bytes); }
  void releaseHost(void *p) override { std::free(p); }
  void copyAsync(void *dst, const void *src, size_t bytes, Stream st) override {
    q.copyToHost(dst, src, bytes, st);
  }
  /// Read when the queue runs it, as a DMA from pinned memory would.
  void uploadAsync(void *dst, const void *src, size_t bytes, Stream st) override {
    q.checkStream(st);
    ++q.uploads;
    q.uploadSources.push_back(src);
    q.queue.push_back([dst, src, bytes] { std::memcpy(dst, src, bytes); });
  }
  uint64_t mark(Stream) override { return q.markNow(); }
  bool reached(uint64_t marker) override { return q.ran >= marker; }
  void wait(uint64_t marker) override {
    if (q.ran < marker)
      q.runUntil(marker);
  }

private:
  QueueBackend &q;
};

inline std::unique_ptr<ReadbackChannel> QueueBackend::createReadback() {
  return std::make_unique<QueueReadback>(*this);
}

} // namespace test
} // namespace mpc

#endif // MPC_TESTS_RUNTIME_EXEC_QUEUEBACKEND_H
