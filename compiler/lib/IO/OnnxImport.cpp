//===- OnnxImport.cpp - ONNX ModelProto to IR ------------------------------===//
//
// Builds the IR from a ModelProto. Node outputs are created before inputs are
// connected, so graphs whose nodes are not in topological order import (and
// are sorted); cycles, undefined inputs and duplicate names are input errors
// that name the graph, node and value.
//
//===----------------------------------------------------------------------===//
#include "mpc/IO/Onnx.h"
#include "mpc/Support/Diagnostics.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>
#include <cstring>

using namespace mpc;
namespace pb = google::protobuf;

/// The generated accessor, not reflection: this runs for every node, value
/// and attribute.
template <typename Msg> static std::string unknownFieldsOf(const Msg &msg) {
  const pb::UnknownFieldSet &u = msg.unknown_fields();
  if (u.empty())
    return {};
  std::string s;
  u.SerializeToString(&s);
  return s;
}

static std::vector<std::pair<std::string, std::string>>
importProps(const pb::RepeatedPtrField<onnx::StringStringEntryProto> &props) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto &p : props)
    out.emplace_back(p.key(), p.value());
  return out;
}

namespace {

/// Name scope of one graph, chained to the enclosing graph's scope.
struct Scope {
  llvm::StringMap<Value *> names;
  const Scope *parent = nullptr;

  /// Sizes the table for the names `gp` defines (no rehashing on import).
  void reserveFor(const onnx::GraphProto &gp) {
    if (!names.empty())
      return;
    unsigned n = static_cast<unsigned>(gp.input_size() + gp.initializer_size());
    for (const auto &np : gp.node())
      n += static_cast<unsigned>(np.output_size());
    names = llvm::StringMap<Value *>(n);
  }

  Value *lookup(llvm::StringRef n) const {
    for (const Scope *s = this; s; s = s->parent) {
      auto it = s->names.find(n);
      if (it != s->names.end())
        return it->second;
    }
    return nullptr;
  }
};

class Importer {
public:
  Importer(Model &m, llvm::StringRef baseDir) : model(m), baseDir(baseDir) {}

  llvm::Error importModel(const onnx::ModelProto &p);

private:
  Model &model;
  std::string baseDir;

  llvm::Error importGraph(const onnx::GraphProto &gp, Graph &g, const Scope *outer,
                          Scope &scope);
  llvm::Expected<Type> importType(const onnx::TypeProto &tp,
                                  llvm::function_ref<std::string()> where);
  /// `describe` names the tensor in messages; it runs only on errors.
  llvm::Error importTensor(const onnx::TensorProto &tp, Tensor &t,
                           llvm::function_ref<std::string()> describe);
  llvm::Error importAttribute(const onnx::AttributeProto &ap, Attribute &a, Node &owner,
                              const Scope &scope);
  llvm::Error checkExternalLocation(llvm::StringRef loc, llvm::StringRef where,
                                    std::string &resolved);
  llvm::Error defineName(Scope &scope, Value *v, const Graph &g);
};

} // namespace

llvm::Error Importer::defineName(Scope &scope, Value *v, const Graph &g) {
  // One hash for this scope's check and insertion together.
  if ((scope.parent && scope.parent->lookup(v->name())) ||
      !scope.names.try_emplace(v->name(), v).second)
    return inputError("graph '{0}': value name '{1}' is defined twice", g.name, v->name());
  return llvm::Error::success();
}

llvm::Expected<Type> Importer::importType(const onnx::TypeProto &tp,
                                          llvm::function_ref<std::string()> where) {
  Type t;
  t.denotation = tp.denotation();
  auto elemType = [&](int32_t e) -> llvm::Expected<DType> {
    if (!isKnownDType(e))
      return inputError("{0}: unknown element type {1}", where(), e);
    return static_cast<DType>(e);
  };
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

llvm::Error Importer::importTensor(const onnx::TensorProto &tp, Tensor &t,
                                   llvm::function_ref<std::string()> describe) {
  t.name = tp.name();
  t.docString = tp.doc_string();
  t.unknownFields = unknownFieldsOf(tp);
  if (!isKnownDType(tp.data_type()) || tp.data_type() == 0)
    return inputError("{0}: unsupported tensor data type {1}", describe(), tp.data_type());
  t.dtype = static_cast<DType>(tp.data_type());
  // Element counts and byte sizes must fit in 64 bits (a hostile shape must
  // not overflow later arithmetic).
  int64_t elements = 1;
  for (int64_t d : tp.dims()) {
    if (d < 0)
      return inputError("{0}: negative dimension {1}", describe(), d);
    if (__builtin_mul_overflow(elements, d, &elements) || elements > (int64_t(1) << 58))
      return inputError("{0}: shape is too large", describe());
    t.dims.push_back(d);
  }
  if (tp.has_segment())
    return inputError("{0}: segmented tensors are not supported", describe());

  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
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
    if (r.length >= 0 && static_cast<uint64_t>(r.length) != t.byteSize() &&
        t.dtype != DType::String)
      return inputError("{0}: external data length {1} does not match its shape ({2} bytes)",
                        describe(), r.length, t.byteSize());
    uint64_t fileSize = 0;
    if (llvm::sys::fs::file_size(r.path, fileSize) || r.offset + t.byteSize() > fileSize)
      return inputError("{0}: external data file '{1}' is shorter than offset + length", describe(),
                        r.location);
    t.setExternal(std::move(r));
    return llvm::Error::success();
  }

  int64_t n = t.numElements();
  std::vector<uint8_t> raw;
  size_t count = 0; // values given in a typed field, if any
  if (tp.has_raw_data()) {
    const std::string &rd = tp.raw_data();
    raw.resize(rd.size()); // memcpy, not a char -> uint8_t element loop
    if (!rd.empty())
      std::memcpy(raw.data(), rd.data(), rd.size());
    if (raw.size() != t.byteSize())
      return inputError("{0}: raw data has {1} bytes, shape needs {2}", describe(), raw.size(),
                        t.byteSize());
    t.setBytes(std::move(raw));
    return llvm::Error::success();
  }
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

llvm::Error Importer::importAttribute(const onnx::AttributeProto &ap, Attribute &a,
                                      Node &owner, const Scope &scope) {
  a.name = ap.name();
  a.docString = ap.doc_string();
  a.refAttrName = ap.ref_attr_name();
  a.unknownFields = unknownFieldsOf(ap);
  a.kind = static_cast<AttrKind>(ap.type());
  auto where = [&] { return describeNode(owner) + ", attribute '" + ap.name() + "'"; };
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
    return importTensor(tp, a.tensors.back(), where);
  };
  if (ap.has_t())
    if (auto err = importOneTensor(ap.t()))
      return err;
  for (const auto &tp : ap.tensors())
    if (auto err = importOneTensor(tp))
      return err;
  auto importOneGraph = [&](const onnx::GraphProto &gp) -> llvm::Error {
    auto g = std::make_unique<Graph>(model, owner.getParent(), &owner);
    Scope inner;
    inner.parent = &scope;
    if (auto err = importGraph(gp, *g, &scope, inner))
      return err;
    a.graphs.push_back(std::move(g));
    return llvm::Error::success();
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

llvm::Error Importer::importGraph(const onnx::GraphProto &gp, Graph &g, const Scope *outer,
                                  Scope &scope) {
  g.name = gp.name();
  g.docString = gp.doc_string();
  g.unknownFields = unknownFieldsOf(gp);
  for (const auto &sp : gp.sparse_initializer())
    g.sparseInitializers.push_back(sp.SerializeAsString());
  for (const auto &qa : gp.quantization_annotation())
    g.quantizationAnnotations.push_back(qa.SerializeAsString());
  std::string gname = "graph '" + gp.name() + "'";
  scope.reserveFor(gp);

  for (const auto &vi : gp.input()) {
    if (vi.name().empty())
      return inputError("{0}: an input has no name", gname);
    auto t = importType(vi.type(), [&] { return gname + ", input '" + vi.name() + "'"; });
    if (!t)
      return t.takeError();
    Value *v = g.addInput(vi.name(), std::move(*t));
    v->docString = vi.doc_string();
    if (auto err = defineName(scope, v, g))
      return err;
  }
  for (const auto &tp : gp.initializer()) {
    auto where = [&] { return gname + ", initializer '" + tp.name() + "'"; };
    if (tp.name().empty())
      return inputError("{0}: an initializer has no name", gname);
    Tensor t;
    if (auto err = importTensor(tp, t, where))
      return err;
    auto it = scope.names.find(tp.name());
    if (it != scope.names.end() && it->second->kind() == ValueKind::GraphInput &&
        !it->second->initializer()) {
      g.setInputDefault(it->second, std::move(t));
      continue;
    }
    Value *v = g.addInitializer(tp.name(), std::move(t));
    if (auto err = defineName(scope, v, g))
      return err;
  }

  // Phase 1: nodes and their results, so inputs may refer to later nodes.
  std::vector<Node *> nodes;
  nodes.reserve(gp.node_size());
  for (const auto &np : gp.node()) {
    Node *n = g.createNode(np.op_type(), np.domain());
    n->name = np.name();
    n->docString = np.doc_string();
    n->unknownFields = unknownFieldsOf(np);
    if (np.op_type().empty())
      return inputError("{0}: {1} has no op_type", gname, describeNode(*n));
    n->resizeOutputs(np.output_size()); // omitted optional outputs stay null
    for (int i = 0; i < np.output_size(); ++i) {
      if (np.output(i).empty())
        continue;
      Value *v = n->setOutput(i, np.output(i), Type());
      if (auto err = defineName(scope, v, g))
        return inputError("{0}: {1} defines '{2}', which is already defined", gname,
                          describeNode(*n), np.output(i));
    }
    // Reserved after the outputs: a node is usually named like its first
    // result, whose name is reserved already (one hash instead of two).
    if (!n->name.empty() && !(np.output_size() > 0 && np.output(0) == n->name))
      model.reserveName(n->name);
    nodes.push_back(n);
  }
  // Phase 2: inputs, attributes (nested graphs see every name of this graph).
  for (int k = 0; k < gp.node_size(); ++k) {
    const auto &np = gp.node(k);
    Node *n = nodes[k];
    n->reserveInputs(static_cast<unsigned>(np.input_size()));
    n->attrs.reserve(np.attribute_size());
    for (const std::string &in : np.input()) {
      if (in.empty()) {
        n->addInput(nullptr);
        continue;
      }
      Value *v = scope.lookup(in);
      if (!v)
        return inputError("{0}: {1} uses '{2}', which is not defined", gname, describeNode(*n),
                          in);
      n->addInput(v);
    }
    for (const auto &ap : np.attribute()) {
      Attribute a;
      if (auto err = importAttribute(ap, a, *n, scope))
        return err;
      n->attrs.push_back(std::move(a));
    }
  }

  for (const auto &vi : gp.value_info()) {
    Value *v = scope.lookup(vi.name());
    if (!v || v->graph() != &g)
      continue; // value_info for an unused or outer name: nothing to attach it to
    auto t = importType(vi.type(), [&] { return gname + ", value_info '" + vi.name() + "'"; });
    if (!t)
      return t.takeError();
    v->type = std::move(*t);
    v->hasValueInfo = true;
    v->docString = vi.doc_string();
  }
  for (const auto &vi : gp.output()) {
    Value *v = scope.lookup(vi.name());
    if (!v)
      return inputError("{0}: output '{1}' is not defined", gname, vi.name());
    auto t = importType(vi.type(), [&] { return gname + ", output '" + vi.name() + "'"; });
    if (!t)
      return t.takeError();
    if (t->isKnown() && v->graph() == &g && v->kind() == ValueKind::NodeResult)
      v->type = std::move(*t);
    if (v->graph() == &g && v->kind() == ValueKind::NodeResult)
      v->docString = vi.doc_string();
    g.addOutput(v);
  }

  if (!g.sortTopologically())
    return inputError("{0}: the nodes form a cycle", gname);
  g.renumber();
  (void)outer;
  return llvm::Error::success();
}

llvm::Error Importer::importModel(const onnx::ModelProto &p) {
  if (!p.has_ir_version() || p.ir_version() < kMinIrVersion)
    return inputError("unsupported IR version {0} (mpc reads {1} to {2})", p.ir_version(),
                      kMinIrVersion, kMaxIrVersion);
  if (p.ir_version() > kMaxIrVersion)
    return inputError("unsupported IR version {0} (mpc reads {1} to {2})", p.ir_version(),
                      kMinIrVersion, kMaxIrVersion);
  if (!p.has_graph())
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
  if (auto err = importGraph(p.graph(), *model.graph, nullptr, mainScope))
    return err;

  for (const auto &tip : p.training_info()) {
    TrainingInfo ti;
    // A training stage reads the inference graph's initializers, nothing else
    // of it: its own inputs may reuse the inference inputs' names.
    Scope initScope;
    for (Value *v : model.graph->initializers())
      initScope.names.try_emplace(v->name(), v);
    auto importStage = [&](const onnx::GraphProto &gp,
                           std::unique_ptr<Graph> &out) -> llvm::Error {
      out = std::make_unique<Graph>(model, model.graph.get());
      Scope s;
      s.parent = &initScope;
      return importGraph(gp, *out, &initScope, s);
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

llvm::Expected<std::unique_ptr<Model>> mpc::importOnnx(const onnx::ModelProto &proto,
                                                       llvm::StringRef baseDir) {
  auto m = std::make_unique<Model>();
  m->baseDir = baseDir.str();
  Importer imp(*m, baseDir);
  if (auto err = imp.importModel(proto))
    return std::move(err);
  return std::move(m);
}

llvm::Expected<std::unique_ptr<Model>> mpc::importOnnxBytes(llvm::StringRef bytes,
                                                            llvm::StringRef baseDir) {
  // Parse into an arena: allocation is a pointer bump and teardown is free,
  // which matters for models of a million nodes.
  pb::Arena arena;
  onnx::ModelProto &proto = *pb::Arena::CreateMessage<onnx::ModelProto>(&arena);
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                              static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  in.SetTotalBytesLimit(INT32_MAX);
  in.SetRecursionLimit(200);
  if (bytes.size() > INT32_MAX)
    return inputError("the file is larger than 2 GiB; store weights as external data");
  if (!proto.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return inputError("not a valid ONNX model (the protobuf does not parse; truncated or not "
                      "ONNX)");
  return importOnnx(proto, baseDir);
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
  auto m = importOnnxBytes((*buf)->getBuffer(), dir);
  if (!m)
    return llvm::make_error<InputError>(
        (path + ": " + llvm::toString(m.takeError())).str());
  return m;
}
