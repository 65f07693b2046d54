//===- RecurrentTest.cpp - LSTM, GRU and RNN against a double reference ---===//
//
// The recurrent nodes on every selected device through the op tester
// (OpTester.h), against the ONNX definitions written here as direct double
// loops: forward, reverse and bidirectional, biases, initial states and
// peepholes, sequence_lens with shorter sequences (a graph constant, as the
// CUDA rows require), layout 1, clip, GRU's linear_before_reset and
// activations other than the defaults, hidden sizes that are not multiples
// of 32 and size-1 batches. Inputs are rounded to the storage type first and
// held in double for the reference.
//
//===----------------------------------------------------------------------===//
#include "OpTester.h"
#include "mpc/IR/Graph.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

using namespace mpc;
using namespace mpc::optest;
using namespace mpc::test;

namespace {

class RecurrentTest : public DeviceTypeTest {};
OPTEST_INSTANTIATE_FLOAT_TYPES(RecurrentTest);

/// An activation by ONNX name, with its alpha and beta.
struct Act {
  std::string name;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    if (name == "Sigmoid")
      return 1.0 / (1.0 + std::exp(-x));
    if (name == "Tanh")
      return std::tanh(x);
    if (name == "Relu")
      return std::max(0.0, x);
    if (name == "HardSigmoid")
      return std::max(0.0, std::min(1.0, alpha * x + beta));
    if (name == "LeakyRelu")
      return x < 0 ? alpha * x : x;
    ADD_FAILURE() << "no reference for " << name;
    return 0;
  }
};

/// One recurrent node: the op, its sizes and attributes.
struct Case {
  std::string op; // LSTM, GRU, RNN
  int64_t seq = 3, batch = 2, input = 4, hidden = 5;
  std::string direction = "forward";
  bool bias = true, initial = true, peephole = false, lbr = false, layout1 = false;
  float clip = 0;
  std::vector<int64_t> lens; ///< empty: all seq
  std::vector<Act> acts;     ///< per direction (f, g[, h]); empty: defaults
};

int64_t gatesOf(const Case &k) { return k.op == "LSTM" ? 4 : k.op == "GRU" ? 3 : 1; }
int64_t dirsOf(const Case &k) { return k.direction == "bidirectional" ? 2 : 1; }

std::vector<Act> defaultActs(const Case &k) {
  if (k.op == "LSTM")
    return {{"Sigmoid"}, {"Tanh"}, {"Tanh"}};
  if (k.op == "GRU")
    return {{"Sigmoid"}, {"Tanh"}};
  return {{"Tanh"}};
}

/// Inputs in double, layout 0 (X [seq, batch, input], states [dirs, batch, H]).
struct Inputs {
  std::vector<double> x, w, r, b, h0, c0, p;
};

/// Y [seq, dirs, batch, H], Y_h and Y_c [dirs, batch, H] (layout 0).
void reference(const Case &k, const Inputs &in, std::vector<double> &y, std::vector<double> &yh,
               std::vector<double> &yc) {
  const int64_t D = dirsOf(k), H = k.hidden, G = gatesOf(k), I = k.input, B = k.batch;
  std::vector<Act> acts = k.acts.empty() ? defaultActs(k) : k.acts;
  size_t perDir = defaultActs(k).size();
  y.assign(size_t(k.seq * D * B * H), 0.0);
  yh.assign(size_t(D * B * H), 0.0);
  yc.assign(size_t(D * B * H), 0.0);
  auto clip = [&](double v) {
    return k.clip > 0 ? std::max(-double(k.clip), std::min(double(k.clip), v)) : v;
  };
  for (int64_t d = 0; d < D; ++d) {
    auto act = [&](size_t i) { return acts[acts.size() == perDir ? i : d * perDir + i]; };
    for (int64_t b = 0; b < B; ++b) {
      int64_t len = k.lens.empty() ? k.seq : k.lens[size_t(b)];
      std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) {
        h[size_t(j)] = in.h0.empty() ? 0 : in.h0[size_t((d * B + b) * H + j)];
        c[size_t(j)] = in.c0.empty() ? 0 : in.c0[size_t((d * B + b) * H + j)];
      }
      for (int64_t s = 0; s < len; ++s) {
        int64_t t = (k.direction == "reverse" || d == 1) ? len - 1 - s : s;
        // xw[g] = W x + Wb, hr[g] = R h + Rb, per gate row.
        std::vector<double> xw(size_t(G * H)), hr(size_t(G * H));
        for (int64_t q = 0; q < G * H; ++q) {
          double a = in.b.empty() ? 0 : in.b[size_t(d * 2 * G * H + q)];
          double e = in.b.empty() ? 0 : in.b[size_t(d * 2 * G * H + G * H + q)];
          for (int64_t i = 0; i < I; ++i)
            a += in.w[size_t((d * G * H + q) * I + i)] * in.x[size_t((t * B + b) * I + i)];
          for (int64_t j = 0; j < H; ++j)
            e += in.r[size_t((d * G * H + q) * H + j)] * h[size_t(j)];
          xw[size_t(q)] = a;
          hr[size_t(q)] = e;
        }
        std::vector<double> hn(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) {
          auto pre = [&](int64_t g) { return xw[size_t(g * H + j)] + hr[size_t(g * H + j)]; };
          if (k.op == "LSTM") {
            auto peep = [&](int64_t g) {
              return in.p.empty() ? 0.0 : in.p[size_t(d * 3 * H + g * H + j)];
            };
            double ig = act(0)(clip(pre(0) + peep(0) * c[size_t(j)]));
            double fg = act(0)(clip(pre(2) + peep(2) * c[size_t(j)]));
            double cg = act(1)(clip(pre(3)));
            c[size_t(j)] = fg * c[size_t(j)] + ig * cg;
            double og = act(0)(clip(pre(1) + peep(1) * c[size_t(j)]));
            hn[size_t(j)] = og * act(2)(c[size_t(j)]);
          } else if (k.op == "GRU") {
            double z = act(0)(clip(pre(0))), r = act(0)(clip(pre(1)));
            double rb = in.b.empty() ? 0 : in.b[size_t(d * 2 * G * H + G * H + 2 * H + j)];
            double cand;
            if (k.lbr) {
              cand = xw[size_t(2 * H + j)] + r * hr[size_t(2 * H + j)];
            } else {
              double e = rb;
              for (int64_t i = 0; i < H; ++i)
                e += in.r[size_t((d * G * H + 2 * H + j) * H + i)] *
                     (act(0)(clip(xw[size_t(H + i)] + hr[size_t(H + i)])) * h[size_t(i)]);
              cand = xw[size_t(2 * H + j)] + e;
            }
            hn[size_t(j)] = (1 - z) * act(1)(clip(cand)) + z * h[size_t(j)];
          } else {
            hn[size_t(j)] = act(0)(clip(pre(0)));
          }
        }
        h = hn;
        for (int64_t j = 0; j < H; ++j)
          y[size_t(((t * D + d) * B + b) * H + j)] = h[size_t(j)];
      }
      for (int64_t j = 0; j < H; ++j) {
        yh[size_t((d * B + b) * H + j)] = h[size_t(j)];
        yc[size_t((d * B + b) * H + j)] = c[size_t(j)];
      }
    }
  }
}

/// Swaps the two leading axes of [a, b, inner].
template <typename V> V swapLeading(const V &v, int64_t a, int64_t b, int64_t inner) {
  V out(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t e = 0; e < inner; ++e)
        out[size_t((j * a + i) * inner + e)] = v[size_t((i * b + j) * inner + e)];
  return out;
}

template <typename T> void runCase(const Case &k, const std::string &device, uint32_t seed) {
  SCOPED_TRACE(k.op + " " + k.direction + " hidden " + std::to_string(k.hidden) +
               (k.layout1 ? " layout 1" : "") + (k.lens.empty() ? "" : " lens") +
               (k.lbr ? " lbr" : "") + (k.clip > 0 ? " clip" : ""));
  std::mt19937 rng(seed);
  const int64_t D = dirsOf(k), H = k.hidden, G = gatesOf(k), B = k.batch;
  Inputs in;
  auto make = [&](std::vector<double> &v, int64_t n) {
    std::vector<T> t = randomVector<T>(size_t(n), rng);
    v = toDoubles(t);
    return t;
  };
  std::vector<T> x = make(in.x, k.seq * B * k.input), w = make(in.w, D * G * H * k.input),
                 r = make(in.r, D * G * H * H), b, h0, c0, p;
  if (k.bias)
    b = make(in.b, D * 2 * G * H);
  if (k.initial) {
    h0 = make(in.h0, D * B * H);
    if (k.op == "LSTM")
      c0 = make(in.c0, D * B * H);
  }
  if (k.peephole)
    p = make(in.p, D * 3 * H);
  std::vector<double> y, yh, yc;
  reference(k, in, y, yh, yc);

  OpTester t(k.op, 14);
  t.attrInt("hidden_size", H).attrString("direction", k.direction);
  if (k.layout1)
    t.attrInt("layout", 1);
  if (k.lbr)
    t.attrInt("linear_before_reset", 1);
  if (k.clip > 0)
    t.attrFloat("clip", k.clip);
  if (!k.acts.empty()) {
    std::vector<std::string> names;
    std::vector<float> alphas, betas;
    for (const Act &a : k.acts) {
      names.push_back(a.name);
      if (a.name == "HardSigmoid" || a.name == "LeakyRelu")
        alphas.push_back(float(a.alpha));
      if (a.name == "HardSigmoid")
        betas.push_back(float(a.beta));
    }
    Attribute a;
    a.name = "activations";
    a.kind = AttrKind::Strings;
    a.strings.assign(names.begin(), names.end());
    t.attr(std::move(a));
    if (!alphas.empty())
      t.attrFloats("activation_alpha", alphas);
    if (!betas.empty())
      t.attrFloats("activation_beta", betas);
  }
  if (k.layout1)
    t.input({B, k.seq, k.input}, swapLeading(x, k.seq, B, k.input));
  else
    t.input({k.seq, B, k.input}, x);
  t.input({D, G * H, k.input}, w).input({D, G * H, H}, r);
  if (k.bias)
    t.input({D, 2 * G * H}, b);
  else
    t.absentInput();
  if (k.lens.empty())
    t.absentInput();
  else
    t.constantInput(tensorOf<int32_t>({B}, std::vector<int32_t>(k.lens.begin(), k.lens.end())));
  auto state = [&](const std::vector<T> &v) {
    if (v.empty())
      t.absentInput();
    else if (k.layout1)
      t.input({B, D, H}, swapLeading(v, D, B, H));
    else
      t.input({D, B, H}, v);
  };
  state(h0);
  if (k.op == "LSTM") {
    state(c0);
    if (k.peephole)
      t.input({D, 3 * H}, p);
  }
  t.outputs(k.op == "LSTM" ? 3 : 2);
  std::vector<HostTensor> out = runOrFail(t, device);
  ASSERT_EQ(out.size(), size_t(k.op == "LSTM" ? 3 : 2));
  if (k.layout1) {
    y = swapLeading(y, k.seq * D, B, H);
    yh = swapLeading(yh, D, B, H);
    yc = swapLeading(yc, D, B, H);
  }
  // fp32 state over a few steps, one rounding per output.
  Tolerance tol{std::max(TypeTraits<T>::kTol.rtol, 1e-5), 1e-5, 0.0};
  EXPECT_TRUE(allClose(valuesOf<T>(out[0]), y, {}, tol)) << "Y";
  EXPECT_TRUE(allClose(valuesOf<T>(out[1]), yh, {}, tol)) << "Y_h";
  if (k.op == "LSTM")
    EXPECT_TRUE(allClose(valuesOf<T>(out[2]), yc, {}, tol)) << "Y_c";
}

OPTEST_TYPED_P(RecurrentTest, LstmDirectionsStatesAndPeepholes) {
  Case k;
  k.op = "LSTM";
  for (const char *dir : {"forward", "reverse", "bidirectional"}) {
    k.direction = dir;
    runCase<T>(k, device, 1);
  }
  k.peephole = true;
  k.hidden = 37; // not a multiple of 32
  runCase<T>(k, device, 2);
  k.bias = k.initial = k.peephole = false;
  k.batch = 1;
  k.direction = "forward";
  runCase<T>(k, device, 3);
}

OPTEST_TYPED_P(RecurrentTest, GruResetVariantsLensLayoutAndActivations) {
  Case k;
  k.op = "GRU";
  for (bool lbr : {false, true}) {
    k.lbr = lbr;
    k.direction = "bidirectional";
    runCase<T>(k, device, 4);
    k.lens = {3, 1};
    runCase<T>(k, device, 5);
    k.lens.clear();
    k.layout1 = true;
    k.direction = "reverse";
    runCase<T>(k, device, 6);
    k.layout1 = false;
  }
  k.lbr = false;
  k.hidden = 33;
  k.clip = 0.5f;
  k.direction = "bidirectional";
  k.acts = {{"HardSigmoid", 0.3, 0.4}, {"Relu"}, {"Sigmoid"}, {"LeakyRelu", 0.1}};
  runCase<T>(k, device, 7);
}

OPTEST_TYPED_P(RecurrentTest, RnnLensLayoutClipAndRelu) {
  Case k;
  k.op = "RNN";
  runCase<T>(k, device, 8);
  k.direction = "bidirectional";
  k.lens = {2, 0, 3};
  k.batch = 3;
  k.layout1 = true;
  runCase<T>(k, device, 9);
  k.acts = {{"Relu"}};
  k.clip = 0.25f;
  k.hidden = 40;
  k.lens.clear();
  runCase<T>(k, device, 10);
}

} // namespace
