//===- TransformerTest.cpp - RotaryEmbedding, Einsum and Attention kernels ===//
//
// The transformer ops against double-precision loops written here, for
// f32, f16, bf16 and f64, on every selected device through the op tester
// (OpTester.h): odd batch, head and sequence sizes, size-1 dimensions, rows
// longer than a thread block, every attribute the kernels read, and the
// one-line errors of bad data. The CUDA launchers of these ops run the same
// bodies as the CPU kernels; `--device cuda` runs these cases on a GPU. Built
// into RuntimeNormalizationTest (tests/runtime/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "OpTester.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <type_traits>

using namespace mpc;
using namespace mpc::optest;
using namespace mpc::test;

namespace {

class TransformerTest : public DeviceTypeTest {};
const double kInf = std::numeric_limits<double>::infinity();
OPTEST_INSTANTIATE_FLOAT_TYPES(TransformerTest);

//===----------------------------------------------------------------------===//
// RotaryEmbedding
//===----------------------------------------------------------------------===//

/// One RotaryEmbedding case: X is [batch, heads, seq, head] (fourD) or
/// [batch, seq, heads * head] with num_heads; `dim` 0 rotates the whole head.
struct RotaryCase {
  int64_t batch, heads, seq, head, dim;
  bool fourD, interleaved, positions;
};

template <typename T> void checkRotary(const std::string &device, const RotaryCase &c) {
  SCOPED_TRACE(testing::Message() << "batch " << c.batch << " heads " << c.heads << " seq "
                                  << c.seq << " head " << c.head << " dim " << c.dim
                                  << (c.fourD ? " 4-D" : " 3-D")
                                  << (c.interleaved ? " interleaved" : "")
                                  << (c.positions ? " positions" : ""));
  std::mt19937 rng(23);
  int64_t dim = c.dim ? c.dim : c.head, half = dim / 2;
  int64_t n = c.batch * c.heads * c.seq * c.head;
  int64_t rows = c.positions ? c.seq + 3 : c.batch * c.seq;
  std::vector<T> x = randomVector<T>(size_t(n), rng, -2, 2);
  std::vector<T> cosC = randomVector<T>(size_t(rows * half), rng);
  std::vector<T> sinC = randomVector<T>(size_t(rows * half), rng);
  std::vector<int64_t> pos(static_cast<size_t>(c.batch * c.seq));
  for (int64_t i = 0; i < int64_t(pos.size()); ++i)
    pos[size_t(i)] = (i * 5 + 2) % rows;
  std::vector<double> xd = toDoubles(x);
  std::vector<double> expected(static_cast<size_t>(n)), scale(static_cast<size_t>(n), 0.0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < c.seq; ++s) {
      int64_t row = c.positions ? pos[size_t(b * c.seq + s)] : b * c.seq + s;
      for (int64_t h = 0; h < c.heads; ++h) {
        int64_t off = c.fourD ? ((b * c.heads + h) * c.seq + s) * c.head
                              : ((b * c.seq + s) * c.heads + h) * c.head;
        for (int64_t e = 0; e < c.head; ++e)
          expected[size_t(off + e)] = xd[size_t(off + e)];
        for (int64_t i = 0; i < half; ++i) {
          int64_t i1 = c.interleaved ? 2 * i : i, i2 = c.interleaved ? 2 * i + 1 : i + half;
          double co = toDouble(cosC[size_t(row * half + i)]);
          double si = toDouble(sinC[size_t(row * half + i)]);
          double x1 = xd[size_t(off + i1)], x2 = xd[size_t(off + i2)];
          expected[size_t(off + i1)] = co * x1 - si * x2;
          expected[size_t(off + i2)] = si * x1 + co * x2;
          scale[size_t(off + i1)] = scale[size_t(off + i2)] =
              std::fabs(co * x1) + std::fabs(si * x2) + std::fabs(si * x1) + std::fabs(co * x2);
        }
      }
    }
  OpTester t("RotaryEmbedding", 23);
  if (c.interleaved)
    t.attrInt("interleaved", 1);
  if (c.dim)
    t.attrInt("rotary_embedding_dim", c.dim);
  if (c.fourD) {
    t.input({c.batch, c.heads, c.seq, c.head}, x);
  } else {
    t.attrInt("num_heads", c.heads);
    t.input({c.batch, c.seq, c.heads * c.head}, x);
  }
  std::vector<int64_t> cacheShape =
      c.positions ? std::vector<int64_t>{rows, half} : std::vector<int64_t>{c.batch, c.seq, half};
  t.input(cacheShape, cosC).input(cacheShape, sinC);
  if (c.positions)
    t.input<int64_t>({c.batch, c.seq}, pos);
  EXPECT_TRUE(allClose(runOutput<T>(t, device), expected, scale));
}

OPTEST_TYPED_P(TransformerTest, RotaryEmbedding) {
  const RotaryCase cases[] = {
      {2, 3, 5, 8, 0, true, false, false},     // 4-D, the whole head rotated
      {2, 3, 5, 8, 0, true, true, false},      // interleaved pairs
      {1, 3, 7, 10, 6, false, true, true},     // 3-D, partial, position ids
      {3, 1, 1, 6, 4, false, false, true},     // size-1 heads and sequence
      {1, 1, 1, 2, 0, true, false, false},     // one pair
      {1, 2, 1100, 64, 32, true, false, true}, // a long sequence, partial
      {0, 2, 3, 4, 0, true, false, false},     // empty batch
  };
  for (const RotaryCase &c : cases)
    checkRotary<T>(device, c);
}

OPTEST_TYPED_P(TransformerTest, RotaryEmbeddingPositionOutsideTheCachesIsOneLine) {
  // Position 9 of caches with 4 rows: the CPU kernel and the CUDA launcher
  // record the same index error against cos_cache.
  for (int64_t bad : {9, -1}) {
    OpTester t("RotaryEmbedding", 23);
    std::vector<T> zeros(12, fromDouble<T>(0));
    t.input({1, 2, 3, 2}, zeros).input({4, 1}, std::vector<T>(4, fromDouble<T>(1)));
    t.input({4, 1}, std::vector<T>(4, fromDouble<T>(0)));
    t.input<int64_t>({1, 3}, {0, bad, 1});
    EXPECT_EQ(runExpectingError(t, device),
              "node 'node' (RotaryEmbedding): index " + std::to_string(bad) +
                  " out of range for [4, 1]");
  }
}

//===----------------------------------------------------------------------===//
// Einsum
//===----------------------------------------------------------------------===//

/// One Einsum case: the node's equation, and the same equation spelled
/// with one plain label per dimension (no '...', explicit output) for the
/// reference.
struct EinsumCase {
  std::string equation;
  std::vector<std::string> labels;
  std::string output;
  std::vector<std::vector<int64_t>> shapes;
};

/// The reference: every assignment of the labels, counted like an
/// odometer, adding the product of the operands to its output element; the
/// scale is the sum of the products' magnitudes (the accumulation's error).
void refEinsum(const EinsumCase &c, const std::vector<std::vector<double>> &in,
               std::vector<double> &out, std::vector<double> &scale) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < c.labels.size(); ++i)
    for (size_t d = 0; d < c.labels[i].size(); ++d)
      size[c.labels[i][d]] = c.shapes[i][d];
  std::vector<char> all;
  int64_t total = 1, outCount = 1;
  for (auto &kv : size) {
    all.push_back(kv.first);
    total *= kv.second;
  }
  for (char l : c.output)
    outCount *= size[l];
  out.assign(size_t(outCount), 0.0);
  scale.assign(size_t(outCount), 0.0);
  std::map<char, int64_t> at;
  for (char l : all)
    at[l] = 0;
  auto flat = [&](const std::string &labels) {
    int64_t off = 0;
    for (char l : labels)
      off = off * size[l] + at[l];
    return size_t(off);
  };
  for (int64_t it = 0; it < total; ++it) {
    double prod = 1;
    for (size_t i = 0; i < in.size(); ++i)
      prod *= in[i][flat(c.labels[i])];
    out[flat(c.output)] += prod;
    scale[flat(c.output)] += std::fabs(prod);
    for (size_t d = all.size(); d-- > 0;) {
      if (++at[all[d]] < size[all[d]])
        break;
      at[all[d]] = 0;
    }
  }
}

OPTEST_TYPED_P(TransformerTest, Einsum) {
  const EinsumCase cases[] = {
      {"ij,jk->ik", {"ij", "jk"}, "ik", {{3, 5}, {5, 4}}},              // matmul
      {"bij,bjk->bik", {"bij", "bjk"}, "bik", {{3, 2, 1100}, {3, 1100, 2}}}, // long k
      {"bhqd,bhkd->bhqk", {"bhqd", "bhkd"}, "bhqk", {{2, 3, 5, 8}, {2, 3, 7, 8}}},
      {"bij,jk->bik", {"bij", "jk"}, "bik", {{2, 3, 4}, {4, 5}}},       // shared B
      {"ij,kj->ki", {"ij", "kj"}, "ki", {{3, 5}, {4, 5}}},              // transposed output
      {"ij->ji", {"ij"}, "ji", {{3, 5}}},                                // transpose only
      {"ii->", {"ii"}, "", {{6, 6}}},                                    // trace
      {"ii->i", {"ii"}, "i", {{6, 6}}},                                  // diagonal
      {"ijk->j", {"ijk"}, "j", {{2, 3, 4}}},                             // sums
      {"ij,ij->", {"ij", "ij"}, "", {{3, 7}, {3, 7}}},                   // all contracted
      {"i,j->ij", {"i", "j"}, "ij", {{3}, {4}}},                         // outer product
      {"ij,jk", {"ij", "jk"}, "ik", {{2, 3}, {3, 2}}},                   // implicit output
      {"...ij,...jk->...ik", {"aij", "ajk"}, "aik", {{2, 3, 4}, {2, 4, 5}}}, // '...'
      {"ijx,jky->ki", {"ijx", "jky"}, "ki", {{2, 3, 2}, {3, 4, 3}}},   // summed labels
      {"ij,jk->ik", {"ij", "jk"}, "ik", {{1, 1}, {1, 1}}},              // size 1
      {"ij,jk->ik", {"ij", "jk"}, "ik", {{0, 3}, {3, 2}}},              // empty rows
      {"ij,jk,kl->il", {"ij", "jk", "kl"}, "il", {{2, 3}, {3, 2}, {2, 2}}}, // three operands
  };
  std::mt19937 rng(12);
  for (const EinsumCase &c : cases) {
    SCOPED_TRACE(c.equation);
    OpTester t("Einsum", 12);
    t.attrString("equation", c.equation);
    std::vector<std::vector<double>> in;
    for (const std::vector<int64_t> &shape : c.shapes) {
      std::vector<T> v = randomVector<T>(size_t(product(shape)), rng);
      in.push_back(toDoubles(v));
      t.input(shape, v);
    }
    std::vector<double> expected, scale;
    refEinsum(c, in, expected, scale);
    Tolerance tol = TypeTraits<T>::kTol;
    if (!std::is_same<T, double>::value)
      tol.accum = 1e-5; // fp32 accumulation over up to 1100 terms
    EXPECT_TRUE(allClose(runOutput<T>(t, device), expected, scale, tol));
  }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// One Attention case: Q [batch, qHeads, qSeq, head] and K/V [batch,
/// kvHeads, kvSeq, head/vHead] (or their 3-D forms [batch, seq, heads *
/// head] with q_num_heads/kv_num_heads); a mask of `maskShape` (empty: none),
/// bool or of Q's type.
struct AttentionCase {
  int64_t batch, qHeads, kvHeads, qSeq, kvSeq, head, vHead;
  bool threeD = false, causal = false;
  std::vector<int64_t> maskShape = {};
  bool boolMask = false;
  float scale = 0, softcap = 0; // 0: the default scale, no soft cap
};

template <typename T> void checkAttention(const std::string &device, const AttentionCase &c) {
  SCOPED_TRACE(testing::Message()
               << "batch " << c.batch << " heads " << c.qHeads << "/" << c.kvHeads << " seq "
               << c.qSeq << "/" << c.kvSeq << " head " << c.head << "/" << c.vHead
               << (c.threeD ? " 3-D" : " 4-D") << (c.causal ? " causal" : "") << " mask rank "
               << c.maskShape.size() << (c.boolMask ? " bool" : "") << " scale " << c.scale
               << " softcap " << c.softcap);
  std::mt19937 rng(31);
  int64_t b = c.batch, qh = c.qHeads, kvh = c.kvHeads, s = c.qSeq, t = c.kvSeq;
  std::vector<T> q = randomVector<T>(size_t(b * qh * s * c.head), rng, -2, 2);
  std::vector<T> k = randomVector<T>(size_t(b * kvh * t * c.head), rng, -2, 2);
  std::vector<T> v = randomVector<T>(size_t(b * kvh * t * c.vHead), rng);
  std::vector<double> qd = toDoubles(q), kd = toDoubles(k), vd = toDoubles(v);
  // The mask: column 0 always kept (no row is all -inf), others by a pattern.
  int64_t maskCount = c.maskShape.empty() ? 0 : product(c.maskShape);
  std::vector<T> floatMask = randomVector<T>(size_t(maskCount), rng, -1, 1);
  std::vector<bool> boolMask(static_cast<size_t>(maskCount));
  std::vector<int64_t> m4(4, 1);
  for (size_t d = 0; d < c.maskShape.size(); ++d)
    m4[4 - c.maskShape.size() + d] = c.maskShape[d];
  for (int64_t i = 0; i < maskCount; ++i)
    boolMask[size_t(i)] = i % m4[3] == 0 || (i * 7) % 3 != 0;
  auto at4 = [&](int64_t bb, int64_t h, int64_t i, int64_t e, int64_t heads, int64_t seq,
                 int64_t size) {
    return size_t(c.threeD ? ((bb * seq + i) * heads + h) * size + e
                           : ((bb * heads + h) * seq + i) * size + e);
  };
  double scale = c.scale ? c.scale : 1 / std::sqrt(double(c.head));
  std::vector<double> expected(static_cast<size_t>(b * qh * s * c.vHead));
  std::vector<double> errScale(expected.size());
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t h = 0; h < qh; ++h) {
      int64_t g = h / (qh / kvh);
      for (int64_t i = 0; i < s; ++i) {
        std::vector<double> p(static_cast<size_t>(t));
        double mx = -kInf;
        for (int64_t j = 0; j < t; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.head; ++e)
            dot += qd[at4(bb, h, i, e, qh, s, c.head)] * kd[at4(bb, g, j, e, kvh, t, c.head)];
          dot *= scale;
          if (c.softcap)
            dot = c.softcap * std::tanh(dot / c.softcap);
          if (maskCount) {
            int64_t off = (((m4[0] == 1 ? 0 : bb) * m4[1] + (m4[1] == 1 ? 0 : h)) * m4[2] +
                           (m4[2] == 1 ? 0 : i)) * m4[3] + j;
            if (j >= m4[3])
              dot = -kInf;
            else if (c.boolMask)
              dot = boolMask[size_t(off)] ? dot : -kInf;
            else
              dot += toDouble(floatMask[size_t(off)]);
          }
          if (c.causal && j > i)
            dot = -kInf;
          p[size_t(j)] = dot;
          mx = std::max(mx, dot);
        }
        double sum = 0;
        for (double &x : p)
          sum += x = std::exp(x - mx);
        for (int64_t e = 0; e < c.vHead; ++e) {
          double y = 0, mag = 0;
          for (int64_t j = 0; j < t; ++j) {
            y += p[size_t(j)] / sum * vd[at4(bb, g, j, e, kvh, t, c.vHead)];
            mag += p[size_t(j)] / sum * std::fabs(vd[at4(bb, g, j, e, kvh, t, c.vHead)]);
          }
          expected[at4(bb, h, i, e, qh, s, c.vHead)] = y;
          errScale[at4(bb, h, i, e, qh, s, c.vHead)] = mag;
        }
      }
    }
  OpTester op("Attention", 23);
  if (c.causal)
    op.attrInt("is_causal", 1);
  if (c.scale)
    op.attrFloat("scale", c.scale);
  if (c.softcap)
    op.attrFloat("softcap", c.softcap);
  if (c.threeD) {
    op.attrInt("q_num_heads", qh).attrInt("kv_num_heads", kvh);
    op.input({b, s, qh * c.head}, q).input({b, t, kvh * c.head}, k);
    op.input({b, t, kvh * c.vHead}, v);
  } else {
    op.input({b, qh, s, c.head}, q).input({b, kvh, t, c.head}, k).input({b, kvh, t, c.vHead}, v);
  }
  if (maskCount) {
    if (c.boolMask)
      op.input(tensorOf<bool>(c.maskShape, boolMask));
    else
      op.input(c.maskShape, floatMask);
  }
  Tolerance tol = TypeTraits<T>::kTol;
  if (!std::is_same<T, double>::value)
    tol.accum = 1e-4; // fp32 scores: their error is the probabilities' relative error
  EXPECT_TRUE(allClose(runOutput<T>(op, device), expected, errScale, tol));
}

OPTEST_TYPED_P(TransformerTest, Attention) {
  std::vector<AttentionCase> cases = {
      {2, 3, 3, 5, 7, 8, 6},                                // plain 4-D, V head of its own
      {1, 4, 2, 3, 5, 8, 8, false, true},                   // grouped heads, causal
      {2, 3, 1, 5, 6, 4, 6, true, false, {5, 6}},           // 3-D, 2-D float mask
      {2, 3, 3, 5, 7, 8, 8, false, false, {2, 1, 5, 7}, true}, // bool mask per batch
      {1, 2, 2, 3, 6, 8, 8, false, false, {1, 4}, true},    // mask narrower than the keys
      {1, 2, 1, 4, 4, 16, 16, false, true, {}, false, 0.3f, 2.0f}, // scale and soft cap
      {1, 1, 1, 2, 1500, 16, 16},                           // key rows longer than a block
      {1, 1, 1, 1, 1, 1, 1},                                // everything size 1
  };
  for (const AttentionCase &c : cases)
    checkAttention<T>(device, c);
}

} // namespace
