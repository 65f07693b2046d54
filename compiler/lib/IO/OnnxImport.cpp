//===- OnnxImport.cpp - ONNX ModelProto to IR ------------------------------===//
//
// Builds the IR from a ModelProto. Node outputs are created before inputs are
// connected, so graphs whose nodes are not in topological order import (and
// are sorted); cycles, undefined inputs and duplicate names are input errors
// that name the graph, node and value. The graph comes as views (OnnxWire.h):
// the main graph's hot parts straight from the file's wire bytes, the rest
// from parsed messages.
//
//===----------------------------------------------------------------------===//
#include "OnnxWire.h"
#include "mpc/IO/Onnx.h"
#include "mpc/IR/Limits.h"
#include "mpc/Support/Diagnostics.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/CachedHashString.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"
#include <array>
#include <cstring>
#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>

using namespace mpc;
using namespace mpc::onnxio;
namespace pb = google::protobuf;

static std::vector<std::pair<std::string, std::string>>
importProps(const pb::RepeatedPtrField<onnx::StringStringEntryProto> &props) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto &p : props)
    out.emplace_back(p.key(), p.value());
  return out;
}

static llvm::Error notAModel() {
  return inputError("not a valid ONNX model (the protobuf does not parse; truncated or not "
                    "ONNX)");
}

namespace {

/// Name scope of one graph, chained to the enclosing graph's scope. The main
/// graph's scope is the model's name table itself (Model::nameBinding): every
/// value's name is reserved there anyway, so one probe serves both.
struct Scope {
  /// Keys are the values' own names, with their hashes: a probe compares
  /// hashes before it reads a name. Unused when `shared` is set. A small
  /// body (an If branch, a Loop body of a few nodes) fits in the inline
  /// buckets: no allocation per body.
  llvm::SmallDenseMap<llvm::CachedHashStringRef, Value *, 16> names;
  /// The model whose name table holds this scope's bindings, or null.
  Model *shared = nullptr;
  const Scope *parent = nullptr;

  /// The model's hash (NameTable::key), so keys are shared.
  static llvm::CachedHashStringRef key(llvm::StringRef name) { return Model::nameKey(name); }

  /// Sizes the table for the names `gv` defines (no rehashing on import).
  void reserveFor(const GraphView &gv) {
    size_t n = gv.inputs.size() + gv.initializers.size();
    for (const NodeView &nv : gv.nodes)
      n += nv.numOutputs;
    if (shared)
      shared->reserveNameCapacity(n);
    else if (names.empty())
      names.reserve(static_cast<unsigned>(n));
  }

  /// Starts loading what a probe for `k` reads (the model's table is large
  /// and every probe a cache miss; import looks a few nodes ahead).
  void prefetch(llvm::CachedHashStringRef k) const {
    if (shared)
      shared->prefetchName(k);
  }
  static constexpr size_t kPrefetchAhead = 8;

  /// The value this scope (not an enclosing one) binds `k` to, or null.
  Value *own(llvm::CachedHashStringRef k) const {
    if (shared)
      return shared->boundValue(k);
    auto it = names.find(k);
    return it == names.end() ? nullptr : it->second;
  }

  /// Values of this scope by hash slot, the latest one noted in each: inputs
  /// usually name a value produced a few nodes earlier, found here without a
  /// probe of the (large, cache-missing) table. Only values `names` holds are
  /// noted, so a hit is what the table would give.
  std::array<Value *, 64> recent{};
  void noteRecent(llvm::CachedHashStringRef k, Value *v) { noteRecent(k.hash(), v); }
  void noteRecent(unsigned hash, Value *v) { recent[hash % recent.size()] = v; }

  /// Adds `v` under its name; false when this scope has the name already.
  bool define(llvm::CachedHashStringRef k, Value *v) {
    if (shared) {
      Value *&slot = shared->nameBinding(k);
      if (slot)
        return false;
      slot = v;
    } else if (!names.try_emplace(k, v).second) {
      return false;
    }
    noteRecent(k, v);
    return true;
  }
  bool define(Value *v) { return define(key(v->name()), v); }

  /// The value a name refers to here or in an enclosing scope.
  Value *lookup(llvm::CachedHashStringRef k) const {
    // A name this scope defines is found here before any enclosing scope.
    if (Value *v = recent[k.hash() % recent.size()]; v && v->name() == k.val())
      return v;
    for (const Scope *s = this; s; s = s->parent)
      if (Value *v = s->own(k))
        return v;
    return nullptr;
  }
  Value *lookup(llvm::StringRef name) const { return lookup(key(name)); }
};

/// Table keys of each node's result (or input) names, computed once per
/// name when its node enters the prefetch window and handed out when the
/// node is imported. Nodes must be asked for in order 0, 1, 2, ...
class KeyWindow {
public:
  /// Filling a node's keys also starts loading the table slots they will
  /// probe.
  KeyWindow(const GraphView &gv, const Scope &scope, bool inputs)
      : gv(gv), scope(scope), inputs(inputs) {}

  llvm::ArrayRef<llvm::CachedHashStringRef> at(size_t k) {
    if (k == 0)
      for (size_t j = 0; j < Scope::kPrefetchAhead && j < gv.nodes.size(); ++j)
        fill(j);
    if (k + Scope::kPrefetchAhead < gv.nodes.size())
      fill(k + Scope::kPrefetchAhead);
    return ring[k % ring.size()];
  }

private:
  const GraphView &gv;
  const Scope &scope;
  bool inputs;
  std::array<llvm::SmallVector<llvm::CachedHashStringRef, 4>, Scope::kPrefetchAhead + 1> ring;

  void fill(size_t k) {
    llvm::SmallVector<llvm::CachedHashStringRef, 4> &keys = ring[k % ring.size()];
    keys.clear();
    for (llvm::StringRef name : inputs ? gv.inputsOf(gv.nodes[k]) : gv.outputsOf(gv.nodes[k])) {
      keys.push_back(Scope::key(name));
      if (!name.empty())
        scope.prefetch(keys.back());
    }
  }
};

class Importer {
public:
  /// `source` and `owner`: see importOnnxBytes (raw data inside `source` is
  /// borrowed when `owner` is set).
  Importer(Model &m, llvm::StringRef baseDir, llvm::StringRef source = {},
           std::shared_ptr<const void> owner = nullptr)
      : model(m), baseDir(baseDir), source(source), owner(std::move(owner)) {}

  /// `p` gives every field but the main graph, which `mainGraph` views
  /// (null when the model has none).
  llvm::Error importModel(const onnx::ModelProto &p, GraphView *mainGraph);

private:
  Model &model;
  std::string baseDir;
  llvm::StringRef source;
  std::shared_ptr<const void> owner;
  /// Attributes of wire nodes that are not plain, parsed.
  pb::Arena fallbackArena;
  /// The graphs enclosing the one being imported, innermost last: a value of
  /// `graph` captured from inside its node being imported keeps the file's
  /// order topological only if its id is below `limit` (the node's first
  /// result id); else `inOrder` (of that graph's import) is cleared.
  struct Enclosing {
    const Graph *graph;
    unsigned limit;
    bool *inOrder;
  };
  llvm::SmallVector<Enclosing, 4> enclosing;
  /// Views of the nested graphs of the attribute being imported, one list
  /// per nesting level (an attribute's bodies are imported before the next
  /// attribute at their level is read): a model of many small If/Loop
  /// bodies reuses their lists instead of allocating and freeing them per
  /// body. unique_ptr: a deeper level's list may be added while a
  /// shallower one is in use.
  std::vector<std::unique_ptr<std::vector<GraphView>>> bodyViews;
  /// `count` cleared views for the attribute at nesting `depth`.
  llvm::MutableArrayRef<GraphView> viewsAt(int depth, size_t count) {
    size_t level = static_cast<size_t>(std::max(depth, 0));
    if (bodyViews.size() <= level)
      bodyViews.resize(level + 1);
    if (!bodyViews[level])
      bodyViews[level] = std::make_unique<std::vector<GraphView>>();
    std::vector<GraphView> &views = *bodyViews[level];
    if (views.size() < count)
      views.resize(count);
    for (size_t k = 0; k < count; ++k)
      views[k].clear();
    return llvm::MutableArrayRef<GraphView>(views).take_front(count);
  }
  /// Notes a use of `v` from graph `g` that may be a capture.
  void noteCapture(const Value *v, const Graph &g) {
    if (!v || v->graph() == &g || v->kind() != ValueKind::NodeResult)
      return;
    for (auto it = enclosing.rbegin(); it != enclosing.rend(); ++it)
      if (it->graph == v->graph()) {
        if (v->id() >= it->limit)
          *it->inOrder = false;
        return;
      }
  }

  /// Imports the graph `gv` views; its types are moved out of it.
  llvm::Error importGraph(GraphView &gv, Graph &g, Scope &scope);
  llvm::Error importGraph(const onnx::GraphProto &gp, Graph &g, Scope &scope) {
    GraphView gv;
    viewGraph(gv, gp);
    return importGraph(gv, g, scope);
  }
  llvm::Expected<Type> importType(const onnx::TypeProto &tp,
                                  llvm::function_ref<std::string()> where);
  /// The type of `vi` (a tensor type read from the wire is moved out).
  llvm::Expected<Type> importType(ValueInfoView &vi, llvm::function_ref<std::string()> where);
  /// `describe` names the tensor in messages; it runs only on errors.
  llvm::Error importTensor(const TensorView &tv, Tensor &t,
                           llvm::function_ref<std::string()> describe);
  llvm::Error importExternalData(const onnx::TensorProto &tp, Tensor &t,
                                 llvm::function_ref<std::string()> describe);
  llvm::Error importTypedData(const onnx::TensorProto &tp, Tensor &t,
                              llvm::function_ref<std::string()> describe);
  /// `depth`: the attribute's nesting below the ModelProto.
  llvm::Error importAttribute(const AttrRef &ar, Attribute &a, Node &owner, const Scope &scope,
                              int depth);
  llvm::Error importAttribute(const onnx::AttributeProto &ap, Attribute &a, Node &owner,
                              const Scope &scope);
  /// Imports a graph of attribute `a` of `owner` (appended to a.graphs).
  llvm::Error importAttrGraph(GraphView &gv, Attribute &a, Node &owner, const Scope &scope);
  llvm::Error checkExternalLocation(llvm::StringRef loc, llvm::StringRef where,
                                    std::string &resolved);
  llvm::Error defineName(Scope &scope, Value *v, const Graph &g) {
    return defineName(scope, Scope::key(v->name()), v, g);
  }
  /// The same with the name's key computed already.
  llvm::Error defineName(Scope &scope, llvm::CachedHashStringRef k, Value *v, const Graph &g);
};

} // namespace

llvm::Error Importer::defineName(Scope &scope, llvm::CachedHashStringRef k, Value *v,
                                 const Graph &g) {
  // One hash for the enclosing scopes' check and this scope's insertion.
  if ((scope.parent && scope.parent->lookup(k)) || !scope.define(k, v))
    return inputError("graph '{0}': value name '{1}' is defined twice", g.name, v->name());
  return llvm::Error::success();
}

static llvm::Expected<DType> elemTypeOf(int32_t e, llvm::function_ref<std::string()> where) {
  if (!isKnownDType(e))
    return inputError("{0}: unknown element type {1}", where(), e);
  return static_cast<DType>(e);
}

llvm::Expected<Type> Importer::importType(ValueInfoView &vi,
                                          llvm::function_ref<std::string()> where) {
  if (vi.type)
    return importType(*vi.type, where);
  auto e = elemTypeOf(vi.elemType, where);
  if (!e)
    return e.takeError();
  Type t = std::move(vi.tensorType);
  t.elem = *e;
  return t;
}

llvm::Expected<Type> Importer::importType(const onnx::TypeProto &tp,
                                          llvm::function_ref<std::string()> where) {
  Type t;
  t.denotation = tp.denotation();
  auto elemType = [&](int32_t e) { return elemTypeOf(e, where); };
  auto importShape = [&](const onnx::TensorShapeProto &sp) {
    t.hasShape = true;
    for (const auto &d : sp.dim()) {
      Dim dim;
      if (d.has_dim_value())
        dim.value = d.dim_value();
      else if (d.has_dim_param())
        dim.param = d.dim_param();
      dim.denotation = d.denotation();
      t.dims.push_back(std::move(dim));
    }
  };
  switch (tp.value_case()) {
  case onnx::TypeProto::kTensorType: {
    t.kind = TypeKind::Tensor;
    auto e = elemType(tp.tensor_type().elem_type());
    if (!e)
      return e.takeError();
    t.elem = *e;
    if (tp.tensor_type().has_shape())
      importShape(tp.tensor_type().shape());
    return t;
  }
  case onnx::TypeProto::kSparseTensorType: {
    t.kind = TypeKind::SparseTensor;
    auto e = elemType(tp.sparse_tensor_type().elem_type());
    if (!e)
      return e.takeError();
    t.elem = *e;
    if (tp.sparse_tensor_type().has_shape())
      importShape(tp.sparse_tensor_type().shape());
    return t;
  }
  case onnx::TypeProto::kSequenceType:
  case onnx::TypeProto::kOptionalType: {
    bool isSeq = tp.value_case() == onnx::TypeProto::kSequenceType;
    t.kind = isSeq ? TypeKind::Sequence : TypeKind::Optional;
    const onnx::TypeProto &in =
        isSeq ? tp.sequence_type().elem_type() : tp.optional_type().elem_type();
    auto inner = importType(in, where);
    if (!inner)
      return inner.takeError();
    t.inner = std::make_unique<Type>(std::move(*inner));
    return t;
  }
  case onnx::TypeProto::kMapType: {
    t.kind = TypeKind::Map;
    auto k = elemType(tp.map_type().key_type());
    if (!k)
      return k.takeError();
    t.elem = *k;
    auto inner = importType(tp.map_type().value_type(), where);
    if (!inner)
      return inner.takeError();
    t.inner = std::make_unique<Type>(std::move(*inner));
    return t;
  }
  default: // not set, or an opaque type: no element type to reason about
    return t;
  }
  return t;
}

template <typename T, typename Src>
static void packValues(const Src &src, std::vector<uint8_t> &raw) {
  raw.resize(src.size() * sizeof(T));
  uint8_t *p = raw.data();
  for (auto v : src) {
    T x = static_cast<T>(v);
    std::memcpy(p, &x, sizeof(T));
    p += sizeof(T);
  }
}

llvm::Error Importer::checkExternalLocation(llvm::StringRef loc, llvm::StringRef where,
                                            std::string &resolved) {
  namespace fs = llvm::sys::fs;
  namespace path = llvm::sys::path;
  if (loc.empty() || path::is_absolute(loc))
    return inputError("{0}: external data location '{1}' must be a relative path inside the "
                      "model's folder",
                      where, loc);
  for (auto it = path::begin(loc), e = path::end(loc); it != e; ++it)
    if (*it == "..")
      return inputError("{0}: external data location '{1}' escapes the model's folder", where,
                        loc);
  llvm::SmallString<256> full(baseDir);
  path::append(full, loc);
  llvm::SmallString<256> realFull, realBase;
  if (fs::real_path(full, realFull) || fs::real_path(baseDir, realBase))
    return inputError("{0}: external data file '{1}' not found", where, loc);
  llvm::StringRef rf = realFull, rb = realBase;
  if (!rf.startswith(rb) || rf.size() <= rb.size() || !path::is_separator(rf[rb.size()]))
    return inputError("{0}: external data location '{1}' resolves outside the model's folder",
                      where, loc);
  resolved = std::string(realFull);
  return llvm::Error::success();
}

llvm::Error Importer::importTensor(const TensorView &tv, Tensor &t,
                                   llvm::function_ref<std::string()> describe) {
  t.name.assign(tv.name.data(), tv.name.size());
  t.docString = tv.docString;
  if (tv.proto)
    t.unknownFields = unknownFieldsOf(*tv.proto);
  if (!isKnownDType(tv.dataType) || tv.dataType == 0)
    return inputError("{0}: unsupported tensor data type {1}", describe(), tv.dataType);
  t.dtype = static_cast<DType>(tv.dataType);
  // Element counts and byte sizes must fit in 64 bits (a hostile shape must
  // not overflow later arithmetic).
  int64_t elements = 1;
  t.dims.reserve(tv.dims.size());
  for (int64_t d : tv.dims) {
    if (d < 0)
      return inputError("{0}: negative dimension {1}", describe(), d);
    if (__builtin_mul_overflow(elements, d, &elements) || elements > (int64_t(1) << 58))
      return inputError("{0}: shape is too large", describe());
    t.dims.push_back(d);
  }
  if (tv.proto && tv.proto->has_segment())
    return inputError("{0}: segmented tensors are not supported", describe());
  if (tv.proto && tv.proto->data_location() == onnx::TensorProto::EXTERNAL)
    return importExternalData(*tv.proto, t, describe);
  if (!tv.hasRawData) {
    assert(tv.proto && "wire views carry raw data");
    return importTypedData(*tv.proto, t, describe);
  }
  if (tv.rawData.size() != t.byteSize()) {
    std::string dims;
    for (int64_t d : t.dims)
      dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    return inputError("{0}: raw data has {1} bytes, its shape needs {2} ({3} [{4}])", describe(),
                      tv.rawData.size(), t.byteSize(), dtypeName(t.dtype), dims);
  }
  // Raw data read from the file is used in place; from a parsed message (which
  // dies after import) it is copied.
  if (owner && tv.rawData.begin() >= source.begin() && tv.rawData.end() <= source.end())
    t.setBorrowedBytes(llvm::makeArrayRef(tv.rawData.bytes_begin(), tv.rawData.size()), owner);
  else
    t.setBytes(std::vector<uint8_t>(tv.rawData.bytes_begin(), tv.rawData.bytes_end()));
  return llvm::Error::success();
}

llvm::Error Importer::importExternalData(const onnx::TensorProto &tp, Tensor &t,
                                         llvm::function_ref<std::string()> describe) {
  ExternalRef r;
  for (const auto &kv : tp.external_data()) {
    if (kv.key() == "location")
      r.location = kv.value();
    else if (kv.key() == "offset" || kv.key() == "length") {
      char *end = nullptr;
      long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || *end || v < 0)
        return inputError("{0}: external data {1} '{2}' is not a non-negative integer", describe(),
                          kv.key(), kv.value());
      if (kv.key() == "offset")
        r.offset = static_cast<uint64_t>(v);
      else
        r.length = v;
    } else if (kv.key() == "checksum")
      r.checksum = kv.value();
  }
  if (auto err = checkExternalLocation(r.location, describe(), r.path))
    return err;
  if (r.length >= 0 && static_cast<uint64_t>(r.length) != t.byteSize() && t.dtype != DType::String)
    return inputError("{0}: external data length {1} does not match its shape ({2} bytes)",
                      describe(), r.length, t.byteSize());
  uint64_t fileSize = 0;
  if (llvm::sys::fs::file_size(r.path, fileSize) || r.offset + t.byteSize() > fileSize)
    return inputError("{0}: external data file '{1}' is shorter than offset + length", describe(),
                      r.location);
  t.setExternal(std::move(r));
  return llvm::Error::success();
}

llvm::Error Importer::importTypedData(const onnx::TensorProto &tp, Tensor &t,
                                      llvm::function_ref<std::string()> describe) {
  int64_t n = t.numElements();
  std::vector<uint8_t> raw;
  size_t count = 0; // values given in a typed field, if any
  switch (t.dtype) {
  case DType::F32:
    packValues<float>(tp.float_data(), raw);
    count = tp.float_data_size();
    break;
  case DType::C64:
    packValues<float>(tp.float_data(), raw);
    count = tp.float_data_size() / 2;
    break;
  case DType::F64:
    packValues<double>(tp.double_data(), raw);
    count = tp.double_data_size();
    break;
  case DType::C128:
    packValues<double>(tp.double_data(), raw);
    count = tp.double_data_size() / 2;
    break;
  case DType::I64:
    packValues<int64_t>(tp.int64_data(), raw);
    count = tp.int64_data_size();
    break;
  case DType::U32:
    packValues<uint32_t>(tp.uint64_data(), raw);
    count = tp.uint64_data_size();
    break;
  case DType::U64:
    packValues<uint64_t>(tp.uint64_data(), raw);
    count = tp.uint64_data_size();
    break;
  case DType::I32:
    packValues<int32_t>(tp.int32_data(), raw);
    count = tp.int32_data_size();
    break;
  case DType::I16:
  case DType::U16:
  case DType::F16:
  case DType::BF16:
    packValues<uint16_t>(tp.int32_data(), raw);
    count = tp.int32_data_size();
    break;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
  case DType::F8E4M3FN:
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2:
  case DType::F8E5M2FNUZ:
  case DType::F8E8M0:
    packValues<uint8_t>(tp.int32_data(), raw);
    count = tp.int32_data_size();
    break;
  case DType::U4:
  case DType::I4:
  case DType::F4E2M1:
    // int32_data holds one packed byte (two elements) per entry.
    packValues<uint8_t>(tp.int32_data(), raw);
    count = static_cast<size_t>(std::min<int64_t>(tp.int32_data_size() * 2, n));
    break;
  case DType::U2:
  case DType::I2:
    // int32_data holds one packed byte (four elements) per entry.
    packValues<uint8_t>(tp.int32_data(), raw);
    count = static_cast<size_t>(std::min<int64_t>(tp.int32_data_size() * 4, n));
    break;
  case DType::String:
    for (const std::string &s : tp.string_data())
      t.strings().push_back(s);
    count = tp.string_data_size();
    break;
  case DType::Undefined:
    llvm_unreachable("rejected above");
  }
  if (static_cast<int64_t>(count) != n)
    return inputError("{0}: has {1} values, its shape needs {2}", describe(), count, n);
  if (t.dtype != DType::String)
    t.setBytes(std::move(raw));
  return llvm::Error::success();
}

llvm::Error Importer::importAttrGraph(GraphView &gv, Attribute &a, Node &owner,
                                      const Scope &scope) {
  auto g = std::make_unique<Graph>(model, owner.getParent(), &owner);
  g->name = gv.name.str();
  if (auto err = checkGraphDepth(*g))
    return err;
  Scope inner;
  inner.parent = &scope;
  if (auto err = importGraph(gv, *g, inner))
    return err;
  a.graphs.push_back(std::move(g));
  return llvm::Error::success();
}

llvm::Error Importer::importAttribute(const onnx::AttributeProto &ap, Attribute &a,
                                      Node &owner, const Scope &scope) {
  a.name = ap.name();
  a.docString = ap.doc_string();
  a.refAttrName = ap.ref_attr_name();
  a.unknownFields = unknownFieldsOf(ap);
  a.kind = static_cast<AttrKind>(ap.type());
  auto where = [&] { return describeNode(owner) + ", attribute " + quoteName(ap.name()); };
  if (ap.type() < 0 || ap.type() > 14)
    return inputError("{0}: unknown attribute type {1}", where(), static_cast<int>(ap.type()));
  a.f = ap.f();
  a.i = ap.i();
  a.s = ap.s();
  a.floats.assign(ap.floats().begin(), ap.floats().end());
  a.ints.assign(ap.ints().begin(), ap.ints().end());
  a.strings.assign(ap.strings().begin(), ap.strings().end());
  auto importOneTensor = [&](const onnx::TensorProto &tp) -> llvm::Error {
    a.tensors.emplace_back();
    return importTensor(viewTensor(tp), a.tensors.back(), where);
  };
  if (ap.has_t())
    if (auto err = importOneTensor(ap.t()))
      return err;
  for (const auto &tp : ap.tensors())
    if (auto err = importOneTensor(tp))
      return err;
  auto importOneGraph = [&](const onnx::GraphProto &gp) -> llvm::Error {
    GraphView gv;
    viewGraph(gv, gp);
    return importAttrGraph(gv, a, owner, scope);
  };
  if (ap.has_g())
    if (auto err = importOneGraph(ap.g()))
      return err;
  for (const auto &gp : ap.graphs())
    if (auto err = importOneGraph(gp))
      return err;
  if (ap.has_sparse_tensor())
    a.opaque.push_back(ap.sparse_tensor().SerializeAsString());
  for (const auto &sp : ap.sparse_tensors())
    a.opaque.push_back(sp.SerializeAsString());
  if (ap.has_tp())
    a.opaque.push_back(ap.tp().SerializeAsString());
  for (const auto &tp : ap.type_protos())
    a.opaque.push_back(tp.SerializeAsString());
  return llvm::Error::success();
}

llvm::Error Importer::importAttribute(const AttrRef &ar, Attribute &a, Node &owner,
                                      const Scope &scope, int depth) {
  if (ar.proto)
    return importAttribute(*ar.proto, a, owner, scope);
  AttrGraphBytes graphs;
  if (decodePlainAttribute(ar.wire, a, &graphs)) {
    if (graphs.empty())
      return llvm::Error::success();
    // Every graph is decoded before any is imported, so that a graph the
    // wire reader refuses leaves nothing behind for the parse below.
    llvm::MutableArrayRef<GraphView> views = viewsAt(depth, graphs.hasG + graphs.list.size());
    bool decoded = !graphs.hasG || decodeGraph(graphs.g, depth + 1, views[0], fallbackArena);
    for (size_t k = 0; decoded && k < graphs.list.size(); ++k)
      decoded = decodeGraph(graphs.list[k], depth + 1, views[graphs.hasG + k], fallbackArena);
    if (decoded) {
      for (GraphView &gv : views)
        if (auto err = importAttrGraph(gv, a, owner, scope))
          return err;
      return llvm::Error::success();
    }
  }
  a = Attribute();
  const auto *ap = parseIn<onnx::AttributeProto>(fallbackArena, ar.wire, depth);
  if (!ap)
    return notAModel();
  return importAttribute(*ap, a, owner, scope);
}

llvm::Error Importer::importGraph(GraphView &gv, Graph &g, Scope &scope) {
  g.name = gv.name.str();
  g.docString = gv.docString.str();
  g.unknownFields = gv.unknownFields;
  g.sparseInitializers = gv.sparseInitializers;
  g.quantizationAnnotations = gv.quantizationAnnotations;
  // Built only for a message: a model of many small graphs imports each.
  auto gname = [&] { return "graph " + quoteName(g.name); };
  scope.reserveFor(gv);

  for (ValueInfoView &vi : gv.inputs) {
    if (vi.name.empty())
      return inputError("{0}: an input has no name", gname());
    auto t = importType(vi, [&] { return gname() + ", input " + quoteName(vi.name); });
    if (!t)
      return t.takeError();
    Value *v = g.addInput(vi.name, std::move(*t));
    v->docString = vi.docString.str();
    if (auto err = defineName(scope, v, g))
      return err;
  }
  for (const TensorView &tv : gv.initializers) {
    auto where = [&] { return gname() + ", initializer " + quoteName(tv.name); };
    if (tv.name.empty())
      return inputError("{0}: an initializer has no name", gname());
    Tensor t;
    if (auto err = importTensor(tv, t, where))
      return err;
    Value *input = scope.own(Scope::key(tv.name));
    if (input && input->kind() == ValueKind::GraphInput && !input->initializer()) {
      g.setInputDefault(input, std::move(t));
      continue;
    }
    Value *v = g.addInitializer(tv.name, std::move(t));
    if (auto err = defineName(scope, v, g))
      return err;
  }

  // Phase 1: nodes and their results, so inputs may refer to later nodes.
  // Value ids grow in creation order: node k's results have ids from
  // firstResultId[k] on, so an input with a smaller id (of a node result of
  // this graph) comes from an earlier node. The hashes of the results' names
  // are kept for phase 2 (the names need not be read and hashed again).
  // (Inline room for a small body: no allocation per If/Loop body.)
  llvm::SmallVector<Node *, 8> nodes;
  nodes.reserve(gv.nodes.size());
  llvm::SmallVector<unsigned, 8> firstResultId;
  firstResultId.reserve(gv.nodes.size());
  llvm::SmallVector<unsigned, 16> resultHashes;
  resultHashes.reserve(gv.names.size());
  KeyWindow resultKeys(gv, scope, /*inputs=*/false);
  for (size_t k = 0; k < gv.nodes.size(); ++k) {
    const NodeView &nv = gv.nodes[k];
    llvm::ArrayRef<llvm::CachedHashStringRef> outKeys = resultKeys.at(k);
    firstResultId.push_back(model.valueIdBound());
    for (llvm::CachedHashStringRef key : outKeys)
      resultHashes.push_back(key.hash());
    Node *n = g.createNode(nv.opType, nv.domain);
    llvm::ArrayRef<llvm::StringRef> outs = gv.outputsOf(nv);
    // The node's name is the name table's copy. A node is usually named like
    // its first result: then the key (and its hash) is that result's.
    if (!nv.name.empty())
      n->name = model.reserveTableName(!outs.empty() && outs[0] == nv.name ? outKeys[0]
                                                                            : Model::nameKey(nv.name));
    n->docString = nv.docString;
    if (nv.proto)
      n->unknownFields = unknownFieldsOf(*nv.proto);
    if (nv.opType.empty())
      return inputError("{0}: {1} has no op_type", gname(), describeNode(*n));
    n->resizeOutputs(static_cast<unsigned>(outs.size())); // omitted optional outputs stay null
    for (unsigned i = 0; i < outs.size(); ++i) {
      if (outs[i].empty())
        continue;
      Value *v = n->setOutput(i, outKeys[i], Type());
      if (auto err = defineName(scope, outKeys[i], v, g))
        return inputError("{0}: {1} defines '{2}', which is already defined", gname(),
                          describeNode(*n), outs[i]);
    }
    nodes.push_back(n);
  }
  // Phase 2: inputs, attributes (nested graphs see every name of this graph).
  // The recent-value slots replay phase 1: each node's results are noted
  // after its inputs are resolved. `inOrder` stays true while every node
  // reads only results of earlier nodes, through its inputs and through the
  // captures of its nested graphs (noteCapture): the file's order is then
  // topological and nothing needs sorting.
  KeyWindow inputKeys(gv, scope, /*inputs=*/true);
  bool inOrder = true;
  const unsigned *resultHash = resultHashes.data();
  for (size_t k = 0; k < gv.nodes.size(); ++k) {
    const NodeView &nv = gv.nodes[k];
    Node *n = nodes[k];
    llvm::ArrayRef<llvm::CachedHashStringRef> inKeys = inputKeys.at(k);
    llvm::ArrayRef<llvm::StringRef> ins = gv.inputsOf(nv);
    n->reserveInputs(static_cast<unsigned>(ins.size()));
    if (nv.numAttrs)
      n->attrs.reserve(nv.numAttrs);
    for (size_t j = 0; j < ins.size(); ++j) {
      Value *v = nullptr; // an omitted optional input
      if (!ins[j].empty() && !(v = scope.lookup(inKeys[j])))
        return inputError("{0}: {1} uses '{2}', which is not defined", gname(), describeNode(*n),
                          ins[j]);
      n->addInput(v);
      inOrder &= !v || v->graph() != &g || v->kind() != ValueKind::NodeResult ||
                 v->id() < firstResultId[k];
      noteCapture(v, g);
    }
    if (nv.numAttrs) {
      enclosing.push_back({&g, firstResultId[k], &inOrder});
      for (const AttrRef &ar : gv.attrsOf(nv))
        if (auto err = importAttribute(ar, n->attrs.emplace_back(), *n, scope, gv.depth + 2))
          return err;
      enclosing.pop_back();
    }
    for (unsigned i = 0; i < n->numOutputs(); ++i, ++resultHash)
      if (Value *v = n->output(i))
        scope.noteRecent(*resultHash, v);
  }

  for (ValueInfoView &vi : gv.valueInfo) {
    Value *v = scope.lookup(vi.name);
    if (!v || v->graph() != &g)
      continue; // value_info for an unused or outer name: nothing to attach it to
    auto t = importType(vi, [&] { return gname() + ", value_info " + quoteName(vi.name); });
    if (!t)
      return t.takeError();
    v->type = std::move(*t);
    v->hasValueInfo = true;
    v->docString = vi.docString.str();
  }
  for (ValueInfoView &vi : gv.outputs) {
    Value *v = scope.lookup(vi.name);
    if (!v)
      return inputError("{0}: output '{1}' is not defined", gname(), vi.name);
    noteCapture(v, g);
    auto t = importType(vi, [&] { return gname() + ", output " + quoteName(vi.name); });
    if (!t)
      return t.takeError();
    if (t->isKnown() && v->graph() == &g && v->kind() == ValueKind::NodeResult)
      v->type = std::move(*t);
    if (v->graph() == &g && v->kind() == ValueKind::NodeResult)
      v->docString = vi.docString.str();
    g.addOutput(v);
  }

  // In file order the nodes' order keys are 0, 1, 2, ... already.
  if (!inOrder) {
    if (!g.sortTopologically())
      return inputError("{0}: the nodes form a cycle", gname());
    g.renumber();
  }
  return llvm::Error::success();
}

llvm::Error Importer::importModel(const onnx::ModelProto &p, GraphView *mainGraph) {
  if (!p.has_ir_version() || p.ir_version() < kMinIrVersion)
    return inputError("unsupported IR version {0} (mpc reads {1} to {2})", p.ir_version(),
                      kMinIrVersion, kMaxIrVersion);
  if (p.ir_version() > kMaxIrVersion)
    return inputError("unsupported IR version {0} (mpc reads {1} to {2})", p.ir_version(),
                      kMinIrVersion, kMaxIrVersion);
  if (!mainGraph)
    return inputError("the model has no graph");
  model.irVersion = p.ir_version();
  model.producerName = p.producer_name();
  model.producerVersion = p.producer_version();
  model.domain = p.domain();
  model.modelVersion = p.model_version();
  model.docString = p.doc_string();
  model.metadataProps = importProps(p.metadata_props());
  model.unknownFields = unknownFieldsOf(p);
  for (const auto &o : p.opset_import()) {
    for (const OpsetId &prev : model.opsets)
      if (prev.domain == o.domain())
        return inputError("opset_import lists domain '{0}' twice", o.domain());
    model.opsets.push_back({o.domain(), o.version()});
  }
  for (const auto &f : p.functions())
    model.functions.push_back(f.SerializeAsString());

  model.graph = std::make_unique<Graph>(model);
  Scope mainScope;
  mainScope.shared = &model;
  if (auto err = importGraph(*mainGraph, *model.graph, mainScope))
    return err;

  for (const auto &tip : p.training_info()) {
    TrainingInfo ti;
    // A training stage reads the inference graph's initializers, nothing else
    // of it: its own inputs may reuse the inference inputs' names.
    Scope initScope;
    for (Value *v : model.graph->initializers())
      initScope.define(v);
    auto importStage = [&](const onnx::GraphProto &gp,
                           std::unique_ptr<Graph> &out) -> llvm::Error {
      out = std::make_unique<Graph>(model, model.graph.get());
      Scope s;
      s.parent = &initScope;
      return importGraph(gp, *out, s);
    };
    if (tip.has_initialization())
      if (auto err = importStage(tip.initialization(), ti.initialization))
        return err;
    if (tip.has_algorithm())
      if (auto err = importStage(tip.algorithm(), ti.algorithm))
        return err;
    for (const auto &b : tip.initialization_binding())
      ti.initializationBinding.emplace_back(b.key(), b.value());
    for (const auto &b : tip.update_binding())
      ti.updateBinding.emplace_back(b.key(), b.value());
    model.trainingInfo.push_back(std::move(ti));
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Views of parsed messages
//===----------------------------------------------------------------------===//

TensorView onnxio::viewTensor(const onnx::TensorProto &tp) {
  TensorView t;
  t.proto = &tp;
  t.name = tp.name();
  t.docString = tp.doc_string();
  t.dataType = tp.data_type();
  t.dims.assign(tp.dims().begin(), tp.dims().end());
  t.hasRawData = tp.has_raw_data();
  t.rawData = tp.raw_data();
  return t;
}

ValueInfoView onnxio::viewValueInfo(const onnx::ValueInfoProto &vi) {
  ValueInfoView v;
  v.name = vi.name();
  v.docString = vi.doc_string();
  v.type = &vi.type();
  return v;
}

void onnxio::appendNode(GraphView &g, const onnx::NodeProto &np) {
  NodeView n;
  n.opType = np.op_type();
  n.domain = np.domain();
  n.name = np.name();
  n.docString = np.doc_string();
  n.proto = &np;
  n.firstName = static_cast<unsigned>(g.names.size());
  n.numInputs = static_cast<unsigned>(np.input_size());
  n.numOutputs = static_cast<unsigned>(np.output_size());
  g.names.insert(g.names.end(), np.input().begin(), np.input().end());
  g.names.insert(g.names.end(), np.output().begin(), np.output().end());
  n.firstAttr = static_cast<unsigned>(g.attrs.size());
  n.numAttrs = static_cast<unsigned>(np.attribute_size());
  for (const auto &ap : np.attribute())
    g.attrs.push_back({llvm::StringRef(), &ap});
  g.nodes.push_back(std::move(n));
}

void onnxio::setGraphFields(GraphView &g, const onnx::GraphProto &gp) {
  g.name = gp.name();
  g.docString = gp.doc_string();
  g.unknownFields = unknownFieldsOf(gp);
  for (const auto &sp : gp.sparse_initializer())
    g.sparseInitializers.push_back(sp.SerializeAsString());
  for (const auto &qa : gp.quantization_annotation())
    g.quantizationAnnotations.push_back(qa.SerializeAsString());
}

void onnxio::viewGraph(GraphView &g, const onnx::GraphProto &gp) {
  setGraphFields(g, gp);
  for (const auto &vi : gp.input())
    g.inputs.push_back(viewValueInfo(vi));
  for (const auto &tp : gp.initializer())
    g.initializers.push_back(viewTensor(tp));
  g.nodes.reserve(gp.node_size());
  for (const auto &np : gp.node())
    appendNode(g, np);
  for (const auto &vi : gp.value_info())
    g.valueInfo.push_back(viewValueInfo(vi));
  for (const auto &vi : gp.output())
    g.outputs.push_back(viewValueInfo(vi));
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// `p` gives every field but the main graph, which `mainGraph` views.
static llvm::Expected<std::unique_ptr<Model>>
importViews(const onnx::ModelProto &p, GraphView *mainGraph, llvm::StringRef baseDir,
            llvm::StringRef source = {}, std::shared_ptr<const void> owner = nullptr) {
  auto m = std::make_unique<Model>();
  m->baseDir = baseDir.str();
  Importer imp(*m, baseDir, source, std::move(owner));
  if (auto err = imp.importModel(p, mainGraph))
    return err;
  return m;
}

llvm::Expected<std::unique_ptr<Model>> mpc::importOnnx(const onnx::ModelProto &proto,
                                                       llvm::StringRef baseDir) {
  GraphView main;
  if (proto.has_graph())
    viewGraph(main, proto.graph());
  return importViews(proto, proto.has_graph() ? &main : nullptr, baseDir);
}

/// The whole file parsed into a ModelProto, then imported.
static llvm::Expected<std::unique_ptr<Model>> importParsed(llvm::StringRef bytes,
                                                           llvm::StringRef baseDir) {
  // Parse into an arena: allocation is a pointer bump and teardown is free.
  pb::Arena arena;
  onnx::ModelProto &proto = *pb::Arena::CreateMessage<onnx::ModelProto>(&arena);
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                              static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(INT32_MAX);
  in.SetRecursionLimit(kRecursionLimit);
  if (!proto.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return notAModel();
  return importOnnx(proto, baseDir);
}

llvm::Expected<std::unique_ptr<Model>>
mpc::importOnnxBytes(llvm::StringRef bytes, llvm::StringRef baseDir,
                     std::shared_ptr<const void> owner) {
  if (bytes.size() > INT32_MAX)
    return inputError("the file is larger than 2 GiB; store weights as external data");
  // `owner` stays held here until the end: a failed import below destroys
  // its model (and the model's share of `bytes`), and the whole-message parse
  // after it still reads `bytes`.
  pb::Arena arena;
  ModelWire wire;
  if (decodeModel(bytes, wire, arena)) {
    auto m = importViews(*wire.rest, wire.hasGraph ? &wire.graph : nullptr, baseDir, bytes,
                         owner);
    if (m)
      return m;
    llvm::consumeError(m.takeError());
  }
  // A file the wire reader refuses, or an input error: the whole-message
  // parse decides what is wrong (a parse error anywhere comes first), but for
  // graphs nested too deep for the parse, which the importer would refuse.
  auto m = importParsed(bytes, baseDir);
  if (!m)
    if (llvm::Error deep = checkWireGraphDepth(bytes)) {
      llvm::consumeError(m.takeError());
      return std::move(deep);
    }
  return m;
}

llvm::Expected<std::unique_ptr<Model>> mpc::importOnnxFile(llvm::StringRef path) {
  if (llvm::sys::fs::is_directory(path))
    return inputError("'{0}' is a directory, not an ONNX file", path);
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return inputError("cannot read '{0}': {1}", path, buf.getError().message());
  llvm::SmallString<256> dir(path);
  llvm::sys::fs::make_absolute(dir);
  llvm::sys::path::remove_filename(dir);
  // The tensors borrow their data from the buffer (a mapping of the file).
  std::shared_ptr<llvm::MemoryBuffer> file = std::move(*buf);
  llvm::StringRef bytes = file->getBuffer();
  auto m = importOnnxBytes(bytes, dir, std::move(file));
  if (!m)
    return llvm::make_error<InputError>(
        (path + ": " + llvm::toString(m.takeError())).str());
  return m;
}
