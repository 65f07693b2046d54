//===- Graph.h - Values, nodes, graphs and models ---------------*- C++ -*-===//
//
// mpc's in-memory IR. A Graph owns its nodes (an intrusive list kept in
// topological order) and its values; every Value has at most one producer and
// a use list, so consumers are found without scanning. Nested graphs (If/Loop/
// Scan bodies, training algorithms) may use values of enclosing graphs.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_GRAPH_H
#define MPC_IR_GRAPH_H

#include "mpc/IR/Attribute.h"
#include "mpc/IR/IRString.h"
#include "mpc/IR/NameTable.h"
#include "mpc/IR/Tensor.h"
#include "mpc/IR/Type.h"
#include "mpc/Support/LargeAlloc.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/ilist.h"
#include "llvm/ADT/ilist_node.h"
#include <cassert>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace mpc {

class Graph;
class Model;
class Node;

/// One use of a value: input `operand` of `user`.
struct Use {
  Node *user;
  unsigned operand;
  /// `user->id()`, kept beside the pointer (in what was padding) so passes
  /// that index per-node facts by id need not load the user node.
  unsigned userId = 0;
  bool operator==(const Use &o) const { return user == o.user && operand == o.operand; }
};

/// The uses of a value, in the order they were added; removing one keeps the
/// order of the others. Adding and removing are O(1) (amortized), however
/// many uses a value has: every input slot of a node records where its use
/// sits in the list, a removed use leaves a hole (a null `user`), trailing
/// holes are dropped at once and the list is compacted, in order, once the
/// holes outnumber the uses. Iteration skips the holes (there are never more
/// of them than uses). Do not add or remove uses of a value while iterating
/// over its list: copy the list first.
class UseList {
public:
  class iterator {
  public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Use;
    using difference_type = std::ptrdiff_t;
    using pointer = const Use *;
    using reference = const Use &;
    iterator() = default;
    iterator(const Use *p, const Use *e) : p(p), e(e) { skipHoles(); }
    reference operator*() const { return *p; }
    pointer operator->() const { return p; }
    iterator &operator++() {
      ++p;
      skipHoles();
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const iterator &o) const { return p == o.p; }
    bool operator!=(const iterator &o) const { return p != o.p; }

  private:
    const Use *p = nullptr, *e = nullptr;
    void skipHoles() {
      while (p != e && !p->user)
        ++p;
    }
  };

  UseList() = default;
  UseList(const UseList &) = delete;
  UseList &operator=(const UseList &) = delete;
  ~UseList() { std::free(data); }

  iterator begin() const { return iterator(data, data + count); }
  iterator end() const { return iterator(data + count, data + count); }
  /// The number of uses (holes not counted).
  unsigned size() const { return live; }
  bool empty() const { return live == 0; }
  const Use &front() const { return *begin(); }
  /// The uses as a vector, for callers that change them while walking.
  std::vector<Use> copy() const { return std::vector<Use>(begin(), end()); }
  /// Entries in storage, holes included (for tests of the bound on holes).
  unsigned storageSize() const { return count; }
  /// Use-list entries this thread's removals have touched so far (the removed
  /// entry, trailing holes dropped, entries moved by compaction): tests check
  /// that it grows linearly with the number of removals, however long the list.
  static uint64_t removalWork();

private:
  friend class Value;
  friend class Graph;
  Use *data = nullptr;
  unsigned count = 0; ///< entries in use, holes included
  unsigned cap = 0;
  unsigned live = 0;

  /// Appends a use; returns its position.
  unsigned append(const Use &u);
  /// Makes the use at `pos` a hole (then trims and compacts, see above).
  void erase(unsigned pos);
  void compact();
  void clear() { count = live = 0; }
};

enum class ValueKind : uint8_t {
  NodeResult,  ///< produced by a node of its graph
  GraphInput,  ///< a formal input of its graph (possibly with a default initializer)
  Initializer, ///< a constant initializer of its graph
};

class Value {
public:
  /// The name table's copy of the value's name (see IRString).
  const IRString &name() const { return valueName; }
  ValueKind kind() const { return valueKind; }
  Graph *graph() const { return owner; }
  Node *producer() const { return producerNode; }
  unsigned producerResult() const { return resultIndex; }
  /// Dense per-model number, unique among the model's values (every graph):
  /// passes keep per-value facts in vectors of Model::valueIdBound() entries.
  unsigned id() const { return valueId; }

  /// Tensor data of an initializer (or of a graph input with a default).
  Tensor *initializer() const { return init.get(); }
  bool isConstant() const { return valueKind == ValueKind::Initializer; }

  /// The uses in the order they were added (see UseList).
  const UseList &uses() const { return useList; }
  bool hasUses() const { return !useList.empty(); }
  unsigned numUses() const { return useList.size(); }
  /// How many entries of its graph's output list name this value.
  unsigned numGraphOutputRefs() const { return graphOutputRefs; }
  bool isGraphOutput() const { return graphOutputRefs != 0; }

  Type type;
  /// True when the model carried a value_info (or graph input/output) entry for
  /// it; export writes value_info for intermediate values with this flag, so
  /// a pass that creates a value sets it to keep the value's type in the file.
  RareString docString;
  bool hasValueInfo = false;

private:
  friend class Graph;
  friend class Node;
  ValueKind valueKind = ValueKind::NodeResult; // packs with hasValueInfo
  unsigned valueId = 0;
  IRString valueName;
  Graph *owner = nullptr;
  Node *producerNode = nullptr;
  unsigned resultIndex = 0;
  unsigned graphOutputRefs = 0;
  std::unique_ptr<Tensor> init;
  UseList useList;

  void addUse(Node *n, unsigned i);
  void removeUse(Node *n, unsigned i);
};

class Node : public llvm::ilist_node_with_parent<Node, Graph> {
public:
  /// Interned in the model (Graph::createNode): a model has few distinct ones.
  IRString opType;
  IRString domain; ///< "" for the default ONNX domain
  /// Borrowed from the model's name table where the IR sets it (import,
  /// inserted casts); anything assigned is copied.
  IRString name;
  RareString docString;
  std::vector<Attribute> attrs;
  /// Serialized protobuf fields this ONNX build lacks (metadata_props, ...).
  RareString unknownFields;

  Graph *getParent() const { return parent; }
  Model &model() const;
  /// Position in the graph as imported (or of the node it was inserted next
  /// to); the tie-breaker that keeps every ordering deterministic.
  unsigned order() const { return orderKey; }
  /// Dense per-model number, unique among the model's nodes (every graph):
  /// passes keep per-node facts in vectors of Model::nodeIdBound() entries.
  unsigned id() const { return nodeId; }

  unsigned numInputs() const { return numIns; }
  unsigned numOutputs() const { return numOuts; }
  /// Null for an omitted optional input.
  Value *input(unsigned i) const {
    assert(i < numIns && "input index out of range");
    return ins[i];
  }
  /// Null for an omitted optional output.
  Value *output(unsigned i) const {
    assert(i < numOuts && "output index out of range");
    return outs[i];
  }
  /// The inputs and outputs live in the model's node arena; the arrays stay
  /// valid while the node lives (growing one leaves the old one in place).
  llvm::ArrayRef<Value *> inputs() const { return llvm::ArrayRef<Value *>(ins, numIns); }
  llvm::ArrayRef<Value *> outputs() const { return llvm::ArrayRef<Value *>(outs, numOuts); }

  void setInput(unsigned i, Value *v);
  void addInput(Value *v);
  /// Reserves room for `n` inputs (for builders that know the count).
  void reserveInputs(unsigned n);
  /// Grows the output list to `n` entries; new entries are omitted outputs.
  void resizeOutputs(unsigned n);
  /// Creates result `i` of this node (grows the output list as needed).
  Value *setOutput(unsigned i, llvm::StringRef valueName, Type t);
  /// The same with the name's table key (Model::nameKey) already computed.
  Value *setOutput(unsigned i, llvm::CachedHashStringRef valueName, Type t);
  /// Drops every input use (before erasing the node).
  void dropAllInputs();

  const Attribute *attr(llvm::StringRef attrName) const;
  Attribute *attr(llvm::StringRef attrName);
  int64_t intAttr(llvm::StringRef attrName, int64_t dflt) const;
  float floatAttr(llvm::StringRef attrName, float dflt) const;
  llvm::StringRef stringAttr(llvm::StringRef attrName, llvm::StringRef dflt) const;
  /// Adds or replaces an attribute.
  void setAttr(Attribute a);

  /// "Domain::OpType" when the domain is not the default one, else "OpType".
  std::string qualifiedOpType() const;
  /// The opset version the node's domain is imported at (-1 when unknown).
  int64_t opsetVersion() const;

private:
  friend class Graph;
  friend class UseList;
  friend class Value;
  friend struct llvm::ilist_traits<Node>;
  Graph *parent = nullptr;
  unsigned orderKey = 0;
  unsigned nodeId = 0;
  /// numIns inputs, room for insCap (in the model's node arena).
  Value **ins = nullptr;
  /// useSlot[i]: the position of input i's use in its value's use list
  /// (meaningless for an omitted input). insCap entries, in the same block
  /// as `ins`.
  unsigned *useSlot = nullptr;
  unsigned numIns = 0, insCap = 0;
  unsigned numOuts = 0, outsCap = 0;
  Value **outs = nullptr; ///< numOuts outputs, room for outsCap (node arena)

  /// Moves the inputs (and their use slots) to a block of `cap` entries.
  void growInputs(unsigned cap);
};

} // namespace mpc

namespace llvm {
/// Nodes live in their model's bump allocator (Graph::createNode): erasing
/// one runs its destructor and leaves its memory to the model.
template <> struct ilist_traits<mpc::Node> : ilist_alloc_traits<mpc::Node> {
  static void deleteNode(mpc::Node *n) { n->~Node(); }
  void addNodeToList(mpc::Node *) {}
  void removeNodeFromList(mpc::Node *) {}
  void transferNodesFromList(ilist_traits &, simple_ilist<mpc::Node>::iterator,
                             simple_ilist<mpc::Node>::iterator) {}
};
} // namespace llvm

namespace mpc {

using NodeList = llvm::iplist<Node>;

class Graph {
public:
  std::string name;
  RareString docString;
  /// Fields no pass inspects, kept serialized: sparse initializers and
  /// quantization annotations, and protobuf fields this ONNX build lacks.
  /// Empty in nearly every graph (a model of small If/Loop bodies has a
  /// graph for every few nodes), so each is one pointer while empty.
  RareVector<std::string> sparseInitializers;
  RareVector<std::string> quantizationAnnotations;
  RareString unknownFields;

  explicit Graph(Model &m, Graph *parentGraph = nullptr, Node *parentNode = nullptr)
      : owningModel(&m), parentGraph(parentGraph), parentNode(parentNode) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  ~Graph();

  Model &model() const { return *owningModel; }
  /// The enclosing graph of a body graph, null for a top-level graph.
  Graph *parent() const { return parentGraph; }
  /// The node whose attribute holds this graph, null for a top-level graph.
  Node *owningNode() const { return parentNode; }
  static NodeList Graph::*getSublistAccess(Node *) { return &Graph::nodeList; }

  NodeList &nodes() { return nodeList; }
  const NodeList &nodes() const { return nodeList; }
  const std::vector<Value *> &inputs() const { return inputList; }
  const std::vector<Value *> &outputs() const { return outputList; }
  const std::vector<Value *> &initializers() const { return initList; }
  /// Every value this graph defines, in creation order (dead ones included).
  const std::vector<Value *> &values() const { return valueStore; }

  Value *addInput(llvm::StringRef valueName, Type t);
  Value *addInitializer(llvm::StringRef valueName, Tensor data);
  /// Attaches a default value to a graph input (IR < 4 style initializers).
  void setInputDefault(Value *input, Tensor data);
  void addOutput(Value *v);
  void setOutput(unsigned i, Value *v);
  /// Removes an initializer that has no uses any more.
  void eraseInitializer(Value *v);

  /// Creates a node before `insertPt` (end() appends), taking its order key
  /// from `orderFrom` (or the next free key).
  Node *createNode(llvm::StringRef opType, llvm::StringRef domain,
                   NodeList::iterator insertPt, const Node *orderFrom = nullptr);
  Node *createNode(llvm::StringRef opType, llvm::StringRef domain = "") {
    return createNode(opType, domain, nodeList.end());
  }
  /// Gives a value a new name (reserved in the model's name table). Names are
  /// what ONNX files refer to, so graph inputs/outputs keep theirs.
  static void renameValue(Value *v, llvm::StringRef newName);
  /// Erases a node whose outputs have no uses.
  void eraseNode(Node *n);
  /// Moves every use of `from` (graph outputs excluded) to `to`.
  static void replaceAllUsesWith(Value *from, Value *to);

  /// Reorders the node list topologically, ties broken by order key; false
  /// when the graph has a cycle (the list is left unchanged then).
  bool sortTopologically();
  /// Renumbers order keys as 0..n-1 in list order.
  void renumber();
  unsigned size() const { return static_cast<unsigned>(nodeList.size()); }

private:
  friend class Node;
  Model *owningModel;
  Graph *parentGraph;
  Node *parentNode;
  NodeList nodeList;
  std::vector<Value *> inputList;
  std::vector<Value *> outputList;
  std::vector<Value *> initList;
  std::vector<Value *> valueStore;
  unsigned nextOrder = 0;

  Value *newValue(llvm::CachedHashStringRef valueName, ValueKind k, Type t);
};

struct OpsetId {
  std::string domain;
  int64_t version = 0;
};

/// One ModelProto.training_info entry.
struct TrainingInfo {
  std::unique_ptr<Graph> initialization;
  std::unique_ptr<Graph> algorithm;
  std::vector<std::pair<std::string, std::string>> initializationBinding;
  std::vector<std::pair<std::string, std::string>> updateBinding;
};

class Model {
public:
  int64_t irVersion = 8;
  std::vector<OpsetId> opsets;
  std::string producerName;
  std::string producerVersion;
  std::string domain;
  int64_t modelVersion = 0;
  std::string docString;
  std::vector<std::pair<std::string, std::string>> metadataProps;
  /// FunctionProtos, kept serialized: calls to them are unlisted ops.
  std::vector<std::string> functions;
  std::string unknownFields;
  /// Folder of the model file; external data locations are relative to it.
  std::string baseDir;

  std::unique_ptr<Graph> graph;
  std::vector<TrainingInfo> trainingInfo;

  Model();
  ~Model();

  /// The opset version imported for `domain` ("" and "ai.onnx" are the same);
  /// -1 when the model does not import it.
  int64_t opsetVersion(llvm::StringRef domain) const;
  bool isTraining() const { return !trainingInfo.empty(); }

  /// The value of metadata entry `key`, null when absent.
  const std::string *findMetadata(llvm::StringRef key) const;
  /// Replaces the value of `key` in place (keeping the order) or appends it.
  void setMetadata(llvm::StringRef key, std::string value);

  /// One more than the largest value / node id handed out so far (ids of
  /// erased values and nodes are not reused).
  unsigned valueIdBound() const { return nextValueId; }
  unsigned nodeIdBound() const { return nextNodeId; }

  /// Records a name as taken (every value and node name of every graph).
  void reserveName(llvm::StringRef n) { reserveKey(nameKey(n)); }
  bool isNameTaken(llvm::StringRef n) const { return names.find(nameKey(n)) != nullptr; }

  /// A name with its hash, as the name table keys it.
  static llvm::CachedHashStringRef nameKey(llvm::StringRef n) { return NameTable::key(n); }
  /// The name table also binds names to values: the importer resolves the
  /// main graph's names here rather than in a second table of every name.
  /// The binding slot of `k`, reserving the name when it is new (the
  /// reference is valid until the next name is reserved).
  Value *&nameBinding(llvm::CachedHashStringRef k) {
    bool inserted;
    return names.insert(k, inserted);
  }
  /// The value bound to `k`; null when none is (or the name is free).
  Value *boundValue(llvm::CachedHashStringRef k) const {
    Value **slot = names.find(k);
    return slot ? *slot : nullptr;
  }
  /// Sizes the name table for `n` more names.
  void reserveNameCapacity(size_t n) { names.reserve(n); }
  /// Starts loading the table slot of `k` (for a name used a little later).
  void prefetchName(llvm::CachedHashStringRef k) const { names.prefetch(k); }
  /// `base` if free, else `base_1`, `base_2`, ...; the result is reserved.
  std::string freshName(llvm::StringRef base);
  /// `n` as an IRString that borrows the name table's copy when the name is
  /// reserved (else a copy of its own): for names of this model's nodes.
  IRString tableName(llvm::StringRef n) const;
  /// Reserves `k` and returns the name table's copy of it.
  IRString reserveTableName(llvm::CachedHashStringRef k);
  /// The model's copy of an op type or domain (a model has few of them).
  IRString internOpString(llvm::StringRef s);

private:
  friend class Graph;
  friend class Node;
  unsigned nextValueId = 0;
  unsigned nextNodeId = 0;
  /// Memory of the nodes of every graph of the model, in creation order (see
  /// ilist_traits<Node>), with their input slots' use positions. One pair of
  /// arenas per model, not per graph: a model of many small If/Loop bodies
  /// would otherwise take two slabs (8 KiB) for each body.
  IRArena nodeArena;
  /// Memory of the values of every graph: a value lives as long as the model
  /// (erased ones included; ~Graph destroys every value of its valueStore).
  IRArena valueArena;
  /// Every name reserved so far, with its binding (see nameBinding).
  NameTable names;
  llvm::StringMap<unsigned> nextSuffix;
  /// Op types and domains of the model's nodes (bindings unused).
  NameTable opStrings;
  /// The last op strings interned, by a slot from their length and end
  /// characters: a node is created for each of a million nodes, from a dozen
  /// op types, and a hit costs a compare instead of a hash and a probe.
  struct InternedOpString {
    const char *chars = nullptr; ///< the table's copy
    size_t size = 0;
  };
  InternedOpString recentOpStrings[16];

  /// Inserts `k`; false when it was taken already.
  bool reserveKey(llvm::CachedHashStringRef k) {
    bool inserted;
    (void)names.insert(k, inserted);
    return inserted;
  }
};

/// Node::inputs() and outputs() compare with vectors, as they did when they
/// were vectors themselves.
inline bool operator==(llvm::ArrayRef<Value *> a, const std::vector<Value *> &b) {
  return a.equals(b);
}
inline bool operator==(const std::vector<Value *> &a, llvm::ArrayRef<Value *> b) {
  return b.equals(a);
}
inline bool operator!=(llvm::ArrayRef<Value *> a, const std::vector<Value *> &b) {
  return !(a == b);
}
inline bool operator!=(const std::vector<Value *> &a, llvm::ArrayRef<Value *> b) {
  return !(a == b);
}

/// Visits `g` and every graph nested in its nodes' attributes, outer first.
void forEachGraph(Graph &g, llvm::function_ref<void(Graph &)> fn);

/// The non-empty lines of a list-valued metadata entry, whitespace trimmed
/// (the mpc.training.* lists of docs/training.md).
std::vector<llvm::StringRef> metadataLines(llvm::StringRef text);

} // namespace mpc

#endif // MPC_IR_GRAPH_H
