//===- AmpColoring.cpp - The AMP painting analysis -------------------------===//
//
// Methodology (amp-algorithm.md, TF-AMP semantics):
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
//===----------------------------------------------------------------------===//
#include "mpc/Passes/AmpColoring.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Ops/TypeInference.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Regex.h"
#include <cmath>
#include <cstring>

using namespace mpc;

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
} // namespace

static const PaintableParam kPaintableParams[] = {
    {"BatchNormalization", "T"}, {"LayerNormalization", "T"}, {"GroupNormalization", "T"},
    {"InstanceNormalization", "T"}, {"Dropout", "T"},      {"Resize", "T1"},
    {"OneHot", "T3"},            {"Pad", "T"},              {"ConstantOfShape", "T2"},
};

/// False when the lists keep `param` of `n` fp32 whatever the painting says.
static bool isPaintableParam(const Node &n, llvm::StringRef param) {
  if (!n.domain.empty() && n.domain != "ai.onnx")
    return true;
  for (const PaintableParam &p : kPaintableParams)
    if (n.opType == p.opType)
      return param == p.param;
  return true;
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

  std::vector<Node *> nodes;
  std::vector<char> schemaOk; // per slot: the schema admits the target type
  // CSR adjacency of the slot graph.
  std::vector<unsigned> succOff, succ, predOff, pred;
  std::vector<std::pair<unsigned, unsigned>> clusterEdges; // sequence-typed edges
  llvm::DenseMap<const Value *, bool> shapeOnly;
  llvm::DenseMap<const Node *, AmpClass> nodeClass; // lists.classify, once per node
  std::vector<char> allow, deny;

  AmpClass classOf(const Node &n) const;
  void collectNodes();
  void computeShapeGuard(Graph &g);
  void buildSlots(const llvm::Regex *denyNodes);
  void buildEdges();
  template <typename Enter, typename Visit>
  void dfs(unsigned root, bool followInputs, bool followOutputs, Enter enter, Visit visit);
  void paint();
  void constantGuard();
  void finish();
  unsigned outSlot(const Value *v) const {
    Node *p = v->producer();
    return c.slotOf(*p, false, v->producerResult());
  }
};

} // namespace mpc

AmpClass AmpPainter::classOf(const Node &n) const {
  auto it = nodeClass.find(&n);
  return it != nodeClass.end() ? it->second : lists.classify(n);
}

void AmpPainter::collectNodes() {
  auto add = [&](Graph &g) {
    forEachGraph(g, [&](Graph &sub) {
      for (Node &n : sub.nodes())
        nodes.push_back(&n);
    });
  };
  add(*m.graph);
  for (TrainingInfo &ti : m.trainingInfo) {
    if (ti.initialization)
      add(*ti.initialization);
    if (ti.algorithm)
      add(*ti.algorithm);
  }
  nodeClass.reserve(static_cast<unsigned>(nodes.size()));
  for (const Node *n : nodes)
    nodeClass[n] = lists.classify(*n);
}

/// A float value is shape-only when it is used, is not a graph output, and
/// every use converts it to an integer or feeds a clear/infer op whose results
/// are shape-only themselves. Reverse order visits users first.
void AmpPainter::computeShapeGuard(Graph &g) {
  std::vector<Node *> order;
  for (Node &n : g.nodes())
    order.push_back(&n);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node &n = **it;
    for (Value *v : n.outputs()) {
      if (!v || v->type.tensorElemType() != DType::F32 || !v->hasUses() || v->isGraphOutput())
        continue;
      bool only = true;
      for (const Use &u : v->uses()) {
        Node &user = *u.user;
        if (user.getParent() != &g) {
          only = false;
          break;
        }
        if (user.opType == "Cast" && user.domain.empty()) {
          const Attribute *to = user.attr("to");
          if (to && to->kind == AttrKind::Int && isKnownDType(to->i) &&
              isIntegerType(static_cast<DType>(to->i)))
            continue;
          only = false;
          break;
        }
        AmpClass uc = classOf(user);
        if (uc != AmpClass::Clear && uc != AmpClass::Infer) {
          only = false;
          break;
        }
        bool anyFloatOut = false;
        for (Value *o : user.outputs()) {
          if (!o || o->type.tensorElemType() != DType::F32)
            continue;
          anyFloatOut = true;
          auto sit = shapeOnly.find(o);
          if (sit == shapeOnly.end() || !sit->second) {
            only = false;
            break;
          }
        }
        if (!only || !anyFloatOut) {
          only = false;
          break;
        }
      }
      shapeOnly[v] = only;
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
  c.portBase.reserve(static_cast<unsigned>(nodes.size()));
  for (Node *n : nodes) {
    SignatureLookup lk = lookupSignature(*n);
    if (lk.fallback && opts.verbose > 0)
      c.fallbacks.push_back(llvm::formatv("{0}: opset {1} is newer than the schemas mpc "
                                          "knows; using {2}-{3}",
                                          describeNode(*n), n->opsetVersion(), n->opType,
                                          lk.sig->sinceVersion)
                                .str());
    AmpClass cls = classOf(*n);
    bool pinned = denyNodes && !n->name.empty() && denyNodes->match(n->name);
    // A training model's mpc.training.fp32_nodes are pinned like --deny-nodes.
    bool trainingPinned = !pinned && opts.fp32Nodes.count(n);
    pinned |= trainingPinned;
    if (pinned)
      cls = AmpClass::Deny;

    unsigned base = static_cast<unsigned>(c.portSlot.size());
    c.portBase[n] = base;
    // Local slots of this node: param -> slot index, plus per-slot facts.
    // Local slots of this node: one per type parameter, one per fixed port.
    // Parameter names point into the cached signature (or are literals).
    struct Local {
      llvm::StringRef param; ///< empty for a fixed port
      unsigned slot;
      bool sawF32 = false, sawOther = false, sawUnknown = false, schemaRejects = false;
      DType other = DType::Undefined;
    };
    llvm::SmallVector<Local, 4> locals;
    auto slotFor = [&](llvm::StringRef param, bool isInput, unsigned port) -> Local & {
      if (!param.empty())
        for (Local &l : locals)
          if (l.param == param)
            return l;
      AmpSlot s;
      s.node = n;
      s.param = param.empty() ? typeParamOfPort(*n, lk.sig, isInput, port) : param.str();
      s.cls = cls;
      slots.push_back(std::move(s));
      schemaOk.push_back(1);
      locals.push_back(Local{param, static_cast<unsigned>(slots.size() - 1)});
      return locals.back();
    };
    auto addPort = [&](bool isInput, unsigned port, const Value *v) {
      llvm::StringRef param = typeParamRef(*n, lk.sig, isInput, port);
      // An op without a schema (a custom domain, a function) that a list
      // names: its float ports form one slot, as in FusedMatMul(A:T, B:T)->T.
      if (!lk.sig && cls != AmpClass::Unlisted && v && v->type.isKnown() &&
          isFloatingPoint(v->type.tensorElemType()))
        param = "T";
      Local &l = slotFor(param, isInput, port);
      c.portSlot.push_back(l.slot);
      if (!v)
        return;
      // A port whose type nobody knows (an untyped body input, a custom
      // op's result) could be anything: its slot is left alone.
      if (!v->type.isKnown() || v->type.tensorElemType() == DType::Undefined) {
        l.sawUnknown = true;
        return;
      }
      DType e = v->type.tensorElemType();
      if (e == DType::F32)
        l.sawF32 = true;
      else {
        l.sawOther = true;
        l.other = e;
      }
      if (lk.sig) {
        const FormalParam *f = isInput ? lk.sig->inputFormal(port) : lk.sig->outputFormal(port);
        const TypeConstraint *tc = f ? lk.sig->constraintOf(*f) : nullptr;
        if (tc && !tc->admits(v->type, target))
          l.schemaRejects = true;
      }
    };
    for (unsigned i = 0; i < n->numInputs(); ++i)
      addPort(true, i, n->input(i));
    for (unsigned i = 0; i < n->numOutputs(); ++i)
      addPort(false, i, n->output(i));

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
        s.detail = "training fp32 node";
      if (l.param.empty())
        keep(AmpReason::FixedType);
      else if (l.sawOther)
        keep(AmpReason::NotFloat32);
      else if (!l.sawF32 || l.sawUnknown)
        keep(AmpReason::TypeUnknown);
      else if (cls == AmpClass::Unlisted)
        keep(AmpReason::Unlisted);
      else if (!isPaintableParam(*n, l.param))
        keep(AmpReason::ParamKeptFp32);
      else if ((cls == AmpClass::Clear || cls == AmpClass::Infer) && !schemaOk[l.slot])
        keep(AmpReason::SchemaRejects);
      else if ((cls == AmpClass::Clear || cls == AmpClass::Infer) &&
               !caps.supportsLowPrecision(*n, target))
        keep(AmpReason::NoKernel);
      else
        s.processable = true;
      if (!s.processable && l.sawOther)
        s.detail = dtypeName(l.other).str();
    }
    // Shape-path guard: a clear/infer slot whose results all only compute shapes.
    if (cls == AmpClass::Clear || cls == AmpClass::Infer) {
      for (Local &l : locals) {
        AmpSlot &s = slots[l.slot];
        if (!s.processable)
          continue;
        bool anyOut = false, allShape = true;
        for (unsigned i = 0; i < n->numOutputs(); ++i) {
          Value *o = n->output(i);
          if (!o || c.portSlot[base + n->numInputs() + i] != l.slot)
            continue;
          anyOut = true;
          auto it = shapeOnly.find(o);
          allShape &= it != shapeOnly.end() && it->second;
        }
        if (anyOut && allShape) {
          s.processable = false;
          s.reason = AmpReason::ShapePathGuard;
        }
      }
    }
  }
}

void AmpPainter::buildEdges() {
  std::vector<std::pair<unsigned, unsigned>> edges;
  for (Node *n : nodes)
    for (unsigned i = 0; i < n->numInputs(); ++i) {
      Value *v = n->input(i);
      if (!v || !v->producer())
        continue;
      unsigned from = outSlot(v), to = c.slotOf(*n, true, i);
      edges.push_back({from, to});
      if (v->type.kind == TypeKind::Sequence || v->type.kind == TypeKind::Optional)
        clusterEdges.push_back({from, to});
    }
  unsigned ns = static_cast<unsigned>(c.slotList.size());
  auto buildCsr = [&](bool bySrc, std::vector<unsigned> &off, std::vector<unsigned> &adj) {
    off.assign(ns + 1, 0);
    for (auto &e : edges)
      ++off[(bySrc ? e.first : e.second) + 1];
    for (unsigned i = 0; i < ns; ++i)
      off[i + 1] += off[i];
    adj.resize(edges.size());
    std::vector<unsigned> fill(off.begin(), off.end() - 1);
    for (auto &e : edges)
      adj[fill[bySrc ? e.first : e.second]++] = bySrc ? e.second : e.first;
  };
  buildCsr(true, succOff, succ);
  buildCsr(false, predOff, pred);
}

template <typename Enter, typename Visit>
void AmpPainter::dfs(unsigned root, bool followInputs, bool followOutputs, Enter enter,
                     Visit visit) {
  llvm::SmallVector<unsigned, 64> stack{root};
  visit(root);
  while (!stack.empty()) {
    unsigned s = stack.pop_back_val();
    auto step = [&](const std::vector<unsigned> &off, const std::vector<unsigned> &adj) {
      for (unsigned k = off[s]; k < off[s + 1]; ++k) {
        unsigned t = adj[k];
        if (t != root && enter(t)) {
          visit(t);
          stack.push_back(t);
        }
      }
    };
    if (followInputs)
      step(predOff, pred);
    if (followOutputs)
      step(succOff, succ);
  }
}

void AmpPainter::paint() {
  std::vector<AmpSlot> &slots = c.slotList;
  unsigned ns = static_cast<unsigned>(slots.size());
  allow.assign(ns, 0);
  deny.assign(ns, 0);
  std::vector<AmpReason> why(ns, AmpReason::Unlisted);
  auto is = [&](unsigned s, AmpClass k) { return slots[s].cls == k; };
  auto proc = [&](unsigned s) { return slots[s].processable; };

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
            if (slots[t].detail.empty())
              slots[t].detail = describeNode(*slots[r].node);
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
    std::function<unsigned(unsigned)> find = [&](unsigned x) {
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
static void scanConstant(const Tensor &t, DType target, ConstantIssue &issue) {
  const uint32_t overflowBits = target == DType::BF16 ? 0x7F7F8000u : 0x477FF000u;
  const uint32_t flushBits = target == DType::BF16 ? 0x00400000u : 0x33000000u;
  const int64_t n = t.numElements();
  issue.total = static_cast<unsigned>(n);
  const uint8_t *p = t.bytes().data();
  // First a branch-free count (weights are scanned whole); the example value
  // is looked for only when something was found.
  unsigned over = 0, under = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    uint32_t mag = bits & 0x7FFFFFFFu;
    // zero, inf and NaN are exact in every float type
    over += (mag >= overflowBits) & (mag < 0x7F800000u);
    under += (mag != 0) & (mag <= flushBits);
  }
  if (!over && !under)
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

/// The constant tensor behind a value: an initializer or a Constant's value.
static const Tensor *constantTensor(const Value *v) {
  if (v->initializer() && v->kind() == ValueKind::Initializer)
    return v->initializer();
  const Node *p = v->producer();
  if (p && p->opType == "Constant" && p->domain.empty()) {
    const Attribute *a = p->attr("value");
    if (a && a->kind == AttrKind::Tensor && !a->tensors.empty())
      return &a->tensors[0];
  }
  return nullptr;
}

void AmpPainter::constantGuard() {
  std::vector<AmpSlot> &slots = c.slotList;
  for (Node *n : nodes)
    for (unsigned i = 0; i < n->numInputs(); ++i) {
      Value *v = n->input(i);
      unsigned s = c.slotOf(*n, true, i);
      if (!v || slots[s].color != SlotColor::Allow || v->type.tensorElemType() != DType::F32)
        continue;
      const Tensor *t = constantTensor(v);
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
        slots[s].detail = v->name();
      }
      c.constIssues.push_back(std::move(issue));
    }
}

void AmpPainter::run() {
  collectNodes();
  auto guard = [&](Graph &g) { forEachGraph(g, [&](Graph &sub) { computeShapeGuard(sub); }); };
  guard(*m.graph);
  for (TrainingInfo &ti : m.trainingInfo)
    if (ti.algorithm)
      guard(*ti.algorithm);
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

unsigned AmpColoring::slotOf(const Node &n, bool isInput, unsigned port) const {
  auto it = portBase.find(&n);
  assert(it != portBase.end() && "node was not painted");
  return portSlot[it->second + (isInput ? port : n.numInputs() + port)];
}

unsigned AmpColoring::numAllow() const {
  unsigned k = 0;
  for (const AmpSlot &s : slotList)
    k += s.color == SlotColor::Allow;
  return k;
}

void AmpColoring::printDecisions(llvm::raw_ostream &os) const {
  for (const AmpSlot &s : slotList) {
    if (s.reason == AmpReason::FixedType || s.reason == AmpReason::NotFloat32 ||
        s.reason == AmpReason::TypeUnknown)
      continue;
    const char *color = s.color == SlotColor::Allow  ? "ALLOW"
                        : s.color == SlotColor::Deny ? "DENY"
                                                     : "KEEP";
    os << "Painting slot " << s.param << " of " << describeNode(*s.node) << " [" << ampClassName(s.cls)
       << "] " << color << ": " << ampReasonText(s.reason);
    if (!s.detail.empty())
      os << " (" << s.detail << ")";
    os << "\n";
  }
}
