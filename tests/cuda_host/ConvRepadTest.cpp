//===- ConvRepadTest.cpp - ConvTranspose/ConvGrad pads cuDNN cannot take ===//
//
// ConvTranspose and ConvGrad whose end pads cuDNN's symmetric pad cannot
// express run on CUDA over the symmetric part of the pads (repadForDnn,
// ConvPlan.h): cuDNN computes on a grown forward input, and the launch copies
// X in (ConvGrad, zeros around it) and crops the result out (ConvTranspose's
// output, ConvGrad's dX) with the CPU's padInteriorPlan. Here cuDNN's part is
// stood in for by the CPU backend's own kernel run with the plan's
// geometry (symmetric pads, grown tensors), the copies by copyByPlan over the
// plans the launch makes, and the result is compared bit for bit with the
// CPU kernel run on the node as given (tested against onnx.reference and
// numpy elsewhere). So a wrong grown shape, pad or offset fails here.
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/ConvPlan.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Runtime/OpRegistry.h"
#include "../../runtime/ops/NodeGeometry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

using Shape = std::vector<int64_t>;

int64_t count(const Shape &s) { return kernels::numElements(s); }

struct RepadCase {
  const char *name;
  Shape x, w;          // the node's X and W
  Shape strides, pads; // pads empty: auto_pad
  const char *autoPad;
  Shape outputPadding, dilations;
  int64_t group;
};

// ConvTranspose: X [N, C_in, ...], W [C_in, C_out / group, ...].
const RepadCase kTransposeCases[] = {
    {"same-upper-stride2", {1, 2, 4, 4}, {2, 3, 3, 3}, {2, 2}, {}, "SAME_UPPER", {}, {}, 1},
    {"same-lower-kernel2", {2, 2, 3, 5}, {2, 2, 2, 2}, {1, 1}, {}, "SAME_LOWER", {}, {}, 1},
    {"end-heavy", {1, 3, 5, 4}, {3, 2, 3, 2}, {1, 2}, {0, 1, 2, 0}, "", {}, {}, 1},
    {"both-ends", {1, 2, 5, 4}, {2, 2, 3, 3}, {1, 2}, {1, 2, 3, 1}, "", {}, {}, 1},
    {"begin-heavy-1d-dilated", {2, 2, 6}, {2, 2, 3}, {2}, {3, 0}, "", {1}, {2}, 1},
    {"3d-groups", {1, 4, 3, 2, 3}, {4, 1, 2, 3, 2}, {2, 1, 2}, {1, 0, 0, 0, 1, 1}, "", {}, {}, 2},
};

// ConvGrad: the forward Conv's X [N, C, ...], W [K, C / group, ...].
const RepadCase kGradCases[] = {
    {"same-upper-stride2", {1, 2, 8, 7}, {3, 2, 3, 3}, {2, 2}, {}, "SAME_UPPER", {}, {}, 1},
    {"end-pads", {2, 1, 5, 5}, {2, 1, 3, 3}, {1, 1}, {1, 0, 1, 2}, "", {}, {}, 1},
    {"1d-dilated", {1, 2, 6}, {2, 2, 2}, {1}, {0, 3}, "", {}, {2}, 1},
    {"3d-groups", {1, 4, 4, 3, 5}, {2, 2, 2, 2, 3}, {2, 1, 2}, {0, 1, 1, 1, 0, 0}, "", {}, {},
     2},
};

std::vector<float> values(int64_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = float(d(rng)) * 0.125f;
  return v;
}

TensorRef ref(const Shape &s, std::vector<float> &data) {
  TensorRef r;
  r.dtype = DType::F32;
  r.shape.assign(s.begin(), s.end());
  r.data = data.data();
  return r;
}

/// `src` of shape `from` copied into `to` (zeros first) by
/// padInteriorPlan(from, to, begin), as the launch's copy kernel does.
std::vector<float> copied(const std::vector<float> &src, const Shape &from, const Shape &to,
                          const Shape &begin) {
  kernels::CopyPlan plan;
  EXPECT_TRUE(kernels::padInteriorPlan(from, to, begin, plan));
  std::vector<float> out(size_t(count(to)), 0.0f);
  kernels::copyByPlan(plan, src.data(), out.data(), sizeof(float));
  return out;
}

Shape negated(const Shape &v) {
  Shape r;
  for (int64_t x : v)
    r.push_back(-x);
  return r;
}

struct ConvRepad : ModelFixture {
  void SetUp() override {
    ModelFixture::SetUp();
    m.opsets.push_back({"ai.mpc.training", 1});
  }

  Node *node(const char *op, const char *domain, const RepadCase &rc, const Shape &pads,
             bool autoPad) {
    Node *n = g->createNode(op);
    n->domain = domain;
    n->name = std::string(op) + "-" + rc.name + (autoPad ? "" : "-dnn");
    n->setAttr(Attribute::makeInts("strides", rc.strides));
    if (autoPad && *rc.autoPad)
      n->setAttr(Attribute::makeString("auto_pad", rc.autoPad));
    else
      n->setAttr(Attribute::makeInts("pads", pads));
    if (!rc.outputPadding.empty())
      n->setAttr(Attribute::makeInts("output_padding", rc.outputPadding));
    if (!rc.dilations.empty())
      n->setAttr(Attribute::makeInts("dilations", rc.dilations));
    n->setAttr(Attribute::makeInt("group", rc.group));
    return n;
  }

  /// Runs the CPU backend's kernel of `n` on `in`, writing `out`.
  void run(Node &n, std::vector<TensorRef> in, std::vector<TensorRef> out) {
    const OpDef *def = findOp(n);
    ASSERT_NE(def, nullptr) << n.name;
    ParsedParams params = def->parse(n);
    ASSERT_TRUE(bool(params)) << n.name;
    KernelCall call;
    call.node = &n;
    call.params = params->get();
    call.inputs.assign(in.begin(), in.end());
    call.outputs.assign(out.begin(), out.end());
    HostKernelFn fn = cpuHostKernel(n);
    ASSERT_NE(fn, nullptr) << n.name;
    llvm::Error e = fn(call);
    ASSERT_FALSE(bool(e)) << n.name << ": " << llvm::toString(std::move(e));
  }

  /// The node's window attributes (they parse in every case here).
  static WindowParams paramsOf(const Node &n) {
    auto p = windowParamsOf(n);
    EXPECT_TRUE(bool(p)) << (p ? "" : llvm::toString(p.takeError()));
    return p ? *p : WindowParams();
  }

  /// The repad of `g`, which cuDNN's begin pad cannot take (each case's
  /// premise).
  static DnnRepad repadOf(const ConvGeometry &g) {
    EXPECT_TRUE(dnnNeedsExplicitPad(g));
    auto r = repadForDnn(g);
    EXPECT_TRUE(bool(r)) << (r ? "" : llvm::toString(r.takeError()));
    return r ? *r : DnnRepad();
  }

  /// The symmetric pads of `r` as an ONNX pads attribute.
  static Shape pads(const DnnRepad &r) {
    Shape p(r.dnn.padsBegin.begin(), r.dnn.padsBegin.end());
    p.insert(p.end(), r.dnn.padsEnd.begin(), r.dnn.padsEnd.end());
    return p;
  }
};

TEST_F(ConvRepad, TransposeCropsTheGrownOutput) {
  std::mt19937 rng(3);
  for (const RepadCase &rc : kTransposeCases) {
    SCOPED_TRACE(rc.name);
    Node *n = node("ConvTranspose", "", rc, rc.pads, true);
    auto d = shapes::deconvGeometry(*n, paramsOf(*n), rc.x, rc.w);
    ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
    DnnRepad repad = repadOf(forwardOfTranspose(*d));
    const DnnRepad *r = &repad;
    ASSERT_FALSE(r->grown.empty());
    Shape out = {d->batch, d->outChannels};
    out.insert(out.end(), d->out.begin(), d->out.end());

    std::vector<float> x = values(count(rc.x), rng), w = values(count(rc.w), rng);
    std::vector<float> want(size_t(count(out))), grown(size_t(count(r->grown)));
    run(*n, {ref(rc.x, x), ref(rc.w, w)}, {ref(out, want)});
    // cuDNN's part: the same ConvTranspose with the symmetric pads, whose
    // output is the grown one.
    Node *sym = node("ConvTranspose", "", rc, pads(*r), false);
    run(*sym, {ref(rc.x, x), ref(rc.w, w)}, {ref(r->grown, grown)});
    std::vector<float> got = copied(grown, r->grown, out, negated(r->offset));
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
    EXPECT_FALSE(dnnNeedsExplicitPad(r->dnn));
  }
}

TEST_F(ConvRepad, GradPadsXAndCropsDx) {
  std::mt19937 rng(4);
  for (const RepadCase &rc : kGradCases) {
    SCOPED_TRACE(rc.name);
    Node *conv = node("Conv", "", rc, rc.pads, true);
    auto geo = shapes::convGeometry(*conv, paramsOf(*conv), rc.x, rc.w);
    ASSERT_TRUE(bool(geo)) << llvm::toString(geo.takeError());
    DnnRepad repad = repadOf(*geo);
    const DnnRepad *r = &repad;
    ASSERT_FALSE(r->grown.empty());
    Shape y = {geo->batch, geo->outChannels};
    y.insert(y.end(), geo->outSpatial.begin(), geo->outSpatial.end());
    Shape b = {geo->outChannels};

    std::vector<float> dy = values(count(y), rng), x = values(count(rc.x), rng),
                       w = values(count(rc.w), rng);
    std::vector<float> dx(size_t(count(rc.x))), dw(size_t(count(rc.w))), db(size_t(count(b)));
    Node *n = node("ConvGrad", "ai.mpc.training", rc, rc.pads, true);
    run(*n, {ref(y, dy), ref(rc.x, x), ref(rc.w, w)}, {ref(rc.x, dx), ref(rc.w, dw), ref(b, db)});

    // cuDNN's part on X copied into the zeroed grown buffer, symmetric pads.
    std::vector<float> xg = copied(x, rc.x, r->grown, r->offset);
    std::vector<float> dxg(size_t(count(r->grown))), dw2(dw.size()), db2(db.size());
    Node *sym = node("ConvGrad", "ai.mpc.training", rc, pads(*r), false);
    run(*sym, {ref(y, dy), ref(r->grown, xg), ref(rc.w, w)},
        {ref(r->grown, dxg), ref(rc.w, dw2), ref(b, db2)});
    std::vector<float> dx2 = copied(dxg, r->grown, rc.x, negated(r->offset));
    EXPECT_EQ(std::memcmp(dx2.data(), dx.data(), dx.size() * sizeof(float)), 0) << "dX";
    EXPECT_EQ(std::memcmp(dw2.data(), dw.data(), dw.size() * sizeof(float)), 0) << "dW";
    EXPECT_EQ(std::memcmp(db2.data(), db.data(), db.size() * sizeof(float)), 0) << "dB";
  }
}

TEST_F(ConvRepad, ShapesOfTheRepad) {
  // SAME_UPPER stride 2 on 8: pads 0/1, the symmetric part 0, X grown to 9
  // at offset 0. Pads 1/0 and 2/3: the smaller pad kept, the rest grown.
  ConvGeometry g;
  g.batch = 2;
  g.inChannels = g.outChannels = g.group = 1;
  g.inSpatial = {8, 5};
  g.kernel = {3, 3};
  g.strides = {2, 1};
  g.dilations = {1, 1};
  g.padsBegin = {0, 2};
  g.padsEnd = {1, 3};
  g.outSpatial = {4, 8};
  auto r = repadForDnn(g);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->grown, (Shape{2, 1, 9, 6}));
  EXPECT_EQ(r->offset, (Shape{0, 0, 0, 0}));
  EXPECT_EQ(Shape(r->dnn.padsBegin.begin(), r->dnn.padsBegin.end()), (Shape{0, 2}));
  EXPECT_EQ(Shape(r->dnn.padsEnd.begin(), r->dnn.padsEnd.end()), (Shape{0, 2}));
  g.padsBegin = {1, 3};
  g.padsEnd = {0, 2};
  r = repadForDnn(g);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(r->offset, (Shape{0, 0, 1, 1}));
  // A negative pad (ConvTranspose's output_shape beyond its full output).
  g.padsEnd = {-1, 2};
  auto bad = repadForDnn(g);
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "pads 1 and -1 on spatial axis 0: cuDNN takes no negative pad");
}

} // namespace
