//===- AmpColoring.cpp - The AMP painting analysis -------------------------===//
//
// Methodology (docs/amp-algorithm.md, TF-AMP semantics):
//   1. Seed allow with every processable slot of an allow-list op.
//   2. Deny spreads forward through infer ops, and through clear ops only when
//      they lead (through clear ops) to another infer or deny op.
//   3. Clear/infer slots on a clear/infer-only path between two allow ops
//      become allow.
//   4. (bf16) An infer slot fed by allow and by no deny becomes allow.
//   5. Allow floods through clear slots in both directions.
//   6. Allow-list slots whose schema rejects the target type drop out.
//   7. Sequence clusters agree: one non-allow member keeps all fp32.
// Then two guards beyond TF: the shape-path guard (float math that only
// computes shapes stays fp32, computed before painting) and the constant
// guard (a small constant that would flush to zero keeps its consumer fp32).
//
// Every traversal is a DFS over the slot graph in CSR form; each pass enters
// a slot at most once, so the analysis is linear in slots plus edges.
//
// Data layout: one walk over the model collects the nodes, classifies each
// distinct (domain, op type) once (schema, list class, which ports share a
// type parameter) and computes the shape-path guard; per-node and per-value
// facts are vectors indexed by Node::id() / Value::id(); slots hold no
// strings (parameter names point into the cached signatures, the detail text
// is built when printed).
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/AmpColoring.h"
#include "mpc/IR/Limits.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Ops/TypeInference.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Regex.h"
#include <cmath>
#include <cstring>

using namespace mpc;

static_assert(sizeof(void *) != 8 || sizeof(AmpSlot) == 40,
              "AmpSlot grew: the traversals read slots by the hundred thousand");

llvm::StringRef mpc::ampReasonText(AmpReason r) {
  switch (r) {
  case AmpReason::AllowList:
    return "op on allow list";
  case AmpReason::BetweenAllow:
    return "on a clear/infer path between allow ops";
  case AmpReason::FollowsAllow:
    return "infer op fed by allow (bf16)";
  case AmpReason::ClearNextToAllow:
    return "clear op connected to allow";
  case AmpReason::ForceAll:
    return "UNSAFE_FORCE_ALL";
  case AmpReason::DenyList:
    return "op on deny list";
  case AmpReason::DenyNodes:
    return "node pinned by --deny-nodes";
  case AmpReason::DenyPropagated:
    return "downstream of a deny op through infer/clear ops";
  case AmpReason::InferAlone:
    return "infer op not between allow ops";
  case AmpReason::ClearAlone:
    return "clear op not connected to allow";
  case AmpReason::Unlisted:
    return "op on no list (fp32 barrier)";
  case AmpReason::NotFloat32:
    return "type is not fp32";
  case AmpReason::FixedType:
    return "type fixed by the schema";
  case AmpReason::ParamKeptFp32:
    return "parameter slot kept fp32 by the lists";
  case AmpReason::TypeUnknown:
    return "element type unknown";
  case AmpReason::SchemaRejects:
    return "schema does not accept the target type";
  case AmpReason::NoKernel:
    return "backend has no low-precision kernel";
  case AmpReason::ShapePathGuard:
    return "shape-path guard: only feeds shape/size/index computations";
  case AmpReason::ConstantGuard:
    return "constant guard: a constant input flushes to zero in the target type";
  case AmpReason::ClusterDisagrees:
    return "sequence cluster has a member that is not allow";
  }
  llvm_unreachable("bad AmpReason");
}

namespace {
/// Ops whose low-precision conversion is limited to one type parameter; the
/// others (statistics, scales, ratios, indices) stay fp32.
struct PaintableParam {
  const char *opType;
  const char *param;
};

/// A formal input or output of an op, resolved once per op.
struct FormalInfo {
  int group = -1; ///< index into OpInfo::groupParam; -1 for a fixed-type port
  const TypeConstraint *tc = nullptr;
  bool tensorAdmitsTarget = true; ///< tc admits a tensor of the target type
};

/// Facts about one (domain, op type), computed once per distinct op: the
/// schema, the list class, and which ports share a type parameter.
struct OpInfo {
  SignatureLookup lk;
  AmpClass cls = AmpClass::Unlisted;
  bool isCast = false;     ///< default-domain Cast
  bool isConstant = false; ///< default-domain Constant
  /// The only parameter the lists let convert (kPaintableParams), or null.
  const char *paintParam = nullptr;
  std::vector<FormalInfo> ins, outs;
  bool insVariadic = false, outsVariadic = false;
  /// Distinct type parameters of the op's formals; a schema-less op's float
  /// ports share "T" (group 0).
  llvm::SmallVector<llvm::StringRef, 4> groupParam;
};
} // namespace

static const PaintableParam kPaintableParams[] = {
    {"BatchNormalization", "T"}, {"LayerNormalization", "T"}, {"GroupNormalization", "T"},
    {"InstanceNormalization", "T"}, {"Dropout", "T"},      {"Resize", "T1"},
    {"OneHot", "T3"},            {"Pad", "T"},              {"ConstantOfShape", "T2"},
};

/// The parameter of `n`'s op that alone may convert (the lists keep the
/// others fp32), or null when every parameter may.
static const char *paintableParamOf(const Node &n) {
  if (!n.domain.empty() && n.domain != "ai.onnx")
    return nullptr;
  for (const PaintableParam &p : kPaintableParams)
    if (n.opType == p.opType)
      return p.param;
  return nullptr;
}

static bool isIntegerType(DType t) {
  switch (t) {
  case DType::I8:
  case DType::I16:
  case DType::I32:
  case DType::I64:
  case DType::U8:
  case DType::U16:
  case DType::U32:
  case DType::U64:
  case DType::Bool:
    return true;
  default:
    return false;
  }
}

/// Type::tensorElemType with the common case (a tensor) inline.
static DType elemTypeOf(const Type &t) {
  return t.kind == TypeKind::Tensor ? t.elem : t.tensorElemType();
}

/// The formal of port `port` (variadic formals cover the tail), as
/// OpSignature::inputFormal/outputFormal.
static const FormalInfo *formalOf(const std::vector<FormalInfo> &formals, bool variadic,
                                  unsigned port) {
  if (port < formals.size())
    return &formals[port];
  return variadic && !formals.empty() ? &formals.back() : nullptr;
}

namespace mpc {

class AmpPainter {
public:
  AmpPainter(AmpColoring &c, Model &m, const AmpLists &lists, const AmpOptions &opts,
             const BackendCaps &caps)
      : c(c), m(m), lists(lists), opts(opts), caps(caps) {}

  void run();

private:
  AmpColoring &c;
  Model &m;
  const AmpLists &lists;
  const AmpOptions &opts;
  const BackendCaps &caps;

  std::vector<Node *> nodes; // every graph, outer first (forEachGraph order)
  std::vector<OpInfo> ops;
  OpIndex opIndex; // (domain, op type) -> index into ops
  std::vector<unsigned> dfsStack;
  std::vector<char> schemaOk; // per slot: the schema admits the target type
  // CSR adjacency of the slot graph.
  std::vector<unsigned> succOff, succ, predOff, pred;
  std::vector<std::pair<unsigned, unsigned>> clusterEdges; // sequence-typed edges
  /// (node, input) fed by an initializer or a Constant, in graph order: the
  /// inputs the constant guard looks at.
  std::vector<std::pair<Node *, unsigned>> constantInputs;
  std::vector<char> shapeOnly; // by Value::id()
  std::vector<char> allow, deny;

  unsigned opOf(const Node &n);
  void addOp(const Node &n, const SignatureLookup &lk);
  const OpInfo &opInfo(const Node &n) const { return ops[c.nodeOp[n.id()]]; }
  void collect(Graph &g, bool guard);
  void computeShapeGuard(Graph &g, size_t begin, size_t end);
  void buildSlots(const llvm::Regex *denyNodes);
  void buildEdges();
  template <typename Enter, typename Visit>
  void dfs(unsigned root, bool followInputs, bool followOutputs, Enter enter, Visit visit);
  void paint();
  void constantGuard();
};

} // namespace mpc

void AmpPainter::addOp(const Node &n, const SignatureLookup &lk) {
  OpInfo op;
  op.lk = lk;
  op.cls = lists.classify(n);
  op.isCast = n.opType == "Cast" && n.domain.empty();
  op.isConstant = n.opType == "Constant" && n.domain.empty();
  op.paintParam = paintableParamOf(n);
  auto groupOf = [&](llvm::StringRef param) {
    if (param.empty())
      return -1;
    for (unsigned g = 0; g < op.groupParam.size(); ++g)
      if (op.groupParam[g] == param)
        return static_cast<int>(g);
    op.groupParam.push_back(param);
    return static_cast<int>(op.groupParam.size() - 1);
  };
  if (const OpSignature *sig = op.lk.sig) {
    auto resolve = [&](const std::vector<FormalParam> &formals, bool isInput,
                       std::vector<FormalInfo> &out) {
      for (unsigned k = 0; k < formals.size(); ++k) {
        FormalInfo f;
        f.group = groupOf(typeParamRef(n, sig, isInput, k));
        f.tc = sig->constraintOf(formals[k]);
        f.tensorAdmitsTarget = !f.tc || f.tc->admitsTensor(opts.target);
        out.push_back(f);
      }
    };
    resolve(sig->inputs, true, op.ins);
    resolve(sig->outputs, false, op.outs);
    op.insVariadic = !sig->inputs.empty() && sig->inputs.back().option == FormalOption::Variadic;
    op.outsVariadic = !sig->outputs.empty() && sig->outputs.back().option == FormalOption::Variadic;
  } else {
    groupOf("T");
  }
  ops.push_back(std::move(op));
  c.opNames.push_back(n.qualifiedOpType());
}

unsigned AmpPainter::opOf(const Node &n) {
  unsigned i = opIndex.indexOf(n);
  if (i == ops.size()) // indices are handed out in order: a new op
    addOp(n, opIndex.signature(i));
  return i;
}

/// Collects the nodes of `g` and of the graphs nested in it (outer first, as
/// forEachGraph), classifies them, and computes the shape-path guard of each
/// graph when `guard` is set: one walk over the model.
void AmpPainter::collect(Graph &g, bool guard) {
  // One level of recursion per nested graph: the verifier, run before any
  // painting, refuses graphs nested deeper than the limit.
  assert(graphDepth(g) <= kMaxGraphDepth && "verify the model first");
  size_t begin = nodes.size();
  bool nested = false;
  for (Node &n : g.nodes()) {
    nodes.push_back(&n);
    c.nodeOp[n.id()] = opOf(n);
    for (const Attribute &a : n.attrs)
      nested |= !a.graphs.empty();
  }
  size_t end = nodes.size();
  if (guard)
    computeShapeGuard(g, begin, end);
  if (!nested)
    return;
  for (size_t i = begin; i < end; ++i)
    for (Attribute &a : nodes[i]->attrs)
      for (auto &sub : a.graphs)
        collect(*sub, guard);
}

/// A float value is shape-only when it is used, is not a graph output, and
/// every use converts it to an integer or feeds a clear/infer op whose results
/// are shape-only themselves. Reverse order visits users first.
void AmpPainter::computeShapeGuard(Graph &g, size_t begin, size_t end) {
  for (size_t k = end; k-- > begin;) {
    Node &n = *nodes[k];
    for (Value *v : n.outputs()) {
      if (!v || elemTypeOf(v->type) != DType::F32 || !v->hasUses() || v->isGraphOutput())
        continue;
      bool only = true;
      for (const Use &u : v->uses()) {
        // The op is known by the user's id: most users are allow ops, which
        // end the walk without loading the user node.
        const OpInfo &uop = ops[c.nodeOp[u.userId]];
        if (!uop.isCast && uop.cls != AmpClass::Clear && uop.cls != AmpClass::Infer) {
          only = false;
          break;
        }
        Node &user = *u.user;
        if (user.getParent() != &g) {
          only = false;
          break;
        }
        if (uop.isCast) {
          const Attribute *to = user.attr("to");
          if (to && to->kind == AttrKind::Int && isKnownDType(to->i) &&
              isIntegerType(static_cast<DType>(to->i)))
            continue;
          only = false;
          break;
        }
        if (uop.cls != AmpClass::Clear && uop.cls != AmpClass::Infer) {
          only = false;
          break;
        }
        bool anyFloatOut = false;
        for (Value *o : user.outputs()) {
          if (!o || elemTypeOf(o->type) != DType::F32)
            continue;
          anyFloatOut = true;
          if (!shapeOnly[o->id()]) {
            only = false;
            break;
          }
        }
        if (!only || !anyFloatOut) {
          only = false;
          break;
        }
      }
      shapeOnly[v->id()] = only;
    }
  }
}

void AmpPainter::buildSlots(const llvm::Regex *denyNodes) {
  std::vector<AmpSlot> &slots = c.slotList;
  DType target = opts.target;
  size_t ports = 0;
  for (const Node *n : nodes)
    ports += n->numInputs() + n->numOutputs();
  slots.reserve(ports); // at most one slot per port
  schemaOk.reserve(ports);
  c.portSlot.reserve(ports);
  // Local slots of a node: one per type parameter, one per fixed port.
  struct Local {
    int group; ///< OpInfo::groupParam index; -1 for a fixed port
    unsigned slot;
    bool sawF32 = false, sawOther = false, sawUnknown = false, schemaRejects = false;
    DType other = DType::Undefined;
  };
  llvm::SmallVector<Local, 8> locals;
  for (Node *n : nodes) {
    const OpInfo &op = opInfo(*n);
    const OpSignature *sig = op.lk.sig;
    if (op.lk.fallback && opts.verbose > 0)
      c.fallbacks.push_back(llvm::formatv("{0}: opset {1} is newer than the schemas mpc "
                                          "knows; using {2}-{3}",
                                          describeNode(*n), n->opsetVersion(), n->opType,
                                          sig->sinceVersion)
                                .str());
    AmpClass cls = op.cls;
    bool pinned = denyNodes && !n->name.empty() && denyNodes->match(n->name);
    // A training model's mpc.training.fp32_nodes are pinned like --deny-nodes.
    bool trainingPinned = !pinned && !opts.fp32Nodes.empty() && opts.fp32Nodes.count(n);
    pinned |= trainingPinned;
    if (pinned)
      cls = AmpClass::Deny;

    unsigned base = static_cast<unsigned>(c.portSlot.size());
    c.portBase[n->id()] = base;
    unsigned numIn = n->numInputs(), numOut = n->numOutputs();
    locals.clear();
    for (unsigned k = 0; k < numIn + numOut; ++k) {
      bool isInput = k < numIn;
      unsigned port = isInput ? k : k - numIn;
      const Value *v = isInput ? n->input(port) : n->output(port);
      const FormalInfo *f = isInput ? formalOf(op.ins, op.insVariadic, port)
                                    : formalOf(op.outs, op.outsVariadic, port);
      int group = f ? f->group : -1;
      // An op without a schema (a custom domain, a function) that a list
      // names: its float ports form one slot, as in FusedMatMul(A:T, B:T)->T.
      if (!sig && cls != AmpClass::Unlisted && v && v->type.isKnown() &&
          isFloatingPoint(elemTypeOf(v->type)))
        group = 0;
      Local *l = nullptr;
      if (group >= 0)
        for (Local &cand : locals)
          if (cand.group == group) {
            l = &cand;
            break;
          }
      if (!l) {
        AmpSlot s;
        s.node = n;
        if (group >= 0)
          s.param = op.groupParam[group];
        s.cls = cls;
        slots.push_back(s);
        schemaOk.push_back(1);
        locals.push_back(Local{group, static_cast<unsigned>(slots.size() - 1)});
        l = &locals.back();
      }
      c.portSlot.push_back(l->slot);
      if (!v)
        continue;
      // A port whose type nobody knows (an untyped body input, a custom
      // op's result) could be anything: its slot is left alone.
      DType e = v->type.isKnown() ? elemTypeOf(v->type) : DType::Undefined;
      if (e == DType::Undefined) {
        l->sawUnknown = true;
        continue;
      }
      if (e == DType::F32)
        l->sawF32 = true;
      else {
        l->sawOther = true;
        l->other = e;
      }
      if (sig && f && f->tc &&
          !(v->type.kind == TypeKind::Tensor ? f->tensorAdmitsTarget
                                             : f->tc->admits(v->type, target)))
        l->schemaRejects = true;
    }

    int lowPrecisionOk = -1; // the backend query, made at most once per node
    auto supportsLowPrecision = [&] {
      if (lowPrecisionOk < 0)
        lowPrecisionOk = caps.supportsLowPrecision(*n, target);
      return lowPrecisionOk != 0;
    };
    bool clearOrInfer = cls == AmpClass::Clear || cls == AmpClass::Infer;
    for (Local &l : locals) {
      AmpSlot &s = slots[l.slot];
      // Without a schema only the lists speak for the op.
      schemaOk[l.slot] = !l.schemaRejects;
      auto keep = [&](AmpReason r) {
        s.processable = false;
        s.reason = r;
      };
      if (pinned)
        s.reason = AmpReason::DenyNodes;
      if (trainingPinned)
        s.detailKind = AmpDetail::TrainingFp32;
      if (l.group < 0)
        keep(AmpReason::FixedType);
      else if (l.sawOther)
        keep(AmpReason::NotFloat32);
      else if (!l.sawF32 || l.sawUnknown)
        keep(AmpReason::TypeUnknown);
      else if (cls == AmpClass::Unlisted)
        keep(AmpReason::Unlisted);
      else if (op.paintParam && s.param != op.paintParam)
        keep(AmpReason::ParamKeptFp32);
      else if (clearOrInfer && l.schemaRejects)
        keep(AmpReason::SchemaRejects);
      else if (clearOrInfer && !supportsLowPrecision())
        keep(AmpReason::NoKernel);
      else
        s.processable = true;
      if (!s.processable && l.sawOther) {
        s.detailType = l.other;
        s.detailKind = dtypeName(l.other).empty() ? AmpDetail::None : AmpDetail::OtherType;
      }
    }
    // Shape-path guard: a clear/infer slot whose results all only compute shapes.
    if (!clearOrInfer)
      continue;
    for (Local &l : locals) {
      AmpSlot &s = slots[l.slot];
      if (!s.processable)
        continue;
      bool anyOut = false, allShape = true;
      for (unsigned i = 0; i < numOut; ++i) {
        Value *o = n->output(i);
        if (!o || c.portSlot[base + numIn + i] != l.slot)
          continue;
        anyOut = true;
        allShape &= shapeOnly[o->id()] != 0;
      }
      if (anyOut && allShape) {
        s.processable = false;
        s.reason = AmpReason::ShapePathGuard;
      }
    }
  }
}

void AmpPainter::buildEdges() {
  std::vector<std::pair<unsigned, unsigned>> edges;
  edges.reserve(c.portSlot.size());
  for (Node *n : nodes) {
    unsigned base = c.portBase[n->id()];
    for (unsigned i = 0; i < n->numInputs(); ++i) {
      Value *v = n->input(i);
      if (!v)
        continue;
      bool fromConstantOp = v->producer() && opInfo(*v->producer()).isConstant;
      if (v->kind() == ValueKind::Initializer || fromConstantOp)
        constantInputs.push_back({n, i});
      if (!v->producer())
        continue;
      unsigned from = c.slotOf(*v->producer(), false, v->producerResult());
      unsigned to = c.portSlot[base + i];
      edges.push_back({from, to});
      if (v->type.kind == TypeKind::Sequence || v->type.kind == TypeKind::Optional)
        clusterEdges.push_back({from, to});
    }
  }
  // Both CSR directions in one count and one fill pass.
  unsigned ns = static_cast<unsigned>(c.slotList.size());
  succOff.assign(ns + 1, 0);
  predOff.assign(ns + 1, 0);
  for (const auto &e : edges) {
    ++succOff[e.first + 1];
    ++predOff[e.second + 1];
  }
  for (unsigned i = 0; i < ns; ++i) {
    succOff[i + 1] += succOff[i];
    predOff[i + 1] += predOff[i];
  }
  succ.resize(edges.size());
  pred.resize(edges.size());
  std::vector<unsigned> succFill(succOff.begin(), succOff.end() - 1);
  std::vector<unsigned> predFill(predOff.begin(), predOff.end() - 1);
  for (const auto &e : edges) {
    succ[succFill[e.first]++] = e.second;
    pred[predFill[e.second]++] = e.first;
  }
}

template <typename Enter, typename Visit>
void AmpPainter::dfs(unsigned root, bool followInputs, bool followOutputs, Enter enter,
                     Visit visit) {
  std::vector<unsigned> &stack = dfsStack; // reused: most walks enter nothing
  stack.clear();
  stack.push_back(root);
  visit(root);
  const unsigned *predO = predOff.data(), *predA = pred.data();
  const unsigned *succO = succOff.data(), *succA = succ.data();
  while (!stack.empty()) {
    unsigned s = stack.back();
    stack.pop_back();
    auto step = [&](const unsigned *off, const unsigned *adj) {
      for (unsigned k = off[s], e = off[s + 1]; k < e; ++k) {
        unsigned t = adj[k];
        if (t != root && enter(t)) {
          visit(t);
          stack.push_back(t);
        }
      }
    };
    if (followInputs)
      step(predO, predA);
    if (followOutputs)
      step(succO, succA);
  }
}

void AmpPainter::paint() {
  std::vector<AmpSlot> &slots = c.slotList;
  unsigned ns = static_cast<unsigned>(slots.size());
  allow.assign(ns, 0);
  deny.assign(ns, 0);
  std::vector<AmpReason> why(ns, AmpReason::Unlisted);
  // The traversals read class and processability of every slot they touch:
  // a byte each, not the 40-byte slots.
  std::vector<AmpClass> slotCls(ns);
  std::vector<char> slotProc(ns);
  for (unsigned s = 0; s < ns; ++s) {
    slotCls[s] = slots[s].cls;
    slotProc[s] = slots[s].processable;
  }
  auto is = [&](unsigned s, AmpClass k) { return slotCls[s] == k; };
  auto proc = [&](unsigned s) { return slotProc[s] != 0; };

  if (opts.level == AmpLevel::UnsafeForceAll) {
    for (unsigned s = 0; s < ns; ++s)
      if (proc(s)) {
        allow[s] = 1;
        why[s] = AmpReason::ForceAll;
      }
  } else {
    // 1. Seed allow.
    for (unsigned s = 0; s < ns; ++s)
      if (proc(s) && is(s, AmpClass::Allow)) {
        allow[s] = 1;
        why[s] = AmpReason::AllowList;
      }
    // 2. Deny forward through infer and clear-leading-to-infer/deny.
    std::vector<char> upstream(ns, 0);
    for (unsigned r = 0; r < ns; ++r) {
      if (!is(r, AmpClass::Deny) && !is(r, AmpClass::Infer))
        continue;
      dfs(
          r, true, false,
          [&](unsigned t) { return !upstream[t] && is(t, AmpClass::Clear); },
          [&](unsigned t) { upstream[t] = 1; });
    }
    for (unsigned r = 0; r < ns; ++r) {
      if (deny[r] || !is(r, AmpClass::Deny))
        continue;
      dfs(
          r, false, true, [&](unsigned t) { return !deny[t] && upstream[t]; },
          [&](unsigned t) {
            deny[t] = 1;
            // A deny slot keeps its own reason when another deny op reaches it.
            if (is(t, AmpClass::Deny)) {
              why[t] = slots[t].reason == AmpReason::DenyNodes ? AmpReason::DenyNodes
                                                               : AmpReason::DenyList;
              return;
            }
            why[t] = AmpReason::DenyPropagated;
            if (!slots[t].hasDetail()) {
              slots[t].detailKind = AmpDetail::DenyOp;
              slots[t].detailRef = slots[r].node;
            }
          });
    }
    // 3. Clear and infer between allow ops become allow.
    std::vector<char> downstream(ns, 0);
    for (unsigned r = 0; r < ns; ++r) {
      if (!allow[r] || !is(r, AmpClass::Allow))
        continue;
      dfs(
          r, false, true,
          [&](unsigned t) {
            return !downstream[t] && !is(t, AmpClass::Allow) && !deny[t] && proc(t) &&
                   (is(t, AmpClass::Clear) || is(t, AmpClass::Infer));
          },
          [&](unsigned t) { downstream[t] = 1; });
    }
    std::vector<char> upstreamOfAllow(ns, 0);
    for (unsigned r = 0; r < ns; ++r) {
      if (!allow[r] || !is(r, AmpClass::Allow) || upstreamOfAllow[r])
        continue;
      dfs(
          r, true, false, [&](unsigned t) { return !upstreamOfAllow[t] && downstream[t]; },
          [&](unsigned t) {
            upstreamOfAllow[t] = 1;
            if (!allow[t]) {
              allow[t] = 1;
              why[t] = AmpReason::BetweenAllow;
            }
          });
    }
    // 4. bf16: infer follows allow, in graph order so chains propagate.
    if (opts.target == DType::BF16) {
      for (unsigned s = 0; s < ns; ++s) {
        if (!proc(s) || !is(s, AmpClass::Infer) || allow[s] || deny[s])
          continue;
        bool anyAllow = false, anyDeny = false;
        for (unsigned k = predOff[s]; k < predOff[s + 1]; ++k) {
          anyAllow |= allow[pred[k]] != 0;
          anyDeny |= deny[pred[k]] != 0;
        }
        if (anyAllow && !anyDeny) {
          allow[s] = 1;
          why[s] = AmpReason::FollowsAllow;
        }
      }
    }
    // 5. Allow floods through clear slots, both directions.
    for (unsigned r = 0; r < ns; ++r) {
      if (!allow[r])
        continue;
      dfs(
          r, true, true,
          [&](unsigned t) {
            return !allow[t] && !deny[t] && proc(t) && is(t, AmpClass::Clear);
          },
          [&](unsigned t) {
            if (!allow[t]) {
              allow[t] = 1;
              why[t] = AmpReason::ClearNextToAllow;
            }
          });
    }
  }
  // 6. Drop allow-list slots whose schema rejects the target type.
  for (unsigned s = 0; s < ns; ++s)
    if (allow[s] && !schemaOk[s]) {
      allow[s] = 0;
      slots[s].processable = false;
      why[s] = AmpReason::SchemaRejects;
    }
  // 7. Sequence clusters get one color (union-find over sequence edges).
  if (!clusterEdges.empty()) {
    std::vector<unsigned> parent(ns);
    for (unsigned s = 0; s < ns; ++s)
      parent[s] = s;
    auto find = [&](unsigned x) {
      while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
      return x;
    };
    for (auto &e : clusterEdges)
      parent[find(e.first)] = find(e.second);
    std::vector<char> clusterOk(ns, 1);
    std::vector<char> inCluster(ns, 0);
    for (auto &e : clusterEdges)
      inCluster[e.first] = inCluster[e.second] = 1;
    for (unsigned s = 0; s < ns; ++s)
      if (inCluster[s] && !allow[s])
        clusterOk[find(s)] = 0;
    for (unsigned s = 0; s < ns; ++s)
      if (inCluster[s] && allow[s] && !clusterOk[find(s)]) {
        allow[s] = 0;
        why[s] = AmpReason::ClusterDisagrees;
      }
  }
  for (unsigned s = 0; s < ns; ++s) {
    AmpSlot &slot = slots[s];
    if (allow[s]) {
      slot.color = SlotColor::Allow;
      slot.reason = why[s];
    } else if (deny[s]) {
      slot.color = SlotColor::Deny;
      slot.reason = why[s];
    } else if (why[s] == AmpReason::SchemaRejects || why[s] == AmpReason::ClusterDisagrees) {
      slot.reason = why[s];
    } else if (slot.processable) {
      slot.reason = slot.cls == AmpClass::Infer ? AmpReason::InferAlone : AmpReason::ClearAlone;
      if (slot.cls == AmpClass::Allow)
        slot.reason = AmpReason::AllowList; // unreachable: allow-list slots seed allow
    }
  }
}

/// Counts the values of a constant that overflow or flush to zero in `target`,
/// by comparing magnitudes with the rounding boundaries (round to nearest even):
/// f16 overflows from 65520 and flushes at or below 2^-25; bf16 overflows from
/// 0x7F7F8000 (bits) and flushes at or below 2^-134.
/// True when any of the `n` fp32 values at `p` has a magnitude in
/// [overflowBits, inf) or in (0, flushBits]; zero, inf and NaN are exact in
/// every float type. Both tests are one unsigned range check, four lanes at a
/// time (weights are scanned whole).
static bool anyOutOfRange(const uint8_t *p, int64_t n, uint32_t overflowBits, uint32_t flushBits) {
  typedef uint32_t Lanes __attribute__((vector_size(16)));
  typedef int32_t Mask __attribute__((vector_size(16))); // lane compares give -1 / 0
  const uint32_t overSpan = 0x7F800000u - overflowBits;
  const Lanes magMask = {0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu};
  const Lanes overLo = {overflowBits, overflowBits, overflowBits, overflowBits};
  const Lanes overLen = {overSpan, overSpan, overSpan, overSpan};
  const Lanes one = {1, 1, 1, 1};
  const Lanes flush = {flushBits, flushBits, flushBits, flushBits};
  Mask hit = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    Lanes bits;
    std::memcpy(&bits, p + 4 * i, sizeof(bits));
    Lanes mag = bits & magMask;
    hit |= ((mag - overLo) < overLen) | ((mag - one) < flush);
  }
  bool any = (hit[0] | hit[1] | hit[2] | hit[3]) != 0;
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    uint32_t mag = bits & 0x7FFFFFFFu;
    any |= (mag - overflowBits < overSpan) | (mag - 1 < flushBits);
  }
  return any;
}

/// Counts the values of a constant that overflow or flush to zero in `target`,
/// by comparing magnitudes with the rounding boundaries (round to nearest even):
/// f16 overflows from 65520 and flushes at or below 2^-25; bf16 overflows from
/// 0x7F7F8000 (bits) and flushes at or below 2^-134.
static void scanConstant(const Tensor &t, DType target, ConstantIssue &issue) {
  const uint32_t overflowBits = target == DType::BF16 ? 0x7F7F8000u : 0x477FF000u;
  const uint32_t flushBits = target == DType::BF16 ? 0x00400000u : 0x33000000u;
  const int64_t n = t.numElements();
  issue.total = static_cast<unsigned>(n);
  const uint8_t *p = t.bytes().data();
  // First a branch-free test; the values are counted and the example looked
  // for only when something was found.
  if (!anyOutOfRange(p, n, overflowBits, flushBits))
    return;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    uint32_t mag = bits & 0x7FFFFFFFu;
    if (mag == 0 || mag >= 0x7F800000u)
      continue;
    if (mag >= overflowBits) {
      if (!issue.overflow++)
        issue.example = t.getAsDouble(i);
    } else if (mag <= flushBits) {
      if (!issue.overflow && !issue.underflow)
        issue.example = t.getAsDouble(i);
      ++issue.underflow;
    }
  }
}

/// The constant tensor behind a value: an initializer or a Constant's value
/// (`fromConstantOp`: its producer is a Constant node).
static const Tensor *constantTensor(const Value *v, bool fromConstantOp) {
  if (v->initializer() && v->kind() == ValueKind::Initializer)
    return v->initializer();
  if (fromConstantOp) {
    const Attribute *a = v->producer()->attr("value");
    if (a && a->kind == AttrKind::Tensor && !a->tensors.empty())
      return &a->tensors[0];
  }
  return nullptr;
}

void AmpPainter::constantGuard() {
  std::vector<AmpSlot> &slots = c.slotList;
  for (auto [n, i] : constantInputs) {
    Value *v = n->input(i);
    unsigned s = c.portSlot[c.portBase[n->id()] + i];
    if (slots[s].color != SlotColor::Allow || elemTypeOf(v->type) != DType::F32)
      continue;
    const Tensor *t = constantTensor(v, v->producer() && opInfo(*v->producer()).isConstant);
    if (!t || t->isExternal() || t->dtype != DType::F32)
      continue;
    ConstantIssue issue;
    scanConstant(*t, opts.target, issue);
    if (!issue.overflow && !issue.underflow)
      continue;
    issue.value = v->name();
    issue.node = describeNode(*n);
    // A small constant (an epsilon, a scale) that flushes to zero changes
    // the math: its consumer stays fp32. Large overflowing constants
    // (attention masks) saturate when converted.
    if (issue.underflow && issue.total <= 16) {
      issue.keptFp32 = true;
      slots[s].color = SlotColor::Keep;
      slots[s].reason = AmpReason::ConstantGuard;
      slots[s].detailKind = v->name().empty() ? AmpDetail::None : AmpDetail::Constant;
      slots[s].detailRef = v;
    }
    c.constIssues.push_back(std::move(issue));
  }
}

void AmpPainter::run() {
  c.portBase.assign(m.nodeIdBound(), AmpColoring::kNotPainted);
  c.nodeOp.assign(m.nodeIdBound(), 0);
  shapeOnly.assign(m.valueIdBound(), 0);
  // The shape-path guard covers the main graph and the training algorithm,
  // not the initialization graphs.
  collect(*m.graph, /*guard=*/true);
  for (TrainingInfo &ti : m.trainingInfo) {
    if (ti.initialization)
      collect(*ti.initialization, /*guard=*/false);
    if (ti.algorithm)
      collect(*ti.algorithm, /*guard=*/true);
  }
  llvm::Optional<llvm::Regex> re;
  if (!opts.denyNodesRegex.empty())
    re.emplace(opts.denyNodesRegex);
  buildSlots(re ? re.getPointer() : nullptr);
  buildEdges();
  paint();
  constantGuard();
}

AmpColoring::AmpColoring(Model &m, const AmpLists &lists, const AmpOptions &opts,
                         const BackendCaps &caps) {
  AmpPainter p(*this, m, lists, opts, caps);
  p.run();
}

std::string AmpSlot::detail() const {
  switch (detailKind) {
  case AmpDetail::None:
    return "";
  case AmpDetail::TrainingFp32:
    return "training fp32 node";
  case AmpDetail::OtherType:
    return dtypeName(detailType).str();
  case AmpDetail::DenyOp:
    return describeNode(*static_cast<const Node *>(detailRef));
  case AmpDetail::Constant:
    return static_cast<const Value *>(detailRef)->name();
  }
  llvm_unreachable("bad AmpDetail");
}

std::string AmpColoring::paramText(unsigned slot) const {
  const AmpSlot &s = slotList[slot];
  if (!s.param.empty())
    return s.param.str();
  // A fixed slot has exactly one port.
  const Node &n = *s.node;
  unsigned base = portBase[n.id()];
  for (unsigned k = 0; k < n.numInputs() + n.numOutputs(); ++k)
    if (portSlot[base + k] == slot)
      return k < n.numInputs() ? "#in" + std::to_string(k)
                               : "#out" + std::to_string(k - n.numInputs());
  llvm_unreachable("slot has no port");
}

unsigned AmpColoring::numAllow() const {
  unsigned k = 0;
  for (const AmpSlot &s : slotList)
    k += s.color == SlotColor::Allow;
  return k;
}

void AmpColoring::printDecisions(llvm::raw_ostream &os) const {
  for (unsigned i = 0; i < slotList.size(); ++i) {
    const AmpSlot &s = slotList[i];
    if (s.reason == AmpReason::FixedType || s.reason == AmpReason::NotFloat32 ||
        s.reason == AmpReason::TypeUnknown)
      continue;
    const char *color = s.color == SlotColor::Allow  ? "ALLOW"
                        : s.color == SlotColor::Deny ? "DENY"
                                                     : "KEEP";
    os << "Painting slot " << paramText(i) << " of " << describeNode(*s.node) << " ["
       << ampClassName(s.cls) << "] " << color << ": " << ampReasonText(s.reason);
    if (s.hasDetail())
      os << " (" << s.detail() << ")";
    os << "\n";
  }
}
