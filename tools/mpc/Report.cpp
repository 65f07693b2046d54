//===- Report.cpp - The JSON report of an AMP rewrite ----------------------===//
//
// `mpc rewrite --report FILE`: every painting decision, the casts inserted,
// the constants clipped, and a profitability estimate: the fractions of FLOPs
// and of intermediate tensor bytes that are now 16-bit, which GEMM/conv shapes
// can use Tensor Cores (dimensions multiples of 8) and the bytes the inserted
// casts move. Shapes come from the static estimator in mpc/Ops/ShapeEstimator.h (the op
// registry's shape functions), each op's cost class from its registry row; whatever the
// estimator cannot estimate is counted as such, never guessed.
//
//===----------------------------------------------------------------------===//
#include "Dump.h"
#include "FilePlan.h"
#include "mpc/Ops/GemmBiasAct.h"
#include "mpc/Ops/ShapeEstimator.h"
#include "mpc/Passes/LossScaling.h"
#include "mpc/Runtime/OpRegistry.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <map>

using namespace mpc;
using namespace mpc::tool;

/// Tensor Cores want GEMM dimensions (and conv channels) in multiples of this.
static constexpr int64_t kTensorCoreMultiple = 8;

//===----------------------------------------------------------------------===//
// FLOP counting
//===----------------------------------------------------------------------===//

namespace {
/// The dimensions of a GEMM-like node as the hardware sees them.
struct GemmShape {
  int64_t m = -1, n = -1, k = -1; ///< convolutions: m = N * pixels, k = C_in/group * kernel
  int64_t batch = 1;              ///< MatMul batch dims; conv groups; RNN directions
  int64_t cin = -1, cout = -1;    ///< convolutions: channels per group; RNNs: input, hidden
};

/// How a node's floating-point work is counted (from the op registry's cost
/// classes, runtime/ops: window and reduction ops share one branch).
enum class FlopKind : uint8_t {
  None,        ///< data movement and shape ops: 0 FLOPs
  Gemm,        ///< GEMM-like: standard 2*M*N*K formulas
  Elementwise, ///< 1 FLOP per output element
  Reduction,   ///< 1 FLOP per input element (reductions, pooling windows)
};
} // namespace

static bool isFusedMatMul(const Node &n) {
  return n.domain == "com.microsoft" && n.opType == "FusedMatMul";
}

static bool isDefaultDomain(const Node &n) { return n.domain.empty() || n.domain == "ai.onnx"; }

/// The registry row (runtime/ops) of the default-domain op named like `n`,
/// at any opset: the cost class does not change between opsets.
static const OpDef *defaultDomainRow(const Node &n) {
  return findOp(n.opType, "", kMaxOpsetVersion);
}

/// GEMM-like nodes: the default domain's rows of cost class gemm (MatMul,
/// Gemm, Conv, ConvTranspose, Einsum, LSTM, GRU, RNN), FusedMatMul and
/// GemmBiasAct (--fuse-gemm-epilogues).
static bool isGemmLike(const Node &n) {
  if (isFusedMatMul(n) || isGemmBiasAct(n))
    return true;
  const OpDef *d = isDefaultDomain(n) ? defaultDomainRow(n) : nullptr;
  return d && d->cost == CostClass::Gemm;
}

/// How a node's work is counted: the registry's cost class of the
/// default-domain op of its name, for every domain (a custom op named like
/// a standard one counts like it, though never as GEMM work: the GEMM views
/// below are the standard ops'). Names with no row (ops without a kernel,
/// the ai.mpc.training gradients) count per output element, except the few
/// listed here.
static FlopKind flopKind(const Node &n) {
  if (isGemmLike(n))
    return FlopKind::Gemm;
  llvm::StringRef op = n.opType;
  const OpDef *d = defaultDomainRow(n);
  // SequenceMap counts per output element (an unestimated node), unlike If,
  // Loop and Scan: the report's counting before the registry, kept as is.
  if (!d || op == "SequenceMap") {
    if (op.startswith("Reduce") || op == "GlobalLpPool" || op == "LpPool")
      return FlopKind::Reduction;
    return llvm::StringSwitch<FlopKind>(op)
        .Cases("Scatter", "RandomNormal", "RandomUniform", "RandomNormalLike", FlopKind::None)
        .Cases("RandomUniformLike", "Multinomial", "Bernoulli", FlopKind::None)
        .Default(FlopKind::Elementwise);
  }
  switch (d->cost) {
  case CostClass::Data:
    return FlopKind::None;
  case CostClass::Reduction:
  case CostClass::Window:
    return FlopKind::Reduction;
  case CostClass::Elementwise:
  case CostClass::Gemm: // another domain's op named like a GEMM
    return FlopKind::Elementwise;
  }
  llvm_unreachable("bad CostClass");
}

/// The GEMM view of MatMul, Gemm, Conv, ConvTranspose, LSTM, GRU and RNN
/// nodes; None for other ops (Einsum) or when the shapes are unknown.
static llvm::Optional<GemmShape> gemmShape(const Node &n, const ShapeEstimator &s) {
  auto inShape = [&](unsigned i) -> const ShapeInfo * {
    return i < n.numInputs() && n.input(i) && s.shape(n.input(i)).rankKnown ? &s.shape(n.input(i))
                                                                            : nullptr;
  };
  const ShapeInfo *out = n.numOutputs() && n.output(0) ? &s.shape(n.output(0)) : nullptr;
  const ShapeInfo *a = inShape(0), *b = inShape(1);
  if (!a || !b || !out || !out->isFullyKnown() || !a->isFullyKnown() || !b->isFullyKnown())
    return llvm::None;
  GemmShape g;
  // FusedMatMul multiplies op(A) and op(B) (its trans flags) like MatMul.
  ShapeInfo fusedA, fusedB;
  if (isFusedMatMul(n)) {
    fusedA = fusedMatMulOperand(*a, n.intAttr("transA", 0), n.intAttr("transBatchA", 0));
    fusedB = fusedMatMulOperand(*b, n.intAttr("transB", 0), n.intAttr("transBatchB", 0));
    a = &fusedA;
    b = &fusedB;
  }
  if (isGemmBiasAct(n)) {
    // op(A) [..., M, K] (or [K]) times op(B) [K, N]; A's batch is the batch.
    bool ta = n.intAttr("transA", 0) != 0, tb = n.intAttr("transB", 0) != 0;
    if (a->rank() == 0 || b->rank() != 2)
      return llvm::None;
    g.k = ta ? a->dims[0] : a->dims.back();
    g.m = a->rank() < 2 ? 1 : ta ? a->dims[1] : a->dims[a->rank() - 2];
    g.n = b->dims[tb ? 0 : 1];
    int64_t mn = g.m * g.n;
    g.batch = mn > 0 ? out->numElements() / mn : 0;
    return g;
  }
  if (n.opType == "MatMul" || isFusedMatMul(n)) {
    if (a->rank() == 0 || b->rank() == 0)
      return llvm::None;
    g.k = a->dims.back();
    g.m = a->rank() >= 2 ? a->dims[a->rank() - 2] : 1;
    g.n = b->rank() >= 2 ? b->dims.back() : 1;
    int64_t mn = g.m * g.n;
    g.batch = mn > 0 ? out->numElements() / mn : 0;
    return g;
  }
  if (n.opType == "Gemm") {
    if (a->rank() != 2 || b->rank() != 2)
      return llvm::None;
    g.m = out->dims[0];
    g.n = out->dims[1];
    g.k = a->dims[n.intAttr("transA", 0) ? 0 : 1];
    return g;
  }
  if (n.opType == "Conv" || n.opType == "ConvTranspose") {
    if (a->rank() < 3 || b->rank() != a->rank())
      return llvm::None;
    int64_t group = std::max<int64_t>(1, n.intAttr("group", 1));
    int64_t kernel = 1;
    for (unsigned i = 2; i < b->rank(); ++i)
      kernel *= b->dims[i];
    bool transposed = n.opType == "ConvTranspose";
    // Implicit GEMM: rows are output (forward) or input (transposed) pixels.
    const ShapeInfo &pix = transposed ? *a : *out;
    int64_t pixels = 1;
    for (unsigned i = 2; i < pix.rank(); ++i)
      pixels *= pix.dims[i];
    g.cin = a->dims[1] / group;
    g.cout = transposed ? b->dims[1] : b->dims[0] / group;
    g.m = pix.dims[0] * pixels;
    g.n = g.cout;
    g.k = g.cin * kernel;
    g.batch = group;
    return g;
  }
  if (n.opType == "LSTM" || n.opType == "GRU" || n.opType == "RNN") {
    // cuDNN's view: the input projection of all steps is one GEMM, with
    // rows = steps * batch, columns = gates * hidden, depth = input size.
    if (a->rank() != 3 || b->rank() != 3)
      return llvm::None;
    int64_t gates = n.opType == "LSTM" ? 4 : n.opType == "GRU" ? 3 : 1;
    g.m = a->dims[0] * a->dims[1];
    g.n = b->dims[1];
    g.k = a->dims[2];
    g.batch = b->dims[0];
    g.cin = a->dims[2];
    g.cout = b->dims[1] / gates;
    return g;
  }
  return llvm::None;
}

/// Estimated FLOPs of a node; None when the shapes it needs are unknown.
static llvm::Optional<double> estimateFlops(const Node &n, const ShapeEstimator &s) {
  FlopKind kind = flopKind(n);
  if (kind == FlopKind::None)
    return 0.0;
  const ShapeInfo *out = n.numOutputs() && n.output(0) ? &s.shape(n.output(0)) : nullptr;
  const ShapeInfo *x = n.numInputs() && n.input(0) ? &s.shape(n.input(0)) : nullptr;
  if (kind == FlopKind::Elementwise) {
    int64_t e = out ? out->numElements() : -1;
    if (e < 0)
      return llvm::None;
    return static_cast<double>(e);
  }
  if (kind == FlopKind::Reduction) {
    llvm::StringRef op = n.opType;
    if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
      int64_t e = out ? out->numElements() : -1;
      if (e < 0)
        return llvm::None;
      double k = 1;
      if (const Attribute *a = n.attr("kernel_shape"))
        for (int64_t d : a->ints)
          k *= static_cast<double>(d);
      return e * k;
    }
    int64_t e = x ? x->numElements() : -1;
    if (e < 0)
      return llvm::None;
    return static_cast<double>(e);
  }
  // GEMM-like.
  llvm::StringRef op = n.opType;
  if (op == "Einsum") {
    std::vector<int64_t> sizes;
    if (!einsumIndexSizes(n, s, sizes))
      return llvm::None;
    double prod = 1;
    for (int64_t d : sizes) {
      if (d < 0)
        return llvm::None;
      prod *= static_cast<double>(d);
    }
    // Every combination of indices is one multiply-add per extra operand.
    return n.numInputs() > 1 ? 2.0 * prod * (n.numInputs() - 1) : prod;
  }
  if (op == "LSTM" || op == "GRU" || op == "RNN") {
    const ShapeInfo *w = n.numInputs() > 1 && n.input(1) ? &s.shape(n.input(1)) : nullptr;
    if (!x || !x->isFullyKnown() || x->rank() != 3 || !w || !w->isFullyKnown() || w->rank() != 3)
      return llvm::None;
    bool batchFirst = n.intAttr("layout", 0) != 0;
    double seq = x->dims[batchFirst ? 1 : 0], batch = x->dims[batchFirst ? 0 : 1];
    double input = x->dims[2], dirs = w->dims[0];
    double gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
    double hidden = w->dims[1] / gates;
    // Per step and direction: the gate GEMMs over [x_t, h_{t-1}], plus about
    // 4 element-wise operations per gate output (activations and updates).
    return dirs * seq * batch * (2.0 * gates * hidden * (input + hidden) + 4.0 * gates * hidden);
  }
  if (llvm::Optional<GemmShape> g = gemmShape(n, s)) {
    double flops = 2.0 * g->batch * g->m * g->n * g->k;
    if (op == "Gemm" && n.numInputs() > 2 && n.input(2))
      flops += static_cast<double>(g->m) * g->n;
    if (isGemmBiasAct(n) && n.numInputs() > 2 && n.input(2)) // the bias, once per output
      flops += static_cast<double>(g->batch) * g->m * g->n;
    if (op == "Conv" && n.numInputs() > 2 && n.input(2) && out)
      flops += static_cast<double>(out->numElements());
    return flops;
  }
  return llvm::None;
}

//===----------------------------------------------------------------------===//
// Report sections
//===----------------------------------------------------------------------===//

static llvm::StringRef colorName(SlotColor c) {
  switch (c) {
  case SlotColor::Allow:
    return "allow";
  case SlotColor::Deny:
    return "deny";
  case SlotColor::Keep:
    return "keep";
  }
  llvm_unreachable("bad SlotColor");
}

/// Does the node compute in 16-bit? Its float results are 16-bit, or it has
/// no float results and reads 16-bit inputs (comparisons, ArgMax).
static bool runsInHalf(const Node &n) {
  // GemmBiasAct's product runs in its operands' type (a folded Cast types Y).
  if (isGemmBiasAct(n) && n.numInputs() && n.input(0))
    return isHalfPrecision(n.input(0)->type.tensorElemType());
  bool floatResult = false;
  for (const Value *v : n.outputs()) {
    if (!v)
      continue;
    DType t = v->type.tensorElemType();
    if (isHalfPrecision(t))
      return true;
    floatResult |= isFloatingPoint(t);
  }
  if (floatResult)
    return false;
  return llvm::any_of(
      n.inputs(), [](const Value *v) { return v && isHalfPrecision(v->type.tensorElemType()); });
}

/// Bytes of a value as stored; -1 when its shape or type is unknown.
static double valueBytes(const Value *v, const ShapeEstimator &s) {
  if (!v->type.isTensor())
    return -1;
  unsigned bits = dtypeBits(v->type.elem);
  int64_t n = s.shape(v).numElements();
  if (n < 0 || bits == 0)
    return -1;
  return static_cast<double>(n) * bits / 8.0;
}

static double fraction(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

static llvm::json::Object summarySection(const AmpResult &r, const AmpOptions &opts) {
  unsigned allow = 0, deny = 0, keep = 0, partial = 0;
  for (const NodeDecision &d : r.decisions) {
    allow += d.color == SlotColor::Allow;
    deny += d.color == SlotColor::Deny;
    keep += d.color == SlotColor::Keep;
    partial += d.partial;
  }
  return llvm::json::Object{
      {"line", r.summaryLine(opts.target)},
      {"target", dtypeName(opts.target)},
      {"level", ampLevelName(opts.level)},
      {"keep_io_types", opts.keepIoTypes},
      {"deny_nodes", opts.denyNodesRegex},
      {"nodes_before", r.nodesBefore},       // M
      {"slots_converted", r.slotsConverted}, // N
      {"casts_to_target", r.castsToTarget},  // K
      {"casts_to_fp32", r.castsToFp32},
      {"constants_converted", r.constantsConverted},
      {"casts_reused", r.castsReused},
      {"casts_folded", r.castsFolded},
      {"changed", r.changed},
      {"nodes_by_color", llvm::json::Object{{"allow", allow}, {"deny", deny}, {"keep", keep}}},
      {"partial_nodes", partial},
  };
}

/// One entry per painted node; streamed, as big models have many.
static void writeNodes(llvm::json::OStream &j, const AmpResult &r) {
  j.attributeArray("nodes", [&] {
    for (const NodeDecision &d : r.decisions)
      j.object([&] {
        j.attribute("graph", d.graph);
        j.attribute("name", d.name);
        j.attribute("op", d.opType);
        j.attribute("class", ampClassName(d.cls));
        j.attribute("color", colorName(d.color));
        j.attribute("partial", d.partial);
        j.attribute("reason", ampReasonText(d.reason));
        j.attribute("detail", d.detail);
      });
  });
}

namespace {
struct OpFlops {
  unsigned nodes = 0, unestimated = 0;
  double flops = 0, half = 0;
};

/// Totals over every graph of the rewritten model.
struct Totals {
  double flops = 0, halfFlops = 0;
  unsigned computeNodes = 0, unestimatedNodes = 0;
  std::map<std::string, OpFlops> byOp;
  double bytes = 0, halfBytes = 0;
  unsigned values = 0, unknownValues = 0;
  double initBytes = 0, halfInitBytes = 0;
};
} // namespace

static void addGraphTotals(const Graph &g, const ShapeEstimator &s, Totals &t) {
  for (const Value *v : g.initializers()) {
    const Tensor *data = v->initializer();
    if (!data)
      continue;
    t.initBytes += static_cast<double>(data->byteSize());
    if (isHalfPrecision(data->dtype))
      t.halfInitBytes += static_cast<double>(data->byteSize());
  }
  for (const Node &n : g.nodes()) {
    bool half = runsInHalf(n);
    if (flopKind(n) != FlopKind::None) {
      OpFlops &o = t.byOp[n.qualifiedOpType()];
      ++o.nodes;
      ++t.computeNodes;
      if (llvm::Optional<double> f = estimateFlops(n, s)) {
        o.flops += *f;
        t.flops += *f;
        if (half) {
          o.half += *f;
          t.halfFlops += *f;
        }
      } else {
        ++o.unestimated;
        ++t.unestimatedNodes;
      }
    }
    for (const Value *v : n.outputs()) {
      if (!v)
        continue;
      ++t.values;
      double b = valueBytes(v, s);
      if (b < 0) {
        ++t.unknownValues;
        continue;
      }
      t.bytes += b;
      if (isHalfPrecision(v->type.elem))
        t.halfBytes += b;
    }
  }
}

static llvm::json::Object flopsSection(const Totals &t) {
  std::vector<std::pair<std::string, OpFlops>> ops(t.byOp.begin(), t.byOp.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto &a, const auto &b) { return a.second.flops > b.second.flops; });
  llvm::json::Array byOp;
  for (auto &[op, o] : ops)
    byOp.push_back(llvm::json::Object{{"op", op},
                                      {"nodes", o.nodes},
                                      {"flops", o.flops},
                                      {"half_flops", o.half},
                                      {"unestimated_nodes", o.unestimated}});
  return llvm::json::Object{
      {"total", t.flops},
      {"half", t.halfFlops},
      {"compute_nodes", t.computeNodes},
      {"unestimated_nodes", t.unestimatedNodes},
      // The FLOPs of a node with unknown shapes are unknown too, so the part
      // that could not be estimated is given as a fraction of compute nodes.
      {"unestimated_node_fraction",
       fraction(t.unestimatedNodes, static_cast<double>(t.computeNodes))},
      {"counting",
       "MatMul/FusedMatMul/Gemm/Conv/ConvTranspose: 2*M*N*K (+bias); Einsum: 2*product of "
       "index sizes; "
       "LSTM/GRU/RNN: per step and direction 2*gates*H*(I+H) + 4*gates*H; pooling: output "
       "elements * window; reductions: input elements; other arithmetic: 1 per output element; "
       "data movement: 0"},
      {"by_op", std::move(byOp)},
  };
}

static llvm::json::Object bytesSection(const Totals &t) {
  return llvm::json::Object{
      {"intermediate_total", t.bytes},     {"intermediate_half", t.halfBytes},
      {"intermediate_values", t.values},   {"unknown_values", t.unknownValues},
      {"initializers_total", t.initBytes}, {"initializers_half", t.halfInitBytes},
  };
}

namespace {
/// The Tensor Core view of one GEMM-like node.
struct TensorCoreRow {
  const Graph *graph;
  const Node *node;
  bool half;
  llvm::Optional<GemmShape> shape;
  bool symbolic; ///< shapes computed with symbolic dims taken as 1
  bool aligned = false;
  llvm::SmallVector<const char *, 3> misaligned;
};
} // namespace

static void writeTensorCores(llvm::json::OStream &j, const Model &m, const AmpResult &r,
                             const ShapeEstimator &s) {
  std::vector<TensorCoreRow> rows;
  unsigned known = 0, aligned = 0, alignedHalf = 0, half = 0;
  llvm::StringSet<> castOutputs;
  for (const InsertedCast &c : r.casts)
    castOutputs.insert(c.to);
  double castBytes = 0, toTarget = 0, toFp32 = 0;
  unsigned castsFound = 0, castsUnknown = 0;
  auto mult = [](int64_t d) { return d >= 0 && d % kTensorCoreMultiple == 0; };
  forEachGraphConst(*m.graph, [&](const Graph &g) {
    for (const Node &n : g.nodes()) {
      if (n.opType == "Cast" && n.domain.empty() && n.numOutputs() == 1 && n.output(0) &&
          castOutputs.count(n.output(0)->name()) && n.numInputs() == 1 && n.input(0)) {
        ++castsFound;
        double in = valueBytes(n.input(0), s), out = valueBytes(n.output(0), s);
        if (in < 0 || out < 0) {
          ++castsUnknown;
        } else {
          castBytes += in + out; // each cast reads its input and writes its result
          (isHalfPrecision(n.output(0)->type.elem) ? toTarget : toFp32) += in + out;
        }
      }
      if (!isGemmLike(n))
        continue;
      bool symbolic =
          llvm::any_of(n.inputs(), [&](const Value *v) { return v && s.dependsOnSymbols(v); });
      TensorCoreRow row{&g, &n, runsInHalf(n), gemmShape(n, s), symbolic, false, {}};
      half += row.half;
      if (const llvm::Optional<GemmShape> &gs = row.shape) {
        ++known;
        if (gs->cin >= 0) {
          if (!mult(gs->cin))
            row.misaligned.push_back("c_in");
          if (!mult(gs->cout))
            row.misaligned.push_back("c_out");
        } else {
          // M grows with the batch: not judged when the batch is symbolic.
          if (!mult(gs->m) && !symbolic)
            row.misaligned.push_back("m");
          if (!mult(gs->n))
            row.misaligned.push_back("n");
          if (!mult(gs->k))
            row.misaligned.push_back("k");
        }
        row.aligned = row.misaligned.empty();
        aligned += row.aligned;
        alignedHalf += row.aligned && row.half;
      }
      rows.push_back(std::move(row));
    }
  });
  j.attributeObject("tensor_cores", [&] {
    j.attribute("dim_multiple", kTensorCoreMultiple);
    j.attribute("rule", "MatMul/Gemm: M, N and K multiples of 8 (M not judged when it comes "
                        "from a symbolic dimension); Conv/ConvTranspose: input and output "
                        "channels per group multiples of 8; LSTM/GRU/RNN: input and hidden "
                        "sizes multiples of 8");
    j.attribute("gemm_nodes", static_cast<int64_t>(rows.size()));
    j.attribute("half_gemm_nodes", half);
    j.attribute("shapes_known", known);
    j.attribute("aligned", aligned);
    j.attribute("aligned_half", alignedHalf);
    j.attribute("cast_bytes", llvm::json::Object{{"total", castBytes},
                                                 {"to_target", toTarget},
                                                 {"to_fp32", toFp32},
                                                 {"casts", castsFound},
                                                 {"unknown_shape", castsUnknown}});
    j.attributeArray("nodes", [&] {
      for (const TensorCoreRow &row : rows)
        j.object([&] {
          j.attribute("graph", row.graph->name);
          j.attribute("name", row.node->name.ref());
          j.attribute("op", row.node->qualifiedOpType());
          j.attribute("half", row.half);
          j.attribute("shape_known", row.shape.hasValue());
          if (!row.shape)
            return;
          j.attribute("symbolic_dims_taken_as_1", row.symbolic);
          j.attribute("m", row.shape->m);
          j.attribute("n", row.shape->n);
          j.attribute("k", row.shape->k);
          j.attribute("batch", row.shape->batch);
          if (row.shape->cin >= 0) {
            j.attribute("c_in", row.shape->cin);
            j.attribute("c_out", row.shape->cout);
          }
          j.attribute("multiples_of_8", row.aligned);
          j.attributeArray("misaligned", [&] {
            for (const char *d : row.misaligned)
              j.value(d);
          });
        });
    });
  });
}

/// Training models: what the loss-scaling stage inserted, read back from the
/// model (the mpc.training.loss_scale* metadata and the nodes whose doc string
/// starts with "mpc loss scaling: ", counted per role).
static void writeLossScaling(llvm::json::OStream &j, const Model &after) {
  const std::string *config = after.findMetadata(trainkeys::kLossScale);
  j.attributeObject("loss_scaling", [&] {
    j.attribute("inserted", config != nullptr);
    if (!config) {
      std::string why = lossScalingUnsupportedReason(after);
      j.attribute("reason", why.empty() ? "loss scaling off" : why);
      return;
    }
    llvm::StringRef cfg(*config);
    j.attribute("mode", cfg.split(' ').first);
    j.attribute("config", cfg);
    auto lines = [&](const char *key) {
      llvm::SmallVector<llvm::StringRef, 8> parts;
      if (const std::string *v = after.findMetadata(key))
        llvm::StringRef(*v).split(parts, '\n', -1, /*KeepEmpty=*/false);
      return parts;
    };
    j.attributeArray("state", [&] {
      for (llvm::StringRef s : lines(trainkeys::kLossScaleState))
        j.value(s);
    });
    const std::string *found = after.findMetadata(trainkeys::kFoundInf);
    const std::string *nonfinite = after.findMetadata(trainkeys::kGradNonfinite);
    j.attribute("found_inf", found ? *found : "");
    j.attribute("grad_nonfinite", nonfinite ? *nonfinite : "");
    j.attributeArray("gradients", [&] {
      for (llvm::StringRef line : lines(trainkeys::kGradients)) {
        // Named pairs, not structured bindings: clang 14 cannot capture those.
        std::pair<llvm::StringRef, llvm::StringRef> pg = line.split('=');
        llvm::StringRef param = pg.first, grad = pg.second;
        j.object([&] {
          j.attribute("param", param.trim());
          j.attribute("gradient", grad.trim());
        });
      }
    });
    std::map<std::string, int64_t> roles;
    llvm::StringSet<> guarded;
    if (!after.trainingInfo.empty() && after.trainingInfo[0].algorithm)
      for (const Node &n : after.trainingInfo[0].algorithm->nodes()) {
        llvm::StringRef doc(n.docString);
        if (!doc.consume_front("mpc loss scaling: "))
          continue;
        ++roles[doc.str()];
        if (doc == "guard" && n.output(0))
          guarded.insert(n.output(0)->name());
      }
    j.attributeArray("guarded_updates", [&] {
      for (const auto &b : after.trainingInfo[0].updateBinding)
        if (guarded.count(b.second))
          j.object([&] {
            j.attribute("state", b.first);
            j.attribute("output", b.second);
          });
    });
    j.attributeObject("inserted_nodes", [&] {
      for (const auto &r : roles)
        j.attribute(r.first, r.second);
    });
  });
}

/// The whole report, small sections first and the per-node list last.
static void writeJson(llvm::raw_ostream &os, const Model &after, const AmpResult &result,
                      const AmpOptions &opts) {
  llvm::json::OStream j(os, /*IndentSize=*/2);
  j.object([&] {
    j.attribute("mpc_report_version", 1);
    j.attribute("graph", after.graph ? after.graph->name : "");
    j.attribute("summary", summarySection(result, opts));
    if (after.isTraining())
      writeLossScaling(j, after);
    if (after.graph) {
      ShapeEstimator shapes(after);
      Totals t;
      forEachGraphConst(*after.graph, [&](const Graph &g) { addGraphTotals(g, shapes, t); });
      j.attribute("fp16_flops_fraction", fraction(t.halfFlops, t.flops));
      j.attribute("fp16_bytes_fraction", fraction(t.halfBytes, t.bytes));
      j.attribute("flops", flopsSection(t));
      j.attribute("bytes", bytesSection(t));
      j.attributeArray("symbolic_dims_taken_as_1", [&] {
        for (const std::string &sym : shapes.assumedSymbols())
          j.value(sym);
      });
      writeTensorCores(j, after, result, shapes);
    }
    j.attributeArray("notes", [&] {
      for (const std::string &n : result.notes)
        j.value(n);
    });
    j.attributeArray("casts", [&] {
      for (const InsertedCast &c : result.casts)
        j.object([&] {
          j.attribute("from", c.from);
          j.attribute("to", c.to);
          j.attribute("type", dtypeName(c.toType));
          j.attribute("of_constant", c.ofConstant);
        });
    });
    writeNodes(j, result);
  });
  os << "\n";
}

llvm::Error tool::writeReport(llvm::StringRef path, const Model &after, const AmpResult &result,
                              const AmpOptions &opts) {
  std::string model = (path + kTempSuffix).str();
  llvm::Error err = llvm::writeFileAtomically(model, path, [&](llvm::raw_ostream &os) {
    writeJson(os, after, result, opts);
    return llvm::Error::success();
  });
  if (err)
    return inputError("cannot write the report '{0}': {1}", path, llvm::toString(std::move(err)));
  return llvm::Error::success();
}
