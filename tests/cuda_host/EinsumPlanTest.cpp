//===- EinsumPlanTest.cpp - Einsum lowered to gathers and one GEMM ---------===//
//
// planEinsum (EinsumPlan.h) against an independent einsum: the plan is
// executed on the host (its gathers with EinsumGather's own index math, a
// plain batched matrix product in double) and compared with a direct loop
// over every label assignment, for matrix products, batches, transposes,
// diagonals, traces, sums, outer products and digit ('...') labels; plus the
// group sizes of a few equations and what the planner refuses.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/EinsumPlan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

using namespace mpc;
using namespace mpc::cuda;

namespace {

struct Operand {
  std::string labels;
  std::vector<double> values;
};

std::map<char, int64_t> sizesOf(const std::vector<std::string> &labels,
                                const std::vector<std::vector<int64_t>> &shapes) {
  std::map<char, int64_t> sizes;
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t d = 0; d < labels[i].size(); ++d)
      sizes[labels[i][d]] = shapes[i][d];
  return sizes;
}

/// einsum by a loop over every assignment of every label.
std::vector<double> directEinsum(const std::vector<Operand> &ops, const std::string &output,
                                 const std::map<char, int64_t> &sizes) {
  std::string labels;
  for (auto &kv : sizes)
    labels += kv.first;
  int64_t outCount = 1;
  for (char l : output)
    outCount *= sizes.at(l);
  std::vector<double> out(size_t(outCount), 0.0);
  std::map<char, int64_t> at;
  std::function<void(size_t)> walk = [&](size_t d) {
    if (d == labels.size()) {
      double prod = 1;
      for (const Operand &o : ops) {
        int64_t off = 0;
        for (char l : o.labels)
          off = off * sizes.at(l) + at[l];
        prod *= o.values[size_t(off)];
      }
      int64_t off = 0;
      for (char l : output)
        off = off * sizes.at(l) + at[l];
      out[size_t(off)] += prod;
      return;
    }
    for (at[labels[d]] = 0; at[labels[d]] < sizes.at(labels[d]); ++at[labels[d]])
      walk(d + 1);
  };
  walk(0);
  return out;
}

std::vector<double> runGather(const EinsumGather &g, const std::vector<double> &src) {
  std::vector<double> out(size_t(g.count()));
  for (int64_t i = 0; i < g.count(); ++i) {
    double s = 0;
    int64_t base = g.offset(i);
    for (int64_t j = 0; j < g.sumCount(); ++j)
      s += src[size_t(base + g.sumOffset(j))];
    out[size_t(i)] = g.scale * s;
  }
  return out;
}

/// The plan executed on the host.
std::vector<double> runPlan(const EinsumLowering &p, const std::vector<Operand> &ops) {
  std::vector<double> a = runGather(p.a, ops[0].values);
  if (!p.product)
    return a;
  std::vector<double> b = runGather(p.b, ops[1].values);
  EXPECT_EQ(int64_t(a.size()), p.batch * p.m * p.k);
  EXPECT_EQ(int64_t(b.size()), p.batch * p.k * p.n);
  std::vector<double> d(size_t(p.batch * p.m * p.n), 0.0);
  for (int64_t t = 0; t < p.batch; ++t)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j)
        for (int64_t q = 0; q < p.k; ++q)
          d[size_t((t * p.m + i) * p.n + j)] +=
              a[size_t((t * p.m + i) * p.k + q)] * b[size_t((t * p.k + q) * p.n + j)];
  return runGather(p.out, d);
}

void checkEquation(const std::vector<std::string> &labels, const std::string &output,
                   const std::vector<std::vector<int64_t>> &shapes) {
  std::string eq;
  for (const std::string &l : labels)
    eq += (eq.empty() ? "" : ",") + l;
  SCOPED_TRACE(eq + "->" + output);
  std::map<char, int64_t> sizes = sizesOf(labels, shapes);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<Operand> ops;
  for (size_t i = 0; i < labels.size(); ++i) {
    Operand o{labels[i], {}};
    int64_t n = 1;
    for (int64_t d : shapes[i])
      n *= d;
    for (int64_t j = 0; j < n; ++j)
      o.values.push_back(dist(rng));
    ops.push_back(o);
  }
  auto plan = planEinsum(labels, output, sizes);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  std::vector<double> want = directEinsum(ops, output, sizes);
  std::vector<double> got = runPlan(*plan, ops);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::fabs(want[i]))) << "element " << i;
}

TEST(EinsumPlan, ExecutedPlansMatchADirectEinsum) {
  checkEquation({"ij", "jk"}, "ik", {{3, 5}, {5, 4}});                 // matmul
  checkEquation({"bij", "bjk"}, "bik", {{2, 3, 5}, {2, 5, 4}});        // batched
  checkEquation({"bhqd", "bhkd"}, "bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}); // attention scores
  checkEquation({"ij", "kj"}, "ki", {{3, 5}, {4, 5}});                 // transposed output
  checkEquation({"ij"}, "ji", {{3, 5}});                               // transpose only
  checkEquation({"ii"}, "", {{4, 4}});                                 // trace
  checkEquation({"ii"}, "i", {{4, 4}});                                // diagonal
  checkEquation({"ijk"}, "j", {{2, 3, 4}});                            // sums
  checkEquation({"i", "j"}, "ij", {{3}, {4}});                         // outer product
  checkEquation({"i", "i"}, "", {{7}, {7}});                           // dot
  checkEquation({"ij", "jk"}, "", {{3, 5}, {5, 4}});                   // everything summed
  checkEquation({"ijx", "jky"}, "ki", {{2, 3, 2}, {3, 4, 3}});         // summed on each side
  checkEquation({"89ij", "89jk"}, "89ik", {{2, 1, 3, 4}, {2, 1, 4, 5}}); // '...' labels
  checkEquation({"iij", "jk"}, "ik", {{3, 3, 2}, {2, 4}});             // a diagonal operand
  checkEquation({"bi", "bi"}, "b", {{5, 6}, {5, 6}});                  // batched dot
  checkEquation({"ij", "jk"}, "ik", {{1, 1}, {1, 1}});                 // size-1 everything
  checkEquation({"ij", "jk"}, "ik", {{0, 3}, {3, 2}});                 // empty rows
}

TEST(EinsumPlan, GroupsAndStrides) {
  auto p = planEinsum({"bij", "bjk"}, "bik", {{'b', 2}, {'i', 3}, {'j', 5}, {'k', 4}});
  ASSERT_TRUE(bool(p));
  EXPECT_TRUE(p->product);
  EXPECT_EQ(p->batch, 2);
  EXPECT_EQ(p->m, 3);
  EXPECT_EQ(p->n, 4);
  EXPECT_EQ(p->k, 5);
  // A is gathered as [b, i, j] from itself: strides 15, 5, 1.
  ASSERT_EQ(p->a.rank, 3);
  EXPECT_EQ(p->a.strides[0], 15);
  EXPECT_EQ(p->a.strides[1], 5);
  EXPECT_EQ(p->a.strides[2], 1);
  EXPECT_EQ(p->a.sumRank, 0);
  // B is gathered as [b, j, k].
  EXPECT_EQ(p->b.strides[0], 20);
  EXPECT_EQ(p->b.strides[1], 4);
  EXPECT_EQ(p->b.strides[2], 1);
  // The trace sums the diagonal: stride 4 + 1.
  auto t = planEinsum({"ii"}, "", {{'i', 4}});
  ASSERT_TRUE(bool(t));
  EXPECT_FALSE(t->product);
  EXPECT_EQ(t->a.rank, 0);
  ASSERT_EQ(t->a.sumRank, 1);
  EXPECT_EQ(t->a.sumStrides[0], 5);
  EXPECT_EQ(t->a.count(), 1);
  EXPECT_EQ(t->a.sumCount(), 4);
}

TEST(EinsumPlan, RefusesWhatItDoesNotPlan) {
  auto three = planEinsum({"ij", "jk", "kl"}, "il", {{'i', 2}, {'j', 2}, {'k', 2}, {'l', 2}});
  ASSERT_FALSE(bool(three));
  EXPECT_EQ(llvm::toString(three.takeError()), "3 operands (one or two are planned)");
  auto repeated = planEinsum({"ij"}, "ii", {{'i', 2}, {'j', 2}});
  ASSERT_FALSE(bool(repeated));
  EXPECT_EQ(llvm::toString(repeated.takeError()), "the output label ii repeats a label");
  std::map<char, int64_t> nine;
  std::string labels = "abcdefghi";
  for (char l : labels)
    nine[l] = 1;
  auto wide = planEinsum({labels}, labels, nine);
  ASSERT_FALSE(bool(wide));
  EXPECT_EQ(llvm::toString(wide.takeError()),
            "a gather of 9 dimensions summing 0 (at most 8 each)");
}

} // namespace
