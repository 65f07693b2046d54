//===- AsyncBackendTest.cpp - The executor on a fake asynchronous backend ---===//
//
// QueueBackend behaves like a device on the CPU: copies and launches are
// queued on the stream and run only when synchronize() drains it, so a
// launch cannot report anything; it prepares a handle per node and shape
// signature that asks for a workspace; runPlan captures a plan the first
// time it sees it and replays the capture afterwards (what CUDA graphs
// need). The kernels are the CPU backend's. The cases check what the
// executor must do for such a backend (docs/backends.md): prepare once per
// signature, own the workspace, hand over whole plans, report a kernel's
// data-dependent error after the run, naming the node, with the CPU
// backend's message, wait once per run, and not at all with deferred errors.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/FallbackBackend.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Text/Text.h"
#include "mpc/Verify/Verifier.h"
#include "gtest/gtest.h"
#include "../runtime/ModelText.h"
#include "QueueBackend.h"
#include <cstring>
#include <set>
#include "llvm/Support/FileSystem.h"
#include <deque>
#include <functional>
#include <map>

using namespace mpc;
using mpc::test::QueueBackend;

namespace {


std::unique_ptr<Model> parse(llvm::StringRef text) { return test::parseVerified(text); }

HostTensor floats(std::vector<int64_t> shape, float first) {
  HostTensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = first + float(i);
  return t;
}

HostTensor ints(std::vector<int64_t> shape, std::vector<int64_t> v) {
  HostTensor t(DType::I64, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// y = Relu(x @ w) + 1 with a batch dimension that changes between runs.
const char kMlp[] = R"(
graph @g(%x: f32["n",2]) -> (%y: f32["n",2]) {
  init %w: f32[2,2] = [1, -1, 2, 0.5]
  init %one: f32[] = [1]
  %h = MatMul(%x, %w) : f32["n",2] name="mm"
  %r = Relu(%h) : f32["n",2] name="relu"
  %y = Add(%r, %one) : f32["n",2] name="add"
  return %y
})";

std::vector<float> expectedMlp(const HostTensor &x) {
  std::vector<float> y;
  const float *p = x.data<float>();
  for (int64_t r = 0; r < x.shape[0]; ++r) {
    float a = p[2 * r], b = p[2 * r + 1];
    y.push_back(std::max(0.f, a * 1 + b * 2) + 1);
    y.push_back(std::max(0.f, a * -1 + b * 0.5f) + 1);
  }
  return y;
}

std::vector<float> values(const HostTensor &t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numElements());
}

} // namespace

TEST(AsyncBackend, PreparedOncePerShapeSignature) {
  auto m = parse(kMlp);
  ASSERT_TRUE(m);
  QueueBackend b;
  {
    auto ex = Executor::create(*m, b);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    EXPECT_EQ(b.prepares, 0u); // no shapes yet
    EXPECT_EQ(b.streams, 1);
    for (int run = 0; run < 3; ++run) {
      HostTensor x = floats({3, 2}, float(run) - 2);
      auto out = (*ex)->run({{"x", x}});
      ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
      EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x));
    }
    EXPECT_EQ(b.prepares, 3u);
    EXPECT_EQ(b.lastSignature["mm"], (std::vector<int64_t>{3, 2}));
    // A new batch size is a new signature for every node.
    HostTensor x5 = floats({5, 2}, -4);
    auto out = (*ex)->run({{"x", x5}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x5));
    EXPECT_EQ(b.prepares, 6u);
    EXPECT_EQ(b.preparesOf["relu"], 2u);
    EXPECT_EQ(b.lastSignature["mm"], (std::vector<int64_t>{5, 2}));
    EXPECT_EQ(b.live, 3); // the handles of the old signature were given back
    // The same shapes again: nothing to prepare.
    out = (*ex)->run({{"x", x5}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(b.prepares, 6u);
  }
  EXPECT_EQ(b.live, 0);
  EXPECT_EQ(b.streams, 0);
}

TEST(AsyncBackend, StaticPlansAreCapturedOnceAndReplayed) {
  auto m = parse(kMlp);
  ASSERT_TRUE(m);
  QueueBackend b;
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  for (int run = 0; run < 4; ++run) {
    // New values each run: a replay reads the inputs copied in this run.
    HostTensor x = floats({2, 2}, float(3 * run) - 5);
    auto out = (*ex)->run({{"x", x}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x)) << "run " << run;
  }
  EXPECT_EQ(b.captures, 1u);
  EXPECT_EQ(b.replays, 3u);
  EXPECT_EQ(b.launches, 12u);
  // Work was still queued when runPlan returned: the executor waits after.
  EXPECT_GT(b.queuedAfterRunPlan, 0u);
  // A new plan (new shapes) is captured again.
  HostTensor x = floats({4, 2}, 1);
  auto out = (*ex)->run({{"x", x}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x));
  EXPECT_EQ(b.captures, 2u);
}

// A bound input that moves to another buffer (the trainer swaps double
// buffers every step) gives the plan another version: a capture taken with
// one address is never replayed with another. Moving back to an address seen
// before gives back its version, so the capture taken with it is replayed
// (a double-buffered training step alternates between two captures).
TEST(AsyncBackend, AMovedBoundBufferIsCapturedAgain) {
  auto m = parse(kMlp);
  ASSERT_TRUE(m);
  QueueBackend b;
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  HostTensor xa = floats({2, 2}, -1), xc = floats({2, 2}, 3);
  auto a = b.allocate(xa.byteSize(), BufferKind::Persistent);
  auto c = b.allocate(xc.byteSize(), BufferKind::Persistent);
  ASSERT_TRUE(a && c);
  // The fake device's memory is the host's.
  std::memcpy(a->data, xa.bytes.data(), xa.byteSize());
  std::memcpy(c->data, xc.bytes.data(), xc.byteSize());
  auto runBoundTo = [&](const DeviceBuffer &buf, const HostTensor &x, const char *what) {
    llvm::Error err = (*ex)->bindInput("x", TensorRef{DType::F32, {2, 2}, buf.data});
    ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
    auto out = (*ex)->run({});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x)) << what;
  };
  runBoundTo(*a, xa, "first run, buffer a");
  runBoundTo(*a, xa, "same buffer");
  EXPECT_EQ(b.captures, 1u);
  EXPECT_EQ(b.replays, 1u);
  runBoundTo(*c, xc, "moved to buffer c");
  EXPECT_EQ(b.captures, 2u);
  // Back to a, with new contents: a's capture is replayed and reads them.
  HostTensor xa2 = floats({2, 2}, 7);
  std::memcpy(a->data, xa2.bytes.data(), xa2.byteSize());
  runBoundTo(*a, xa2, "moved back to buffer a");
  runBoundTo(*c, xc, "moved back to buffer c");
  EXPECT_EQ(b.captures, 2u);
  EXPECT_EQ(b.replays, 3u);
  b.release(*a);
  b.release(*c);
}

namespace {
// Two Gathers by the same indices, from a four-row and a three-row table;
// the Relus after them run on whatever a failed Gather left.
const char kGathers[] = R"(
graph @g(%i: i64[2]) -> (%y: f32[2,2], %z: f32[2,2]) {
  init %d: f32[4,2] = [1, 2, 3, 4, 5, 6, 7, 8]
  init %e: f32[3,2] = [1, 2, 3, 4, 5, 6]
  %a = Gather(%d, %i) {axis = 0} : f32[2,2] name="first"
  %y = Relu(%a) : f32[2,2] name="relu"
  %b = Gather(%e, %i) {axis = 0} : f32[2,2] name="second"
  %z = Relu(%b) : f32[2,2] name="relu2"
  return %y, %z
})";

/// kGathers on `q` as the trainer runs its steps: deferred errors, both
/// outputs bound to buffers of q, planned by a first run, drained.
struct DeferredGathers {
  std::unique_ptr<Model> model;
  std::unique_ptr<Executor> ex;
  DeviceBuffer y, z; ///< the bound outputs
  void setUp(QueueBackend &q) {
    model = parse(kGathers);
    ASSERT_TRUE(model);
    auto created = Executor::create(*model, q);
    ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
    Executor &e = **created;
    e.setDeferredErrors(true);
    for (DeviceBuffer *out : {&y, &z}) {
      auto buf = q.allocate(16, BufferKind::Persistent);
      ASSERT_TRUE(bool(buf));
      *out = *buf;
      TensorRef r;
      r.dtype = DType::F32;
      r.shape = {2, 2};
      r.data = buf->data;
      ASSERT_FALSE(bool(e.bindOutput(out == &y ? "y" : "z", r)));
    }
    ASSERT_TRUE(bool(e.run({{"i", ints({2}, {1, 0})}}))); // plans
    q.drain();
    ex = std::move(*created);
  }
};

/// The message of a run of kGathers with indices `idx` on `backend`.
std::string gatherError(Backend &backend, std::vector<int64_t> idx) {
  auto m = parse(kGathers);
  if (!m)
    return "parse failed";
  auto ex = Executor::create(*m, backend);
  if (!ex)
    return llvm::toString(ex.takeError());
  auto out = (*ex)->run({{"i", ints({2}, idx)}});
  return out ? "" : llvm::toString(out.takeError());
}
} // namespace

TEST(AsyncBackend, KernelErrorsAreReportedAfterTheRunNamingTheNode) {
  QueueBackend q;
  CpuBackend cpu;
  // Index 3 is out of range for the second Gather only.
  std::string msg = gatherError(q, {0, 3});
  EXPECT_EQ(msg, "node 'second' (Gather): index 3 out of range for [3, 2]");
  EXPECT_EQ(msg, gatherError(cpu, {0, 3})); // the CPU backend's words exactly
  // Nothing had run when runPlan returned, and every launch was queued: the
  // error could only come from the record read after the run.
  EXPECT_EQ(q.launches, 4u);
  EXPECT_GE(q.queuedAfterRunPlan, 4u);
  // Out of range for both: the first launch's error wins.
  msg = gatherError(q, {-5, 1});
  EXPECT_EQ(msg, "node 'first' (Gather): index -5 out of range for [4, 2]");
  EXPECT_EQ(msg, gatherError(cpu, {-5, 1}));
  EXPECT_EQ(gatherError(q, {1, 2}), "");
}

TEST(AsyncBackend, ARunAfterAnErrorStartsWithAClearRecord) {
  auto m = parse(kGathers);
  ASSERT_TRUE(m);
  QueueBackend b;
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  auto bad = (*ex)->run({{"i", ints({2}, {7, 0})}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "node 'first' (Gather): index 7 out of range for [4, 2]");
  auto good = (*ex)->run({{"i", ints({2}, {2, 0})}});
  ASSERT_TRUE(bool(good)) << llvm::toString(good.takeError());
  EXPECT_EQ(values((*good)[0].tensor), (std::vector<float>{5, 6, 1, 2}));
  EXPECT_EQ(values((*good)[1].tensor), (std::vector<float>{5, 6, 1, 2}));
}

// The record is cleared before each run by a copy queued from the readback
// channel's host memory (page-locked on a GPU, so queued without staging),
// always the same cleared record, which nothing writes again.
TEST(AsyncBackend, TheRecordIsClearedFromTheChannelsHostMemory) {
  auto m = parse(kGathers);
  ASSERT_TRUE(m);
  QueueBackend b;
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  for (int run = 1; run <= 3; ++run) {
    auto bad = (*ex)->run({{"i", ints({2}, {run == 2 ? 9 : 1, 0})}});
    EXPECT_EQ(bool(bad), run != 2) << "run " << run;
    if (!bad)
      llvm::consumeError(bad.takeError());
    EXPECT_EQ(b.uploads, uint64_t(2 * run)); // the input, then the record
  }
  ASSERT_EQ(b.uploadSources.size(), 6u);
  EXPECT_EQ(b.uploadSources[1], b.uploadSources[3]);
  EXPECT_EQ(b.uploadSources[1], b.uploadSources[5]);
  KernelErrorRecord cleared;
  EXPECT_EQ(std::memcmp(b.uploadSources[1], &cleared, sizeof(cleared)), 0);
}

// The inputs a run copies go through a ring of slots in the channel's host
// memory (page-locked on a GPU): queued runs keep their own inputs, five slots
// let five runs be queued ahead without waiting, and a sixth waits for the
// oldest slot's copies, not for the whole queue.
TEST(AsyncBackend, InputsAreStagedThroughARingOfTheChannelsHostMemory) {
  QueueBackend q;
  DeferredGathers d;
  d.setUp(q);
  ASSERT_TRUE(d.ex);
  Executor &e = *d.ex;
  // Seven runs queued; only the sixth reads an index the second Gather
  // ([3, 2]) does not have.
  const size_t runs = 7;
  std::vector<KernelErrorRecord> records(runs);
  std::vector<uint64_t> waited;
  size_t sourcesBefore = q.uploadSources.size();
  for (size_t r = 0; r < runs; ++r) {
    uint64_t w = q.waits;
    auto out = e.run({{"i", ints({2}, {r == 5 ? 3 : int64_t(r % 3), 0})}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    waited.push_back(q.waits - w);
    q.copyToHost(&records[r], e.errorRecord(), sizeof(KernelErrorRecord), e.executionStream());
  }
  // The planning run took slot 0 (reached: drained); runs 0-4 take slots
  // 1-4 and 0 without waiting; runs 5 and 6 take slots 1 and 2 again, each
  // after the copies of the run that used it (runs 0 and 1) were done.
  EXPECT_EQ(waited, (std::vector<uint64_t>{0, 0, 0, 0, 0, 1, 1}));
  q.drain();
  for (size_t r = 0; r < runs; ++r)
    EXPECT_EQ(records[r].code != 0, r == 5) << "run " << r;
  // Each run uploads its input (from the ring's five slots in turn), then the
  // cleared record (always the same).
  ASSERT_EQ(q.uploadSources.size() - sourcesBefore, 2 * runs);
  std::set<const void *> slotsUsed;
  for (size_t r = 0; r < runs; ++r) {
    slotsUsed.insert(q.uploadSources[sourcesBefore + 2 * r]);
    EXPECT_EQ(q.uploadSources[sourcesBefore + 2 * r + 1], q.uploadSources[sourcesBefore + 1]);
  }
  EXPECT_EQ(slotsUsed.size(), 5u);
  q.release(d.y);
  q.release(d.z);
}

// A run that returns its outputs to the host waits for the device once, at
// its end: the error record travels with the outputs.
TEST(AsyncBackend, ARunWaitsOnceAtItsEnd) {
  auto m = parse(kGathers);
  ASSERT_TRUE(m);
  QueueBackend q;
  auto ex = Executor::create(*m, q);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  ASSERT_TRUE(bool((*ex)->run({{"i", ints({2}, {1, 0})}}))); // plans
  for (auto idx : {std::vector<int64_t>{2, 1}, std::vector<int64_t>{0, 9}}) {
    uint64_t w = q.waits, s = q.syncCalls;
    auto out = (*ex)->run({{"i", ints({2}, idx)}});
    EXPECT_EQ(q.waits - w, 1u);
    EXPECT_EQ(q.syncCalls - s, 1u);
    if (idx[1] == 9) {
      ASSERT_FALSE(bool(out));
      EXPECT_EQ(llvm::toString(out.takeError()),
                "node 'first' (Gather): index 9 out of range for [4, 2]");
    } else {
      ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
      EXPECT_EQ(values((*out)[1].tensor), (std::vector<float>{5, 6, 3, 4}));
    }
  }
}

// --profile times each node from its launch to a wait for it: nothing else
// may still be queued then, or the first node's time holds the inputs'
// uploads (on a GPU the 8192 x 8192 MatMul's node time held 256 MiB of
// copies). The results are the same.
TEST(AsyncBackend, ProfiledNodesStartOnAnEmptyQueue) {
  auto m = parse(kMlp);
  ASSERT_TRUE(m);
  QueueBackend b;
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  (*ex)->setProfiling(true);
  for (int run = 0; run < 2; ++run) {
    HostTensor x = floats({3, 2}, float(run) - 1);
    b.queuedAtLaunch.clear();
    auto out = (*ex)->run({{"x", x}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x));
    EXPECT_EQ(b.queuedAtLaunch, (std::vector<size_t>{0, 0, 0})) << "run " << run;
  }
  ASSERT_EQ((*ex)->nodeSeconds().size(), 3u);
}

// Deferred errors (the trainer's steps): a run whose outputs are bound to
// backend memory returns without waiting; the record copied behind each run
// names the failing node of that run, whichever runs came after it.
TEST(AsyncBackend, DeferredErrorsAreReadFromACopyBehindTheRun) {
  QueueBackend q;
  DeferredGathers d;
  d.setUp(q);
  ASSERT_TRUE(d.ex);
  Executor &e = *d.ex;
  // Three runs queued back to back, the second one failing; a copy of the
  // record behind each.
  std::vector<std::vector<int64_t>> idx = {{2, 1}, {0, 3}, {1, 1}};
  KernelErrorRecord copies[3];
  uint64_t w = q.waits;
  for (size_t r = 0; r < idx.size(); ++r) {
    auto out = e.run({{"i", ints({2}, idx[r])}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    q.copyToHost(&copies[r], e.errorRecord(), sizeof(KernelErrorRecord),
                 e.executionStream());
  }
  EXPECT_EQ(q.waits, w) << "a deferred run waited";
  EXPECT_EQ(copies[1].code, 0) << "nothing has run yet";
  q.drain();
  uint64_t gen = e.callsGeneration();
  EXPECT_FALSE(bool(e.recordError(copies[0], gen)));
  llvm::Error err = e.recordError(copies[1], gen);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "node 'second' (Gather): index 3 out of range for [3, 2]");
  EXPECT_FALSE(bool(e.recordError(copies[2], gen)));
  // The last run computed its outputs from a clear record.
  float got[4];
  std::memcpy(got, d.z.data, sizeof(got));
  EXPECT_EQ(std::vector<float>(got, got + 4), (std::vector<float>{3, 4, 3, 4}));
  // A record of an earlier plan no longer names a node.
  ASSERT_FALSE(bool(e.plan({{"i", ints({2}, {0, 0})}})));
  ASSERT_TRUE(bool(e.run({{"i", ints({2}, {0, 0})}})));
  q.drain();
  err = e.recordError(copies[1], gen);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "a kernel of an earlier plan failed (error code 1)");
  q.release(d.y);
  q.release(d.z);
}

TEST(AsyncBackend, DynamicModeReportsTheFailingNode) {
  // NonZero makes the graph run node by node; its result indexes a
  // three-row table, out of range for the last non-zero position (4).
  auto m = parse(R"(
graph @g(%x: f32[5]) -> (%y: f32["k",2]) {
  init %d: f32[3,2] = [1, 2, 3, 4, 5, 6]
  %nz = NonZero(%x) : i64[1,"k"] name="nz"
  %flat = Squeeze(%nz) : i64["k"] name="sq"
  %y = Gather(%d, %flat) {axis = 0} : f32["k",2] name="pick"
  return %y
})");
  ASSERT_TRUE(m);
  QueueBackend b;
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  ASSERT_TRUE((*ex)->isDynamic());
  HostTensor x(DType::F32, {5});
  std::vector<float> xs = {0, 1, 0, 0, 2};
  std::copy(xs.begin(), xs.end(), x.data<float>());
  auto out = (*ex)->run({{"x", x}});
  ASSERT_FALSE(out);
  EXPECT_EQ(llvm::toString(out.takeError()),
            "node 'pick' (Gather): index 4 out of range for [3, 2]");
  xs = {0, 1, 3, 0, 0};
  std::copy(xs.begin(), xs.end(), x.data<float>());
  out = (*ex)->run({{"x", x}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(values((*out)[0].tensor), (std::vector<float>{3, 4, 5, 6}));
}

TEST(AsyncBackend, ErrorsTheKernelsReturnTravelTheSameWay) {
  // CumSum checks an axis it reads from its input when it runs and returns an error
  // (KernelErrorCode::Message): reported after the run as well, with the
  // CPU backend's message.
  const char text[] = R"(
graph @g(%i: i64[1]) -> (%y: f32[3,2]) {
  init %d: f32[3,2] = [1, 2, 3, 4, 5, 6]
  %s = CumSum(%d, %i) : f32[3,2] name="se"
  %y = Relu(%s) : f32[3,2] name="relu"
  return %y
})";
  std::vector<std::string> messages;
  QueueBackend q;
  CpuBackend cpu;
  for (Backend *b : std::initializer_list<Backend *>{&q, &cpu}) {
    auto m = parse(text);
    ASSERT_TRUE(m);
    auto ex = Executor::create(*m, *b);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    auto out = (*ex)->run({{"i", ints({1}, {5})}});
    ASSERT_FALSE(out);
    messages.push_back(llvm::toString(out.takeError()));
  }
  EXPECT_EQ(messages[0], "node 'se' (CumSum): axis out of range for [3, 2]");
  EXPECT_EQ(messages[0], messages[1]);
  EXPECT_GE(q.queuedAfterRunPlan, 2u);
}

//===----------------------------------------------------------------------===//
// FallbackBackend: the queue device with gaps, the CPU backend behind it
//===----------------------------------------------------------------------===//

namespace {
/// A FallbackBackend over a QueueBackend that runs the ops named; `queue`
/// points at that device.
std::unique_ptr<FallbackBackend> fallbackOver(std::set<std::string> ops, QueueBackend *&queue) {
  auto q = std::make_unique<QueueBackend>();
  q->only = [ops](const Node &n) { return ops.count(n.opType) || ops.count(n.name); };
  queue = q.get();
  return std::make_unique<FallbackBackend>(std::move(q), std::make_unique<CpuBackend>());
}
} // namespace

TEST(FallbackBackend, HostNodesRunBetweenDeviceNodesInStreamOrder) {
  auto m = parse(kMlp);
  ASSERT_TRUE(m);
  QueueBackend *q;
  auto fb = fallbackOver({"MatMul", "Add"}, q);
  auto ex = Executor::create(*m, *fb);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  for (int run = 0; run < 3; ++run) {
    // The queue runs nothing until synchronized: Relu on the host reads
    // MatMul's result only because the fallback waits for it.
    HostTensor x = floats({3, 2}, float(2 * run) - 3);
    auto out = (*ex)->run({{"x", x}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x)) << "run " << run;
  }
  EXPECT_EQ(q->launches, 6u); // MatMul and Add, three runs
  EXPECT_EQ(fb->partitionLine(), "queue: 2 nodes; cpu fallback: 1 node (Relu x1)");
  FallbackBackend::Partition p = fb->partition();
  EXPECT_EQ(p.deviceNodes, 2u);
  EXPECT_EQ(p.hostNodes, 1u);
}

TEST(FallbackBackend, EveryNodeOnOneSide) {
  for (bool onDevice : {true, false}) {
    auto m = parse(kMlp);
    ASSERT_TRUE(m);
    QueueBackend *q;
    auto fb = fallbackOver(onDevice ? std::set<std::string>{"MatMul", "Relu", "Add"}
                                    : std::set<std::string>{},
                           q);
    auto ex = Executor::create(*m, *fb);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    HostTensor x = floats({4, 2}, -3);
    auto out = (*ex)->run({{"x", x}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x));
    EXPECT_EQ(fb->partitionLine(), onDevice ? "queue: 3 nodes; cpu fallback: none"
                                            : "queue: 0 nodes; cpu fallback: 3 nodes "
                                              "(Add x1, MatMul x1, Relu x1)");
  }
}

TEST(FallbackBackend, HostErrorsTakeTheirPlaceInTheRunsRecord) {
  auto m = parse(kGathers);
  ASSERT_TRUE(m);
  CpuBackend cpu;
  // Both gathers fail for {-5, 7}; the first node's error wins whichever side
  // ran it, with the CPU backend's words.
  for (const char *deviceNode : {"first", "second"}) {
    SCOPED_TRACE(deviceNode);
    QueueBackend *q;
    auto fb = fallbackOver({deviceNode}, q);
    EXPECT_EQ(gatherError(*fb, {-5, 7}), gatherError(cpu, {-5, 7}));
    EXPECT_EQ(gatherError(*fb, {-5, 7}), "node 'first' (Gather): index -5 out of range for [4, 2]");
    // Only the second fails.
    EXPECT_EQ(gatherError(*fb, {0, 3}), "node 'second' (Gather): index 3 out of range for [3, 2]");
    EXPECT_EQ(gatherError(*fb, {1, 2}), "");
  }
}

TEST(FallbackBackend, MessagesOfHostKernelsTravelTheSameWay) {
  auto m = parse(R"(
graph @g(%i: i64[1]) -> (%y: f32[3,2]) {
  init %d: f32[3,2] = [1, 2, 3, 4, 5, 6]
  %s = CumSum(%d, %i) : f32[3,2] name="se"
  %y = Relu(%s) : f32[3,2] name="relu"
  return %y
})");
  ASSERT_TRUE(m);
  QueueBackend *q;
  auto fb = fallbackOver({"Relu"}, q);
  auto ex = Executor::create(*m, *fb);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  for (int run = 0; run < 2; ++run) {
    auto out = (*ex)->run({{"i", ints({1}, {5})}});
    ASSERT_FALSE(out);
    EXPECT_EQ(llvm::toString(out.takeError()),
              "node 'se' (CumSum): axis out of range for [3, 2]");
  }
}

TEST(FallbackBackend, ANodeNeitherSideRunsIsRefusedByName) {
  auto m = parse(kMlp);
  ASSERT_TRUE(m);
  // The host is a queue device too, with no Relu either.
  auto dev = std::make_unique<QueueBackend>(), host = std::make_unique<QueueBackend>();
  dev->only = [](const Node &n) { return n.opType == "MatMul"; };
  host->only = [](const Node &n) { return n.opType == "Add"; };
  FallbackBackend fb(std::move(dev), std::move(host));
  auto ex = Executor::create(*m, fb);
  ASSERT_FALSE(ex);
  EXPECT_EQ(llvm::toString(ex.takeError()),
            "unsupported op Relu (domain 'ai.onnx', opset 17, input type f32) at node 'relu' "
            "(Relu): the queue backend has no kernel for it");
}

// Every shipped model, with the device running only element-wise ops and
// matrix products (as the CUDA backend does today): the same bits as the CPU
// backend alone, since the host nodes run the same kernels on the same values.
TEST(FallbackBackend, ShippedModelsGiveTheCpuBackendsBits) {
  std::error_code ec;
  std::vector<std::string> files;
  for (llvm::sys::fs::directory_iterator it(MPC_SOURCE_DIR "/models", ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::StringRef(it->path()).endswith(".onnx"))
      files.push_back(it->path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 7u);
  const std::set<std::string> deviceOps = {"MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu",
                                           "Tanh", "Sigmoid", "Cast", "Erf", "Sqrt", "Pow"};
  for (const std::string &file : files) {
    SCOPED_TRACE(file);
    std::vector<std::vector<NamedTensor>> results;
    std::string line;
    for (bool fallback : {false, true}) {
      auto m = importOnnxFile(file);
      ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
      std::unique_ptr<Backend> b;
      QueueBackend *q = nullptr;
      std::unique_ptr<FallbackBackend> fb;
      if (fallback)
        fb = fallbackOver(deviceOps, q);
      else
        b = std::make_unique<CpuBackend>();
      Backend &backend = fallback ? static_cast<Backend &>(*fb) : *b;
      auto ex = Executor::create(**m, backend);
      ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
      std::vector<NamedTensor> in;
      uint32_t state = 12345;
      for (const Value *v : (*m)->graph->inputs()) {
        if (v->initializer())
          continue; // a graph input with a default
        std::vector<int64_t> shape;
        for (const Dim &d : v->type.dims)
          shape.push_back(d.isKnown() ? d.value : 2);
        HostTensor t(v->type.elem, shape);
        for (int64_t i = 0; i < t.numElements(); ++i) {
          state = state * 1664525u + 1013904223u;
          if (t.dtype == DType::F32)
            t.data<float>()[i] = float(state >> 8) / float(1 << 24) * 2 - 1;
          else if (t.dtype == DType::I64)
            t.data<int64_t>()[i] = int64_t(state >> 28) % 3;
        }
        in.push_back({v->name(), std::move(t)});
      }
      auto out = (*ex)->run(in);
      ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
      results.push_back(std::move(*out));
      if (fb)
        line = fb->partitionLine();
    }
    EXPECT_NE(line.find("cpu fallback"), std::string::npos) << line;
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t k = 0; k < results[0].size(); ++k) {
      const HostTensor &a = results[0][k].tensor, &b = results[1][k].tensor;
      ASSERT_EQ(a.shape, b.shape);
      ASSERT_EQ(a.dtype, b.dtype);
      EXPECT_EQ(a.bytes, b.bytes)
          << results[0][k].name << " (" << line << ")";
    }
  }
}

TEST(FallbackBackend, APlanWithoutHostNodesReachesTheDeviceWhole) {
  for (bool gap : {false, true}) {
    SCOPED_TRACE(gap ? "Relu on the host" : "every node on the device");
    auto m = parse(kMlp);
    ASSERT_TRUE(m);
    QueueBackend *q;
    auto fb = fallbackOver(gap ? std::set<std::string>{"MatMul", "Add"}
                               : std::set<std::string>{"MatMul", "Relu", "Add"},
                           q);
    auto ex = Executor::create(*m, *fb);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    for (int run = 0; run < 3; ++run) {
      HostTensor x = floats({2, 2}, float(run) - 1);
      auto out = (*ex)->run({{"x", x}});
      ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
      EXPECT_EQ(values((*out)[0].tensor), expectedMlp(x)) << "run " << run;
    }
    // Whole: captured once and replayed (a CUDA graph could be); with a host
    // node: launched one by one, nothing captured.
    EXPECT_EQ(q->captures, gap ? 0u : 1u);
    EXPECT_EQ(q->replays, gap ? 0u : 2u);
    EXPECT_EQ(q->launches, gap ? 6u : 9u);
  }
}
