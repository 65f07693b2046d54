//===- InsertCasts.cpp - Apply an AMP coloring -----------------------------===//
//
// Retypes every allow slot to the target type and makes the graph type-correct
// again. For each value, the uses are grouped by the type they want; each
// group gets exactly one conversion:
//
//       x:f32 ──► MatMul(allow)          x:f32 ──► Cast ──► x/CastToFp16:f16 ──► MatMul
//            └──► Softmax(deny)   ==>        └──► Softmax
//
// Constants are converted instead of cast in inference models (one copy per
// precision when consumers disagree); in training models the fp32 initializer
// is the master weight and gets one shared cast. Graph outputs keep their
// names and types: the producer's value is renamed and a cast back to the
// original type takes over the name. The reverse of every inserted cast is
// remembered, so fp16 -> fp32 -> fp16 round trips never appear.
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/Amp.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Runtime/Float16.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

using namespace mpc;

std::string AmpResult::summaryLine(DType target) const {
  const char *tname = target == DType::BF16 ? "bfloat16" : "float16";
  return llvm::formatv("Converted {0}/{1} nodes to {2} precision using {3} cast(s) to {2} "
                       "(excluding Const and Variable casts)",
                       slotsConverted, nodesBefore, tname, castsToTarget)
      .str();
}

static llvm::StringRef castSuffix(DType t) {
  switch (t) {
  case DType::F16:
    return "CastToFp16";
  case DType::BF16:
    return "CastToBf16";
  case DType::F32:
    return "CastToFp32";
  default:
    return "Cast";
  }
}

static llvm::StringRef typeSuffix(DType t) {
  switch (t) {
  case DType::F16:
    return "fp16";
  case DType::BF16:
    return "bf16";
  case DType::F32:
    return "fp32";
  default:
    return dtypeName(t);
  }
}

/// `base` + "/" + `suffix`, or that with "_N" appended when it is taken
/// (Model::freshName); the name is reserved. Built in one buffer: a cast's
/// name is made for nearly every cast the rewrite inserts.
static std::string freshSuffixedName(Model &m, llvm::StringRef base, llvm::StringRef suffix) {
  llvm::SmallString<128> name(base);
  name += '/';
  name += suffix;
  return m.freshName(name);
}

/// Converts an f32 tensor to `to` (f16/bf16), rounding to nearest even; finite
/// values beyond the target's range saturate to its largest finite value
/// (attention masks like -1e9 keep their meaning), inf and NaN stay.
static Tensor convertFloatTensor(const Tensor &src, DType to, unsigned &saturated) {
  Tensor out(to, src.dims);
  out.name = src.name;
  out.docString = src.docString;
  const bool bf16 = to == DType::BF16;
  const uint16_t largest = bf16 ? 0x7F7F : 0x7BFF;
  int64_t n = src.numElements();
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * 2);
  const uint8_t *in = src.bytes().data();
  uint8_t *outBytes = bytes.data();
  // Fast path for fp16: a result in the normal range (most weights) needs no
  // special cases; the rounding is floatBitsToHalfBits' own. Blocks whose
  // values are all normal run branch-free (the compiler vectorizes them).
  auto isNormal = [](uint32_t x) {
    return (x & 0x7fffffffu) - 0x38800000u < 0x477ff000u - 0x38800000u;
  };
  auto fastHalf = [](uint32_t x) {
    uint32_t abs = x & 0x7fffffffu;
    uint32_t r = (abs >> 13) - (112u << 10);
    r += ((abs & 0x1fffu) + (r & 1u)) > 0x1000u;
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | r);
  };
  auto convertOne = [&](int64_t i) {
    uint32_t x;
    std::memcpy(&x, in + 4 * i, 4);
    uint16_t h;
    if (!bf16 && isNormal(x)) {
      h = fastHalf(x);
    } else {
      h = bf16 ? floatBitsToBFloat16Bits(x) : floatBitsToHalfBits(x);
      bool finiteIn = (x & 0x7F800000u) != 0x7F800000u;
      bool infOut = (h & 0x7FFF) == (bf16 ? 0x7F80 : 0x7C00);
      if (finiteIn && infOut) {
        h = static_cast<uint16_t>((h & 0x8000) | largest);
        ++saturated;
      }
    }
    std::memcpy(outBytes + 2 * i, &h, 2);
  };
  constexpr int64_t kBlock = 16;
  int64_t i = 0;
  for (; !bf16 && i + kBlock <= n; i += kBlock) {
    uint32_t x[kBlock];
    std::memcpy(x, in + 4 * i, sizeof x);
    bool all = true;
    for (int64_t k = 0; k < kBlock; ++k)
      all &= isNormal(x[k]);
    if (!all) {
      for (int64_t k = 0; k < kBlock; ++k)
        convertOne(i + k);
      continue;
    }
    uint16_t h[kBlock];
    for (int64_t k = 0; k < kBlock; ++k)
      h[k] = fastHalf(x[k]);
    std::memcpy(outBytes + 2 * i, h, sizeof h);
  }
  for (; i < n; ++i)
    convertOne(i);
  out.setBytes(std::move(bytes));
  return out;
}

namespace {

class CastInserter {
public:
  CastInserter(Model &m, const AmpColoring &coloring, const AmpOptions &opts)
      : m(m), coloring(coloring), opts(opts), target(opts.target) {}
  AmpResult run();

private:
  Model &m;
  const AmpColoring &coloring;
  const AmpOptions &opts;
  DType target;
  AmpResult result;
  /// Original element type of every value before retyping, by value id;
  /// kNotRecorded for ids no graph reaches, and values created by the
  /// rewrite have ids past its end.
  std::vector<DType> origType;
  static constexpr DType kNotRecorded = static_cast<DType>(0xFF);
  /// Nodes with ids from here on are casts and constant copies this rewrite
  /// created; their uses are correct by construction and they were not painted.
  unsigned firstInsertedNode = 0;
  /// (value, type) -> the value holding it in that type, for the entries
  /// the two lists below do not hold.
  llvm::DenseMap<std::pair<const Value *, unsigned>, Value *> cache;
  /// The (value, target type) entries of the cache for values that existed
  /// before the rewrite, by value id: nearly every lookup (weights, results
  /// feeding allow ops).
  std::vector<Value *> inTarget;
  /// One entry for each value the rewrite created, by id from
  /// inTarget.size(): a cast's result is recorded once, with its source as
  /// the holder in the source's type (one per cast, so a list rather than a
  /// hash table). Further types of such a value go to `cache`.
  std::vector<std::pair<DType, Value *>> created;
  Value *cached(const Value *v, DType t) const {
    if (v->id() >= inTarget.size()) {
      size_t at = v->id() - inTarget.size();
      if (at < created.size() && created[at].second && created[at].first == t)
        return created[at].second;
    } else if (t == target) {
      return inTarget[v->id()];
    }
    if (cache.empty())
      return nullptr;
    auto it = cache.find({v, static_cast<unsigned>(t)});
    return it == cache.end() ? nullptr : it->second;
  }
  void setCached(const Value *v, DType t, Value *holder) {
    if (v->id() >= inTarget.size()) {
      size_t at = v->id() - inTarget.size();
      if (at >= created.size())
        created.resize(std::max(at + 1, created.size() * 2));
      if (!created[at].second || created[at].first == t) {
        created[at] = {t, holder};
        return;
      }
    } else if (t == target) {
      inTarget[v->id()] = holder;
      return;
    }
    cache[{v, static_cast<unsigned>(t)}] = holder;
  }
  std::vector<Node *> allNodes;
  /// Every graph of the model, outer first (the rewrite adds none).
  std::vector<Graph *> graphs;

  bool isTopLevel(const Graph &g) const { return &g == m.graph.get(); }
  /// Whether a use's user is a cast or constant copy this rewrite made.
  bool isInserted(const Use &u) const { return u.userId >= firstInsertedNode; }
  /// The element type `v` had before the rewrite (its current one for a
  /// value the rewrite created).
  DType originalType(const Value &v) const {
    DType t = v.id() < origType.size() ? origType[v.id()] : kNotRecorded;
    return t == kNotRecorded ? v.type.tensorElemType() : t;
  }
  void collect();
  void reuseExistingCast(Node &n, std::vector<std::string> &log);
  void retypeSlots(Node &n);
  void retypeNodes();
  void retypeAttributes(Node &n);
  void fixValue(Value *v);
  Value *convertTo(Value *v, DType want, bool allUsesWant);
  /// `freshResultName`: resultName was just made by Model::freshName, so no
  /// value (and no graph output) has it yet.
  Value *insertCast(Value *v, DType want, llvm::StringRef resultName,
                    bool freshResultName = true);
  void keepGraphOutputs(Graph &g);
  void retypeGraphInputs(Graph &g);
  NodeList::iterator insertionPoint(Value *v);
  /// The training stage (algorithm or initialization graph) containing `g`, or null.
  Graph *stageOf(Graph *g) const;
  /// Where insertCast puts a cast of an inference-graph initializer that a
  /// training stage reads (a stage may read initializers, not other values).
  Graph *castHome = nullptr;
  /// Casts of inference initializers made inside a training stage.
  std::map<std::tuple<const Value *, unsigned, const Graph *>, Value *> stageCache;
  static bool isOutputName(const Graph &g, llvm::StringRef name);
  /// First node of each graph before the rewrite (null: the graph was empty).
  llvm::DenseMap<const Graph *, Node *> firstOriginal;
};

} // namespace

void CastInserter::collect() {
  firstInsertedNode = m.nodeIdBound();
  origType.assign(m.valueIdBound(), kNotRecorded);
  inTarget.assign(m.valueIdBound(), nullptr);
  auto add = [&](Graph &g) {
    forEachGraph(g, [&](Graph &sub) {
      graphs.push_back(&sub);
      for (Value *v : sub.inputs())
        origType[v->id()] = v->type.tensorElemType();
      for (Value *v : sub.initializers())
        origType[v->id()] = v->type.tensorElemType();
      for (Node &n : sub.nodes())
        allNodes.push_back(&n);
    });
  };
  add(*m.graph);
  for (TrainingInfo &ti : m.trainingInfo) {
    if (ti.initialization)
      add(*ti.initialization);
    if (ti.algorithm)
      add(*ti.algorithm);
  }
  result.nodesBefore = static_cast<unsigned>(allNodes.size());
}

/// Step 8: a Cast(to=float) whose consumers all want the target type is
/// retargeted instead of getting a second cast behind it.
void CastInserter::reuseExistingCast(Node &n, std::vector<std::string> &log) {
  if (llvm::StringRef(n.opType) != "Cast" || !n.domain.empty() || n.numOutputs() != 1)
    return;
  Value *out = n.output(0);
  Attribute *to = n.attr("to");
  if (!out || !to || to->i != static_cast<int64_t>(DType::F32) || !out->hasUses() ||
      out->isGraphOutput())
    return;
  bool allAllow = true;
  for (const Use &u : out->uses())
    allAllow &= coloring.isAllow(u);
  if (!allAllow)
    return;
  to->i = static_cast<int64_t>(target);
  out->type.setTensorElemType(target);
  ++result.castsReused;
  if (opts.verbose)
    log.push_back(llvm::formatv("{0}: existing Cast retargeted to {1}", describeNode(n),
                                dtypeName(target)));
}

void CastInserter::retypeAttributes(Node &n) {
  if (llvm::StringRef(n.domain) == "ai.mpc.training" && llvm::StringRef(n.opType) == "BiasGrad") {
    // A BiasGrad converted whole (a model rewritten again after a widening
    // Cast was folded into it) sums into dY's type: its `to` goes.
    llvm::erase_if(n.attrs, [](const Attribute &a) { return a.name == "to"; });
    return;
  }
  if (!n.domain.empty())
    return;
  if (llvm::StringRef(n.opType) == "ConstantOfShape") {
    Attribute *a = n.attr("value");
    if (a && !a->tensors.empty() && a->tensors[0].dtype == DType::F32) {
      unsigned sat = 0;
      a->tensors[0] = convertFloatTensor(a->tensors[0], target, sat);
    } else if (!a) {
      // The default fill is a float 0: make it explicit in the target type.
      Tensor zero(target, {1});
      zero.setBytes({0, 0});
      n.setAttr(Attribute::makeTensor("value", std::move(zero)));
    }
    return;
  }
  for (llvm::StringLiteral name : {llvm::StringLiteral("dtype"), llvm::StringLiteral("to")}) {
    Attribute *a = n.attr(name);
    if (a && a->kind == AttrKind::Int && a->i == static_cast<int64_t>(DType::F32))
      a->i = static_cast<int64_t>(target);
  }
}

void CastInserter::retypeSlots(Node &n) {
  bool any = false;
  llvm::SmallVector<unsigned, 4> counted;
  for (unsigned i = 0; i < n.numOutputs(); ++i) {
    Value *v = n.output(i);
    if (!v || !coloring.isAllow(n, false, i))
      continue;
    v->type.setTensorElemType(target);
    any = true;
    if (opts.verbose)
      result.typeChanges.push_back(mpc::formatQuoted(
          "{0}: result '{1}' f32 -> {2}", describeNode(n), v->name(), dtypeName(target)));
  }
  // N counts converted slots (inputs-only slots included).
  auto countSlot = [&](unsigned s) {
    if (coloring.slots()[s].color != SlotColor::Allow ||
        std::find(counted.begin(), counted.end(), s) != counted.end())
      return;
    counted.push_back(s);
    any = true;
  };
  for (unsigned i = 0; i < n.numInputs(); ++i)
    countSlot(coloring.slotOf(n, true, i));
  for (unsigned i = 0; i < n.numOutputs(); ++i)
    countSlot(coloring.slotOf(n, false, i));
  result.slotsConverted += static_cast<unsigned>(counted.size());
  if (any)
    retypeAttributes(n);
}

/// One walk over every node: records the results' original types, then
/// retargets reusable casts (step 8) and retypes converted slots. A node's
/// steps change only its own attributes and results, so doing them node by
/// node is doing them step by step; the verbose log keeps the step order.
void CastInserter::retypeNodes() {
  std::vector<std::string> reuseLog;
  for (Node *n : allNodes) {
    for (Value *v : n->outputs())
      if (v)
        origType[v->id()] = v->type.tensorElemType();
    reuseExistingCast(*n, reuseLog);
    retypeSlots(*n);
  }
  result.typeChanges.insert(result.typeChanges.begin(), std::make_move_iterator(reuseLog.begin()),
                            std::make_move_iterator(reuseLog.end()));
}

NodeList::iterator CastInserter::insertionPoint(Value *v) {
  if (Node *p = v->producer(); p && !castHome)
    return std::next(p->getIterator());
  // Casts of graph inputs and initializers go before the graph's first
  // original node, in the order they are created.
  Graph *g = castHome ? castHome : v->graph();
  auto it = firstOriginal.find(g);
  if (it == firstOriginal.end()) {
    Node *first = g->nodes().empty() ? nullptr : &g->nodes().front();
    it = firstOriginal.try_emplace(g, first).first;
  }
  return it->second ? it->second->getIterator() : g->nodes().end();
}

bool CastInserter::isOutputName(const Graph &g, llvm::StringRef name) {
  for (const Value *o : g.outputs())
    if (o->name() == name)
      return true;
  return false;
}

Graph *CastInserter::stageOf(Graph *g) const {
  for (; g; g = g->parent())
    for (const TrainingInfo &ti : m.trainingInfo)
      if (g == ti.algorithm.get() || g == ti.initialization.get())
        return g;
  return nullptr;
}

Value *CastInserter::insertCast(Value *v, DType want, llvm::StringRef resultName,
                                bool freshResultName) {
  Graph &g = castHome ? *castHome : *v->graph();
  Node *cast = g.createNode("Cast", "", insertionPoint(v), v->producer());
  // The node takes its result's name, unless that is a graph output's name
  // (a fresh name is none: the scan of the outputs, O(outputs) per cast, is
  // only for the names keepGraphOutputs passes).
  // Either way the name is reserved: the node borrows the name table's copy.
  // Names are hashed once: both are reserved already, so reserveTableName
  // finds them and borrows the table's copy (as tableName would).
  llvm::CachedHashStringRef resultKey = Model::nameKey(resultName);
  if (resultName == v->name() || v->isGraphOutput() ||
      (!freshResultName && isOutputName(g, resultName)))
    cast->name = m.reserveTableName(
        Model::nameKey(freshSuffixedName(m, v->name(), castSuffix(want))));
  else
    cast->name = m.reserveTableName(resultKey);
  cast->addInput(v);
  cast->setAttr(Attribute::makeInt("to", static_cast<int64_t>(want)));
  Type t = v->type;
  t.setTensorElemType(want);
  Value *out = cast->setOutput(0, resultKey, std::move(t));
  out->hasValueInfo = v->hasValueInfo || v->type.hasShape;
  bool ofConstant = v->kind() == ValueKind::Initializer ||
                    (v->producer() && llvm::StringRef(v->producer()->opType) == "Constant");
  if (!result.castNames)
    result.castNames = std::make_shared<llvm::BumpPtrAllocator>();
  auto keep = [&](llvm::StringRef name) {
    if (name.empty())
      return llvm::StringRef();
    char *chars = result.castNames->Allocate<char>(name.size());
    std::copy(name.begin(), name.end(), chars);
    return llvm::StringRef(chars, name.size());
  };
  result.casts.push_back({keep(v->name()), keep(out->name()), out, want, ofConstant});
  if (want == target && !ofConstant)
    ++result.castsToTarget;
  if (want == DType::F32)
    ++result.castsToFp32;
  // Remember the reverse: casting the result back gives the source.
  setCached(out, v->type.tensorElemType(), v);
  return out;
}

/// The value holding `v` in type `want`, creating it once per (v, want).
Value *CastInserter::convertTo(Value *v, DType want, bool allUsesWant) {
  if (Value *known = cached(v, want))
    return known;
  Value *res = nullptr;
  DType have = v->type.tensorElemType();
  bool floatPair = have == DType::F32 && isHalfPrecision(want);
  Graph &g = *v->graph();

  // v = Cast(x) widened x's type: x itself is v in x's type, exactly.
  if (Node *c = v->producer())
    if (llvm::StringRef(c->opType) == "Cast" && c->domain.empty() && c->numInputs() == 1 && c->input(0) &&
        c->input(0)->type.tensorElemType() == want && isHalfPrecision(want) &&
        have == DType::F32) {
      setCached(v, want, c->input(0));
      return c->input(0);
    }

  // Inference initializers are stored in the target type (in place when every
  // consumer wants it, else one copy per precision).
  if (floatPair && v->kind() == ValueKind::Initializer && !m.isTraining() &&
      v->initializer() && v->initializer()->dtype == DType::F32) {
    Tensor *t = v->initializer();
    if (!t->isExternal() || !t->materialize()) {
      unsigned sat = 0;
      Tensor conv = convertFloatTensor(*t, want, sat);
      ++result.constantsConverted;
      if (allUsesWant && !v->isGraphOutput()) {
        conv.name = v->name();
        *t = std::move(conv);
        v->type.setTensorElemType(want);
        res = v;
      } else {
        std::string name = freshSuffixedName(m, v->name(), typeSuffix(want));
        res = g.addInitializer(name, std::move(conv));
      }
    }
  }
  // Constant nodes likewise.
  Node *p = v->producer();
  if (!res && floatPair && p && llvm::StringRef(p->opType) == "Constant" && p->domain.empty()) {
    Attribute *a = p->attr("value");
    if (a && a->kind == AttrKind::Tensor && !a->tensors.empty() &&
        a->tensors[0].dtype == DType::F32 && !a->tensors[0].isExternal()) {
      unsigned sat = 0;
      Tensor conv = convertFloatTensor(a->tensors[0], want, sat);
      ++result.constantsConverted;
      if (allUsesWant && !v->isGraphOutput()) {
        a->tensors[0] = std::move(conv);
        v->type.setTensorElemType(want);
        res = v;
      } else {
        Node *c = g.createNode("Constant", "", std::next(p->getIterator()), p);
        std::string name = freshSuffixedName(m, v->name(), typeSuffix(want));
        c->name = m.tableName(name);
        c->setAttr(Attribute::makeTensor("value", std::move(conv)));
        Type t = v->type;
        t.setTensorElemType(want);
        res = c->setOutput(0, name, std::move(t));
      }
    }
  }
  if (!res)
    res = insertCast(v, want, freshSuffixedName(m, v->name(), castSuffix(want)));
  setCached(v, want, res);
  return res;
}

/// Groups the uses of `v` by wanted type and redirects each group.
void CastInserter::fixValue(Value *v) {
  DType have = v->type.tensorElemType();
  DType orig = originalType(*v);
  if (orig != DType::F32)
    return; // only fp32 values take part in the rewrite
  llvm::SmallVector<std::pair<Use, DType>, 8> moves;
  unsigned wantTarget = 0, total = 0;
  for (const Use &u : v->uses()) {
    if (isInserted(u))
      continue;
    DType want = coloring.isAllow(u) ? target : orig;
    ++total;
    wantTarget += want == target;
    if (want != have)
      moves.push_back({u, want});
  }
  bool inMain = v->graph() == m.graph.get();
  for (auto &mv : moves) {
    DType want = mv.second;
    if (Graph *stage = inMain ? stageOf(mv.first.user->getParent()) : nullptr) {
      Value *&repl = stageCache[{v, static_cast<unsigned>(want), stage}];
      if (!repl) {
        castHome = stage;
        repl = insertCast(v, want, freshSuffixedName(m, v->name(), castSuffix(want)));
        castHome = nullptr;
      }
      mv.first.user->setInput(mv.first.operand, repl);
      continue;
    }
    bool allWant = want == target ? wantTarget == total : wantTarget == 0;
    Value *repl = convertTo(v, want, allWant);
    if (repl != v)
      mv.first.user->setInput(mv.first.operand, repl);
  }
}

/// Graph outputs keep their names and types: the producer's value is renamed
/// and a cast back to the original type takes the output's name.
void CastInserter::keepGraphOutputs(Graph &g) {
  bool keep = opts.keepIoTypes || !isTopLevel(g);
  for (unsigned i = 0; i < g.outputs().size(); ++i) {
    Value *v = g.outputs()[i];
    if (v->id() >= origType.size() || origType[v->id()] == kNotRecorded || v->graph() != &g)
      continue;
    DType orig = origType[v->id()], have = v->type.tensorElemType();
    if (orig == have || !keep)
      continue;
    std::string name = v->name();
    Value *out = cached(v, orig);
    if (!out || out->name() != name) {
      Graph::renameValue(v, freshSuffixedName(m, name, typeSuffix(have)));
      out = insertCast(v, orig, name, /*freshResultName=*/false);
      setCached(v, orig, out);
    }
    g.setOutput(i, out);
  }
}

/// --no-keep-io-types: a float input all of whose consumers want the target
/// type takes the target type itself.
void CastInserter::retypeGraphInputs(Graph &g) {
  if (opts.keepIoTypes || !isTopLevel(g))
    return;
  for (Value *v : g.inputs()) {
    if (v->type.tensorElemType() != DType::F32 || !v->hasUses() || v->initializer() ||
        v->isGraphOutput())
      continue;
    bool all = true;
    for (const Use &u : v->uses())
      all &= u.user->getParent() == &g && coloring.isAllow(u);
    if (all) {
      v->type.setTensorElemType(target);
      if (opts.verbose)
        result.typeChanges.push_back(
            mpc::formatQuoted("graph input '{0}': f32 -> {1}", v->name(), dtypeName(target)));
    }
  }
}

AmpResult CastInserter::run() {
  collect();
  retypeNodes();
  for (Graph *g : graphs)
    retypeGraphInputs(*g);
  for (Graph *g : graphs)
    keepGraphOutputs(*g);
  // Fix every value in a deterministic order: inputs, initializers, results.
  std::vector<Value *> vals;
  for (Graph *g : graphs) {
    vals.assign(g->inputs().begin(), g->inputs().end());
    vals.insert(vals.end(), g->initializers().begin(), g->initializers().end());
    for (Node &n : g->nodes())
      for (Value *v : n.outputs())
        if (v)
          vals.push_back(v);
    for (Value *v : vals)
      fixValue(v);
  }
  result.changed = result.slotsConverted || result.castsReused || !result.casts.empty();
  // A member: without the move the whole list of casts would be copied.
  return std::move(result);
}

AmpResult mpc::insertAmpCasts(Model &m, const AmpColoring &coloring, const AmpOptions &opts) {
  CastInserter ci(m, coloring, opts);
  return ci.run();
}
