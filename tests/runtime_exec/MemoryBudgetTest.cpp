//===- MemoryBudgetTest.cpp - Backend memory budgets (--max-memory) --------===//
//
// Backend::setMemoryBudget: an allocation past the budget fails with one
// line, allocates nothing and leaves the counts alone; a FallbackBackend
// passes the budget to its device. Executor::memoryStats() names what the
// first run allocates (arena and workspace), which `mpc run --max-memory`
// adds to what the backend holds after planning.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/FallbackBackend.h"
#include "gtest/gtest.h"
#include "../runtime/ModelText.h"
#include "QueueBackend.h"
#include <cmath>

using namespace mpc;

namespace {

TEST(MemoryBudget, AllocationSizeIsWhatTheBackendsAllocate) {
  EXPECT_EQ(allocationSize(0), 256u);
  EXPECT_EQ(allocationSize(1), 256u);
  EXPECT_EQ(allocationSize(256), 256u);
  EXPECT_EQ(allocationSize(257), 512u);
  CpuBackend cpu;
  auto b = cpu.allocate(300, BufferKind::Transient);
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  EXPECT_EQ(b->size, allocationSize(300));
  EXPECT_EQ(cpu.allocatedBytes(), 512u);
  cpu.release(*b);
  EXPECT_EQ(cpu.allocatedBytes(), 0u);
}

TEST(MemoryBudget, AnAllocationPastTheBudgetFailsAndAllocatesNothing) {
  CpuBackend cpu;
  EXPECT_EQ(cpu.memoryBudget(), 0u);
  cpu.setMemoryBudget(1024);
  auto a = cpu.allocate(512, BufferKind::Persistent);
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  auto b = cpu.allocate(600, BufferKind::Transient); // 768 more: 1280 > 1024
  ASSERT_FALSE(bool(b));
  EXPECT_EQ(llvm::toString(b.takeError()),
            "memory budget: 768 more bytes on top of the 512 held would exceed the budget of "
            "1024 bytes");
  EXPECT_EQ(cpu.allocatedBytes(), 512u);
  EXPECT_EQ(cpu.peakAllocatedBytes(), 512u);
  // Exactly the budget fits.
  auto c = cpu.allocate(512, BufferKind::Transient);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(cpu.allocatedBytes(), 1024u);
  // A single request larger than the budget (no overflow in the check).
  cpu.release(*a);
  cpu.release(*c);
  auto d = cpu.allocate(~size_t(0) - 4096, BufferKind::Transient);
  ASSERT_FALSE(bool(d));
  llvm::consumeError(d.takeError());
  // No budget: no cap.
  cpu.setMemoryBudget(0);
  auto e = cpu.allocate(4096, BufferKind::Transient);
  ASSERT_TRUE(bool(e)) << llvm::toString(e.takeError());
  cpu.release(*e);
}

// Without a budget, what the machine has available (MemAvailable, read once)
// bounds what the backend holds: past it the kernel kills the process when the
// pages are touched. Nothing here touches the pages it gets.
TEST(MemoryBudget, WithoutABudgetTheMachinesAvailableMemoryBoundsWhatIsHeld) {
  uint64_t avail = availableHostBytes();
  ASSERT_GT(avail, 0u);
  EXPECT_LE(avail, maxTensorBytes());
  CpuBackend cpu;
  auto tooBig = cpu.allocate(avail + 1, BufferKind::Transient);
  ASSERT_FALSE(bool(tooBig));
  EXPECT_NE(llvm::toString(tooBig.takeError()).find("bytes available on this machine"),
            std::string::npos);
  EXPECT_EQ(cpu.allocatedBytes(), 0u);
  // Two allocations of 60% each: the first is held (never touched), the
  // second would pass what is available on top of it.
  size_t part = allocationSize(avail / 10 * 6);
  auto a = cpu.allocate(part, BufferKind::Transient);
  if (!a) // a machine that does not overcommit (vm.overcommit_memory=2)
    GTEST_SKIP() << llvm::toString(a.takeError());
  auto b = cpu.allocate(part, BufferKind::Transient);
  ASSERT_FALSE(bool(b));
  EXPECT_EQ(llvm::toString(b.takeError()),
            "host memory: " + std::to_string(part) + " more bytes on top of the " +
                std::to_string(part) + " this run holds exceed the " + std::to_string(avail) +
                " bytes available on this machine (--max-memory sets another limit)");
  EXPECT_EQ(cpu.allocatedBytes(), part);
  // A budget replaces the machine's figure.
  cpu.setMemoryBudget(~uint64_t(0) >> 1);
  auto c = cpu.allocate(allocationSize(avail / 2), BufferKind::Transient);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  cpu.release(*c);
  cpu.release(*a);
  EXPECT_EQ(cpu.allocatedBytes(), 0u);
}

TEST(MemoryBudget, TheFallbackPassesTheBudgetToItsDevice) {
  auto device = std::make_unique<CpuBackend>();
  CpuBackend *dev = device.get();
  FallbackBackend fb(std::move(device), std::make_unique<CpuBackend>());
  fb.setMemoryBudget(256);
  EXPECT_EQ(dev->memoryBudget(), 256u);
  EXPECT_EQ(fb.memoryBudget(), 256u);
  auto a = fb.allocate(100, BufferKind::Persistent);
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  EXPECT_EQ(fb.allocatedBytes(), 256u);
  auto b = fb.allocate(1, BufferKind::Transient);
  ASSERT_FALSE(bool(b));
  llvm::consumeError(b.takeError());
  uint64_t used = 0, total = 0;
  EXPECT_FALSE(fb.deviceMemoryInfo(used, total)); // host memory: no device figures
  fb.release(*a);
}

// The first run allocates the planned arena and workspace, nothing else.
TEST(MemoryBudget, TheFirstRunAllocatesThePlannedArenaAndWorkspace) {
  auto m = test::parseVerified(R"(
graph @g(%x: f32["n",2]) -> (%y: f32["n",2]) {
  init %w: f32[2,2] = [1, -1, 2, 0.5]
  %h = MatMul(%x, %w) : f32["n",2] name="mm"
  %y = Relu(%h) : f32["n",2] name="relu"
  return %y
})");
  ASSERT_TRUE(m);
  test::QueueBackend b; // asks for a workspace of 8 bytes per element of input 0
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  HostTensor x(DType::F32, {40, 2});
  ASSERT_FALSE(bool((*ex)->plan({{"x", x}})));
  const MemoryStats &ms = (*ex)->memoryStats();
  EXPECT_EQ(ms.workspace, 40u * 2 * 8); // 8 bytes per element of input 0
  size_t held = b.allocatedBytes();
  auto out = (*ex)->run({{"x", x}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(b.allocatedBytes(),
            held + allocationSize(ms.plannedPeak) + allocationSize(ms.workspace));
}

/// A product of n x 1 by 1 x n, each element 4 bytes, larger than the
/// host's memory (maxTensorBytes), and the model summing it to one number
/// (`sum`) or returning it.
std::string hugeProductModel(bool sum) {
  uint64_t n = uint64_t(std::sqrt(double(maxTensorBytes()) / 4.0)) + 2;
  std::string d = std::to_string(n);
  return std::string("graph @g(%a: f32[") + d + ",1], %b: f32[1," + d + "]) -> (%" + (sum ? "y" : "p") + ": f32" +
         (sum ? "[]" : "[" + d + "," + d + "]") + ") {\n  %p = MatMul(%a, %b) : f32[" + d +
         "," + d + "] name=\"outer\"\n" +
         (sum ? "  %y = ReduceSum(%p) {keepdims = 0} : f32[] name=\"total\"\n  return %y\n"
              : "  return %p\n") +
         "}";
}

TEST(MemoryBudget, ADevicesValuesAreBoundedByItsMemoryNotTheHosts) {
  // The 2026-11-26 H200 machine's host had less memory than its GPU: a
  // device value larger than the host's memory reaches the device's own
  // allocation (here QueueBackend's, capped at 1 MiB), while a graph output,
  // copied back to the host, is still bounded by the host's memory.
  for (bool sum : {true, false}) {
    SCOPED_TRACE(sum ? "summed" : "returned");
    auto m = test::parseVerified(hugeProductModel(sum));
    ASSERT_TRUE(m);
    test::QueueBackend b;
    b.cpu.setMemoryBudget(uint64_t(1) << 20);
    auto ex = Executor::create(*m, b);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    int64_t n = (*m).graph->inputs()[0]->type.dims[0].value;
    HostTensor a(DType::F32, {n, 1}), bt(DType::F32, {1, n});
    auto out = (*ex)->run({{"a", a}, {"b", bt}});
    ASSERT_FALSE(bool(out));
    std::string msg = llvm::toString(out.takeError());
    if (sum)
      EXPECT_NE(msg.find("memory budget: "), std::string::npos) << msg;
    else
      EXPECT_NE(msg.find("node 'outer' (MatMul): output 'p': shape"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("this machine's memory") == std::string::npos, sum) << msg;
  }
}

} // namespace
