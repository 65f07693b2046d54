//===- OptimizerPlanTest.cpp - The multi-tensor optimizer step's host decisions -===//
//
// OptimizerPlan.h without a GPU: the pointer table's slots for each kind,
// and the chunk table replayed on the host as the launch walks it (blocks
// in a scrambled order, threads striding a chunk) with the kernel's own
// per-element body: every element of every group is updated exactly once,
// and the results are bit for bit those of the per-parameter step's body
// run over each parameter alone (and, skipped, the inputs). Also the rows
// of the CUDA kernel table for MultiTensor*Step.
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/Ops/OptimizerStep.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/OptimizerPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;
using kernels::OptimizerStepKind;

namespace {

void *fake(uintptr_t v) { return reinterpret_cast<void *>(v); }

TEST(OptimizerPlan, PointerTableSlotsPerKind) {
  // Adam: 8 scalars, decay, skip, then (param, grad, m, v) twice.
  const OptimizerStepLayout &adam = optimizerStepLayouts()[2];
  std::vector<void *> ins(adam.multiFirstGroup(), nullptr);
  for (uintptr_t v = 100; v < 108; ++v)
    ins.push_back(fake(v));
  std::vector<void *> outs = {fake(200), fake(201), fake(202), fake(203), fake(204), fake(205)};
  std::vector<void *> t = stepPointerTable(2, adam.multiFirstGroup(), ins, outs);
  ASSERT_EQ(t.size(), 2u * kStepSlots);
  std::vector<void *> want = {fake(100), fake(101), fake(102), fake(103),
                              fake(200), fake(201), fake(202), // group 0
                              fake(104), fake(105), fake(106), fake(107),
                              fake(203), fake(204), fake(205)}; // group 1
  EXPECT_EQ(t, want);
  // SGD: (param, grad) groups, no state slots.
  std::vector<void *> sgdIns = {nullptr, nullptr, nullptr, fake(1), fake(2), fake(3), fake(4)};
  std::vector<void *> sgd = stepPointerTable(0, 3, sgdIns, {fake(9), fake(10)});
  std::vector<void *> wantSgd = {fake(1), fake(2), nullptr, nullptr, fake(9), nullptr, nullptr,
                                 fake(3), fake(4), nullptr, nullptr, fake(10), nullptr, nullptr};
  EXPECT_EQ(sgd, wantSgd);
  // Not whole groups, or outputs that do not match: no table.
  EXPECT_TRUE(stepPointerTable(0, 3, {nullptr, nullptr, nullptr, fake(1)}, {fake(9)}).empty());
  EXPECT_TRUE(stepPointerTable(0, 3, sgdIns, {fake(9)}).empty());
  EXPECT_TRUE(stepPointerTable(0, 3, {nullptr, nullptr, nullptr}, {}).empty());
  EXPECT_TRUE(stepPointerTable(3, 0, {}, {}).empty());
}

TEST(OptimizerPlan, ChunksAreThoseOfTheUnscalePlan) {
  UnscalePlan p, u;
  ASSERT_TRUE(planMultiTensorStep({10, 0, 4097}, 2, p, 8));
  ASSERT_TRUE(planUnscale({10, 0, 4097}, {kOnnxF32, kOnnxF32, kOnnxF32}, 2, u, 8));
  ASSERT_EQ(p.chunks.size(), u.chunks.size());
  for (size_t i = 0; i < p.chunks.size(); ++i)
    EXPECT_EQ(std::memcmp(&p.chunks[i], &u.chunks[i], sizeof(UnscaleChunk)), 0);
  EXPECT_EQ(p.blocks, u.blocks);
  EXPECT_FALSE(planMultiTensorStep({-1}, 2, p));
}

/// One group's tensors: param, grad, two states in; their outputs.
struct Group {
  std::vector<float> p, g, s1, s2, po, s1o, s2o;
};

std::vector<Group> makeGroups(const std::vector<int64_t> &sizes, bool nanGrads) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<Group> gs;
  for (int64_t n : sizes) {
    Group g;
    for (auto *v : {&g.p, &g.g, &g.s1, &g.s2}) {
      v->resize(size_t(n));
      for (float &x : *v)
        x = d(rng);
    }
    for (float &x : g.s2)
      x = std::fabs(x); // Adam's v is non-negative
    if (nanGrads && n > 0)
      g.g[0] = std::nanf("");
    g.po.assign(size_t(n), -7.0f);
    g.s1o.assign(size_t(n), -7.0f);
    g.s2o.assign(size_t(n), -7.0f);
    gs.push_back(std::move(g));
  }
  return gs;
}

kernels::OptimizerScalars<float> scalars(OptimizerStepKind kind) {
  static const float values[] = {0.003f, 0.9f, 0.999f, 0.1f, 0.001f, 1e-8f, 0.271f, 0.0297f};
  const float *ptrs[kernels::kMaxOptimizerScalars];
  for (unsigned i = 0; i < kernels::kMaxOptimizerScalars; ++i)
    ptrs[i] = &values[i];
  static const float decay = 0.01f;
  return kernels::optimizerScalarsFrom(kind, ptrs, &decay);
}

/// The launches on the host, as launchMultiTensorStep makes them: one per
/// slice of at most `maxPointers` pointers (its pointers by value), the
/// slices last to first; in a launch, blocks run last to first, each taking
/// the slice's chunks b, b + blocks, ...; `threads` threads stride each chunk.
void replay(const UnscalePlan &plan, const std::vector<void *> &table, OptimizerStepKind kind,
            bool skip, unsigned threads, int32_t maxPointers,
            std::vector<std::vector<int>> &seen) {
  kernels::OptimizerScalars<float> s = scalars(kind);
  int32_t groups = int32_t(table.size() / kStepSlots);
  std::vector<LaunchSlice> slices = sliceLaunches(plan, groups, kStepSlots, maxPointers);
  ASSERT_FALSE(slices.empty());
  for (size_t k = slices.size(); k-- > 0;) {
    const LaunchSlice &slice = slices[k];
    const LaunchPointers p = launchPointers(table, slice, kStepSlots);
    const UnscaleChunk *chunks = plan.chunks.data() + slice.firstChunk;
    unsigned blocks = std::min(plan.blocks, unsigned(slice.chunks));
    for (unsigned b = blocks; b-- > 0;)
      for (int32_t c = int32_t(b); c < slice.chunks; c += int32_t(blocks)) {
        const UnscaleChunk &ch = chunks[c];
        void *const *slots = chunkPointers(p, ch, slice.firstTensor, kStepSlots);
        for (unsigned t = 0; t < threads; ++t)
          for (int64_t i = ch.begin + t; i < ch.begin + ch.length; i += threads) {
            multiTensorStepElement(kind, s, skip, slots, i);
            ++seen[size_t(ch.tensor)][size_t(i)];
          }
      }
  }
}

void checkReplay(OptimizerStepKind kind, bool skip) {
  SCOPED_TRACE(int(kind) * 2 + int(skip));
  std::vector<int64_t> sizes = {17, 0, 64, 130, 1, 300};
  std::vector<Group> gs = makeGroups(sizes, skip);
  unsigned states = kind == OptimizerStepKind::Sgd ? 0 : kind == OptimizerStepKind::Momentum ? 1 : 2;
  std::vector<void *> ins(3, nullptr), outs;
  for (Group &g : gs) {
    ins.push_back(g.p.data());
    ins.push_back(g.g.data());
    outs.push_back(g.po.data());
    if (states > 0) {
      ins.push_back(g.s1.data());
      outs.push_back(g.s1o.data());
    }
    if (states > 1) {
      ins.push_back(g.s2.data());
      outs.push_back(g.s2o.data());
    }
  }
  std::vector<void *> table = stepPointerTable(states, 3, ins, outs);
  ASSERT_EQ(table.size(), sizes.size() * kStepSlots);
  UnscalePlan plan;
  ASSERT_TRUE(planMultiTensorStep(sizes, 1, plan, 32));
  plan.blocks = 3; // fewer blocks than chunks: each walks several
  std::vector<std::vector<int>> seen;
  for (int64_t n : sizes)
    seen.emplace_back(size_t(n), 0);
  // 2 groups to a launch: 3 launches for the 6 groups.
  replay(plan, table, kind, skip, 5, 2 * kStepSlots + 1, seen);
  kernels::OptimizerScalars<float> s = scalars(kind);
  for (size_t t = 0; t < gs.size(); ++t)
    for (size_t i = 0; i < size_t(sizes[t]); ++i) {
      ASSERT_EQ(seen[t][i], 1) << "group " << t << " element " << i;
      // The per-parameter body on this parameter alone (or, skipped, the input).
      float p = gs[t].p[i], a = gs[t].s1[i], b = gs[t].s2[i];
      if (!skip)
        kernels::optimizerStepElement(kind, s, gs[t].g[i], p, a, b);
      EXPECT_EQ(std::memcmp(&p, &gs[t].po[i], 4), 0) << "param, group " << t << " element " << i;
      if (states > 0)
        EXPECT_EQ(std::memcmp(&a, &gs[t].s1o[i], 4), 0) << "state 1, group " << t;
      else
        EXPECT_EQ(gs[t].s1o[i], -7.0f); // untouched
      if (states > 1)
        EXPECT_EQ(std::memcmp(&b, &gs[t].s2o[i], 4), 0) << "state 2, group " << t;
      else
        EXPECT_EQ(gs[t].s2o[i], -7.0f);
    }
}

TEST(OptimizerPlan, ReplayedOnTheHostUpdatesEveryElementOnceAsThePerParameterStep) {
  for (OptimizerStepKind k :
       {OptimizerStepKind::Sgd, OptimizerStepKind::Momentum, OptimizerStepKind::Adam}) {
    checkReplay(k, false);
    checkReplay(k, true); // NaN gradients, skipped: the inputs bit for bit
  }
}

struct MultiStepRow : ModelFixture {
  Node *node(const char *op, std::vector<DType> ins) {
    m.opsets.push_back({"ai.mpc.training", 1});
    Node *n = g->createNode(op);
    n->name = "multi";
    n->domain = "ai.mpc.training";
    int i = 0;
    for (DType t : ins)
      n->addInput(t == DType::Undefined
                      ? nullptr
                      : g->addInput("in" + std::to_string(i++), Type::tensor(t, {})));
    n->setOutput(0, "p_out", Type::tensor(DType::F32, {}));
    return n;
  }
};

TEST_F(MultiStepRow, TakesF32OperandsAndABoolOrF32SkipFlag) {
  const DType f = DType::F32, b = DType::Bool, u = DType::Undefined, d = DType::F64;
  // SGD: lr, weight_decay, skip, then (param, grad) groups.
  Node *n = node("MultiTensorSGDStep", {f, u, b, f, f, f, f});
  const CudaKernel *k = findCudaKernel(*n);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->kind, CudaKernelKind::OptimizerStep);
  EXPECT_TRUE(cudaRuns(*n, {f, u, b, f, f, f, f}));
  EXPECT_TRUE(cudaRuns(*n, {f, f, f, f, f}));    // a float skip flag, a decay
  EXPECT_FALSE(cudaRuns(*n, {f, u, b, f, d}));   // no f64 launcher
  EXPECT_FALSE(cudaRuns(*n, {f, b, u, f, f}));   // a bool weight decay
  Node *adam = node("MultiTensorAdamStep", {f, f, f, f, f, f, f, f, u, b, f, f, f, f});
  EXPECT_TRUE(cudaRuns(*adam, {f, f, f, f, f, f, f, f, u, b, f, f, f, f}));
  EXPECT_FALSE(cudaRuns(*adam, {f, f, f, f, f, f, f, f, u, f, f, b, f, f})); // a bool grad
}

} // namespace
