//===- ReductionTest.cpp - Reduce* over arbitrary axes --------------------===//
//
// All ten reduction nodes (opset 18, axes as an input) against a naive
// double-precision loop written here, on every selected device through the
// op tester (OpTester.h): leading, middle, trailing, alternating and all
// axes, long rows that are widened in chunks, size-1 and empty dimensions
// (ONNX identities), NaN and -inf handling, and native int32/int64
// accumulation. ArgMax/ArgMin with ties, negative axes, keepdims and
// select_last_index, for the float and integer types; CumSum/CumProd with
// exclusive, reverse and negative axes, exact in every type. The CPU's output-shape helper is a CPU internal, checked
// directly.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Reduce.h"

#include "OpTester.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

using namespace mpc;
using namespace mpc::optest;
using namespace mpc::test;

namespace {

class ReduceTest : public DeviceTypeTest {};
OPTEST_INSTANTIATE_FLOAT_TYPES(ReduceTest);
class ReduceDeviceTest : public DeviceTest {};
OPTEST_INSTANTIATE_DEVICES(ReduceDeviceTest);

/// The reductions, in the order of kindName's table.
enum class ReduceKind { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp };

const double kInf = std::numeric_limits<double>::infinity();

const char *kindName(ReduceKind k) {
  static const char *names[] = {"Sum",    "Mean",      "Max", "Min",
                                "Prod",   "SumSquare", "L1",  "L2",
                                "LogSum", "LogSumExp"};
  return names[int(k)];
}

/// The node Reduce<kind> (opset 18) over `axes` (all when empty), keepdims 1.
template <typename T>
OpTester reduceNode(ReduceKind kind, const std::vector<int64_t> &shape,
                    const std::vector<T> &x, const std::vector<int64_t> &axes) {
  OpTester t(std::string("Reduce") + kindName(kind), 18);
  t.input(shape, x);
  if (!axes.empty())
    t.constantInput(tensorOf<int64_t>({int64_t(axes.size())}, axes));
  return t;
}

/// Naive reference: for every output element, visit every input element
/// that maps to it. Also returns the error scale of each result.
std::vector<double> refReduce(ReduceKind kind, const std::vector<double> &x,
                              const std::vector<int64_t> &shape,
                              std::vector<int64_t> axes,
                              std::vector<double> &scale) {
  size_t rank = shape.size();
  std::vector<bool> red(rank, axes.empty());
  for (int64_t a : axes)
    red[size_t(a < 0 ? a + int64_t(rank) : a)] = true;
  std::vector<int64_t> outShape;
  for (size_t d = 0; d < rank; ++d)
    if (!red[d])
      outShape.push_back(shape[d]);
  int64_t outSize = product(outShape);
  std::vector<std::vector<double>> groups(static_cast<size_t>(outSize));
  for (int64_t i = 0; i < product(shape); ++i) {
    std::vector<int64_t> idx = unravel(i, shape);
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d)
      if (!red[d])
        o = o * shape[d] + idx[d];
    groups[size_t(o)].push_back(x[size_t(i)]);
  }
  std::vector<double> out;
  scale.clear();
  for (const std::vector<double> &g : groups) {
    double sum = 0, abs = 0, sq = 0, prod = 1, mx = -kInf, mn = kInf;
    bool nan = false;
    for (double v : g) {
      sum += v;
      abs += std::fabs(v);
      sq += v * v;
      prod *= v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
      nan |= std::isnan(v);
    }
    double lse = -kInf;
    if (!g.empty() && !std::isinf(mx)) {
      double s = 0;
      for (double v : g)
        s += std::exp(v - mx);
      lse = mx + std::log(s);
    } else if (!g.empty()) {
      lse = mx;
    }
    double n = double(g.size());
    switch (kind) {
    case ReduceKind::Sum:
      out.push_back(sum);
      scale.push_back(abs);
      break;
    case ReduceKind::Mean:
      out.push_back(sum / n);
      scale.push_back(abs / n);
      break;
    case ReduceKind::Max:
      out.push_back(nan ? NAN : mx);
      scale.push_back(0);
      break;
    case ReduceKind::Min:
      out.push_back(nan ? NAN : mn);
      scale.push_back(0);
      break;
    case ReduceKind::Prod:
      out.push_back(prod);
      scale.push_back(std::fabs(prod) * n);
      break;
    case ReduceKind::SumSquare:
      out.push_back(sq);
      scale.push_back(sq);
      break;
    case ReduceKind::L1:
      out.push_back(abs);
      scale.push_back(abs);
      break;
    case ReduceKind::L2:
      out.push_back(std::sqrt(sq));
      scale.push_back(std::sqrt(sq));
      break;
    case ReduceKind::LogSum:
      out.push_back(std::log(sum));
      scale.push_back(1);
      break;
    case ReduceKind::LogSumExp:
      out.push_back(lse);
      scale.push_back(1);
      break;
    }
  }
  return out;
}

struct ReduceCase {
  std::vector<int64_t> shape, axes;
};
const ReduceCase kReduceCases[] = {
    {{2, 3, 4}, {}},
    {{2, 3, 4}, {0}},
    {{2, 3, 4}, {1}},
    {{2, 3, 4}, {2}},
    {{2, 3, 4}, {0, 2}},
    {{2, 3, 4}, {-1}},
    {{2, 3, 4}, {0, 1, 2}},
    {{5, 1, 7}, {1}},
    {{5, 1, 7}, {0, 1}},
    {{3, 1000}, {1}},
    {{2, 5000}, {1}},
    {{1000, 3}, {0}},
    {{2, 3, 4, 5}, {1, 3}},
    {{2, 3, 4, 5}, {0, 2}},
    {{4}, {0}},
    {{}, {}},
    {{0, 3}, {0}},
    {{0, 3}, {1}},
    {{3, 0, 2}, {1}},
    {{2, 3, 4, 5}, {1, 2}}, // a reduced run in the middle
    {{3, 1, 4, 1}, {0, 1}}, // size-1 dims inside the run
    {{2, 1100}, {0}},       // a short middle axis under long rows
    // Long middle axes with few results: CUDA's two-pass split (planColumnSplit), with
    // a partial column tile and a short last chunk.
    {{2, 300, 45}, {1}},
    {{700, 40}, {0}},
};

template <typename T>
void checkKind(const std::string &device, ReduceKind kind, double lo, double hi) {
  SCOPED_TRACE(kindName(kind));
  std::mt19937 rng(15);
  for (const ReduceCase &rc : kReduceCases) {
    SCOPED_TRACE(shapeString(rc.shape) + " axes " + shapeString(rc.axes));
    std::vector<T> x = randomVector<T>(size_t(product(rc.shape)), rng, lo, hi);
    std::vector<double> scale;
    std::vector<double> expected =
        refReduce(kind, toDoubles(x), rc.shape, rc.axes, scale);
    std::vector<int64_t> outShape = rc.shape; // keepdims: reduced axes become 1
    for (size_t d = 0; d < outShape.size(); ++d)
      for (int64_t a : rc.axes)
        if (rc.axes.empty() || a == int64_t(d) || a + int64_t(outShape.size()) == int64_t(d))
          outShape[d] = 1;
    if (rc.axes.empty())
      std::fill(outShape.begin(), outShape.end(), 1);
    std::vector<HostTensor> out = runOrFail(reduceNode(kind, rc.shape, x, rc.axes), device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, outShape);
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), expected, scale));
  }
}

OPTEST_TYPED_P(ReduceTest, AllKindsMatchNaiveLoops) {
  checkKind<T>(device, ReduceKind::Sum, -1, 1);
  checkKind<T>(device, ReduceKind::Mean, -1, 1);
  checkKind<T>(device, ReduceKind::Max, -1, 1);
  checkKind<T>(device, ReduceKind::Min, -1, 1);
  checkKind<T>(device, ReduceKind::Prod, 0.9, 1.1);
  checkKind<T>(device, ReduceKind::SumSquare, -1, 1);
  checkKind<T>(device, ReduceKind::L1, -1, 1);
  checkKind<T>(device, ReduceKind::L2, -1, 1);
  checkKind<T>(device, ReduceKind::LogSum, 0.1, 1);
  checkKind<T>(device, ReduceKind::LogSumExp, -5, 5);
}

OPTEST_TYPED_P(ReduceTest, SpecialValues) {
  std::vector<int64_t> shape = {3, 4};
  std::vector<double> v = {1,     std::nan(""), 3,     4,     -kInf, -kInf,
                           -kInf, -kInf,        20000, 19999, -kInf, 1};
  std::vector<T> x;
  for (double d : v)
    x.push_back(fromDouble<T>(d));
  std::vector<T> y = runOutput<T>(reduceNode<T>(ReduceKind::Max, shape, x, {1}), device);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
  EXPECT_EQ(toDouble(y[1]), -kInf);
  y = runOutput<T>(reduceNode<T>(ReduceKind::Min, shape, x, {1}), device);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
  y = runOutput<T>(reduceNode<T>(ReduceKind::LogSumExp, shape, x, {1}), device);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
  EXPECT_EQ(toDouble(y[1]), -kInf); // All -inf: no inf - inf NaN.
  double big = toDouble(fromDouble<T>(20000)),
         big2 = toDouble(fromDouble<T>(19999));
  double lse = big + std::log(1 + std::exp(big2 - big));
  EXPECT_NEAR(toDouble(y[2]), lse, std::fabs(lse) * TypeTraits<T>::kTol.rtol);
}

OPTEST_TYPED_P(ReduceTest, KeepdimsNoopAndAxesAsAttributeOrGraphInput) {
  std::mt19937 rng(17);
  const std::vector<int64_t> shape = {2, 3, 4};
  std::vector<T> x = randomVector<T>(24, rng);
  std::vector<double> xd = toDoubles(x), scale;
  {
    SCOPED_TRACE("ReduceSum opset 13, constant axes input, keepdims 0");
    OpTester t("ReduceSum", 13);
    t.attrInt("keepdims", 0).input(shape, x);
    t.constantInput(tensorOf<int64_t>({1}, {-2}));
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 4}));
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), refReduce(ReduceKind::Sum, xd, shape, {1}, scale),
                         scale));
  }
  {
    SCOPED_TRACE("ReduceMean opset 17, axes attribute, keepdims 0");
    OpTester t("ReduceMean", 17);
    t.attrInts("axes", {-1}).attrInt("keepdims", 0).input(shape, x);
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]),
                         refReduce(ReduceKind::Mean, xd, shape, {2}, scale), scale));
  }
  {
    SCOPED_TRACE("ReduceSumSquare opset 18, noop_with_empty_axes: the input itself");
    OpTester t("ReduceSumSquare", 18);
    t.attrInt("noop_with_empty_axes", 1).input(shape, x);
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, shape);
    EXPECT_EQ(toDoubles(valuesOf<T>(out[0])), xd);
  }
  {
    SCOPED_TRACE("ReduceMax opset 18, constant axes split by a kept axis");
    // Reduced axes split by a kept one (CUDA transposes them into one trailing
    // run in the workspace first).
    OpTester t("ReduceMax", 18);
    t.input(shape, x).constantInput(tensorOf<int64_t>({2}, {0, 2}));
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, (std::vector<int64_t>{1, 3, 1}));
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]),
                         refReduce(ReduceKind::Max, xd, shape, {0, 2}, scale), scale));
  }
  {
    SCOPED_TRACE("axes from a graph input: the graph runs in dynamic mode on every device");
    OpTester t("ReduceMax", 18);
    t.input(shape, x).input(tensorOf<int64_t>({2}, {0, -1}));
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, (std::vector<int64_t>{1, 3, 1}));
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]),
                         refReduce(ReduceKind::Max, xd, shape, {0, 2}, scale), scale));
  }
  {
    SCOPED_TRACE("axes from a graph input that is not a list: one line");
    OpTester t("ReduceMax", 18);
    t.input(shape, x).input(tensorOf<int64_t>({}, {0}));
    EXPECT_EQ(runExpectingError(t, device),
              "node 'node' (ReduceMax): axes is []; it must be a 1-D tensor");
  }
}

TEST_P(ReduceDeviceTest, EmptyIdentities) {
  std::vector<int64_t> shape = {0, 2};
  auto run = [&](ReduceKind k) {
    std::vector<float> y = runOutput<float>(reduceNode<float>(k, shape, {}, {0}), device());
    EXPECT_EQ(y.size(), 2u);
    return y.empty() ? 0.5f : y[0];
  };
  EXPECT_EQ(run(ReduceKind::Sum), 0.0f);
  EXPECT_EQ(run(ReduceKind::Prod), 1.0f);
  EXPECT_EQ(run(ReduceKind::Max), -INFINITY);
  EXPECT_EQ(run(ReduceKind::Min), INFINITY);
  EXPECT_TRUE(std::isnan(run(ReduceKind::Mean)));
  EXPECT_EQ(run(ReduceKind::L2), 0.0f);
  EXPECT_EQ(run(ReduceKind::LogSum), -INFINITY);
  EXPECT_EQ(run(ReduceKind::LogSumExp), -INFINITY);
  std::vector<int32_t> yi =
      runOutput<int32_t>(reduceNode<int32_t>(ReduceKind::Max, shape, {}, {0}), device());
  ASSERT_EQ(yi.size(), 2u);
  EXPECT_EQ(yi[0], std::numeric_limits<int32_t>::lowest());
  yi = runOutput<int32_t>(reduceNode<int32_t>(ReduceKind::Mean, shape, {}, {0}), device());
  ASSERT_EQ(yi.size(), 2u);
  EXPECT_EQ(yi[0], 0);
}

template <typename I> void checkIntegers(const std::string &device) {
  std::mt19937 rng(16);
  std::uniform_int_distribution<int> dist(-50, 50);
  std::vector<int64_t> shape = {4, 5, 6};
  std::vector<I> x(120);
  for (I &v : x)
    v = I(dist(rng));
  for (ReduceKind kind :
       {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max, ReduceKind::Min,
        ReduceKind::SumSquare, ReduceKind::L1, ReduceKind::L2}) {
    SCOPED_TRACE(kindName(kind));
    for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, {0, 2}, {}}) {
      std::vector<double> scale;
      std::vector<double> xd(x.begin(), x.end());
      std::vector<double> ref = refReduce(kind, xd, shape, axes, scale);
      std::vector<I> y = runOutput<I>(reduceNode(kind, shape, x, axes), device);
      ASSERT_EQ(y.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_EQ(int64_t(y[i]), int64_t(std::trunc(ref[i]))) << "at " << i;
    }
  }
  // Products in int64 do not overflow here and must be exact.
  std::vector<I> small = {2, -3, 4, 5, 1, -1};
  std::vector<I> y = runOutput<I>(reduceNode<I>(ReduceKind::Prod, {2, 3}, small, {1}), device);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(int64_t(y[0]), -24);
  EXPECT_EQ(int64_t(y[1]), -5);
}

TEST_P(ReduceDeviceTest, Int32) { checkIntegers<int32_t>(device()); }
TEST_P(ReduceDeviceTest, Int64) { checkIntegers<int64_t>(device()); }

/// TopK's values and indices by sorting each slice in double with the
/// lower index first among equal values (onnx.reference's order).
template <typename T>
void checkTopK(const std::string &device, const std::vector<int64_t> &shape, int64_t axis,
               int64_t k, bool largest, const std::vector<T> &x, bool kAsInput = true) {
  SCOPED_TRACE(shapeString(shape) + " axis " + std::to_string(axis) + " k " +
               std::to_string(k) + (largest ? " largest" : " smallest"));
  int64_t a = axis < 0 ? axis + int64_t(shape.size()) : axis;
  int64_t outer = 1, dim = shape[size_t(a)], inner = 1;
  for (int64_t i = 0; i < a; ++i)
    outer *= shape[size_t(i)];
  for (size_t i = size_t(a) + 1; i < shape.size(); ++i)
    inner *= shape[i];
  std::vector<int64_t> outShape = shape;
  outShape[size_t(a)] = k;
  auto dbl = [](T v) {
    if constexpr (std::is_integral<T>::value)
      return double(v);
    else
      return toDouble(v);
  };
  std::vector<double> values(size_t(outer * k * inner));
  std::vector<int64_t> indices(values.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> order(static_cast<size_t>(dim));
      for (int64_t j = 0; j < dim; ++j)
        order[size_t(j)] = j;
      auto at = [&](int64_t j) { return dbl(x[size_t((o * dim + j) * inner + i)]); };
      std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
        return largest ? at(p) > at(q) : at(p) < at(q);
      });
      for (int64_t j = 0; j < k; ++j) {
        size_t e = size_t((o * k + j) * inner + i);
        values[e] = at(order[size_t(j)]);
        indices[e] = order[size_t(j)];
      }
    }
  OpTester t("TopK", kAsInput ? 11 : 1);
  t.attrInt("axis", axis).input(shape, x);
  if (kAsInput)
    t.attrInt("largest", largest ? 1 : 0).constantInput(tensorOf<int64_t>({1}, {k}));
  else
    t.attrInt("k", k);
  t.outputs(2);
  std::vector<HostTensor> out = runOrFail(t, device);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape, outShape);
  std::vector<T> got = valuesOf<T>(out[0]);
  ASSERT_EQ(got.size(), values.size());
  for (size_t e = 0; e < got.size(); ++e)
    EXPECT_EQ(dbl(got[e]), values[e]) << "value " << e;
  EXPECT_EQ(valuesOf<int64_t>(out[1]), indices);
}

OPTEST_TYPED_P(ReduceTest, TopKOrdersTiesByIndex) {
  std::mt19937 rng(17);
  // Few distinct values, so that ties are common.
  auto ties = [&](size_t n) {
    std::uniform_int_distribution<int> d(-4, 4);
    std::vector<T> v(n);
    for (T &e : v)
      e = fromDouble<T>(d(rng) * 0.5);
    return v;
  };
  checkTopK<T>(device, {3, 10}, -1, 4, true, ties(30));
  checkTopK<T>(device, {3, 10}, 1, 4, false, ties(30));
  checkTopK<T>(device, {2, 7, 3}, 1, 7, true, ties(42));   // k = dim, a middle axis
  checkTopK<T>(device, {4, 5, 2}, -3, 2, false, ties(40)); // a negative first axis
  checkTopK<T>(device, {1, 1}, 0, 1, true, ties(1));
  checkTopK<T>(device, {2, 5}, 1, 0, true, ties(10));      // k = 0: empty outputs
  checkTopK<T>(device, {2, 1500}, 1, 5, true, randomVector<T>(3000, rng, -3, 3));
  checkTopK<T>(device, {3, 6}, 1, 3, true, ties(18), /*kAsInput=*/false); // TopK-1's k
}

TEST_P(ReduceDeviceTest, TopKOfIntegers) {
  std::vector<int32_t> x32 = {5, -2, 7, 7, 0, -2, 9, 1};
  checkTopK<int32_t>(device(), {2, 4}, 1, 3, true, x32);
  checkTopK<int32_t>(device(), {2, 4}, 0, 1, false, x32);
  std::vector<int64_t> x64 = {int64_t(1) << 40, -3, int64_t(1) << 40, 2, 2, -(int64_t(1) << 41)};
  checkTopK<int64_t>(device(), {6}, 0, 4, true, x64);
  checkTopK<int64_t>(device(), {6}, 0, 4, false, x64);
}

// CPU internal: the output-shape helper of the CPU's reduction shape rule.
TEST(CpuReduceShapeTest, OutputShapes) {
  llvm::SmallVector<int64_t, 4> out;
  ASSERT_TRUE(cpu::reduceOutputShape({2, 3, 4}, {0, -1}, true, out));
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.end()),
            (std::vector<int64_t>{1, 3, 1}));
  ASSERT_TRUE(cpu::reduceOutputShape({2, 3, 4}, {0, -1}, false, out));
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.end()),
            (std::vector<int64_t>{3}));
  ASSERT_TRUE(cpu::reduceOutputShape({2, 3}, {}, false, out));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(cpu::reduceOutputShape({2, 3}, {2}, false, out));
  EXPECT_FALSE(cpu::reduceOutputShape({2, 3}, {1, -1}, false, out));
}


/// ArgMax/ArgMin (opset 13) of T over `axis` of `shape` against a search
/// written here on multi-indices: values (i * 7 + seed) % 5 - 2, so most
/// slices tie; the first position of the extreme, or the last with
/// select_last_index; keepdims 0 and 1.
template <typename T> void checkArgReduce(const std::string &device) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  const Case cases[] = {{{3, 1100, 2}, 1}, {{3, 1100, 2}, -1}, {{2, 1500}, -1},
                        {{4, 1, 3}, -2},   {{5}, 0},           {{0, 5}, 1},
                        {{2, 3, 4, 5}, -3}};
  for (const Case &c : cases)
    for (int seed : {0, 3}) {
      int64_t rank = int64_t(c.shape.size()), axis = c.axis < 0 ? c.axis + rank : c.axis;
      std::vector<T> x(size_t(product(c.shape)));
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = T(static_cast<float>(int64_t((i * 7 + size_t(seed)) % 5) - 2));
      std::vector<int64_t> outShape = c.shape;
      outShape[size_t(axis)] = 1;
      for (bool isMax : {true, false})
        for (int last : {0, 1})
          for (int keep : {0, 1}) {
            SCOPED_TRACE(shapeString(c.shape) + " axis " + std::to_string(c.axis) +
                         (isMax ? " ArgMax" : " ArgMin") + " last " + std::to_string(last) +
                         " keepdims " + std::to_string(keep));
            OpTester t(isMax ? "ArgMax" : "ArgMin", 13);
            t.attrInt("axis", c.axis).attrInt("keepdims", keep).attrInt("select_last_index",
                                                                         last);
            t.input(c.shape, x);
            std::vector<HostTensor> out = runOrFail(t, device);
            ASSERT_EQ(out.size(), 1u);
            std::vector<int64_t> wantShape = outShape;
            if (!keep)
              wantShape.erase(wantShape.begin() + axis);
            EXPECT_EQ(out[0].shape, wantShape);
            std::vector<int64_t> got = valuesOf<int64_t>(out[0]);
            ASSERT_EQ(int64_t(got.size()), product(outShape));
            for (int64_t o = 0; o < product(outShape); ++o) {
              std::vector<int64_t> idx = unravel(o, outShape);
              int64_t at = -1;
              double best = 0;
              for (int64_t j = 0; j < c.shape[size_t(axis)]; ++j) {
                idx[size_t(axis)] = j;
                int64_t e = 0;
                for (size_t d = 0; d < idx.size(); ++d)
                  e = e * c.shape[d] + idx[d];
                double v = double(static_cast<float>(x[size_t(e)]));
                bool better = at < 0 || (isMax ? v > best : v < best) || (last && v == best);
                if (better) {
                  best = v;
                  at = j;
                }
              }
              ASSERT_EQ(got[size_t(o)], at) << "slice " << o;
            }
          }
    }
}

TEST_P(ReduceDeviceTest, ArgMaxArgMinTiesAxesAndKeepdims) {
  checkArgReduce<float>(device());
  checkArgReduce<Half>(device());
  checkArgReduce<BFloat16>(device());
  checkArgReduce<int32_t>(device());
  checkArgReduce<int64_t>(device());
  checkArgReduce<double>(device());
  checkArgReduce<int8_t>(device());
}


/// CumSum (opset 14) or CumProd (opset 26) of T along `axis` (a constant
/// input) against a running sum/product in double on multi-indices, with
/// exclusive and reverse. The values keep every partial result exact in
/// each type: CumSum of -1/0/1 over at most 100 steps, CumProd of -1/1/2
/// over at most 9 (powers of two).
template <typename T> void checkScan(const std::string &device, bool sum) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  const std::vector<Case> cases =
      sum ? std::vector<Case>{{{3, 100, 1100}, 1}, {{2, 1100, 7}, -1}, {{100}, 0},
                              {{4, 1, 3}, -2},     {{0, 5}, 1},         {{2, 3, 4, 5}, -3}}
          : std::vector<Case>{{{3, 9, 1100}, 1}, {{1100, 9}, -1}, {{0, 5}, 1}, {{4, 1}, 1}};
  for (const Case &c : cases) {
    int64_t rank = int64_t(c.shape.size()), axis = c.axis < 0 ? c.axis + rank : c.axis;
    std::vector<T> x(size_t(product(c.shape)));
    std::vector<double> xd(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      int64_t r = int64_t((i * 7 + i / 3) % 3);
      xd[i] = sum ? double(r - 1) : (r == 0 ? -1.0 : double(r));
      x[i] = T(static_cast<float>(xd[i]));
    }
    for (int exclusive : {0, 1})
      for (int reverse : {0, 1}) {
        SCOPED_TRACE(shapeString(c.shape) + " axis " + std::to_string(c.axis) + " exclusive " +
                     std::to_string(exclusive) + " reverse " + std::to_string(reverse));
        OpTester t(sum ? "CumSum" : "CumProd", sum ? 14 : 26);
        t.attrInt("exclusive", exclusive).attrInt("reverse", reverse);
        t.input(c.shape, x).constantInput(tensorOf<int64_t>({}, {c.axis}));
        std::vector<HostTensor> out = runOrFail(t, device);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].shape, c.shape);
        std::vector<T> got = valuesOf<T>(out[0]);
        ASSERT_EQ(got.size(), x.size());
        for (int64_t e = 0; e < product(c.shape); ++e) {
          std::vector<int64_t> idx = unravel(e, c.shape);
          int64_t at = idx[size_t(axis)], dim = c.shape[size_t(axis)];
          double acc = sum ? 0.0 : 1.0;
          for (int64_t j = 0; j < dim; ++j) {
            bool before = reverse ? j > at : j < at;
            if (!(before || (!exclusive && j == at)))
              continue;
            idx[size_t(axis)] = j;
            int64_t off = 0;
            for (size_t d = 0; d < idx.size(); ++d)
              off = off * c.shape[d] + idx[d];
            acc = sum ? acc + xd[size_t(off)] : acc * xd[size_t(off)];
          }
          ASSERT_EQ(double(static_cast<float>(got[size_t(e)])), acc) << "element " << e;
        }
      }
  }
}

TEST_P(ReduceDeviceTest, CumSumAndCumProdExclusiveReverseAnyAxis) {
  for (bool sum : {true, false}) {
    SCOPED_TRACE(sum ? "CumSum" : "CumProd");
    checkScan<float>(device(), sum);
    checkScan<Half>(device(), sum);
    checkScan<BFloat16>(device(), sum);
    checkScan<int32_t>(device(), sum);
    checkScan<int64_t>(device(), sum);
    checkScan<double>(device(), sum);
  }
}

} // namespace
