//===- DataTest.cpp - Data-movement ops on every selected device ------------===//
//
// Identity, Reshape, Flatten, Squeeze, Unsqueeze, inference Dropout,
// Transpose, Slice, Expand, Concat, Split, Tile, constant Pad, SliceGrad,
// Where, Gather and GatherGrad (with their out-of-range messages), Sum and
// Mean, Shape (start/end), Size, Range, ConstantOfShape, Trilu,
// GatherElements (with its out-of-range message), OneHot, DepthToSpace,
// SpaceToDepth, GatherND, ScatterElements, ScatterND (duplicates and every
// reduction, out-of-range messages), ReverseSequence, EyeLike, Compress and
// NonZero
// through the op tester (OpTester.h) on each selected device, over dtypes of
// every element size (bool, i8, u8, i16, f16, bf16, i32, f32, i64, f64).
// The expected output of each case is computed here by numpy's definition
// of the op on multi-indices (not the CopyPlans the kernels share) and the
// comparison is byte-exact: moving data must not change a bit. Shapes
// include size-1 and empty dimensions, rows longer than 1024 and ranks up
// to 6; bounds come as initializers (what the CUDA rows take).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Kernels/Storage.h"

#include "OpTester.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace mpc;
using namespace mpc::optest;

namespace {

using Shape = std::vector<int64_t>;

const std::vector<DType> kTypes = {DType::Bool, DType::I8,  DType::U8,  DType::I16,
                                   DType::F16,  DType::BF16, DType::I32, DType::F32,
                                   DType::I64,  DType::F64};

int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// A tensor of `dt` whose elements are distinct where the type allows:
/// element i holds (i * 7 + seed) mod 61 + 1, stored in the type (bool: odd).
HostTensor numbered(DType dt, const Shape &shape, int seed = 0) {
  HostTensor t(dt, shape);
  size_t es = runtimeElementSize(dt);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v = double((i * 7 + seed) % 61 + 1);
    char *p = reinterpret_cast<char *>(t.bytes.data()) + i * int64_t(es);
    auto put = [&](auto x) { std::memcpy(p, &x, sizeof(x)); };
    switch (dt) {
    case DType::Bool: put(bool(int64_t(v) % 2)); break;
    case DType::I8: put(int8_t(v)); break;
    case DType::U8: put(uint8_t(v)); break;
    case DType::I16: put(int16_t(v)); break;
    case DType::F16: put(kernels::castValue<Half>(v)); break;
    case DType::BF16: put(kernels::castValue<BFloat16>(v)); break;
    case DType::I32: put(int32_t(v)); break;
    case DType::F32: put(float(v)); break;
    case DType::I64: put(int64_t(v)); break;
    case DType::F64: put(v); break;
    default: ADD_FAILURE() << "no values for " << dtypeName(dt).str();
    }
  }
  return t;
}

HostTensor ints(const std::vector<int64_t> &v) {
  return tensorOf<int64_t>({int64_t(v.size())}, v);
}

int64_t linear(const Shape &idx, const Shape &s) {
  int64_t off = 0;
  for (size_t d = 0; d < s.size(); ++d)
    off = off * s[d] + idx[d];
  return off;
}

/// The expected tensor of `shape`: element j is in's element src(j), or
/// `fill`'s first element where src returns false.
HostTensor moved(const HostTensor &in, const Shape &shape,
                 const std::function<bool(const Shape &, Shape &)> &src,
                 const HostTensor *fill = nullptr) {
  HostTensor t(in.dtype, shape);
  size_t es = runtimeElementSize(in.dtype);
  Shape j(shape.size(), 0), i;
  for (int64_t e = 0, n = count(shape); e < n; ++e) {
    char *dst = reinterpret_cast<char *>(t.bytes.data()) + e * int64_t(es);
    if (src(j, i))
      std::memcpy(dst, in.bytes.data() + linear(i, in.shape) * int64_t(es), es);
    else if (fill)
      std::memcpy(dst, fill->bytes.data(), es);
    else
      std::memset(dst, 0, es);
    for (size_t d = shape.size(); d-- > 0;)
      if (++j[d] < shape[d])
        break;
      else
        j[d] = 0;
  }
  return t;
}

/// Byte-exact comparison, naming the first differing element.
::testing::AssertionResult sameBytes(const HostTensor &got, const HostTensor &want) {
  if (got.dtype != want.dtype)
    return ::testing::AssertionFailure() << "dtype " << dtypeName(got.dtype).str() << ", want "
                                         << dtypeName(want.dtype).str();
  if (got.shape != want.shape)
    return ::testing::AssertionFailure() << "shape " << formatShape(got.shape) << ", want "
                                         << formatShape(want.shape);
  size_t es = runtimeElementSize(got.dtype);
  for (size_t b = 0; b < got.bytes.size(); ++b)
    if (got.bytes[b] != want.bytes[b])
      return ::testing::AssertionFailure()
             << "element " << b / es << " differs (" << dtypeName(got.dtype).str() << ")";
  return ::testing::AssertionSuccess();
}

/// Runs `t` on `device` and compares output `k` with `want`.
void expectOutput(const OpTester &t, const std::string &device, const HostTensor &want,
                  unsigned k = 0) {
  std::vector<HostTensor> out = runOrFail(t, device);
  ASSERT_GT(out.size(), k);
  EXPECT_TRUE(sameBytes(out[k], want));
}

class DataTest : public DeviceTest {};
OPTEST_INSTANTIATE_DEVICES(DataTest);

TEST_P(DataTest, ViewLikeCopiesKeepTheBytes) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, {2, 1, 1100});
    auto same = [&](const Shape &s) {
      return moved(x, s, [&](const Shape &j, Shape &i) {
        int64_t e = linear(j, s);
        i = {e / 1100, 0, e % 1100};
        return true;
      });
    };
    expectOutput(OpTester("Identity", 21).input(x), device(), same({2, 1, 1100}));
    expectOutput(OpTester("Reshape", 21).input(x).constantInput(ints({-1, 550, 2})), device(),
                 same({2, 550, 2}));
    expectOutput(OpTester("Flatten", 21).attrInt("axis", -1).input(x), device(),
                 same({2, 1100}));
    expectOutput(OpTester("Squeeze", 21).input(x).constantInput(ints({-2})), device(),
                 same({2, 1100}));
    expectOutput(OpTester("Unsqueeze", 21).input(x).constantInput(ints({0, -1})), device(),
                 same({1, 2, 1, 1100, 1}));
  }
  // Empty: nothing to copy.
  HostTensor e = numbered(DType::F32, {0, 3});
  expectOutput(OpTester("Identity", 21).input(e), device(), HostTensor(DType::F32, {0, 3}));
  // Flatten keeps the sizes on both sides of the axis, empty ones too.
  expectOutput(OpTester("Flatten", 21).input(e), device(), HostTensor(DType::F32, {0, 3}));
  HostTensor e3 = numbered(DType::F32, {2, 0, 3});
  expectOutput(OpTester("Flatten", 21).attrInt("axis", 2).input(e3), device(),
               HostTensor(DType::F32, {0, 3}));
  expectOutput(OpTester("Flatten", 21).attrInt("axis", 1).input(e3), device(),
               HostTensor(DType::F32, {2, 0}));
}

TEST_P(DataTest, InferenceDropoutIsTheIdentityWithATrueMask) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, {3, 1031});
    OpTester t("Dropout", 13);
    t.input(x).outputs(2);
    std::vector<HostTensor> out = runOrFail(t, device());
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(sameBytes(out[0], x));
    EXPECT_EQ(valuesOf<bool>(out[1]), std::vector<bool>(size_t(x.numElements()), true));
    // A ratio without training_mode is still inference.
    OpTester r("Dropout", 13);
    r.input(x).constantInput(tensorOf<float>({}, {0.5f}));
    expectOutput(r, device(), x);
  }
}

/// Before opset 10 the mask has the data's type (the opset 9 exports of the
/// ONNX light models): ones of that type.
TEST_P(DataTest, OpsetNineDropoutMaskIsOnesOfTheDataType) {
  for (DType dt : {DType::F32, DType::F16, DType::F64}) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, {2, 1029});
    OpTester t("Dropout", 9);
    t.attrFloat("ratio", 0.5f).input(x).outputs(2);
    std::vector<HostTensor> out = runOrFail(t, device());
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(sameBytes(out[0], x));
    ASSERT_EQ(out[1].dtype, dt);
    std::vector<double> ones(size_t(x.numElements()), 1.0);
    EXPECT_TRUE(allCloseTensor(out[1], ones));
  }
}

TEST_P(DataTest, TransposeMatchesThePermutedIndex) {
  std::mt19937 rng(3);
  std::vector<std::pair<Shape, Shape>> cases = {
      {{1100, 3}, {1, 0}},       {{2, 3, 4}, {0, 2, 1}}, {{2, 1, 4, 1}, {3, 2, 1, 0}},
      {{5}, {0}},                {{2, 3, 0}, {2, 0, 1}}, {{2, 3, 1, 2, 3, 2}, {5, 1, 3, 0, 4, 2}},
      {{4, 1, 1030}, {2, 0, 1}}, {{3, 2, 2}, {}},        {{}, {}}};
  for (DType dt : kTypes)
    for (auto &c : cases) {
      const Shape &in = c.first, &permGiven = c.second;
      SCOPED_TRACE(dtypeName(dt).str() + " " + formatShape(in));
      Shape perm = permGiven;
      if (perm.empty())
        for (size_t k = in.size(); k-- > 0;)
          perm.push_back(int64_t(k)); // the default: axes reversed
      Shape out(in.size());
      for (size_t k = 0; k < in.size(); ++k)
        out[k] = in[size_t(perm[k])];
      HostTensor x = numbered(dt, in, int(rng() % 13));
      OpTester t("Transpose", 21);
      if (!permGiven.empty())
        t.attrInts("perm", perm);
      t.input(x);
      expectOutput(t, device(), moved(x, out, [&](const Shape &j, Shape &i) {
                     i.assign(in.size(), 0);
                     for (size_t k = 0; k < in.size(); ++k)
                       i[size_t(perm[k])] = j[k];
                     return true;
                   }));
    }
}

/// One axis of a Slice by the ONNX rule: negative bounds count from the
/// end; for a positive step start and end are clamped to [0, dim], for a
/// negative one start to [0, dim - 1] and end to [-1, dim - 1].
struct AxisSlice {
  int64_t start, step, count;
};
AxisSlice resolve(int64_t dim, int64_t start, int64_t end, int64_t step) {
  auto clamp = [](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
  int64_t s = start < 0 ? start + dim : start, e = end < 0 ? end + dim : end;
  if (step > 0) {
    s = clamp(s, 0, dim);
    e = clamp(e, 0, dim);
  } else {
    s = clamp(s, 0, dim - 1);
    e = clamp(e, -1, dim - 1);
  }
  int64_t n = step > 0 ? (e - s + step - 1) / step : (s - e - step - 1) / -step;
  return {s, step, std::max<int64_t>(n, 0)};
}

TEST_P(DataTest, SliceWithStepsNegativeAxesAndOpenEnds) {
  struct Case {
    Shape in;
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<Case> cases = {
      {{4, 1100}, {1, 3}, {3, kMax}, {0, 1}, {1, 2}},
      {{4, 5, 6}, {-1}, {-kMax}, {-2}, {-1}},
      {{3, 1, 7}, {5, 0}, {0, 1}, {2, 1}, {-2, 1}},
      {{2, 3, 4, 5}, {0, 1, 0}, {2, 3, 5}, {-4, 1, -1}, {1, 1, 3}},
      {{5, 4}, {2}, {2}, {0}, {1}}, // empty output
  };
  for (DType dt : kTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dt).str() + " " + formatShape(c.in));
      HostTensor x = numbered(dt, c.in);
      std::vector<AxisSlice> ax(c.in.size());
      for (size_t k = 0; k < c.in.size(); ++k)
        ax[k] = {0, 1, c.in[k]};
      for (size_t a = 0; a < c.axes.size(); ++a) {
        int64_t k = c.axes[a] < 0 ? c.axes[a] + int64_t(c.in.size()) : c.axes[a];
        ax[size_t(k)] = resolve(c.in[size_t(k)], c.starts[a], c.ends[a], c.steps[a]);
      }
      Shape out;
      for (const AxisSlice &s : ax)
        out.push_back(s.count);
      HostTensor want = moved(x, out, [&](const Shape &j, Shape &i) {
        i.assign(j.size(), 0);
        for (size_t k = 0; k < j.size(); ++k)
          i[k] = ax[k].start + j[k] * ax[k].step;
        return true;
      });
      OpTester t("Slice", 13);
      t.input(x);
      for (const auto *v : {&c.starts, &c.ends, &c.axes, &c.steps})
        t.constantInput(ints(*v));
      expectOutput(t, device(), want);
      // Default axes and steps (absent inputs) over a full-rank bound list.
      if (c.axes.size() == c.in.size() && c.steps == std::vector<int64_t>(c.in.size(), 1)) {
        std::vector<int64_t> starts(c.in.size()), ends(c.in.size());
        for (size_t a = 0; a < c.axes.size(); ++a) {
          size_t k = size_t(c.axes[a] < 0 ? c.axes[a] + int64_t(c.in.size()) : c.axes[a]);
          starts[k] = c.starts[a];
          ends[k] = c.ends[a];
        }
        expectOutput(OpTester("Slice", 13).input(x).constantInput(ints(starts))
                         .constantInput(ints(ends)),
                     device(), want);
      }
      // SliceGrad scatters a dY of the output's shape back, zeros elsewhere.
      if (dt == DType::F32 || dt == DType::F16 || dt == DType::BF16) {
        HostTensor dy = numbered(dt, out, 5);
        HostTensor zero(dt, {1});
        std::memset(zero.bytes.data(), 0, zero.bytes.size());
        HostTensor dx = moved(dy, c.in, [&](const Shape &i, Shape &j) {
          j.assign(i.size(), 0);
          for (size_t k = 0; k < i.size(); ++k) {
            int64_t d = i[k] - ax[k].start;
            if (d % ax[k].step != 0 || d / ax[k].step < 0 || d / ax[k].step >= ax[k].count)
              return false;
            j[k] = d / ax[k].step;
          }
          return true;
        }, &zero);
        OpTester g("SliceGrad", 1, "ai.mpc.training");
        g.input(dy).constantInput(ints(c.in));
        for (const auto *v : {&c.starts, &c.ends, &c.axes, &c.steps})
          g.constantInput(ints(*v));
        expectOutput(g, device(), dx);
      }
    }
}

TEST_P(DataTest, ExpandAndTileRepeat) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, {3, 1, 5});
    Shape out = {2, 3, 1100, 5};
    expectOutput(OpTester("Expand", 13).input(x).constantInput(ints({2, 1, 1100, 1})), device(),
                 moved(x, out, [&](const Shape &j, Shape &i) {
                   i = {j[1], 0, j[3]};
                   return true;
                 }));
    Shape tiled = {6, 2, 5};
    expectOutput(OpTester("Tile", 13).input(x).constantInput(ints({2, 2, 1})), device(),
                 moved(x, tiled, [&](const Shape &j, Shape &i) {
                   i = {j[0] % 3, 0, j[2]};
                   return true;
                 }));
  }
}

TEST_P(DataTest, ConcatAndSplitAlongAnyAxis) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor a = numbered(dt, {2, 3, 4}, 0), b = numbered(dt, {2, 0, 4}, 1),
               c = numbered(dt, {2, 1030, 4}, 2);
    const HostTensor *parts[] = {&a, &b, &c};
    Shape whole = {2, 1033, 4};
    HostTensor cat(dt, whole);
    size_t es = runtimeElementSize(dt);
    for (int64_t o = 0; o < 2; ++o) {
      int64_t pos = 0;
      for (const HostTensor *p : parts) {
        int64_t row = p->shape[1] * 4 * int64_t(es);
        if (row) // an empty part has no bytes to copy (and may have no buffer)
          std::memcpy(cat.bytes.data() + (o * 1033 * 4 + pos) * int64_t(es),
                      p->bytes.data() + o * row, size_t(row));
        pos += p->shape[1] * 4;
      }
    }
    expectOutput(OpTester("Concat", 13).attrInt("axis", -2).input(a).input(b).input(c),
                 device(), cat);
    // Split back: the attribute form (opset 11) and the input form (13).
    std::vector<HostTensor> byAttr =
        runOrFail(OpTester("Split", 11).attrInt("axis", 1).attrInts("split", {3, 0, 1030})
                      .input(cat).outputs(3),
                  device());
    std::vector<HostTensor> byInput = runOrFail(
        OpTester("Split", 13).attrInt("axis", -2).input(cat).constantInput(ints({3, 0, 1030}))
            .outputs(3),
        device());
    ASSERT_EQ(byAttr.size(), 3u);
    ASSERT_EQ(byInput.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(sameBytes(byAttr[size_t(k)], *parts[k])) << "attribute split " << k;
      EXPECT_TRUE(sameBytes(byInput[size_t(k)], *parts[k])) << "input split " << k;
    }
    // Equal parts on the last axis (opset 18: num_outputs).
    std::vector<HostTensor> halves =
        runOrFail(OpTester("Split", 18).attrInt("axis", -1).attrInt("num_outputs", 2)
                      .input(a).outputs(2),
                  device());
    ASSERT_EQ(halves.size(), 2u);
    for (int64_t h = 0; h < 2; ++h)
      EXPECT_TRUE(sameBytes(halves[size_t(h)], moved(a, {2, 3, 2}, [&](const Shape &j, Shape &i) {
                    i = {j[0], j[1], j[2] + 2 * h};
                    return true;
                  })));
  }
}

TEST_P(DataTest, ConstantPadWithValueAxesAndCropping) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, {3, 1100});
    HostTensor value = numbered(dt, {}, 40);
    // Pads [1, -2] before and [2, 3] after, the value an input.
    Shape out = {3 + 1 + 2, 1100 - 2 + 3};
    auto inside = [&](const Shape &j, Shape &i) {
      i = {j[0] - 1, j[1] + 2};
      return i[0] >= 0 && i[0] < 3 && i[1] >= 0 && i[1] < 1100;
    };
    expectOutput(
        OpTester("Pad", 19).input(x).constantInput(ints({1, -2, 2, 3})).input(value),
        device(), moved(x, out, inside, &value));
    // No value: zeros; only axis -1 padded (the axes input).
    HostTensor zero(dt, {1});
    std::memset(zero.bytes.data(), 0, zero.bytes.size());
    expectOutput(OpTester("Pad", 19)
                     .input(x)
                     .constantInput(ints({4, 0}))
                     .absentInput()
                     .constantInput(ints({-1})),
                 device(), moved(x, {3, 1104}, [&](const Shape &j, Shape &i) {
                   i = {j[0], j[1] - 4};
                   return i[1] >= 0;
                 }, &zero));
  }
  // Reflect (the image family's gather under --device cuda).
  HostTensor x = numbered(DType::F32, {4});
  expectOutput(OpTester("Pad", 19).attrString("mode", "reflect").input(x).constantInput(
                   ints({2, 1})),
               device(), moved(x, {7}, [&](const Shape &j, Shape &i) {
                 static const int64_t src[] = {2, 1, 0, 1, 2, 3, 2};
                 i = {src[j[0]]};
                 return true;
               }));
}

TEST_P(DataTest, WhereBroadcastsConditionAndValues) {
  // Condition [2, 1, 1100], X [3, 1], Y [1100]: output [2, 3, 1100].
  Shape cs = {2, 1, 1100}, xs = {3, 1}, ys = {1100}, out = {2, 3, 1100};
  std::vector<bool> cond(size_t(count(cs)));
  for (size_t i = 0; i < cond.size(); ++i)
    cond[i] = (i * 5) % 7 < 3;
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, xs, 1), y = numbered(dt, ys, 2);
    size_t es = runtimeElementSize(dt);
    // Y everywhere, then X where the condition holds.
    HostTensor want = moved(y, out, [&](const Shape &j, Shape &i) {
      i = {j[2]};
      return true;
    });
    for (int64_t e = 0; e < count(out); ++e) {
      int64_t a = e / 3300, b = (e / 1100) % 3, c = e % 1100;
      if (cond[size_t(a * 1100 + c)])
        std::memcpy(want.bytes.data() + e * int64_t(es), x.bytes.data() + b * int64_t(es), es);
    }
    expectOutput(OpTester("Where", 16).input(tensorOf<bool>(cs, cond)).input(x).input(y),
                 device(), want);
  }
  // One condition for the whole tensor picks a whole operand.
  HostTensor a = numbered(DType::F32, {4, 3}, 1), b = numbered(DType::F32, {4, 3}, 2);
  expectOutput(OpTester("Where", 16).input(tensorOf<bool>({}, {false})).input(a).input(b),
               device(), b);
}

TEST_P(DataTest, GatherWithNegativeIndicesOnAnyAxis) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, {3, 5, 1100});
    // Axis -2 with i64 indices [2, 2] (negative ones count from the end).
    std::vector<int64_t> idx = {4, -1, 0, -5};
    HostTensor want = moved(x, {3, 2, 2, 1100}, [&](const Shape &j, Shape &i) {
      int64_t v = idx[size_t(j[1] * 2 + j[2])];
      i = {j[0], v < 0 ? v + 5 : v, j[3]};
      return true;
    });
    expectOutput(OpTester("Gather", 13).attrInt("axis", -2).input(x).input(
                     tensorOf<int64_t>({2, 2}, idx)),
                 device(), want);
    // Axis 0 with one i32 scalar index: the row itself.
    HostTensor row = moved(x, {5, 1100}, [&](const Shape &j, Shape &i) {
      i = {2, j[0], j[1]};
      return true;
    });
    expectOutput(OpTester("Gather", 13).input(x).input(tensorOf<int32_t>({}, {-1})), device(),
                 row);
  }
}

TEST_P(DataTest, GatherIndexOutOfRangeNamesTheIndex) {
  HostTensor x = numbered(DType::F32, {4, 2});
  OpTester t("Gather", 13);
  t.input(x).input(tensorOf<int64_t>({3}, {1, 4, 0}));
  auto out = t.run(device());
  ASSERT_FALSE(bool(out));
  std::string msg = llvm::toString(out.takeError());
  EXPECT_NE(msg.find("index 4 out of range for [4, 2]"), std::string::npos) << msg;
  OpTester neg("Gather", 13);
  neg.input(x).input(tensorOf<int32_t>({2}, {-5, 0}));
  auto out2 = neg.run(device());
  ASSERT_FALSE(bool(out2));
  msg = llvm::toString(out2.takeError());
  EXPECT_NE(msg.find("index -5 out of range for [4, 2]"), std::string::npos) << msg;
}

TEST_P(DataTest, GatherGradSumsRepeatedIndicesInOrder) {
  // X [3, 6, 5], axis 1, indices [2, 3] with index 2 four times (-4 is 2):
  // the sums stay small integers, exact in every float type.
  std::vector<int64_t> idx = {2, -4, 5, 2, 0, 2};
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor dy = numbered(dt, {3, 2, 3, 5});
    std::vector<double> want(3 * 6 * 5, 0.0);
    for (int64_t o = 0; o < 3; ++o)
      for (int64_t j = 0; j < 6; ++j)
        for (int64_t k = 0; k < 5; ++k) {
          int64_t r = idx[size_t(j)] < 0 ? idx[size_t(j)] + 6 : idx[size_t(j)];
          // numbered(): element e holds (e * 7) % 61 + 1.
          int64_t e = (o * 6 + j) * 5 + k;
          want[size_t((o * 6 + r) * 5 + k)] += double((e * 7) % 61 + 1);
        }
    for (bool i32 : {false, true}) {
      OpTester t("GatherGrad", 1, "ai.mpc.training");
      t.input(dy).constantInput(ints({3, 6, 5}));
      if (i32)
        t.input(tensorOf<int32_t>({2, 3}, std::vector<int32_t>(idx.begin(), idx.end())));
      else
        t.input(tensorOf<int64_t>({2, 3}, idx));
      t.attrInt("axis", -2);
      std::vector<HostTensor> out = runOrFail(t, device());
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(allCloseTensor(out[0], want, {}, test::Tolerance{0, 0, 0})) << "exact sums";
    }
  }
  // An index outside [-dim, dim) names it and dX's shape.
  OpTester bad("GatherGrad", 1, "ai.mpc.training");
  bad.input(numbered(DType::F32, {2})).constantInput(ints({4})).input(
      tensorOf<int64_t>({2}, {1, 7}));
  auto r = bad.run(device());
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_NE(msg.find("index 7 out of range for [4]"), std::string::npos) << msg;
}

TEST_P(DataTest, SumAndMeanBroadcastAnyNumberOfOperands) {
  // Operands [2, 1, 1030], [3, 1], [1030], [] and, past the launcher's eight,
  // nine equal ones: every result against a float64 sum.
  std::vector<Shape> shapes = {{2, 1, 1030}, {3, 1}, {1030}, {}};
  Shape out = {2, 3, 1030};
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    SCOPED_TRACE(dtypeName(dt).str());
    std::vector<HostTensor> ins;
    for (size_t k = 0; k < shapes.size(); ++k)
      ins.push_back(numbered(dt, shapes[k], int(k)));
    // numbered() values are small integers: exact in every type.
    auto value = [&](size_t k, const Shape &j) {
      const Shape &s = shapes[k];
      int64_t e = 0;
      for (size_t a = 0; a < s.size(); ++a)
        e = e * s[a] + (s[a] == 1 ? 0 : j[out.size() - s.size() + a]);
      return double((e * 7 + int64_t(k)) % 61 + 1);
    };
    std::vector<double> sum(size_t(count(out)));
    Shape j(3);
    for (int64_t e = 0; e < count(out); ++e) {
      j = {e / 3090, (e / 1030) % 3, e % 1030};
      for (size_t k = 0; k < shapes.size(); ++k)
        sum[size_t(e)] += value(k, j);
    }
    std::vector<double> mean = sum;
    for (double &v : mean)
      v /= double(shapes.size());
    for (bool isMean : {false, true}) {
      OpTester t(isMean ? "Mean" : "Sum", 13);
      for (const HostTensor &x : ins)
        t.input(x);
      std::vector<HostTensor> got = runOrFail(t, device());
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(allCloseTensor(got[0], isMean ? mean : sum)) << (isMean ? "Mean" : "Sum");
    }
    // Nine operands (more than one launch carries: two runs).
    OpTester nine("Sum", 13);
    HostTensor x = numbered(dt, {5});
    for (int k = 0; k < 9; ++k)
      nine.input(x);
    std::vector<double> want;
    for (int64_t e = 0; e < 5; ++e)
      want.push_back(9.0 * double((e * 7) % 61 + 1));
    std::vector<HostTensor> got = runOrFail(nine, device());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(allCloseTensor(got[0], want));
  }
}


TEST_P(DataTest, SumAndMeanOfManyOperandsRoundOnce) {
  // 21 broadcast operands of random values: three runs of a launch's eight on
  // a device. The oracle adds them left to right in the compute type (float
  // for the 16-bit types, as numpy's float32 accumulation of float16) and
  // rounds once; a run rounded to the output's type in between would differ.
  const std::vector<Shape> kinds = {{3, 1, 5}, {4, 1}, {5}, {}, {3, 4, 5}, {1, 4, 5}};
  const Shape out = {3, 4, 5};
  const size_t operands = 21;
  std::mt19937 rng(7);
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    SCOPED_TRACE(dtypeName(dt).str());
    std::vector<HostTensor> ins;
    std::vector<Shape> shapes;
    for (size_t k = 0; k < operands; ++k) {
      shapes.push_back(kinds[k % kinds.size()]);
      HostTensor d(DType::F64, shapes.back());
      for (int64_t e = 0; e < d.numElements(); ++e)
        d.data<double>()[e] = std::uniform_real_distribution<double>(-60, 60)(rng);
      auto x = castHostTensor(d, dt);
      ASSERT_TRUE(bool(x));
      ins.push_back(std::move(*x));
    }
    auto offset = [&](const Shape &sh, int64_t e) {
      Shape j = {e / 20, (e / 5) % 4, e % 5};
      int64_t o = 0;
      for (size_t a = 0; a < sh.size(); ++a)
        o = o * sh[a] + (sh[a] == 1 ? 0 : j[out.size() - sh.size() + a]);
      return o;
    };
    for (bool isMean : {false, true}) {
      HostTensor want(DType::F64, out);
      for (int64_t e = 0; e < count(out); ++e) {
        double acc;
        if (dt == DType::F64) {
          acc = ins[0].getAsDouble(offset(shapes[0], e));
          for (size_t k = 1; k < operands; ++k)
            acc += ins[k].getAsDouble(offset(shapes[k], e));
          if (isMean)
            acc /= double(operands);
        } else {
          float f = float(ins[0].getAsDouble(offset(shapes[0], e)));
          for (size_t k = 1; k < operands; ++k)
            f += float(ins[k].getAsDouble(offset(shapes[k], e)));
          if (isMean)
            f /= float(operands);
          acc = f;
        }
        want.data<double>()[e] = acc;
      }
      auto rounded = castHostTensor(want, dt); // a float's value rounds as the kernel's store
      ASSERT_TRUE(bool(rounded));
      OpTester t(isMean ? "Mean" : "Sum", 13);
      for (const HostTensor &x : ins)
        t.input(x);
      std::vector<HostTensor> got = runOrFail(t, device());
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].bytes.size(), rounded->bytes.size());
      EXPECT_EQ(std::memcmp(got[0].bytes.data(), rounded->bytes.data(), got[0].bytes.size()), 0)
          << (isMean ? "Mean" : "Sum") << " differs from one rounding";
    }
  }
}

TEST_P(DataTest, ShapeAndSizeOfAnyTensor) {
  for (DType dt : {DType::Bool, DType::F16, DType::I64}) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, {2, 1, 1100, 3});
    expectOutput(OpTester("Shape", 21).input(x), device(), ints({2, 1, 1100, 3}));
    // start/end (opset 15) clamp; negative ones count from the end.
    expectOutput(OpTester("Shape", 21).attrInt("start", -3).attrInt("end", -1).input(x),
                 device(), ints({1, 1100}));
    expectOutput(OpTester("Shape", 21).attrInt("start", 1).attrInt("end", 99).input(x),
                 device(), ints({1, 1100, 3}));
    expectOutput(OpTester("Shape", 21).attrInt("start", 3).attrInt("end", 1).input(x),
                 device(), ints({}));
    expectOutput(OpTester("Size", 21).input(x), device(), tensorOf<int64_t>({}, {6600}));
  }
  HostTensor e = numbered(DType::F32, {4, 0, 2});
  expectOutput(OpTester("Shape", 21).input(e), device(), ints({4, 0, 2}));
  expectOutput(OpTester("Size", 21).input(e), device(), tensorOf<int64_t>({}, {0}));
  HostTensor scalar = numbered(DType::F32, {});
  expectOutput(OpTester("Shape", 21).input(scalar), device(), ints({}));
  expectOutput(OpTester("Size", 21).input(scalar), device(), tensorOf<int64_t>({}, {1}));
}

/// Range(start, limit, delta) of T against start + i * delta in double.
/// Its operands must be known before running, so the executor folds a small
/// Range on the host; one of more than 65536 elements runs on the device.
template <typename T>
void checkRange(const std::string &device, double start, double limit, double delta) {
  SCOPED_TRACE(std::to_string(start) + ":" + std::to_string(limit) + ":" + std::to_string(delta));
  auto scalar = [](double v) { return tensorOf<T>({}, {T(static_cast<float>(v))}); };
  std::vector<HostTensor> out = runOrFail(
      OpTester("Range", 11)
          .constantInput(scalar(start))
          .constantInput(scalar(limit))
          .constantInput(scalar(delta)),
      device);
  ASSERT_EQ(out.size(), 1u);
  int64_t n = std::max<int64_t>(int64_t(std::ceil((limit - start) / delta)), 0);
  ASSERT_EQ(out[0].shape, Shape{n});
  std::vector<T> got = valuesOf<T>(out[0]);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(double(static_cast<float>(got[size_t(i)])),
              double(static_cast<float>(T(static_cast<float>(start + double(i) * delta)))))
        << "element " << i;
}

TEST_P(DataTest, RangeCountsFromStartByDelta) {
  for (auto [s, l, d] : std::vector<std::array<double, 3>>{
           {0, 1500, 1}, {10, -5, -3}, {3, 3, 1}, {5, 0, 1}, {-2, 7, 2}}) {
    checkRange<int64_t>(device(), s, l, d);
    checkRange<int32_t>(device(), s, l, d);
    checkRange<float>(device(), s, l, d);
  }
  // Large enough to run on the device rather than be folded while planning.
  checkRange<int64_t>(device(), -5, 70000, 1);
  checkRange<int32_t>(device(), 70000, -70000, -2);
  checkRange<float>(device(), 0, 70000, 0.5);
  // Fractional steps in float: exact in binary (0.25).
  checkRange<float>(device(), -1, 300, 0.25);
  checkRange<double>(device(), 1, 2, 0.125);
}


TEST_P(DataTest, TriluKeepsTheTriangleOfEveryMatrix) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    for (const Shape &shape : std::vector<Shape>{{2, 3, 5, 1100}, {7, 4}, {1, 1}, {3, 0, 4}})
      for (int64_t k : {0, 2, -3})
        for (int upper : {0, 1}) {
          SCOPED_TRACE(formatShape(shape) + " k " + std::to_string(k) + " upper " +
                       std::to_string(upper));
          HostTensor x = numbered(dt, shape);
          size_t r = shape.size();
          HostTensor want = moved(x, shape, [&](const Shape &j, Shape &i) {
            i = j;
            int64_t d = j[r - 1] - j[r - 2];
            return upper ? d >= k : d <= k;
          });
          OpTester t("Trilu", 14);
          t.attrInt("upper", upper).input(x);
          if (k != 0)
            t.constantInput(tensorOf<int64_t>({}, {k}));
          expectOutput(t, device(), want);
        }
  }
}

TEST_P(DataTest, GatherElementsOnAnyAxisWithNegativeIndices) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    HostTensor x = numbered(dt, {3, 5, 1100});
    // Axis -2: indices [3, 2, 1100], each in [-5, 5).
    Shape is = {3, 2, 1100};
    std::vector<int64_t> idx(size_t(count(is)));
    for (size_t i = 0; i < idx.size(); ++i)
      idx[i] = int64_t((i * 3) % 10) - 5;
    HostTensor want = moved(x, is, [&](const Shape &j, Shape &i) {
      int64_t v = idx[size_t(linear(j, is))];
      i = {j[0], v < 0 ? v + 5 : v, j[2]};
      return true;
    });
    expectOutput(OpTester("GatherElements", 13).attrInt("axis", -2).input(x).input(
                     tensorOf<int64_t>(is, idx)),
                 device(), want);
    // Axis 0 with i32 indices of a smaller shape [2, 1, 3].
    std::vector<int32_t> i32 = {2, -1, 0, 1, -3, 2};
    Shape s32 = {2, 1, 3};
    HostTensor want32 = moved(x, s32, [&](const Shape &j, Shape &i) {
      int64_t v = i32[size_t(linear(j, s32))];
      i = {v < 0 ? v + 3 : v, j[1], j[2]};
      return true;
    });
    expectOutput(OpTester("GatherElements", 13).input(x).input(tensorOf<int32_t>(s32, i32)),
                 device(), want32);
  }
  // Empty indices: an empty output.
  HostTensor x = numbered(DType::F32, {4, 2});
  expectOutput(OpTester("GatherElements", 13).input(x).input(tensorOf<int64_t>({0, 2}, {})),
               device(), HostTensor(DType::F32, {0, 2}));
}

TEST_P(DataTest, GatherElementsIndexOutOfRangeNamesTheIndex) {
  HostTensor x = numbered(DType::F32, {4, 2});
  for (auto [given, text] : std::vector<std::pair<int64_t, std::string>>{
           {4, "index 4 out of range for [4, 2]"}, {-5, "index -5 out of range for [4, 2]"}}) {
    OpTester t("GatherElements", 13);
    t.input(x).input(tensorOf<int64_t>({2, 2}, {1, 0, given, 3}));
    auto out = t.run(device());
    ASSERT_FALSE(bool(out));
    std::string msg = llvm::toString(out.takeError());
    EXPECT_NE(msg.find(text), std::string::npos) << msg;
  }
}


TEST_P(DataTest, ConstantOfShapeFillsWithTheValue) {
  // Large shapes run on the device; small ones are folded while planning.
  for (DType dt : kTypes)
    for (const Shape &shape : std::vector<Shape>{{3, 30000}, {2, 1, 5}, {0, 4}}) {
      SCOPED_TRACE(dtypeName(dt).str() + " " + formatShape(shape));
      HostTensor value = numbered(dt, {1}, 40); // element 0 holds 41 (bool: true)
      Tensor t(dt, {1});
      t.setBytes(value.bytes);
      HostTensor want(dt, shape);
      size_t es = runtimeElementSize(dt);
      for (int64_t i = 0; i < want.numElements(); ++i)
        std::memcpy(want.bytes.data() + i * int64_t(es), value.bytes.data(), es);
      expectOutput(OpTester("ConstantOfShape", 21)
                       .attr(Attribute::makeTensor("value", std::move(t)))
                       .constantInput(ints(shape)),
                   device(), want);
    }
  // No value: float zeros.
  expectOutput(OpTester("ConstantOfShape", 21).constantInput(ints({70000})), device(),
               HostTensor(DType::F32, {70000}));
}


TEST_P(DataTest, OneHotOnAnyAxisWithNegativeIndices) {
  // Indices [3, 1100] in [-6, 6) and one out of range (7: a row of off values).
  Shape is = {3, 1100};
  std::vector<int64_t> idx(size_t(count(is)));
  for (size_t i = 0; i < idx.size(); ++i)
    idx[i] = int64_t((i * 5) % 12) - 6;
  idx[17] = 7;
  const int64_t depth = 6;
  for (DType dt : kTypes)
    for (int64_t axis : {-1, 0, 1}) {
      SCOPED_TRACE(dtypeName(dt).str() + " axis " + std::to_string(axis));
      HostTensor vals = numbered(dt, {2}, 3); // off = 4, on = 11 (bool: false, true)
      int64_t a = axis < 0 ? axis + 3 : axis;
      Shape os = is;
      os.insert(os.begin() + a, depth);
      HostTensor want = moved(vals, os, [&](const Shape &j, Shape &i) {
        Shape rest = j;
        rest.erase(rest.begin() + a);
        int64_t v = idx[size_t(linear(rest, is))];
        i = {(v < 0 ? v + depth : v) == j[size_t(a)] ? 1 : 0};
        return true;
      });
      for (DType it : {DType::I64, DType::I32, DType::F32}) {
        SCOPED_TRACE(dtypeName(it).str());
        HostTensor ind(it, is);
        for (int64_t i = 0; i < count(is); ++i) {
          char *p = reinterpret_cast<char *>(ind.bytes.data());
          if (it == DType::I64)
            reinterpret_cast<int64_t *>(p)[i] = idx[size_t(i)];
          else if (it == DType::I32)
            reinterpret_cast<int32_t *>(p)[i] = int32_t(idx[size_t(i)]);
          else
            reinterpret_cast<float *>(p)[i] = float(idx[size_t(i)]);
        }
        expectOutput(OpTester("OneHot", 11)
                         .attrInt("axis", axis)
                         .input(ind)
                         .constantInput(tensorOf<int64_t>({}, {depth}))
                         .input(vals),
                     device(), want);
      }
    }
  // Empty indices: an empty output.
  HostTensor vals = numbered(DType::F32, {2});
  expectOutput(OpTester("OneHot", 11)
                   .input(tensorOf<int64_t>({0, 2}, {}))
                   .constantInput(tensorOf<int64_t>({}, {3}))
                   .input(vals),
               device(), HostTensor(DType::F32, {0, 2, 3}));
}

//===----------------------------------------------------------------------===//
// DepthToSpace, SpaceToDepth, GatherND, ScatterElements, ScatterND,
// ReverseSequence, EyeLike, Compress, NonZero (the CUDA rows of MoveOps.cpp):
// expected tensors from the ONNX definitions on multi-indices, updates
// applied in index order with one rounding per update.
//===----------------------------------------------------------------------===//

/// The types a scatter reduction runs on (CUDA: kCudaBinaryTypes).
const std::vector<DType> kArithmeticTypes = {DType::F32, DType::F16, DType::BF16, DType::I32,
                                             DType::I64};

/// `v` stored in `dt` and read back (small integers are exact in each type).
double roundTo(DType dt, double v) {
  switch (dt) {
  case DType::F16: return kernels::castValue<double>(kernels::castValue<Half>(v));
  case DType::BF16: return kernels::castValue<double>(kernels::castValue<BFloat16>(v));
  case DType::F32: return double(float(v));
  case DType::I32: return double(int32_t(v));
  default: return v;
  }
}

/// A tensor of `dt` holding `v` (small integers).
HostTensor fromDoubles(DType dt, const Shape &shape, const std::vector<double> &v) {
  HostTensor t(dt, shape);
  for (size_t i = 0; i < v.size(); ++i) {
    char *p = reinterpret_cast<char *>(t.bytes.data()) + i * runtimeElementSize(dt);
    auto put = [&](auto x) { std::memcpy(p, &x, sizeof(x)); };
    switch (dt) {
    case DType::F16: put(kernels::castValue<Half>(v[i])); break;
    case DType::BF16: put(kernels::castValue<BFloat16>(v[i])); break;
    case DType::F32: put(float(v[i])); break;
    case DType::I32: put(int32_t(v[i])); break;
    case DType::I64: put(int64_t(v[i])); break;
    default: ADD_FAILURE() << "no values for " << dtypeName(dt).str();
    }
  }
  return t;
}

/// The stored value after one scatter update (ONNX reduction), in `dt`.
double reduce(DType dt, const std::string &reduction, double old, double upd) {
  if (reduction == "add")
    return roundTo(dt, old + upd);
  if (reduction == "mul")
    return roundTo(dt, old * upd);
  if (reduction == "max")
    return std::max(old, upd);
  if (reduction == "min")
    return std::min(old, upd);
  return upd;
}

/// The index tensor of `values` in `dt` (i32 or i64).
HostTensor indexTensor(DType dt, const Shape &shape, const std::vector<int64_t> &values) {
  if (dt == DType::I64)
    return tensorOf<int64_t>(shape, values);
  return tensorOf<int32_t>(shape, std::vector<int32_t>(values.begin(), values.end()));
}

TEST_P(DataTest, DepthToSpaceAndSpaceToDepthMoveBlocks) {
  for (DType dt : kTypes)
    for (const auto &sb : std::vector<std::pair<Shape, int64_t>>{
             {{2, 3, 4, 6}, 2}, {{1, 1, 3, 3}, 3}, {{1, 2, 2, 1200}, 2}, {{0, 2, 2, 2}, 2}}) {
      const Shape &space = sb.first;
      const int64_t b = sb.second;
      Shape depth = {space[0], space[1] * b * b, space[2] / b, space[3] / b};
      SCOPED_TRACE(dtypeName(dt).str() + " " + formatShape(space) + " b " + std::to_string(b));
      // Space element (n, c, h, w) with (i, j) its place in the block.
      auto depthIndex = [&](const Shape &j, bool crd) {
        int64_t i0 = j[2] % b, j0 = j[3] % b;
        int64_t dc = crd ? j[1] * b * b + i0 * b + j0 : (i0 * b + j0) * space[1] + j[1];
        return Shape{j[0], dc, j[2] / b, j[3] / b};
      };
      HostTensor d = numbered(dt, depth);
      for (bool crd : {false, true}) {
        OpTester t("DepthToSpace", 13);
        t.attrInt("blocksize", b).input(d);
        if (crd)
          t.attrString("mode", "CRD");
        expectOutput(t, device(), moved(d, space, [&](const Shape &j, Shape &i) {
                       i = depthIndex(j, crd);
                       return true;
                     }));
      }
      // SpaceToDepth: the inverse of DCR.
      HostTensor x = numbered(dt, space, 5);
      HostTensor want(dt, depth);
      HostTensor back = moved(x, space, [&](const Shape &j, Shape &i) {
        i = j;
        return true;
      });
      Shape j(4, 0);
      size_t es = runtimeElementSize(dt);
      for (int64_t e = 0; e < count(space); ++e) {
        std::memcpy(want.bytes.data() + linear(depthIndex(j, false), depth) * int64_t(es),
                    back.bytes.data() + e * int64_t(es), es);
        for (size_t k = 4; k-- > 0;)
          if (++j[k] < space[k])
            break;
          else
            j[k] = 0;
      }
      expectOutput(OpTester("SpaceToDepth", 13).attrInt("blocksize", b).input(x), device(),
                   want);
    }
}

TEST_P(DataTest, GatherNDWithBatchDimsAndNegativeIndices) {
  for (DType dt : kTypes)
    for (DType it : {DType::I64, DType::I32}) {
      SCOPED_TRACE(dtypeName(dt).str() + " indices " + dtypeName(it).str());
      // Rank 5 data, tuples of 1, 2 and 3 (negative values), slices of 1100 or 1.
      Shape ds = {3, 2, 2, 1, 1100};
      HostTensor x = numbered(dt, ds);
      for (int64_t depth : {1, 2, 3}) {
        Shape is = {2, 2, depth};
        std::vector<int64_t> idx;
        for (int64_t t = 0; t < 4; ++t)
          for (int64_t j = 0; j < depth; ++j)
            idx.push_back((t + j) % 2 ? -1 - (t % int(ds[size_t(j)])) : t % ds[size_t(j)]);
        Shape os = {2, 2};
        os.insert(os.end(), ds.begin() + depth, ds.end());
        HostTensor want = moved(x, os, [&](const Shape &j, Shape &i) {
          int64_t t = j[0] * 2 + j[1];
          i.clear();
          for (int64_t k = 0; k < depth; ++k) {
            int64_t v = idx[size_t(t * depth + k)];
            i.push_back(v < 0 ? v + ds[size_t(k)] : v);
          }
          i.insert(i.end(), j.begin() + 2, j.end());
          return true;
        });
        expectOutput(OpTester("GatherND", 13).input(x).input(indexTensor(it, is, idx)),
                     device(), want);
      }
      // batch_dims = 1: data [3, 4, 5], indices [3, 2, 1]: y[b, t] = x[b, idx[b, t]].
      HostTensor xb = numbered(dt, {3, 4, 5});
      std::vector<int64_t> ib = {0, -1, 3, 2, -4, 1};
      HostTensor wantb = moved(xb, {3, 2, 5}, [&](const Shape &j, Shape &i) {
        int64_t v = ib[size_t(j[0] * 2 + j[1])];
        i = {j[0], v < 0 ? v + 4 : v, j[2]};
        return true;
      });
      expectOutput(OpTester("GatherND", 13).attrInt("batch_dims", 1).input(xb).input(
                       indexTensor(it, {3, 2, 1}, ib)),
                   device(), wantb);
    }
  // No tuples: an empty output.
  expectOutput(OpTester("GatherND", 13)
                   .input(numbered(DType::F32, {4, 3}))
                   .input(tensorOf<int64_t>({0, 1}, {})),
               device(), HostTensor(DType::F32, {0, 3}));
}

TEST_P(DataTest, GatherNDIndexOutOfRangeNamesTheIndex) {
  for (int64_t given : {4, -5}) {
    OpTester t("GatherND", 13);
    t.input(numbered(DType::F32, {4, 2})).input(tensorOf<int64_t>({2, 1}, {1, given}));
    auto out = t.run(device());
    ASSERT_FALSE(bool(out));
    std::string msg = llvm::toString(out.takeError());
    EXPECT_NE(msg.find("index " + std::to_string(given) + " out of range"), std::string::npos)
        << msg;
  }
}

/// Runs `op` (ScatterElements or ScatterND, opset 18) with data `ds`,
/// `indices` and updates `us` for every reduction and its types, against
/// the updates applied in order: update element e lands on data element
/// target(e). `none` moves raw bytes of every type (the last update wins);
/// the reductions run on small integers, rounded in the type per update.
void expectScattered(const std::string &device, const std::string &op, int64_t axis,
                     const Shape &ds, const HostTensor &indices, const Shape &us,
                     const std::function<int64_t(int64_t)> &target) {
  for (std::string red : {"none", "add", "mul", "max", "min"})
    for (DType dt : red == "none" ? kTypes : kArithmeticTypes) {
      SCOPED_TRACE(op + " " + red + " " + dtypeName(dt).str() + " axis " +
                   std::to_string(axis) + " indices " + formatShape(indices.shape));
      OpTester t(op, 18);
      t.attrString("reduction", red);
      if (op == "ScatterElements")
        t.attrInt("axis", axis);
      HostTensor x, u, want;
      if (red == "none") {
        x = numbered(dt, ds);
        u = numbered(dt, us, 30);
        want = x;
        size_t es = runtimeElementSize(dt);
        for (int64_t e = 0; e < count(us); ++e)
          std::memcpy(want.bytes.data() + target(e) * int64_t(es),
                      u.bytes.data() + e * int64_t(es), es);
      } else {
        std::vector<double> xv(size_t(count(ds))), uv(size_t(count(us)));
        for (size_t i = 0; i < xv.size(); ++i)
          xv[i] = double(int64_t(i % 7) - 3);
        for (size_t i = 0; i < uv.size(); ++i)
          uv[i] = double(int64_t(i % 5) - 2);
        std::vector<double> wv = xv;
        for (size_t e = 0; e < uv.size(); ++e) {
          double &w = wv[size_t(target(int64_t(e)))];
          w = reduce(dt, red, w, uv[e]);
        }
        x = fromDoubles(dt, ds, xv);
        u = fromDoubles(dt, us, uv);
        want = fromDoubles(dt, ds, wv);
      }
      expectOutput(t.input(x).input(indices).input(u), device, want);
    }
}

TEST_P(DataTest, ScatterElementsAppliesDuplicatesInOrder) {
  // Data [3, 4, 1100], indices [3, 3, 1100] on axis 1 (-2), duplicates in
  // every line, negative values.
  Shape ds = {3, 4, 1100}, is = {3, 3, 1100};
  std::vector<int64_t> idx(size_t(count(is)));
  for (size_t e = 0; e < idx.size(); ++e)
    idx[e] = int64_t((e * 5 + e / 1100) % 5) - 2; // in [-2, 3), repeats along the axis
  for (int64_t axis : {1, -2})
    expectScattered(device(), "ScatterElements", axis, ds, tensorOf<int64_t>(is, idx), is,
                    [&](int64_t e) {
                      int64_t v = idx[size_t(e)];
                      return linear({e / 3300, v < 0 ? v + 4 : v, e % 1100}, ds);
                    });
  // i32 indices of a smaller shape on axis 0, and no indices at all.
  HostTensor x = numbered(DType::F32, {3, 2});
  expectOutput(OpTester("ScatterElements", 18)
                   .input(x)
                   .input(tensorOf<int32_t>({1, 2}, {2, -3}))
                   .input(tensorOf<float>({1, 2}, {100, 200})),
               device(), tensorOf<float>({3, 2}, {1, 200, 15, 22, 100, 36}));
  expectOutput(OpTester("ScatterElements", 18)
                   .input(x)
                   .input(tensorOf<int64_t>({0, 2}, {}))
                   .input(HostTensor(DType::F32, {0, 2})),
               device(), x);
}

TEST_P(DataTest, ScatterNDAppliesDuplicateTuplesInOrder) {
  // Data [4, 3, 1100]: tuples of 1 (slices [3, 1100]) and of 3 (single
  // elements), with duplicates and negative values.
  Shape ds = {4, 3, 1100};
  struct Case {
    Shape is;
    std::vector<int64_t> idx;
  };
  std::vector<Case> cases = {{{5, 1}, {1, -3, 3, 1, -1}},
                             {{2, 2, 3}, {0, 2, 5, -4, -1, 1099, 0, 2, 5, 3, 0, -1100}}};
  for (const Case &c : cases) {
    int64_t depth = c.is.back(), tuples = count(c.is) / depth;
    Shape us(c.is.begin(), c.is.end() - 1);
    us.insert(us.end(), ds.begin() + depth, ds.end());
    int64_t slice = count(us) / tuples;
    expectScattered(device(), "ScatterND", 0, ds, tensorOf<int64_t>(c.is, c.idx), us,
                    [&](int64_t e) {
                      int64_t t = e / slice;
                      Shape at(3, 0);
                      for (int64_t k = 0; k < depth; ++k) {
                        int64_t v = c.idx[size_t(t * depth + k)];
                        at[size_t(k)] = v < 0 ? v + ds[size_t(k)] : v;
                      }
                      return linear(at, ds) + e % slice;
                    });
  }
  // Rank-1 data, i32 indices, no tuples.
  HostTensor x = numbered(DType::F16, {5});
  HostTensor want = x;
  std::memcpy(want.bytes.data() + 4 * 2, numbered(DType::F16, {1}, 20).bytes.data(), 2);
  expectOutput(OpTester("ScatterND", 18)
                   .input(x)
                   .input(tensorOf<int32_t>({1, 1}, {-1}))
                   .input(numbered(DType::F16, {1}, 20)),
               device(), want);
  expectOutput(OpTester("ScatterND", 18)
                   .input(x)
                   .input(tensorOf<int64_t>({0, 1}, {}))
                   .input(HostTensor(DType::F16, {0})),
               device(), x);
}

TEST_P(DataTest, ScatterIndexOutOfRangeNamesTheIndex) {
  HostTensor x = numbered(DType::F32, {4, 2});
  OpTester e("ScatterElements", 18);
  e.input(x).input(tensorOf<int64_t>({1, 2}, {1, 4})).input(tensorOf<float>({1, 2}, {0, 0}));
  OpTester n("ScatterND", 18);
  n.input(x).input(tensorOf<int64_t>({2, 1}, {0, -5})).input(HostTensor(DType::F32, {2, 2}));
  for (auto [t, text] : std::vector<std::pair<const OpTester *, std::string>>{
           {&e, "index 4 out of range for [4, 2]"}, {&n, "index -5 out of range"}}) {
    auto out = t->run(device());
    ASSERT_FALSE(bool(out));
    std::string msg = llvm::toString(out.takeError());
    EXPECT_NE(msg.find(text), std::string::npos) << msg;
  }
}

TEST_P(DataTest, ReverseSequenceReversesEachBatchPrefix) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    // Time-major [5, 3, 1100] (the defaults), and batch-major [2, 4, 1, 3].
    for (const auto &c : std::vector<std::tuple<Shape, int64_t, std::vector<int64_t>>>{
             {{5, 3, 1100}, 1, {5, 1, 3}}, {{2, 4, 1, 3}, 0, {4, 2}}}) {
      const Shape &shape = std::get<0>(c);
      const int64_t batchAxis = std::get<1>(c);
      const std::vector<int64_t> &lens = std::get<2>(c);
      int64_t timeAxis = 1 - batchAxis;
      HostTensor x = numbered(dt, shape);
      HostTensor want = moved(x, shape, [&](const Shape &j, Shape &i) {
        i = j;
        int64_t len = lens[size_t(j[size_t(batchAxis)])], t = j[size_t(timeAxis)];
        if (t < len)
          i[size_t(timeAxis)] = len - 1 - t;
        return true;
      });
      expectOutput(OpTester("ReverseSequence", 10)
                       .attrInt("batch_axis", batchAxis)
                       .attrInt("time_axis", timeAxis)
                       .input(x)
                       .input(ints(lens)),
                   device(), want);
    }
  }
}

TEST_P(DataTest, EyeLikeOnAnyDiagonalAndType) {
  for (DType dt : kTypes)
    for (const Shape &shape : std::vector<Shape>{{3, 5}, {40, 1100}, {1, 1}, {0, 4}})
      for (int64_t k : {0, 2, -1, 1200}) {
        SCOPED_TRACE(dtypeName(dt).str() + " " + formatShape(shape) + " k " + std::to_string(k));
        HostTensor one = numbered(dt, {1}); // element 0 holds 1 (bool: true)
        HostTensor want = moved(one, shape, [&](const Shape &j, Shape &i) {
          i = {0};
          return j[1] - j[0] == k;
        });
        expectOutput(OpTester("EyeLike", 9).attrInt("k", k).input(numbered(dt, shape)),
                     device(), want);
      }
  // The dtype attribute: f32 in, i64 out.
  expectOutput(OpTester("EyeLike", 9)
                   .attrInt("dtype", int64_t(DType::I64))
                   .input(numbered(DType::F32, {2, 3})),
               device(), tensorOf<int64_t>({2, 3}, {1, 0, 0, 0, 1, 0}));
}

TEST_P(DataTest, CompressKeepsTheSelectedSlices) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtypeName(dt).str());
    Shape shape = {3, 4, 1100};
    HostTensor x = numbered(dt, shape);
    // Axis 1 (and -2) with a shorter condition; axis -1 over rows of 1100.
    std::vector<bool> c1 = {true, false, true};
    for (int64_t axis : {1, -2}) {
      HostTensor want = moved(x, {3, 2, 1100}, [&](const Shape &j, Shape &i) {
        i = {j[0], j[1] * 2, j[2]};
        return true;
      });
      expectOutput(OpTester("Compress", 11).attrInt("axis", axis).input(x).input(
                       tensorOf(Shape{3}, c1)),
                   device(), want);
    }
    std::vector<bool> c2(1100);
    for (size_t i = 0; i < c2.size(); ++i)
      c2[i] = i % 3 == 1;
    HostTensor want2 = moved(x, {3, 4, 367}, [&](const Shape &j, Shape &i) {
      i = {j[0], j[1], j[2] * 3 + 1};
      return true;
    });
    expectOutput(OpTester("Compress", 11).attrInt("axis", -1).input(x).input(
                     tensorOf(Shape{1100}, c2)),
                 device(), want2);
    // No axis: the flattened input; nothing kept: an empty output.
    HostTensor small = numbered(dt, {2, 3});
    HostTensor want3 = moved(small, {3}, [&](const Shape &j, Shape &i) {
      int64_t flat = j[0] == 0 ? 0 : j[0] == 1 ? 4 : 5;
      i = {flat / 3, flat % 3};
      return true;
    });
    expectOutput(OpTester("Compress", 11).input(small).input(
                     tensorOf(Shape{6}, std::vector<bool>{true, false, false, false, true, true})),
                 device(), want3);
    expectOutput(OpTester("Compress", 11).attrInt("axis", 0).input(small).input(
                     tensorOf(Shape{2}, std::vector<bool>{false, false})),
                 device(), HostTensor(dt, {0, 3}));
  }
}

TEST_P(DataTest, NonZeroListsCoordinatesInOrder) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64,
                   DType::I8, DType::Bool})
    for (const Shape &shape : std::vector<Shape>{{7}, {3, 1100}, {2, 1, 3, 2, 2}, {2, 0, 3}}) {
      SCOPED_TRACE(dtypeName(dt).str() + " " + formatShape(shape));
      // Every third element nonzero (bool: the odd numbered ones).
      HostTensor x = numbered(dt, shape);
      std::vector<bool> nz(size_t(count(shape)));
      size_t es = runtimeElementSize(dt);
      for (size_t e = 0; e < nz.size(); ++e) {
        char *p = reinterpret_cast<char *>(x.bytes.data()) + e * es;
        if (dt == DType::Bool)
          nz[e] = *p != 0;
        else if (e % 3)
          std::memset(p, 0, es);
        else
          nz[e] = true;
      }
      std::vector<int64_t> coords;
      int64_t kept = 0;
      for (bool b : nz)
        kept += b;
      coords.assign(size_t(kept) * shape.size(), 0);
      int64_t k = 0;
      Shape j(shape.size(), 0);
      for (size_t e = 0; e < nz.size(); ++e) {
        if (nz[e]) {
          for (size_t d = 0; d < shape.size(); ++d)
            coords[d * size_t(kept) + size_t(k)] = j[d];
          ++k;
        }
        for (size_t d = shape.size(); d-- > 0;)
          if (++j[d] < shape[d])
            break;
          else
            j[d] = 0;
      }
      expectOutput(OpTester("NonZero", 13).input(x), device(),
                   tensorOf<int64_t>({int64_t(shape.size()), kept}, coords));
    }
  // NaN counts; all zero: no columns.
  expectOutput(OpTester("NonZero", 13).input(tensorOf<float>(
                   {4}, {0.0f, std::numeric_limits<float>::quiet_NaN(), -0.0f, 2.0f})),
               device(), tensorOf<int64_t>({1, 2}, {1, 3}));
  expectOutput(OpTester("NonZero", 13).input(HostTensor(DType::F32, {2, 5})), device(),
               HostTensor(DType::I64, {2, 0}));
}

} // namespace
