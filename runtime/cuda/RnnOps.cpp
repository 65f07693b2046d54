//===- RnnOps.cpp - LSTM, GRU and RNN through cuBLASLt and gate kernels -----===//
//
// The recurrent family (RnnPlan.h has the plan, RnnLaunch.h the kernels):
// one cuBLASLt GEMM for every step's input projection, then per step a
// strided-batch GEMM over the directions for H R^T and a gate kernel over
// RecurrentBodies.h's cells (GRU without linear_before_reset: gates, the
// (r . H) R_h^T GEMM, then the candidate). Algorithms are chosen here, in
// prepare; launch only queues work. The state is fp32 (as on the CPU, which
// widens everything to fp32); X and W enter the projection in their storage
// type with fp32 compute, R is widened to fp32 once per launch.
//
//===----------------------------------------------------------------------===//
#include "../ops/NodeGeometry.h"
#include "../ops/ShapeHelpers.h"
#include "CudaLaunch.h"
#include "CudaOp.h"
#include "LtProduct.h"
#include "RnnLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/RnnPlan.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Support/Diagnostics.h"

using namespace mpc;
using namespace mpc::cuda;
using kernels::RecurrentSizes;

namespace {

/// A prepared LSTM, GRU or RNN node.
class RecurrentOp final : public CudaOp {
public:
  RecurrentCell cell = RecurrentCell::Rnn;
  bool gruSplit = false;
  DType type = DType::F32;
  RecurrentArgs args; ///< sizes and constants; launch fills the pointers
  RecurrentWorkspace ws;
  LtProduct input, recurrent, reset;

  size_t workspaceBytes() const override { return ws.total; }
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &ctx) const override;
};

using PlannedProduct = std::pair<LtProduct *, const MatmulPlan *>;

/// Prepares every product in fp32 (an empty plan is skipped): "" and the
/// largest scratch any needs in `gemmBytes`, or what cuBLASLt refused.
std::string prepareProducts(llvm::ArrayRef<PlannedProduct> products, const CudaContext &ctx,
                            size_t &gemmBytes) {
  gemmBytes = 0;
  for (const PlannedProduct &p : products) {
    if (p.second->gemm.offsets.empty())
      continue;
    if (std::string why = p.first->prepare(p.second->gemm, DType::F32, ctx); !why.empty())
      return why;
    gemmBytes = std::max(gemmBytes, p.first->workspace);
  }
  return "";
}

/// The products LSTMGrad and GRUGrad share (RnnPlan.h).
struct GradProducts {
  LtProduct input, recurrent, backState, dX, dW, dR;

  /// Prepares them from `g` (LstmGradGemms, GruGradGemms) and then `more`,
  /// as prepareProducts.
  template <typename Gemms>
  std::string prepareAll(const Gemms &g, llvm::ArrayRef<PlannedProduct> more,
                         const CudaContext &ctx, size_t &gemmBytes) {
    std::vector<PlannedProduct> all = {{&input, &g.input},
                                       {&recurrent, &g.recurrent},
                                       {&backState, &g.backState},
                                       {&dX, &g.dX},
                                       {&dW, &g.dW},
                                       {&dR, &g.dR}};
    all.insert(all.end(), more.begin(), more.end());
    return prepareProducts(all, ctx, gemmBytes);
  }
};

/// A prepared LSTMGrad node (RnnPlan.h: LstmGradGemms, LstmGradWorkspace).
class LstmGradOp final : public CudaOp, public GradProducts {
public:
  LstmGradArgs args;
  LstmGradWorkspace ws;

  size_t workspaceBytes() const override { return ws.total; }
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &ctx) const override;
};

/// A prepared GRUGrad node (RnnPlan.h: GruGradGemms, GruGradWorkspace).
class GruGradOp final : public CudaOp, public GradProducts {
public:
  GruGradArgs args;
  GruGradWorkspace ws;
  LtProduct reset, backReset, dRh; ///< without linear_before_reset only

  size_t workspaceBytes() const override { return ws.total; }
  std::string launch(const KernelCall &call, cudaStream_t s, const CudaContext &ctx) const override;
};

/// The node refused, with why (it then runs on the CPU).
llvm::Error refused(const Node &n, const std::string &why) {
  return inputError("{0}: {1}; the node runs on the CPU", describeNode(n), why);
}

/// sequence_lens (input `port`, absent or a graph constant with one value
/// per batch entry in [lo, seq]): its type number (0 when absent), or why
/// the node is refused.
llvm::Expected<int32_t> lensTypeOf(const Node &n, llvm::ArrayRef<TensorDesc> inputs, unsigned port,
                                   const RecurrentSizes &s, int64_t lo) {
  if (inputs.size() <= port || inputs[port].dtype == DType::Undefined)
    return 0;
  std::vector<int64_t> lens;
  if (!knownInputInts(n, inputs, port, lens))
    return refused(n, "sequence_lens is not a constant of the graph");
  if (int64_t(lens.size()) != s.batch)
    return refused(n, "sequence_lens does not have one value per batch entry");
  for (int64_t l : lens)
    if (l < lo || l > s.seq)
      return refused(n, "a sequence_lens value is outside [" + std::to_string(lo) + ", " +
                            std::to_string(s.seq) + "]");
  return int32_t(inputs[port].dtype);
}

/// A recurrent gradient node's sizes, direction, type and sequence_lens
/// (LSTMGrad, GRUGrad: `ports`, `check` its attributes) into `a`, or why
/// the node is refused.
template <typename Args>
llvm::Error gradSizes(const Node &n, llvm::ArrayRef<TensorDesc> inputs,
                      const shapes::RecurrentGradPorts &ports, llvm::Error (*check)(const Node &),
                      Args &a) {
  std::vector<ShapedType> types;
  for (const TensorDesc &d : inputs)
    types.push_back(ShapedType{d.dtype, std::vector<int64_t>(d.shape.begin(), d.shape.end())});
  std::vector<const HostTensor *> values(types.size(), nullptr);
  auto shape = shapes::recurrentGradShape(ShapeQuery{n, types, values}, ports, check);
  if (!shape)
    return shape.takeError();
  RecurrentSizes &s = a.s;
  s.seq = shape->seq;
  s.batch = shape->batch;
  s.input = shape->input;
  s.hidden = shape->hidden;
  s.dirs = shape->directions;
  s.gates = ports.gates;
  a.reverse = shape->reverse;
  a.type = int32_t(inputs[ports.x].dtype);
  if (s.seq * s.batch * s.hidden * s.input == 0)
    return refused(n, "an empty sequence, batch, input or state");
  auto lens = lensTypeOf(n, inputs, ports.lens, s, 1);
  if (!lens)
    return lens.takeError();
  a.lensType = *lens;
  return llvm::Error::success();
}

/// A gradient node's launch context: its workspace, scratch and stream.
struct GradLaunch {
  const KernelCall &call;
  const CudaContext &ctx;
  cudaStream_t stream;
  char *base;
  void *scratch;
  size_t scratchBytes;

  GradLaunch(const KernelCall &call, const CudaContext &ctx, cudaStream_t stream, size_t gemm,
             size_t total)
      : call(call), ctx(ctx), stream(stream), base(static_cast<char *>(call.workspace)),
        scratch(base + gemm), scratchBytes(total - gemm) {}
  float *f32(size_t off) const { return reinterpret_cast<float *>(base + off); }
  const void *given(unsigned i) const { return call.hasInput(i) ? call.inputs[i].data : nullptr; }
  void *out(unsigned i) const { return i < call.outputs.size() ? call.outputs[i].data : nullptr; }

  /// X, W and R (input ports x, x+1, x+2) as fp32: widened into the regions
  /// `wide` when `type` is 16-bit.
  std::string operands(int32_t type, unsigned x, const size_t (&wide)[3],
                       const int64_t (&counts)[3], const void *(&into)[3]) const {
    for (unsigned i = 0; i < 3; ++i) {
      into[i] = given(x + i);
      if (type == kOnnxF32)
        continue;
      if (cudaError_t e = launchCast(type, kOnnxF32, into[i], f32(wide[i]), counts[i],
                                     ctx.geometry(counts[i]), stream))
        return launchText(e);
      into[i] = f32(wide[i]);
    }
    return "";
  }
  /// Output i (when wanted) from `count` fp32 values.
  std::string castOut(int32_t type, const float *from, unsigned i, int64_t count) const {
    if (!out(i))
      return "";
    return launchText(launchCast(kOnnxF32, type, from, out(i), count, ctx.geometry(count), stream));
  }
  /// dX, dW and dR (outputs 0 to 2) from their fp32 regions.
  std::string castProducts(int32_t type, const RecurrentSizes &z, size_t dX, size_t dW,
                           size_t dR) const {
    const int64_t g = z.gates * z.hidden;
    std::pair<size_t, int64_t> results[] = {
        {dX, z.seq * z.batch * z.input}, {dW, z.dirs * g * z.input}, {dR, z.dirs * g * z.hidden}};
    for (unsigned i = 0; i < 3; ++i)
      if (std::string e = castOut(type, f32(results[i].first), i, results[i].second); !e.empty())
        return e;
    return "";
  }
  /// Clears `count` fp32 values at `at`.
  std::string clear(float *at, int64_t count, const char *what) const {
    if (cudaError_t e = cudaMemsetAsync(at, 0, size_t(count) * 4, stream))
      return std::string("clearing ") + what + ": " + cudaText(e);
    return "";
  }
  /// One product into fp32 `d`; "" or what failed, after `what`.
  std::string product(const LtProduct &p, const char *what, const void *a, const void *b, float *d,
                      float beta = 0) const {
    std::string why = p.run(ctx, a, b, d, 4, scratch, scratchBytes, stream, beta);
    return why.empty() ? why : what + why;
  }
  /// dX (output 0) = sum_d grads_d W_d and dW (output 1) = grads^T X, for
  /// grads [D, S, G] (G = gates * H), into the fp32 regions dX and dW.
  std::string inputGrads(const LtProduct &pdX, const LtProduct &pdW, const RecurrentSizes &z,
                         const float *grads, const void *x, const void *w, float *dX,
                         float *dW) const {
    const int64_t rows = z.seq * z.batch, g = z.gates * z.hidden;
    std::string why;
    if (out(0))
      for (int64_t d = 0; d < z.dirs && why.empty(); ++d)
        why = product(pdX, "dX product: ", grads + d * rows * g,
                      static_cast<const float *>(w) + d * g * z.input, dX, d == 0 ? 0.0f : 1.0f);
    if (why.empty() && out(1))
      why = product(pdW, "dW product: ", grads, x, dW);
    return why;
  }
};

} // namespace

CudaOpOrError cuda::prepareRecurrentOp(const Node &n, const CudaKernel &row,
                                       llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  auto parsed = parseRecurrent(n);
  if (!parsed)
    return parsed.takeError();
  const RecurrentParams &params = static_cast<const RecurrentParams &>(**parsed);
  auto op = std::make_unique<RecurrentOp>();
  bool lstm = n.opType == "LSTM", gru = n.opType == "GRU";
  if (inputs.size() < 3 || inputs[0].shape.size() != 3 || inputs[2].shape.size() != 3)
    return std::unique_ptr<CudaOp>();
  DType t = inputs[0].dtype;
  // Every float operand of X's type (the launchers read them as one type).
  for (unsigned i : {1u, 2u, 3u, 5u, 6u, 7u})
    if (i < inputs.size() && inputs[i].dtype != DType::Undefined && inputs[i].dtype != t)
      return std::unique_ptr<CudaOp>();
  RecurrentSizes &s = op->args.s;
  s.batchMajor = params.batchMajor;
  s.seq = inputs[0].shape[s.batchMajor ? 1 : 0];
  s.batch = inputs[0].shape[s.batchMajor ? 0 : 1];
  s.input = inputs[0].shape[2];
  s.hidden = inputs[2].shape[2];
  s.dirs = params.numDirections();
  s.gates = lstm ? 4 : gru ? 3 : 1;
  if (s.seq * s.batch * s.hidden * s.input == 0)
    return refused(n, "an empty sequence, batch, input or state");
  op->type = t;
  op->args.type = int32_t(t);
  op->args.reverse = params.reverse();
  op->args.clip = params.hasClip ? params.clip : 0.0f;
  op->gruSplit = gru && !params.linearBeforeReset;
  op->cell = lstm  ? RecurrentCell::Lstm
             : gru ? (op->gruSplit ? RecurrentCell::GruGates : RecurrentCell::Gru)
                   : RecurrentCell::Rnn;
  if (!lstm) {
    static const char *const gruActs[2] = {"Sigmoid", "Tanh"}, *const rnnActs[1] = {"Tanh"};
    auto acts = shapes::parseActivations(n, params,
                                         gru ? llvm::ArrayRef<const char *>(gruActs)
                                             : llvm::ArrayRef<const char *>(rnnActs),
                                         s.dirs);
    if (!acts)
      return acts.takeError();
    for (size_t i = 0; i < acts->size() && i < 4; ++i)
      op->args.acts[i] = (*acts)[i];
  }
  // sequence_lens: the gate kernels read it on the device, but its range is
  // checked here, so it must be a constant of the graph.
  auto lens = lensTypeOf(n, inputs, 4, s, 0);
  if (!lens)
    return lens.takeError();
  op->args.lensType = *lens;
  unsigned eb = unsigned(runtimeElementSize(t));
  auto gemms = planRecurrentGemms(s, op->gruSplit, eb);
  if (!gemms)
    return refused(n, llvm::toString(gemms.takeError()));
  std::string why = op->input.prepare(gemms->input.gemm, t, ctx);
  if (why.empty())
    why = op->recurrent.prepare(gemms->recurrent.gemm, DType::F32, ctx);
  if (why.empty() && op->gruSplit)
    why = op->reset.prepare(gemms->reset.gemm, DType::F32, ctx);
  if (!why.empty())
    return refused(n, why);
  RecurrentOptions o;
  o.lstm = lstm;
  o.gruSplit = op->gruSplit;
  o.widenR = t != DType::F32;
  o.gemmBytes = std::max({op->input.workspace, op->recurrent.workspace, op->reset.workspace});
  op->ws = recurrentWorkspace(s, o);
  (void)row;
  return std::unique_ptr<CudaOp>(std::move(op));
}

CudaOpOrError cuda::prepareLstmGradOp(const Node &n, const CudaKernel &row,
                                      llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  (void)row;
  auto op = std::make_unique<LstmGradOp>();
  if (llvm::Error e = gradSizes(n, inputs, shapes::kLstmPorts, shapes::checkLstmAttrs, op->args))
    return std::move(e);
  const RecurrentSizes &s = op->args.s;
  auto gemms = planLstmGradGemms(s);
  if (!gemms)
    return refused(n, llvm::toString(gemms.takeError()));
  size_t gemmBytes = 0;
  std::string why = op->prepareAll(*gemms, {}, ctx, gemmBytes);
  if (!why.empty())
    return refused(n, why);
  op->ws = lstmGradWorkspace(s, op->args.type != kOnnxF32, gemmBytes);
  return std::unique_ptr<CudaOp>(std::move(op));
}

std::string LstmGradOp::launch(const KernelCall &call, cudaStream_t s,
                               const CudaContext &ctx) const {
  using shapes::kLstmPorts;
  GradLaunch l(call, ctx, s, ws.gemm, ws.total);
  LstmGradArgs a = args;
  const RecurrentSizes &z = a.s;
  const int64_t rows = z.seq * z.batch, g4 = 4 * z.hidden, hid = z.hidden;
  a.lens = l.given(kLstmPorts.lens);
  a.bias = l.given(kLstmPorts.b);
  a.dY = l.given(shapes::kDY);
  a.dYh = l.given(shapes::kDYh);
  a.dYc = l.given(shapes::kDYc);
  a.h0 = l.given(shapes::kH0);
  a.c0 = l.given(shapes::kC0);
  a.projection = l.f32(ws.projection);
  a.recurrent = l.f32(ws.recurrent);
  a.gates = l.f32(ws.gates);
  a.cells = l.f32(ws.cells);
  a.hiddens = l.f32(ws.hiddens);
  a.previous = l.f32(ws.previous);
  a.gateGrads = l.f32(ws.gateGrads);
  a.stepGrads = l.f32(ws.stepGrads);
  a.backState = l.f32(ws.backState);
  a.backCell = l.f32(ws.backCell);
  LaunchGeometry g = ctx.geometry(z.dirs * z.batch * hid);

  // X, W and R in fp32.
  const void *xwr[3];
  std::string why = l.operands(a.type, shapes::kX, {ws.wideX, ws.wideW, ws.wideR},
                               {rows * z.input, z.dirs * g4 * z.input, z.dirs * g4 * hid}, xwr);
  const void *x = xwr[0], *w = xwr[1], *r = xwr[2];
  if (why.empty())
    why = l.clear(a.previous, z.dirs * rows * hid, "the previous states");
  if (why.empty())
    why = l.clear(a.gateGrads, z.dirs * rows * g4, "the gate gradients");
  if (!why.empty())
    return why;
  if (cudaError_t e = launchLstmGradInit(a, g, s))
    return launchText(e);
  if (!(why = l.product(input, "input projection: ", x, w, l.f32(ws.projection))).empty())
    return why;
  for (int64_t step = 0; step < z.seq; ++step) {
    a.step = step;
    why = l.product(recurrent, "recurrent product: ", a.hiddens + step * z.batch * hid, r,
                    l.f32(ws.recurrent));
    if (!why.empty())
      return why;
    if (cudaError_t e = launchLstmGradForward(a, g, s))
      return launchText(e);
  }
  for (int64_t step = z.seq; step-- > 0;) {
    a.step = step;
    if (cudaError_t e = launchLstmGradBackward(a, g, s))
      return launchText(e);
    why = l.product(backState, "state gradient product: ", a.stepGrads, r, a.backState);
    if (!why.empty())
      return why;
  }

  // The outputs: fp32 products, then one cast each.
  why = l.inputGrads(dX, dW, z, a.gateGrads, x, w, l.f32(ws.dX), l.f32(ws.dW));
  if (why.empty() && l.out(2))
    why = l.product(dR, "dR product: ", a.gateGrads, a.previous, l.f32(ws.dR));
  if (!why.empty())
    return why;
  if (std::string e = l.castProducts(a.type, z, ws.dX, ws.dW, ws.dR); !e.empty())
    return e;
  if (l.out(3))
    if (cudaError_t e = launchLstmGradBias(a, l.out(3), ctx.geometry(z.dirs * g4), s))
      return launchText(e);
  int64_t state = z.dirs * z.batch * hid;
  if (std::string e = l.castOut(a.type, a.backState, 4, state); !e.empty())
    return e;
  return l.castOut(a.type, a.backCell, 5, state);
}

CudaOpOrError cuda::prepareGruGradOp(const Node &n, const CudaKernel &row,
                                     llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  (void)row;
  auto op = std::make_unique<GruGradOp>();
  if (llvm::Error e = gradSizes(n, inputs, shapes::kGruPorts, shapes::checkGruGradAttrs, op->args))
    return std::move(e);
  const RecurrentSizes &s = op->args.s;
  bool lbr = n.intAttr("linear_before_reset", 0) != 0;
  op->args.linearBeforeReset = lbr;
  auto gemms = planGruGradGemms(s, lbr);
  if (!gemms)
    return refused(n, llvm::toString(gemms.takeError()));
  size_t gemmBytes = 0;
  std::string why = op->prepareAll(
      *gemms,
      {{&op->reset, &gemms->reset}, {&op->backReset, &gemms->backReset}, {&op->dRh, &gemms->dRh}},
      ctx, gemmBytes);
  if (!why.empty())
    return refused(n, why);
  op->ws = gruGradWorkspace(s, lbr, op->args.type != kOnnxF32, gemmBytes);
  return std::unique_ptr<CudaOp>(std::move(op));
}

std::string GruGradOp::launch(const KernelCall &call, cudaStream_t s,
                              const CudaContext &ctx) const {
  using shapes::kGruPorts;
  GradLaunch l(call, ctx, s, ws.gemm, ws.total);
  GruGradArgs a = args;
  const RecurrentSizes &z = a.s;
  const int64_t rows = z.seq * z.batch, g3 = 3 * z.hidden, hid = z.hidden;
  const bool lbr = a.linearBeforeReset;
  a.lens = l.given(kGruPorts.lens);
  a.bias = l.given(kGruPorts.b);
  a.dY = l.given(shapes::kGDY);
  a.dYh = l.given(shapes::kGDYh);
  a.h0 = l.given(shapes::kGH0);
  a.projection = l.f32(ws.projection);
  a.recurrent = l.f32(ws.recurrent);
  a.gates = l.f32(ws.gates);
  a.hiddens = l.f32(ws.hiddens);
  a.previous = l.f32(ws.previous);
  a.gateGrads = l.f32(ws.gateGrads);
  a.recGrads = l.f32(ws.recGrads);
  a.stepGrads = l.f32(ws.stepGrads);
  a.backState = l.f32(ws.backState);
  if (lbr) {
    a.linear = l.f32(ws.linear);
  } else {
    a.resetStep = l.f32(ws.resetStep);
    a.resetRecurrent = l.f32(ws.resetRecurrent);
    a.resetPrevious = l.f32(ws.resetPrevious);
    a.candGrads = l.f32(ws.candGrads);
    a.candStep = l.f32(ws.candStep);
    a.resetGrad = l.f32(ws.resetGrad);
  }
  LaunchGeometry g = ctx.geometry(z.dirs * z.batch * hid);
  auto forward = [&](GruGradPhase phase) {
    return launchText(launchGruGradForward(phase, a, g, s));
  };
  auto backward = [&](GruGradPhase phase) {
    return launchText(launchGruGradBackward(phase, a, g, s));
  };

  // X, W and R in fp32; the by-time buffers that ended sequences leave
  // unwritten cleared.
  const void *xwr[3];
  std::string why = l.operands(a.type, shapes::kGX, {ws.wideX, ws.wideW, ws.wideR},
                               {rows * z.input, z.dirs * g3 * z.input, z.dirs * g3 * hid}, xwr);
  const void *x = xwr[0], *w = xwr[1], *r = xwr[2];
  // R_h: the rows [2H, 3H) of each direction's R (the plans' strides).
  const float *rh = static_cast<const float *>(r) + 2 * hid * hid;
  std::pair<float *, int64_t> cleared[] = {{a.previous, z.dirs * rows * hid},
                                           {a.gateGrads, z.dirs * rows * g3},
                                           {a.recGrads, z.dirs * rows * g3},
                                           {a.resetPrevious, z.dirs * rows * hid},
                                           {a.candGrads, z.dirs * rows * hid}};
  for (auto &c : cleared)
    if (why.empty() && c.first)
      why = l.clear(c.first, c.second, "the by-time buffers");
  if (!why.empty())
    return why;
  if (cudaError_t e = launchGruGradInit(a, g, s))
    return launchText(e);
  if (!(why = l.product(input, "input projection: ", x, w, l.f32(ws.projection))).empty())
    return why;
  for (int64_t step = 0; step < z.seq && why.empty(); ++step) {
    a.step = step;
    why = l.product(recurrent, "recurrent product: ", a.hiddens + step * z.batch * hid, r,
                    l.f32(ws.recurrent));
    if (why.empty())
      why = forward(lbr ? GruGradPhase::Whole : GruGradPhase::Gates);
    if (why.empty() && !lbr)
      why = l.product(reset, "reset product: ", a.resetStep, rh, l.f32(ws.resetRecurrent));
    if (why.empty() && !lbr)
      why = forward(GruGradPhase::Finish);
  }
  for (int64_t step = z.seq; step-- > 0 && why.empty();) {
    a.step = step;
    why = backward(GruGradPhase::Whole);
    if (why.empty() && !lbr)
      why = l.product(backReset, "reset gradient product: ", a.candStep, rh, l.f32(ws.resetGrad));
    if (why.empty() && !lbr)
      why = backward(GruGradPhase::Finish);
    if (why.empty())
      why = l.product(backState, "state gradient product: ", a.stepGrads, r, a.backState, 1.0f);
  }

  // The outputs: fp32 products, then one cast each.
  if (why.empty())
    why = l.inputGrads(dX, dW, z, a.gateGrads, x, w, l.f32(ws.dX), l.f32(ws.dW));
  if (why.empty() && l.out(2)) {
    why = l.product(dR, "dR product: ", a.recGrads, a.previous, l.f32(ws.dR));
    // Without linear_before_reset the h rows are da^T (r . H).
    if (why.empty() && !lbr)
      why = l.product(dRh, "dR product: ", a.candGrads, a.resetPrevious, l.f32(ws.dRh));
    if (why.empty() && !lbr)
      if (cudaError_t e =
              cudaMemcpy2DAsync(l.f32(ws.dR) + 2 * hid * hid, size_t(g3 * hid) * 4, l.f32(ws.dRh),
                                size_t(hid * hid) * 4, size_t(hid * hid) * 4, size_t(z.dirs),
                                cudaMemcpyDeviceToDevice, s))
        why = "placing dR's h rows: " + cudaText(e);
  }
  if (!why.empty())
    return why;
  if (std::string e = l.castProducts(a.type, z, ws.dX, ws.dW, ws.dR); !e.empty())
    return e;
  if (l.out(3))
    if (cudaError_t e = launchGruGradBias(a, l.out(3), ctx.geometry(z.dirs * g3), s))
      return launchText(e);
  return l.castOut(a.type, a.backState, 4, z.dirs * z.batch * hid);
}

std::string RecurrentOp::launch(const KernelCall &call, cudaStream_t s,
                                const CudaContext &ctx) const {
  char *base = static_cast<char *>(call.workspace);
  auto f32 = [&](size_t off) { return reinterpret_cast<float *>(base + off); };
  RecurrentArgs a = args;
  const RecurrentSizes &z = a.s;
  auto given = [&](unsigned i) { return call.hasInput(i) ? call.inputs[i].data : nullptr; };
  auto wanted = [&](unsigned i) {
    return i < call.outputs.size() ? call.outputs[i].data : nullptr;
  };
  a.lens = given(4);
  a.bias = given(3);
  a.peep = cell == RecurrentCell::Lstm ? given(7) : nullptr;
  a.projection = f32(ws.projection);
  a.recurrent = f32(ws.recurrent);
  a.hidden = f32(ws.hidden);
  a.cell = cell == RecurrentCell::Lstm ? f32(ws.cell) : nullptr;
  if (gruSplit) {
    a.update = f32(ws.update);
    a.resetState = f32(ws.resetState);
    a.resetRecurrent = f32(ws.resetRecurrent);
  }
  a.y = wanted(0);
  void *scratch = base + ws.gemm;
  size_t scratchBytes = ws.total - ws.gemm;
  unsigned eb = unsigned(runtimeElementSize(type));
  LaunchGeometry g = ctx.geometry(z.dirs * z.batch * z.hidden);

  std::string why = input.run(ctx, call.inputs[0].data, call.inputs[1].data, f32(ws.projection), eb,
                              scratch, scratchBytes, s);
  if (!why.empty())
    return "input projection: " + why;
  const void *r = call.inputs[2].data;
  if (type != DType::F32) {
    int64_t n = z.dirs * z.gates * z.hidden * z.hidden;
    if (cudaError_t e =
            launchCast(int32_t(type), kOnnxF32, r, f32(ws.wideR), n, ctx.geometry(n), s))
      return launchText(e);
    r = f32(ws.wideR);
  }
  if (cudaError_t e =
          launchRecurrentInit(a, given(5), cell == RecurrentCell::Lstm ? given(6) : nullptr, g, s))
    return launchText(e);
  if (a.y && a.lens)
    if (cudaError_t e = cudaMemsetAsync(a.y, 0, size_t(call.outputs[0].numElements()) * eb, s))
      return "clearing Y: " + cudaText(e);
  for (int64_t step = 0; step < z.seq; ++step) {
    a.step = step;
    why = recurrent.run(ctx, a.hidden, r, f32(ws.recurrent), 4, scratch, scratchBytes, s);
    if (!why.empty())
      return "recurrent product: " + why;
    if (cudaError_t e = launchRecurrentStep(cell, a, g, s))
      return launchText(e);
    if (!gruSplit)
      continue;
    // R_h: the rows [2H, 3H) of each direction's R (the plan's strides).
    const float *rh = static_cast<const float *>(r) + 2 * z.hidden * z.hidden;
    why = reset.run(ctx, a.resetState, rh, f32(ws.resetRecurrent), 4, scratch, scratchBytes, s);
    if (!why.empty())
      return "reset product: " + why;
    if (cudaError_t e = launchRecurrentStep(RecurrentCell::GruFinish, a, g, s))
      return launchText(e);
  }
  if (cudaError_t e = launchRecurrentFinal(a, wanted(1),
                                           cell == RecurrentCell::Lstm ? wanted(2) : nullptr, g, s))
    return launchText(e);
  return "";
}
