//===- Graph.cpp - Values, nodes, graphs and models ------------------------===//
//
// Use-list maintenance, node creation and erasure, deterministic topological
// ordering and fresh-name generation.
//
//===----------------------------------------------------------------------===//
#include "mpc/IR/Graph.h"
#include "mpc/IR/AttrReadHook.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cstring>
#include <queue>

using namespace mpc;

//===----------------------------------------------------------------------===//
// Attribute
//===----------------------------------------------------------------------===//

Attribute::~Attribute() = default;

Attribute Attribute::copyWithoutGraphs() const {
  Attribute c;
  c.name = name;
  c.kind = kind;
  c.docString = docString;
  c.refAttrName = refAttrName;
  c.f = f;
  c.i = i;
  c.s = s;
  c.floats = floats;
  c.ints = ints;
  c.strings = strings;
  c.tensors = tensors;
  c.opaque = opaque;
  c.unknownFields = unknownFields;
  return c;
}

Attribute Attribute::makeInt(std::string n, int64_t v) {
  Attribute a;
  a.name = std::move(n);
  a.kind = AttrKind::Int;
  a.i = v;
  return a;
}

Attribute Attribute::makeFloat(std::string n, float v) {
  Attribute a;
  a.name = std::move(n);
  a.kind = AttrKind::Float;
  a.f = v;
  return a;
}

Attribute Attribute::makeString(std::string n, std::string v) {
  Attribute a;
  a.name = std::move(n);
  a.kind = AttrKind::String;
  a.s = std::move(v);
  return a;
}

Attribute Attribute::makeInts(std::string n, std::vector<int64_t> v) {
  Attribute a;
  a.name = std::move(n);
  a.kind = AttrKind::Ints;
  a.ints = std::move(v);
  return a;
}

Attribute Attribute::makeTensor(std::string n, Tensor t) {
  Attribute a;
  a.name = std::move(n);
  a.kind = AttrKind::Tensor;
  a.tensors.push_back(std::move(t));
  return a;
}

//===----------------------------------------------------------------------===//
// Value and Node
//===----------------------------------------------------------------------===//

/// See UseList::removalWork. Thread-local: each thread edits its own models.
static thread_local uint64_t useListRemovalWork = 0;

uint64_t UseList::removalWork() { return useListRemovalWork; }

unsigned UseList::append(const Use &u) {
  if (count == cap) {
    unsigned newCap = cap ? 2 * cap : 2;
    void *p = std::realloc(data, sizeof(Use) * newCap);
    if (!p)
      llvm::report_bad_alloc_error("out of memory growing a use list");
    data = static_cast<Use *>(p);
    cap = newCap;
  }
  data[count] = u;
  ++live;
  return count++;
}

void UseList::erase(unsigned pos) {
  assert(pos < count && data[pos].user && "removing a use that is not on the use list");
  data[pos].user = nullptr;
  --live;
  // Trailing holes go at once: the common case, removing the use just added.
  unsigned before = count;
  while (count && !data[count - 1].user)
    --count;
  useListRemovalWork += 1 + (before - count);
  if (count - live > live)
    compact();
}

void UseList::compact() {
  // Moves every use down over the holes, in order, and tells each user's
  // input slot where its use went: O(count), paid for by the count / 2 (or
  // more) removals that made the holes since the last compaction.
  unsigned to = 0;
  for (unsigned from = 0; from < count; ++from) {
    if (!data[from].user)
      continue;
    data[to] = data[from];
    data[to].user->useSlot[data[to].operand] = to;
    ++to;
  }
  useListRemovalWork += count;
  count = to;
}

void Value::addUse(Node *n, unsigned i) { n->useSlot[i] = useList.append({n, i, n->id()}); }

void Value::removeUse(Node *n, unsigned i) {
  unsigned pos = n->useSlot[i];
  assert(pos < useList.count && useList.data[pos].user == n && useList.data[pos].operand == i &&
         "removing a use that is not on the use list");
  useList.erase(pos);
}

Model &Node::model() const { return parent->model(); }

void Node::setInput(unsigned i, Value *v) {
  assert(i < numIns && "input index out of range");
  if (ins[i] == v)
    return;
  if (ins[i])
    ins[i]->removeUse(this, i);
  ins[i] = v;
  if (v)
    v->addUse(this, i);
}

void Node::growInputs(unsigned cap) {
  // One block: the input pointers, then their use slots. The old block stays
  // in the arena (growth is geometric, and nodes rarely grow).
  static_assert(alignof(Value *) >= alignof(unsigned), "use slots follow the inputs");
  void *block = model().nodeArena.Allocate(size_t(cap) * (sizeof(Value *) + sizeof(unsigned)),
                                           alignof(Value *));
  auto *newIns = static_cast<Value **>(block);
  auto *newSlots = reinterpret_cast<unsigned *>(newIns + cap);
  std::copy_n(ins, numIns, newIns);
  std::copy_n(useSlot, numIns, newSlots);
  ins = newIns;
  useSlot = newSlots;
  insCap = cap;
}

void Node::reserveInputs(unsigned n) {
  if (n > insCap)
    growInputs(n);
}

void Node::addInput(Value *v) {
  if (numIns == insCap)
    growInputs(insCap ? 2 * insCap : 1);
  unsigned i = numIns++;
  ins[i] = v;
  if (v)
    v->addUse(this, i);
}

void Node::resizeOutputs(unsigned n) {
  if (n <= numOuts)
    return;
  if (n > outsCap) {
    unsigned cap = std::max(n, 2 * outsCap);
    Value **newOuts = model().nodeArena.Allocate<Value *>(cap);
    std::copy_n(outs, numOuts, newOuts);
    outs = newOuts; // the old array stays in the arena
    outsCap = cap;
  }
  std::fill(outs + numOuts, outs + n, nullptr);
  numOuts = n;
}

Value *Node::setOutput(unsigned i, llvm::StringRef valueName, Type t) {
  return setOutput(i, Model::nameKey(valueName), std::move(t));
}

Value *Node::setOutput(unsigned i, llvm::CachedHashStringRef valueName, Type t) {
  resizeOutputs(i + 1);
  assert(!outs[i] && "output already defined");
  Value *v = parent->newValue(valueName, ValueKind::NodeResult, std::move(t));
  v->producerNode = this;
  v->resultIndex = i;
  outs[i] = v;
  return v;
}

void Node::dropAllInputs() {
  for (unsigned i = 0; i < numIns; ++i)
    if (ins[i]) {
      ins[i]->removeUse(this, i);
      ins[i] = nullptr;
    }
}

std::atomic<AttrReadHook> mpc::gAttrReadHook{nullptr};

const Attribute *Node::attr(llvm::StringRef attrName) const {
  if (AttrReadHook hook = gAttrReadHook.load(std::memory_order_relaxed))
    hook(*this, attrName);
  for (const Attribute &a : attrs)
    if (a.name == attrName)
      return &a;
  return nullptr;
}

Attribute *Node::attr(llvm::StringRef attrName) {
  for (Attribute &a : attrs)
    if (a.name == attrName)
      return &a;
  return nullptr;
}

int64_t Node::intAttr(llvm::StringRef attrName, int64_t dflt) const {
  const Attribute *a = attr(attrName);
  return a && a->kind == AttrKind::Int ? a->i : dflt;
}

float Node::floatAttr(llvm::StringRef attrName, float dflt) const {
  const Attribute *a = attr(attrName);
  return a && a->kind == AttrKind::Float ? a->f : dflt;
}

llvm::StringRef Node::stringAttr(llvm::StringRef attrName, llvm::StringRef dflt) const {
  const Attribute *a = attr(attrName);
  return a && a->kind == AttrKind::String ? llvm::StringRef(a->s) : dflt;
}

void Node::setAttr(Attribute a) {
  if (Attribute *old = attr(a.name)) {
    *old = std::move(a);
    return;
  }
  attrs.push_back(std::move(a));
}

std::string Node::qualifiedOpType() const {
  if (domain.empty() || domain == "ai.onnx")
    return opType.str();
  return (domain.ref() + "::" + opType.ref()).str();
}

int64_t Node::opsetVersion() const { return model().opsetVersion(domain); }

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

Graph::~Graph() {
  // Uses of values captured from enclosing graphs are removed properly (the
  // enclosing graph lives on when a body is erased with its node); uses of
  // this graph's own values are just dropped, they die with it.
  for (Node &n : nodeList)
    for (unsigned i = 0; i < n.numIns; ++i) {
      Value *v = n.ins[i];
      if (v && v->owner != this)
        v->removeUse(&n, i);
      n.ins[i] = nullptr;
    }
  nodeList.clear();
  for (Value *v : valueStore)
    v->~Value();
}

Value *Graph::newValue(llvm::CachedHashStringRef valueName, ValueKind k, Type t) {
  Value *v = new (owningModel->valueArena.Allocate<Value>()) Value();
  valueStore.push_back(v);
  v->valueKind = k;
  v->valueId = owningModel->nextValueId++;
  v->owner = this;
  v->type = std::move(t);
  // Reserves the name; the value borrows the table's copy.
  v->valueName = owningModel->reserveTableName(valueName);
  return v;
}

Value *Graph::addInput(llvm::StringRef valueName, Type t) {
  Value *v = newValue(Model::nameKey(valueName), ValueKind::GraphInput, std::move(t));
  v->hasValueInfo = true;
  inputList.push_back(v);
  return v;
}

Value *Graph::addInitializer(llvm::StringRef valueName, Tensor data) {
  Type t = Type::tensor(data.dtype, data.dims);
  Value *v = newValue(Model::nameKey(valueName), ValueKind::Initializer, std::move(t));
  if (data.name != valueName) // importers pass the name already set
    data.name = valueName.str();
  v->init = std::make_unique<Tensor>(std::move(data));
  initList.push_back(v);
  return v;
}

void Graph::setInputDefault(Value *input, Tensor data) {
  assert(input->kind() == ValueKind::GraphInput && "defaults belong to graph inputs");
  data.name = input->name();
  input->init = std::make_unique<Tensor>(std::move(data));
  initList.push_back(input);
}

void Graph::addOutput(Value *v) {
  outputList.push_back(v);
  ++v->graphOutputRefs;
}

void Graph::setOutput(unsigned i, Value *v) {
  assert(i < outputList.size() && "output index out of range");
  --outputList[i]->graphOutputRefs;
  outputList[i] = v;
  ++v->graphOutputRefs;
}

void Graph::eraseInitializer(Value *v) {
  assert(!v->hasUses() && !v->isGraphOutput() && "erasing a used initializer");
  auto it = std::find(initList.begin(), initList.end(), v);
  assert(it != initList.end() && "not an initializer of this graph");
  initList.erase(it);
  v->init.reset();
  v->valueKind = ValueKind::NodeResult; // detached: no producer, no uses
}

Node *Graph::createNode(llvm::StringRef opType, llvm::StringRef domain,
                        NodeList::iterator insertPt, const Node *orderFrom) {
  Node *n = new (owningModel->nodeArena.Allocate<Node>()) Node();
  n->opType = owningModel->internOpString(opType);
  n->domain = owningModel->internOpString(domain);
  n->parent = this;
  n->nodeId = owningModel->nextNodeId++;
  n->orderKey = orderFrom ? orderFrom->orderKey : nextOrder++;
  nodeList.insert(insertPt, n);
  return n;
}

void Graph::eraseNode(Node *n) {
  assert(n->parent == this && "erasing a node of another graph");
#ifndef NDEBUG
  for (Value *v : n->outputs())
    assert((!v || (!v->hasUses() && !v->isGraphOutput())) && "erasing a node whose result is used");
#endif
  n->dropAllInputs();
  for (Value *v : n->outputs())
    if (v)
      v->producerNode = nullptr;
  nodeList.erase(n);
}

void Graph::renameValue(Value *v, llvm::StringRef newName) {
  v->valueName = v->owner->owningModel->reserveTableName(Model::nameKey(newName));
  if (v->init)
    v->init->name = newName.str();
}

void Graph::replaceAllUsesWith(Value *from, Value *to) {
  assert(from != to && "replacing a value with itself");
  // What setInput(to) on each use in turn would do, in one pass: `to` gains
  // the uses in their order, after its own, and `from` keeps none.
  for (const Use &u : from->useList) {
    u.user->ins[u.operand] = to;
    if (to)
      to->addUse(u.user, u.operand);
  }
  from->useList.clear();
}

void Graph::renumber() {
  unsigned k = 0;
  for (Node &n : nodeList)
    n.orderKey = k++;
  nextOrder = k;
}

/// True when every producer (in this graph) of a node's inputs, and of what
/// its nested graphs capture, has a smaller order key: then list order, which
/// follows the keys, is already topological.
static bool isSortedByOrderKey(Graph &g) {
  unsigned prev = 0;
  bool first = true;
  for (Node &n : g.nodes()) {
    if (!first && n.order() <= prev)
      return false;
    first = false;
    prev = n.order();
    auto before = [&](Value *v) {
      return !v || !v->producer() || v->producer()->getParent() != &g ||
             v->producer()->order() < n.order();
    };
    for (Value *v : n.inputs())
      if (!before(v))
        return false;
    for (Attribute &a : n.attrs)
      for (auto &body : a.graphs) {
        bool ok = true;
        forEachGraph(*body, [&](Graph &sub) {
          for (Node &inner : sub.nodes())
            for (Value *v : inner.inputs())
              ok &= before(v);
          for (Value *v : sub.outputs())
            ok &= before(v);
        });
        if (!ok)
          return false;
      }
  }
  return true;
}

bool Graph::sortTopologically() {
  if (isSortedByOrderKey(*this))
    return true;
  // Kahn's algorithm with a min-heap on (order key, list position): linear up
  // to the heap's log factor, and deterministic. Only dependencies on values
  // produced in this graph count; nested bodies count through their captures.
  std::vector<Node *> order;
  order.reserve(nodeList.size());
  llvm::DenseMap<const Node *, unsigned> pos;
  unsigned p = 0;
  for (Node &n : nodeList)
    pos[&n] = p++;

  // A node depends on a producer through its inputs and through any value its
  // nested graphs capture from this graph.
  std::vector<std::vector<Node *>> deps(p);
  auto addDep = [&](Node &n, Value *v) {
    if (v && v->producer() && v->producer()->parent == this && v->producer() != &n)
      deps[pos[&n]].push_back(v->producer());
  };
  for (Node &n : nodeList) {
    for (Value *v : n.inputs())
      addDep(n, v);
    for (Attribute &a : n.attrs)
      for (auto &g : a.graphs)
        forEachGraph(*g, [&](Graph &body) {
          for (Node &inner : body.nodes())
            for (Value *v : inner.inputs())
              addDep(n, v);
          for (Value *v : body.outputs())
            addDep(n, v);
        });
  }

  std::vector<unsigned> indeg(p, 0);
  std::vector<std::vector<unsigned>> succ(p);
  for (unsigned i = 0; i < p; ++i) {
    llvm::sort(deps[i]);
    deps[i].erase(std::unique(deps[i].begin(), deps[i].end()), deps[i].end());
    for (Node *d : deps[i]) {
      succ[pos[d]].push_back(i);
      ++indeg[i];
    }
  }
  std::vector<Node *> byPos(p);
  for (Node &n : nodeList)
    byPos[pos[&n]] = &n;
  using Key = std::pair<unsigned, unsigned>; // (order key, position)
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  for (unsigned i = 0; i < p; ++i)
    if (indeg[i] == 0)
      ready.push({byPos[i]->orderKey, i});
  while (!ready.empty()) {
    unsigned i = ready.top().second;
    ready.pop();
    order.push_back(byPos[i]);
    for (unsigned s : succ[i])
      if (--indeg[s] == 0)
        ready.push({byPos[s]->orderKey, s});
  }
  if (order.size() != p)
    return false;
  for (Node *n : order) {
    nodeList.remove(n);
    nodeList.push_back(n);
  }
  return true;
}

void mpc::forEachGraph(Graph &g, llvm::function_ref<void(Graph &)> fn) {
  fn(g);
  for (Node &n : g.nodes())
    for (Attribute &a : n.attrs)
      for (auto &sub : a.graphs)
        forEachGraph(*sub, fn);
}

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

Model::Model() = default;
Model::~Model() {
  trainingInfo.clear();
  graph.reset();
}

const std::string *Model::findMetadata(llvm::StringRef key) const {
  for (const auto &kv : metadataProps)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}

void Model::setMetadata(llvm::StringRef key, std::string value) {
  for (auto &kv : metadataProps)
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  metadataProps.emplace_back(key.str(), std::move(value));
}

std::vector<llvm::StringRef> mpc::metadataLines(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 16> parts;
  text.split(parts, '\n', -1, /*KeepEmpty=*/false);
  std::vector<llvm::StringRef> out;
  for (llvm::StringRef p : parts)
    if (!p.trim().empty())
      out.push_back(p.trim());
  return out;
}

int64_t Model::opsetVersion(llvm::StringRef d) const {
  bool isDefault = d.empty() || d == "ai.onnx";
  for (const OpsetId &o : opsets) {
    bool oDefault = o.domain.empty() || llvm::StringRef(o.domain) == "ai.onnx";
    if (isDefault ? oDefault : o.domain == d)
      return o.version;
  }
  return -1;
}

IRString Model::tableName(llvm::StringRef n) const {
  if (n.empty())
    return IRString();
  Value **binding = names.find(nameKey(n));
  return binding ? IRString::borrow(NameTable::charsOf(*binding)) : IRString(n);
}

IRString Model::reserveTableName(llvm::CachedHashStringRef k) {
  if (k.val().empty())
    return IRString();
  bool inserted;
  return IRString::borrow(NameTable::charsOf(names.insert(k, inserted)));
}

IRString Model::internOpString(llvm::StringRef s) {
  if (s.empty())
    return IRString();
  InternedOpString &recent =
      recentOpStrings[(s.size() * 5 + static_cast<unsigned char>(s.front()) * 3 +
                       static_cast<unsigned char>(s.back())) %
                      std::size(recentOpStrings)];
  if (recent.size == s.size() && recent.chars && std::memcmp(recent.chars, s.data(), s.size()) == 0)
    return IRString::borrow(recent.chars);
  bool inserted;
  recent.chars = NameTable::charsOf(opStrings.insert(NameTable::key(s), inserted));
  recent.size = s.size();
  return IRString::borrow(recent.chars);
}

std::string Model::freshName(llvm::StringRef base) {
  if (reserveKey(nameKey(base)))
    return base.str();
  unsigned &next = nextSuffix[base];
  llvm::SmallString<64> candidate;
  do {
    candidate.clear();
    llvm::raw_svector_ostream(candidate) << base << '_' << ++next;
  } while (!reserveKey(nameKey(candidate)));
  return std::string(candidate);
}
