//===- CopyPlanTest.cpp - The data-movement ops' strided-copy plans ---------===//
//
// Every plan builder of CopyPlans.h against a direct multi-index computation
// of the op (numpy's definition, written out here), run two ways: the host
// walker the CPU kernels use (copyByPlan) and the per-element copyOffsets
// loop the CUDA launchers run, so a wrong plan or a wrong collapse fails here
// without a GPU. Plus the collapse itself: how many dimensions are left.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cpu/CopyPlans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

using namespace mpc;
using namespace mpc::kernels;

namespace {

using Shape = std::vector<int64_t>;

int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// Calls fn(multi-index) for every element of `s` in row-major order.
void forEachIndex(const Shape &s, const std::function<void(const Shape &)> &fn) {
  int64_t n = count(s);
  Shape idx(s.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    fn(idx);
    for (size_t d = s.size(); d-- > 0;)
      if (++idx[d] < s[d])
        break;
      else
        idx[d] = 0;
  }
}

int64_t linear(const Shape &idx, const Shape &s) {
  int64_t off = 0;
  for (size_t d = 0; d < s.size(); ++d)
    off = off * s[d] + idx[d];
  return off;
}

/// Source values 1000 + i (never the sentinel -1).
std::vector<int32_t> source(int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = int32_t(1000 + i);
  return v;
}

/// The plan run by copyByPlan and by a copyOffsets loop (what a device
/// thread does per element) must both give `want` (a destination of `dstN`
/// elements, -1 where nothing is written).
void expectPlan(const CopyPlan &p, const std::vector<int32_t> &src, int64_t dstN,
                const std::vector<int32_t> &want) {
  std::vector<int32_t> host(size_t(dstN), -1), device(size_t(dstN), -1);
  copyByPlan(p, src.data(), host.data(), sizeof(int32_t));
  for (int64_t i = 0; i < p.numElements; ++i) {
    int64_t s, d;
    copyOffsets(p, i, s, d);
    device[size_t(d)] = src[size_t(s)];
  }
  EXPECT_EQ(host, want) << "copyByPlan";
  EXPECT_EQ(device, want) << "copyOffsets";
}

/// Random shapes of rank 0..maxRank with dims 1..4 (some 1s to drop).
Shape randomShape(std::mt19937 &rng, int maxRank) {
  Shape s(size_t(std::uniform_int_distribution<int>(0, maxRank)(rng)));
  for (int64_t &d : s)
    d = std::uniform_int_distribution<int>(1, 4)(rng);
  return s;
}

TEST(CopyPlan, TransposeMatchesThePermutedIndex) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    Shape in = randomShape(rng, 8), perm(in.size());
    for (size_t k = 0; k < perm.size(); ++k)
      perm[k] = int64_t(k);
    std::shuffle(perm.begin(), perm.end(), rng);
    Shape out(in.size());
    for (size_t k = 0; k < in.size(); ++k)
      out[k] = in[size_t(perm[k])];
    std::vector<int32_t> src = source(count(in)), want(size_t(count(out)));
    forEachIndex(out, [&](const Shape &j) {
      Shape i(in.size());
      for (size_t k = 0; k < in.size(); ++k)
        i[size_t(perm[k])] = j[k];
      want[size_t(linear(j, out))] = src[size_t(linear(i, in))];
    });
    CopyPlan p;
    ASSERT_TRUE(transposePlan(in, perm, p));
    expectPlan(p, src, count(out), want);
  }
}

TEST(CopyPlan, SliceMatchesStartsAndSteps) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    Shape in = randomShape(rng, 6), starts, steps, out;
    for (int64_t d : in) {
      int64_t step = std::uniform_int_distribution<int>(0, 1)(rng) ? 1 : -1;
      if (std::uniform_int_distribution<int>(0, 3)(rng) == 0)
        step *= 2;
      int64_t start = std::uniform_int_distribution<int64_t>(0, d - 1)(rng);
      // Elements reachable from start in the step's direction.
      int64_t room = step > 0 ? d - start : start + 1, mag = step > 0 ? step : -step;
      int64_t n = std::uniform_int_distribution<int64_t>(0, (room + mag - 1) / mag)(rng);
      starts.push_back(start);
      steps.push_back(step);
      out.push_back(n);
    }
    std::vector<int32_t> src = source(count(in)), want(size_t(count(out)));
    forEachIndex(out, [&](const Shape &j) {
      Shape i(in.size());
      for (size_t k = 0; k < in.size(); ++k)
        i[k] = starts[k] + j[k] * steps[k];
      want[size_t(linear(j, out))] = src[size_t(linear(i, in))];
    });
    CopyPlan p;
    ASSERT_TRUE(slicePlan(in, starts, steps, out, p));
    expectPlan(p, src, count(out), want);
    // SliceGrad: the same plan backwards scatters into the input's shape.
    swapCopySides(p);
    std::vector<int32_t> grad = source(count(out)), scattered(size_t(count(in)), -1);
    forEachIndex(out, [&](const Shape &j) {
      Shape i(in.size());
      for (size_t k = 0; k < in.size(); ++k)
        i[k] = starts[k] + j[k] * steps[k];
      scattered[size_t(linear(i, in))] = grad[size_t(linear(j, out))];
    });
    expectPlan(p, grad, count(in), scattered);
  }
}

TEST(CopyPlan, ExpandBroadcastsSizeOneAndMissingAxes) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 200; ++trial) {
    Shape out = randomShape(rng, 6);
    size_t rank = std::uniform_int_distribution<size_t>(0, out.size())(rng);
    Shape in(out.end() - long(rank), out.end());
    for (int64_t &d : in)
      if (std::uniform_int_distribution<int>(0, 2)(rng) == 0)
        d = 1;
    std::vector<int32_t> src = source(count(in)), want(size_t(count(out)));
    forEachIndex(out, [&](const Shape &j) {
      Shape i(in.size());
      for (size_t k = 0; k < in.size(); ++k)
        i[k] = in[k] == 1 ? 0 : j[out.size() - in.size() + k];
      want[size_t(linear(j, out))] = src[size_t(linear(i, in))];
    });
    CopyPlan p;
    ASSERT_TRUE(expandPlan(in, out, p));
    expectPlan(p, src, count(out), want);
  }
}

TEST(CopyPlan, ConcatAndSplitPlaceEachPartAtItsOffset) {
  Shape whole = {2, 7, 3};
  std::vector<Shape> parts = {{2, 2, 3}, {2, 0, 3}, {2, 4, 3}, {2, 1, 3}};
  std::vector<int32_t> wholeSrc = source(count(whole)), want(size_t(count(whole)), -1);
  std::vector<int32_t> got(size_t(count(whole)), -1), gotDev(got);
  int64_t offset = 0;
  for (const Shape &part : parts) {
    std::vector<int32_t> src = source(count(part));
    for (int32_t &v : src)
      v += int32_t(100 * offset);
    forEachIndex(part, [&](const Shape &j) {
      Shape i = j;
      i[1] += offset;
      want[size_t(linear(i, whole))] = src[size_t(linear(j, part))];
    });
    CopyPlan p;
    ASSERT_TRUE(concatPlan(part, whole, 1, offset, p));
    copyByPlan(p, src.data(), got.data(), sizeof(int32_t));
    // Split: the same plan backwards reads the part back out.
    CopyPlan back = p;
    swapCopySides(back);
    std::vector<int32_t> split(size_t(count(part)), -1), splitWant(size_t(count(part)));
    forEachIndex(part, [&](const Shape &j) {
      Shape i = j;
      i[1] += offset;
      splitWant[size_t(linear(j, part))] = wholeSrc[size_t(linear(i, whole))];
    });
    expectPlan(back, wholeSrc, count(part), splitWant);
    offset += part[1];
  }
  EXPECT_EQ(got, want);
}

TEST(CopyPlan, TileRepeatsEveryAxis) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 100; ++trial) {
    Shape in = randomShape(rng, 5), out = in;
    for (int64_t &d : out)
      d *= std::uniform_int_distribution<int>(1, 3)(rng);
    std::vector<int32_t> src = source(count(in)), want(size_t(count(out)));
    forEachIndex(out, [&](const Shape &j) {
      Shape i(in.size());
      for (size_t k = 0; k < in.size(); ++k)
        i[k] = j[k] % in[k];
      want[size_t(linear(j, out))] = src[size_t(linear(i, in))];
    });
    CopyPlan p;
    ASSERT_TRUE(tilePlan(in, out, p));
    expectPlan(p, src, count(out), want);
  }
}

TEST(CopyPlan, PadInteriorCopiesWhatLiesInsideAndCrops) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 200; ++trial) {
    Shape in = randomShape(rng, 5), begin, out;
    for (int64_t d : in) {
      int64_t b = std::uniform_int_distribution<int64_t>(-d + 1, 2)(rng);
      int64_t e = std::uniform_int_distribution<int64_t>(-(d + b) + 1, 2)(rng);
      begin.push_back(b);
      out.push_back(d + b + e);
    }
    std::vector<int32_t> src = source(count(in)), want(size_t(count(out)), -1);
    forEachIndex(out, [&](const Shape &j) {
      Shape i(in.size());
      for (size_t k = 0; k < in.size(); ++k) {
        i[k] = j[k] - begin[k];
        if (i[k] < 0 || i[k] >= in[k])
          return; // the pad value's place: not written by the plan
      }
      want[size_t(linear(j, out))] = src[size_t(linear(i, in))];
    });
    CopyPlan p;
    ASSERT_TRUE(padInteriorPlan(in, out, begin, p));
    expectPlan(p, src, count(out), want);
  }
}

TEST(SelectPlan, WhereBroadcastsAllThreeOperands) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 200; ++trial) {
    Shape out = randomShape(rng, 6);
    auto operand = [&]() {
      size_t rank = std::uniform_int_distribution<size_t>(0, out.size())(rng);
      Shape s(out.end() - long(rank), out.end());
      for (int64_t &d : s)
        if (std::uniform_int_distribution<int>(0, 2)(rng) == 0)
          d = 1;
      return s;
    };
    Shape shapes[3] = {operand(), operand(), operand()};
    SelectPlan p;
    ASSERT_TRUE(selectPlan(shapes[0], shapes[1], shapes[2], out, p));
    EXPECT_EQ(p.numElements, count(out));
    int64_t e = 0;
    forEachIndex(out, [&](const Shape &j) {
      int64_t off[3];
      selectOffsets(p, e++, off);
      for (int k = 0; k < 3; ++k) {
        const Shape &in = shapes[k];
        Shape i(in.size());
        for (size_t a = 0; a < in.size(); ++a)
          i[a] = in[a] == 1 ? 0 : j[out.size() - in.size() + a];
        EXPECT_EQ(off[k], linear(i, in)) << "operand " << k;
      }
    });
  }
}

TEST(GatherPlan, EachOutputElementReadsItsIndexedRow) {
  Shape data = {2, 5, 3};
  GatherPlan p = gatherPlan(data, 1, 4); // output [2, 4, 3]
  EXPECT_EQ(p.numElements(), 24);
  const int64_t idx[4] = {4, 0, 4, 2};
  forEachIndex({2, 4, 3}, [&](const Shape &j) {
    int64_t e = linear(j, {2, 4, 3});
    EXPECT_EQ(gatherIndexPosition(p, e), j[1]);
    EXPECT_EQ(gatherSource(p, e, idx[j[1]]), linear({j[0], idx[j[1]], j[2]}, data));
  });
  // Negative indices count from the end; [-dim, dim) only.
  int64_t i = -5;
  EXPECT_TRUE(normalizeIndex(i, 5));
  EXPECT_EQ(i, 0);
  i = -6;
  EXPECT_FALSE(normalizeIndex(i, 5));
  i = 5;
  EXPECT_FALSE(normalizeIndex(i, 5));
}

TEST(CopyPlan, CollapseMergesLinearRunsAndDropsOnes) {
  CopyPlan p;
  // The identity permutation is one contiguous run.
  ASSERT_TRUE(transposePlan({2, 3, 4}, {0, 1, 2}, p));
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.dims[0], 24);
  // A last-two-axes swap of [B, M, N] keeps three dimensions; with M = 1 two.
  ASSERT_TRUE(transposePlan({5, 3, 4}, {0, 2, 1}, p));
  EXPECT_EQ(p.rank, 3);
  ASSERT_TRUE(transposePlan({5, 1, 4}, {0, 2, 1}, p));
  EXPECT_EQ(p.rank, 1);
  // A scalar is one element at rank 0; an empty tensor copies nothing.
  ASSERT_TRUE(transposePlan({}, {}, p));
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.numElements, 1);
  ASSERT_TRUE(expandPlan({3}, {0, 3}, p));
  EXPECT_EQ(p.numElements, 0);
  // Tile of rank 8 with every axis repeated: 16 dimensions fit.
  Shape in(8, 2), out(8, 4);
  ASSERT_TRUE(tilePlan(in, out, p));
  EXPECT_EQ(p.rank, 16);
  // A rank-17 reversal cannot merge anything: refused.
  Shape big(17, 2), rev(17);
  for (size_t k = 0; k < rev.size(); ++k)
    rev[k] = int64_t(rev.size() - 1 - k);
  EXPECT_FALSE(transposePlan(big, rev, p));
}

} // namespace
