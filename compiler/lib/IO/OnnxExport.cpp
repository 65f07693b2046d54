//===- OnnxExport.cpp - IR to ONNX ModelProto ------------------------------===//
//
// Writes the IR back as a ModelProto. Tensor data is written as raw_data (or
// string_data), optionally to an external data file streamed one tensor at a
// time. Files are written to a temporary name and renamed into place, so a
// failure never leaves a partial output.
//
//===----------------------------------------------------------------------===//
#include "mpc/IO/Onnx.h"
#include "mpc/IR/Limits.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Support/LargeAlloc.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <google/protobuf/arena.h>
#include <algorithm>
#include <cstring>
#include <functional>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>

using namespace mpc;
namespace pb = google::protobuf;

static void restoreUnknownFields(const std::string &s, pb::Message &msg) {
  if (s.empty())
    return;
  msg.GetReflection()->MutableUnknownFields(&msg)->ParseFromString(s);
}

static void exportProps(const std::vector<std::pair<std::string, std::string>> &props,
                        pb::RepeatedPtrField<onnx::StringStringEntryProto> *out) {
  for (const auto &kv : props) {
    auto *e = out->Add();
    e->set_key(kv.first);
    e->set_value(kv.second);
  }
}

namespace {

/// Appends tensor bytes to an external data file being written.
struct ExternalSink {
  llvm::raw_fd_ostream *os = nullptr;
  std::string location; ///< as recorded in the model
  uint64_t threshold = 0;
  uint64_t offset = 0;
};

/// Wire bytes of small pieces (a node, a graph's name).
using NodeBytes = llvm::SmallVector<char, 0>;
/// Wire bytes under construction (inline appends, unlike std::string's).
using WireBuf = llvm::SmallVectorImpl<char>;

/// The wire bytes of a whole graph's nodes or initializers (GraphProto fields
/// 1 and 5, repeated): 150 MB for a million-node model. They are appended in
/// blocks that double from 64 KiB to 4 MiB (from then on allocateLarge puts
/// them on huge pages); one growing vector would copy everything it holds at
/// each doubling and touch twice the memory.
///
/// With a spill set (streamTo), the bytes need not all be held: whenever a
/// new block would be needed and `spillAfter` bytes or more are held, the
/// spill writes the held bytes out and the largest block is reused, so the
/// main graph's nodes go to the file through a few MiB of memory.
class ChunkedBytes {
public:
  using Spill = std::function<void(const ChunkedBytes &)>;
  ChunkedBytes() = default;
  ChunkedBytes(ChunkedBytes &&) = default;
  ChunkedBytes &operator=(ChunkedBytes &&) = default;

  void streamTo(size_t after, Spill s) {
    spillAfter = after;
    spill = std::move(s);
  }
  void append(llvm::StringRef s) {
    if (blocks.empty() || blocks.back().capacity - blocks.back().size < s.size()) {
      if (spill && held >= spillAfter)
        spillHeld();
      if (blocks.empty() || blocks.back().capacity - blocks.back().size < s.size()) {
        size_t cap = std::max(nextBlock, s.size());
        nextBlock = std::min(nextBlock * 2, kHugePageThreshold);
        blocks.push_back({BlockPtr(static_cast<char *>(allocateLarge(cap, false)),
                                   LargeBlockDeleter{cap}),
                          0, cap});
      }
    }
    Block &b = blocks.back();
    if (!s.empty())
      std::memcpy(b.data.get() + b.size, s.data(), s.size());
    b.size += s.size();
    held += s.size();
    total += s.size();
  }
  /// Every byte appended, spilled ones included.
  size_t size() const { return total; }
  /// The bytes held now (those not spilled).
  size_t heldSize() const { return held; }
  /// Writes the bytes held.
  void writeTo(llvm::raw_ostream &os) const {
    for (const Block &b : blocks)
      os.write(b.data.get(), b.size);
  }

private:
  size_t nextBlock = size_t(64) << 10; ///< doubles up to kHugePageThreshold
  using BlockPtr = std::unique_ptr<char[], LargeBlockDeleter>;
  struct Block {
    BlockPtr data;
    size_t size, capacity;
  };
  std::vector<Block> blocks;
  size_t total = 0;
  size_t held = 0;
  size_t spillAfter = 0;
  Spill spill;

  /// Hands the held bytes to the spill and keeps only the largest block, empty.
  void spillHeld() {
    spill(*this);
    auto largest = std::max_element(blocks.begin(), blocks.end(), [](const Block &a, const Block &b) {
      return a.capacity < b.capacity;
    });
    Block keep = std::move(*largest);
    keep.size = 0;
    blocks.clear();
    blocks.push_back(std::move(keep));
    held = 0;
  }
};

class Exporter {
public:
  explicit Exporter(ExternalSink *sink) : sink(sink) {}
  llvm::Error exportModel(Model &m, onnx::ModelProto &p);
  /// Like exportModel, but the main graph's nodes are serialized straight
  /// into `mainNodes` (the wire bytes of GraphProto field 1, see
  /// writeNodesDirect) instead of being built as NodeProtos.
  llvm::Error exportModelStreamingNodes(Model &m, onnx::ModelProto &p, ChunkedBytes &mainNodes,
                                        ChunkedBytes &mainInitializers);
  /// While writeNodesDirect runs: how many of the main graph's nodes it has
  /// written, of how many.
  unsigned nodesDone = 0, nodesTotal = 0;

private:
  ExternalSink *sink;
  /// Set by exportModelStreamingNodes: the main graph's node bytes.
  const Graph *streamGraph = nullptr;
  ChunkedBytes *streamNodes = nullptr;
  /// The main graph's initializers (GraphProto field 5), likewise.
  ChunkedBytes *streamInits = nullptr;
  pb::Arena scratchArena;

  llvm::Error exportGraph(const Graph &g, onnx::GraphProto &gp);
  llvm::Error exportTensor(const Tensor &t, onnx::TensorProto &tp);
  llvm::Error exportAttribute(const Attribute &a, onnx::AttributeProto &ap);
  llvm::Error exportNode(const Node &n, onnx::NodeProto &np);
  llvm::Error writeNodesDirect(const Graph &g, ChunkedBytes &out);
  /// Appends a NodeProto's fields (not its tag and length) to `out`.
  llvm::Error writeNode(const Node &n, WireBuf &out);
  /// Appends an AttributeProto's fields; `a` is isDirectAttribute.
  llvm::Error writeAttribute(const Attribute &a, WireBuf &out);
  /// Appends a nested GraphProto's fields.
  llvm::Error writeGraph(const Graph &g, WireBuf &out);
  template <typename Sink> llvm::Error writeTensorDirect(const Tensor &t, Sink &out);
};

} // namespace

static void exportType(const Type &t, onnx::TypeProto &tp) {
  if (!t.denotation.empty())
    tp.set_denotation(t.denotation);
  auto exportShape = [&](onnx::TensorShapeProto *sp) {
    for (const Dim &d : t.dims) {
      auto *dp = sp->add_dim();
      if (d.isKnown())
        dp->set_dim_value(d.value);
      else if (!d.param.empty())
        dp->set_dim_param(d.param);
      if (!d.denotation.empty())
        dp->set_denotation(d.denotation);
    }
  };
  switch (t.kind) {
  case TypeKind::Unknown:
    return;
  case TypeKind::Tensor: {
    auto *tt = tp.mutable_tensor_type();
    tt->set_elem_type(static_cast<int32_t>(t.elem));
    if (t.hasShape)
      exportShape(tt->mutable_shape());
    return;
  }
  case TypeKind::SparseTensor: {
    auto *st = tp.mutable_sparse_tensor_type();
    st->set_elem_type(static_cast<int32_t>(t.elem));
    if (t.hasShape)
      exportShape(st->mutable_shape());
    return;
  }
  case TypeKind::Sequence:
    if (t.inner)
      exportType(*t.inner, *tp.mutable_sequence_type()->mutable_elem_type());
    else
      tp.mutable_sequence_type();
    return;
  case TypeKind::Optional:
    if (t.inner)
      exportType(*t.inner, *tp.mutable_optional_type()->mutable_elem_type());
    else
      tp.mutable_optional_type();
    return;
  case TypeKind::Map:
    tp.mutable_map_type()->set_key_type(static_cast<int32_t>(t.elem));
    if (t.inner)
      exportType(*t.inner, *tp.mutable_map_type()->mutable_value_type());
    return;
  }
}

static void exportValueInfo(const Value &v, onnx::ValueInfoProto &vi) {
  vi.set_name(v.name());
  if (v.type.isKnown())
    exportType(v.type, *vi.mutable_type());
  if (!v.docString.empty())
    vi.set_doc_string(v.docString);
}

llvm::Error Exporter::exportTensor(const Tensor &t, onnx::TensorProto &tp) {
  if (!t.name.empty())
    tp.set_name(t.name);
  tp.set_data_type(static_cast<int32_t>(t.dtype));
  for (int64_t d : t.dims)
    tp.add_dims(d);
  if (!t.docString.empty())
    tp.set_doc_string(t.docString);
  restoreUnknownFields(t.unknownFields, tp);
  if (t.dtype == DType::String) {
    for (const std::string &s : t.strings())
      tp.add_string_data(s);
    return llvm::Error::success();
  }

  // Bytes of the tensor: in memory, or read from its external file for now.
  std::unique_ptr<llvm::MemoryBuffer> slice;
  llvm::StringRef data;
  if (t.isExternal()) {
    const ExternalRef &r = *t.externalRef();
    auto buf = llvm::MemoryBuffer::getFileSlice(r.path, t.byteSize(), r.offset, false);
    if (!buf)
      return inputError("tensor '{0}': cannot read external data '{1}': {2}", t.name,
                        r.location, buf.getError().message());
    slice = std::move(*buf);
    data = slice->getBuffer();
  } else {
    data = llvm::StringRef(reinterpret_cast<const char *>(t.bytes().data()), t.bytes().size());
  }

  if (sink && sink->os && data.size() >= sink->threshold && !data.empty()) {
    tp.set_data_location(onnx::TensorProto::EXTERNAL);
    auto addKV = [&](const char *k, std::string v) {
      auto *e = tp.add_external_data();
      e->set_key(k);
      e->set_value(std::move(v));
    };
    addKV("location", sink->location);
    addKV("offset", std::to_string(sink->offset));
    addKV("length", std::to_string(data.size()));
    sink->os->write(data.data(), data.size());
    sink->offset += data.size();
    // Keep offsets 4 KiB aligned so readers can mmap tensors.
    uint64_t pad = (4096 - sink->offset % 4096) % 4096;
    sink->os->write_zeros(pad);
    sink->offset += pad;
    return llvm::Error::success();
  }
  tp.set_raw_data(data.data(), data.size());
  return llvm::Error::success();
}

llvm::Error Exporter::exportAttribute(const Attribute &a, onnx::AttributeProto &ap) {
  ap.set_name(a.name);
  ap.set_type(static_cast<onnx::AttributeProto::AttributeType>(a.kind));
  if (!a.docString.empty())
    ap.set_doc_string(a.docString);
  if (!a.refAttrName.empty())
    ap.set_ref_attr_name(a.refAttrName);
  restoreUnknownFields(a.unknownFields, ap);
  switch (a.kind) {
  case AttrKind::Float:
    ap.set_f(a.f);
    break;
  case AttrKind::Int:
    ap.set_i(a.i);
    break;
  case AttrKind::String:
    ap.set_s(a.s);
    break;
  case AttrKind::Tensor:
    if (!a.tensors.empty())
      if (auto err = exportTensor(a.tensors[0], *ap.mutable_t()))
        return err;
    break;
  case AttrKind::Graph:
    if (!a.graphs.empty())
      if (auto err = exportGraph(*a.graphs[0], *ap.mutable_g()))
        return err;
    break;
  case AttrKind::Floats:
    for (float f : a.floats)
      ap.add_floats(f);
    break;
  case AttrKind::Ints:
    for (int64_t i : a.ints)
      ap.add_ints(i);
    break;
  case AttrKind::Strings:
    for (const std::string &s : a.strings)
      ap.add_strings(s);
    break;
  case AttrKind::Tensors:
    for (const Tensor &t : a.tensors)
      if (auto err = exportTensor(t, *ap.add_tensors()))
        return err;
    break;
  case AttrKind::Graphs:
    for (const auto &g : a.graphs)
      if (auto err = exportGraph(*g, *ap.add_graphs()))
        return err;
    break;
  case AttrKind::SparseTensor:
    if (!a.opaque.empty())
      ap.mutable_sparse_tensor()->ParseFromString(a.opaque[0]);
    break;
  case AttrKind::SparseTensors:
    for (const std::string &s : a.opaque)
      ap.add_sparse_tensors()->ParseFromString(s);
    break;
  case AttrKind::TypeProto:
    if (!a.opaque.empty())
      ap.mutable_tp()->ParseFromString(a.opaque[0]);
    break;
  case AttrKind::TypeProtos:
    for (const std::string &s : a.opaque)
      ap.add_type_protos()->ParseFromString(s);
    break;
  case AttrKind::Undefined:
    break;
  }
  return llvm::Error::success();
}

llvm::Error Exporter::exportNode(const Node &n, onnx::NodeProto &np) {
  for (const Value *v : n.inputs())
    np.add_input(v ? v->name() : std::string());
  for (const Value *v : n.outputs())
    np.add_output(v ? v->name() : std::string());
  if (!n.name.empty())
    np.set_name(n.name);
  np.set_op_type(n.opType);
  if (!n.domain.empty())
    np.set_domain(n.domain);
  if (!n.docString.empty())
    np.set_doc_string(n.docString);
  for (const Attribute &a : n.attrs)
    if (auto err = exportAttribute(a, *np.add_attribute()))
      return err;
  restoreUnknownFields(n.unknownFields, np);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Direct wire encoding of nodes
//===----------------------------------------------------------------------===//
//
// Building a NodeProto per node and serializing it was a third of the export
// time. Nodes whose attributes are all scalars or lists of scalars (nearly all
// of them) are written straight in protobuf's wire format, field by field in
// field-number order as protobuf's own serializer does; any other node goes
// through a NodeProto. The bytes are identical either way (the round-trip
// tests and the rewrite benchmark compare them).

/// Encodes `v` as a varint at `p` (room for 10 bytes); returns the end.
static char *encodeVarint(char *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

static void putVarint(WireBuf &out, uint64_t v) {
  char buf[10];
  out.append(buf, encodeVarint(buf, v));
}

enum : unsigned { kVarint = 0, kFixed32 = 5, kLen = 2 };

static void putTag(WireBuf &out, unsigned field, unsigned wire) {
  putVarint(out, (static_cast<uint64_t>(field) << 3) | wire);
}

/// A length-delimited field: tag, length and bytes, appended with one
/// capacity check.
/// (Always inlined: it is most of the node writer's work, and an out-of-line
/// call per field costs more than the copy it saves.)
LLVM_ATTRIBUTE_ALWAYS_INLINE static void putBytes(WireBuf &out, unsigned field,
                                                  llvm::StringRef s) {
  // Room for the longest head (two 10-byte varints), the head encoded in
  // place, then the size cut back: one copy per field, the name's.
  size_t at = out.size();
  out.resize_for_overwrite(at + 20 + s.size());
  char *p = encodeVarint(out.data() + at, (static_cast<uint64_t>(field) << 3) | kLen);
  p = encodeVarint(p, s.size());
  if (!s.empty())
    std::memcpy(p, s.data(), s.size());
  out.truncate(static_cast<size_t>(p - out.data()) + s.size());
}

static void putFixed32(WireBuf &out, unsigned field, float f) {
  putTag(out, field, kFixed32);
  char buf[4];
  std::memcpy(buf, &f, 4); // protobuf writes little-endian; so do our hosts
  out.append(buf, buf + 4);
}

/// Attributes the direct writer handles: scalar, list-of-scalar and graph
/// kinds without unknown fields.
static bool isDirectAttribute(const Attribute &a) {
  if (!a.unknownFields.empty())
    return false;
  switch (a.kind) {
  case AttrKind::Undefined:
  case AttrKind::Float:
  case AttrKind::Int:
  case AttrKind::String:
  case AttrKind::Floats:
  case AttrKind::Ints:
  case AttrKind::Strings:
  case AttrKind::Graph:
  case AttrKind::Graphs:
    return true;
  default:
    return false;
  }
}

/// Bytes of a varint.
static unsigned varintSize(uint64_t v) {
  unsigned n = 1;
  for (; v >= 0x80; v >>= 7)
    ++n;
  return n;
}

/// Bytes of a length-delimited field of `n` bytes whose number is below 16
/// (a one-byte tag).
static size_t lenFieldSize(size_t n) { return 1 + varintSize(n) + n; }

/// Writes a length-delimited field of number < 16 at `p`; returns the end.
static char *encodeBytes(char *p, unsigned field, llvm::StringRef s) {
  *p++ = static_cast<char>((field << 3) | kLen);
  p = encodeVarint(p, s.size());
  if (!s.empty())
    std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

/// A TypeProto.Tensor (or .SparseTensor): elem_type 1, shape 2
/// (TensorShapeProto: dim 1; Dimension: dim_value 1 or dim_param 2,
/// denotation 3). Its bytes are counted first and then written in place:
/// every length prefix is known before the bytes it counts, so nothing is
/// built in a temporary and copied (value infos of small bodies are a large
/// part of the export of a model of many If/Loop nodes).
namespace {
struct TensorTypeWriter {
  const Type &t;
  uint64_t elem;
  size_t shape = 0, body = 0;

  static size_t dimSize(const Dim &d) {
    size_t n = 0;
    if (d.isKnown())
      n += 1 + varintSize(static_cast<uint64_t>(d.value));
    else if (!d.param.empty())
      n += lenFieldSize(d.param.size());
    if (!d.denotation.empty())
      n += lenFieldSize(d.denotation.size());
    return n;
  }

  explicit TensorTypeWriter(const Type &t)
      : t(t), elem(static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(t.elem)))) {
    if (t.hasShape)
      for (const Dim &d : t.dims)
        shape += lenFieldSize(dimSize(d));
    body = 1 + varintSize(elem) + (t.hasShape ? lenFieldSize(shape) : 0);
  }

  /// Writes the message as field `field` (< 16) at `p`; returns the end.
  char *write(char *p, unsigned field) const {
    *p++ = static_cast<char>((field << 3) | kLen);
    p = encodeVarint(p, body);
    *p++ = static_cast<char>((1 << 3) | kVarint);
    p = encodeVarint(p, elem);
    if (!t.hasShape)
      return p;
    *p++ = static_cast<char>((2 << 3) | kLen);
    p = encodeVarint(p, shape);
    for (const Dim &d : t.dims) {
      *p++ = static_cast<char>((1 << 3) | kLen);
      p = encodeVarint(p, dimSize(d));
      if (d.isKnown()) {
        *p++ = static_cast<char>((1 << 3) | kVarint);
        p = encodeVarint(p, static_cast<uint64_t>(d.value));
      } else if (!d.param.empty()) {
        p = encodeBytes(p, 2, d.param.ref());
      }
      if (!d.denotation.empty())
        p = encodeBytes(p, 3, d.denotation.ref());
    }
    return p;
  }

  /// Appends the message as field `field` (< 16) to `out`.
  void append(WireBuf &out, unsigned field) const {
    size_t at = out.size(), size = lenFieldSize(body);
    out.resize_for_overwrite(at + size);
    char *end = write(out.data() + at, field);
    (void)end;
    assert(end == out.data() + at + size && "tensor type size mismatch");
  }
};
} // namespace

/// A TypeProto's fields, as exportType sets them. Fields go in number order:
/// tensor_type 1, sequence_type 4, map_type 5, denotation 6,
/// sparse_tensor_type 8, optional_type 9 (the types are a oneof).
static void writeType(const Type &t, WireBuf &out) {
  // Sequence and Optional: elem_type 1; Map: key_type 1, value_type 2.
  auto wrapped = [&](unsigned field) {
    llvm::SmallString<64> body, inner;
    if (t.kind == TypeKind::Map) {
      putTag(body, 1, kVarint);
      putVarint(body, static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(t.elem))));
    }
    if (t.inner) {
      writeType(*t.inner, inner);
      putBytes(body, t.kind == TypeKind::Map ? 2 : 1, inner);
    }
    putBytes(out, field, body);
  };
  auto denotation = [&] {
    if (!t.denotation.empty())
      putBytes(out, 6, t.denotation.ref());
  };
  switch (t.kind) {
  case TypeKind::Unknown:
    denotation();
    return;
  case TypeKind::Tensor:
    TensorTypeWriter(t).append(out, 1);
    denotation();
    return;
  case TypeKind::Sequence:
    wrapped(4);
    denotation();
    return;
  case TypeKind::Map:
    wrapped(5);
    denotation();
    return;
  case TypeKind::SparseTensor:
    denotation();
    TensorTypeWriter(t).append(out, 8);
    return;
  case TypeKind::Optional:
    denotation();
    wrapped(9);
    return;
  }
}

/// A ValueInfoProto's fields, as exportValueInfo sets them: name 1, type 2,
/// doc_string 3.
static void writeValueInfo(const Value &v, WireBuf &out) {
  putBytes(out, 1, v.name());
  if (v.type.kind == TypeKind::Tensor && v.type.denotation.empty()) {
    // The common case, written in place: TypeProto { tensor_type 1 }.
    TensorTypeWriter tt(v.type);
    size_t typeSize = lenFieldSize(tt.body);
    size_t at = out.size(), size = lenFieldSize(typeSize);
    out.resize_for_overwrite(at + size);
    char *p = out.data() + at;
    *p++ = static_cast<char>((2 << 3) | kLen);
    p = encodeVarint(p, typeSize);
    p = tt.write(p, 1);
    (void)p;
    assert(p == out.data() + at + size && "value info size mismatch");
  } else if (v.type.isKnown()) {
    llvm::SmallString<64> type;
    writeType(v.type, type);
    putBytes(out, 2, type);
  }
  if (!v.docString.empty())
    putBytes(out, 3, v.docString.ref());
}

/// AttributeProto fields, in field-number order: name 1, f 2, i 3, s 4, g 6,
/// floats 7, ints 8, strings 9, graphs 11, doc_string 13, type 20,
/// ref_attr_name 21.
llvm::Error Exporter::writeAttribute(const Attribute &a, WireBuf &out) {
  putBytes(out, 1, a.name);
  llvm::SmallString<512> graph; // a small body fits: no allocation
  auto putGraph = [&](const Graph &g) -> llvm::Error {
    graph.clear();
    if (auto err = writeGraph(g, graph))
      return err;
    putBytes(out, a.kind == AttrKind::Graph ? 6 : 11, graph);
    return llvm::Error::success();
  };
  switch (a.kind) {
  case AttrKind::Float:
    putFixed32(out, 2, a.f);
    break;
  case AttrKind::Int:
    putTag(out, 3, kVarint);
    putVarint(out, static_cast<uint64_t>(a.i));
    break;
  case AttrKind::String:
    putBytes(out, 4, a.s);
    break;
  case AttrKind::Floats:
    for (float f : a.floats) // proto2 repeated scalars: not packed
      putFixed32(out, 7, f);
    break;
  case AttrKind::Ints:
    for (int64_t i : a.ints) {
      putTag(out, 8, kVarint);
      putVarint(out, static_cast<uint64_t>(i));
    }
    break;
  case AttrKind::Strings:
    for (const std::string &s : a.strings)
      putBytes(out, 9, s);
    break;
  case AttrKind::Graph:
    if (!a.graphs.empty())
      if (auto err = putGraph(*a.graphs[0]))
        return err;
    break;
  case AttrKind::Graphs:
    for (const auto &g : a.graphs)
      if (auto err = putGraph(*g))
        return err;
    break;
  default:
    break;
  }
  if (!a.docString.empty())
    putBytes(out, 13, a.docString.ref());
  putTag(out, 20, kVarint);
  putVarint(out, static_cast<uint64_t>(static_cast<int64_t>(a.kind)));
  if (!a.refAttrName.empty())
    putBytes(out, 21, a.refAttrName.ref());
  return llvm::Error::success();
}

/// A length-delimited field (tag, length, `payload`) appended to `out`.
template <typename Sink> static void appendField(Sink &out, unsigned field, llvm::StringRef payload) {
  llvm::SmallString<16> head;
  putTag(head, field, kLen);
  putVarint(head, payload.size());
  out.append(head);
  out.append(payload);
}

/// Appends the serialized `Msg` that `fill` builds: the route through
/// protobuf's classes for the rare pieces the direct writer leaves to them.
template <typename Msg, typename Fill> static llvm::Error appendViaProto(WireBuf &out, Fill fill) {
  pb::Arena arena;
  Msg &msg = *pb::Arena::CreateMessage<Msg>(&arena);
  if (auto err = fill(msg))
    return err;
  std::string bytes;
  msg.AppendToString(&bytes);
  out.append(bytes.begin(), bytes.end());
  return llvm::Error::success();
}

llvm::Error Exporter::writeNode(const Node &n, WireBuf &out) {
  bool direct = n.unknownFields.empty();
  for (const Attribute &a : n.attrs)
    direct = direct && isDirectAttribute(a);
  if (!direct) {
    // Rare: tensor attributes, unknown fields; protobuf writes these.
    return appendViaProto<onnx::NodeProto>(
        out, [&](onnx::NodeProto &np) { return exportNode(n, np); });
  }
  // NodeProto fields: input 1, output 2, name 3, op_type 4, attribute 5,
  // doc_string 6, domain 7.
  for (const Value *v : n.inputs())
    putBytes(out, 1, v ? llvm::StringRef(v->name()) : llvm::StringRef());
  for (const Value *v : n.outputs())
    putBytes(out, 2, v ? llvm::StringRef(v->name()) : llvm::StringRef());
  if (!n.name.empty())
    putBytes(out, 3, n.name);
  putBytes(out, 4, n.opType);
  llvm::SmallString<128> attr;
  for (const Attribute &a : n.attrs) {
    attr.clear();
    if (auto err = writeAttribute(a, attr))
      return err;
    putBytes(out, 5, attr);
  }
  if (!n.docString.empty())
    putBytes(out, 6, n.docString.ref());
  if (!n.domain.empty())
    putBytes(out, 7, n.domain);
  return llvm::Error::success();
}

llvm::Error Exporter::writeNodesDirect(const Graph &g, ChunkedBytes &out) {
  llvm::SmallString<512> node;
  nodesTotal = g.size();
  nodesDone = 0;
  for (const Node &n : g.nodes()) {
    node.clear();
    if (auto err = writeNode(n, node))
      return err;
    appendField(out, 1, node);
    ++nodesDone;
  }
  return llvm::Error::success();
}

/// Appends to a WireBuf what ChunkedBytes::append appends.
struct WireSink {
  WireBuf &buf;
  void append(llvm::StringRef s) { buf.append(s.begin(), s.end()); }
};

/// GraphProto fields, in number order: node 1, name 2, initializer 5,
/// doc_string 10, input 11, output 12, value_info 13; a graph with other
/// fields (sparse initializers, quantization annotations, unknown fields)
/// goes through a GraphProto.
llvm::Error Exporter::writeGraph(const Graph &g, WireBuf &out) {
  if (auto err = checkGraphDepth(g))
    return err;
  if (!g.unknownFields.empty() || !g.sparseInitializers.empty() ||
      !g.quantizationAnnotations.empty()) {
    return appendViaProto<onnx::GraphProto>(
        out, [&](onnx::GraphProto &gp) { return exportGraph(g, gp); });
  }
  // Initializers are written before the nodes, as exportGraph does: tensors
  // stored as external data land in the file in that order.
  llvm::SmallString<0> inits;
  WireSink initSink{inits};
  for (const Value *v : g.initializers())
    if (auto err = writeTensorDirect(*v->initializer(), initSink))
      return err;
  llvm::SmallString<256> node;
  for (const Node &n : g.nodes()) {
    node.clear();
    if (auto err = writeNode(n, node))
      return err;
    putBytes(out, 1, node);
  }
  putBytes(out, 2, g.name);
  out.append(inits.begin(), inits.end());
  if (!g.docString.empty())
    putBytes(out, 10, g.docString.ref());
  llvm::SmallString<64> info;
  auto putInfo = [&](unsigned field, const Value &v) {
    info.clear();
    writeValueInfo(v, info);
    putBytes(out, field, info);
  };
  for (const Value *v : g.inputs())
    putInfo(11, *v);
  for (const Value *v : g.outputs())
    putInfo(12, *v);
  for (const Node &n : g.nodes())
    for (const Value *v : n.outputs())
      if (v && v->hasValueInfo && !v->isGraphOutput() && v->type.isKnown())
        putInfo(13, *v);
  return llvm::Error::success();
}

/// TensorProto fields, in field-number order: dims 1 (not packed), data_type
/// 2, name 8, raw_data 9, doc_string 12. In-memory numeric tensors without
/// unknown fields only, and not while writing external data; the rest go
/// through exportTensor.
template <typename Sink> llvm::Error Exporter::writeTensorDirect(const Tensor &t, Sink &out) {
  llvm::SmallString<128> body;
  bool plain = t.unknownFields.empty() && t.dtype != DType::String && !t.isExternal() &&
               !(sink && sink->os);
  if (!plain) {
    onnx::TensorProto &tp = *pb::Arena::CreateMessage<onnx::TensorProto>(&scratchArena);
    if (auto err = exportTensor(t, tp))
      return err;
    std::string bytes;
    tp.AppendToString(&bytes);
    appendField(out, 5, bytes);
    return llvm::Error::success();
  }
  // The header (dims, data_type, name) is built first; the data is appended
  // straight to `out` (one copy of the weights, not two).
  for (int64_t d : t.dims) {
    putTag(body, 1, kVarint);
    putVarint(body, static_cast<uint64_t>(d));
  }
  putTag(body, 2, kVarint);
  putVarint(body, static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(t.dtype))));
  if (!t.name.empty())
    putBytes(body, 8, t.name);
  llvm::ArrayRef<uint8_t> raw = t.bytes();
  llvm::SmallString<16> rawHead;
  putTag(rawHead, 9, kLen);
  putVarint(rawHead, raw.size());
  llvm::SmallString<64> doc;
  if (!t.docString.empty())
    putBytes(doc, 12, t.docString.ref());
  llvm::SmallString<16> head;
  putTag(head, 5, kLen);
  putVarint(head, body.size() + rawHead.size() + raw.size() + doc.size());
  out.append(head);
  out.append(body);
  out.append(rawHead);
  out.append(llvm::StringRef(reinterpret_cast<const char *>(raw.data()), raw.size()));
  out.append(doc);
  return llvm::Error::success();
}

llvm::Error Exporter::exportGraph(const Graph &g, onnx::GraphProto &gp) {
  // Nested graphs are exported recursively, one level each.
  if (auto err = checkGraphDepth(g))
    return err;
  gp.set_name(g.name);
  if (!g.docString.empty())
    gp.set_doc_string(g.docString);
  restoreUnknownFields(g.unknownFields, gp);

  for (const Value *v : g.inputs())
    exportValueInfo(*v, *gp.add_input());
  for (const Value *v : g.initializers()) {
    if (&g == streamGraph) {
      if (auto err = writeTensorDirect(*v->initializer(), *streamInits))
        return err;
    } else if (auto err = exportTensor(*v->initializer(), *gp.add_initializer())) {
      return err;
    }
  }
  for (const std::string &s : g.sparseInitializers)
    gp.add_sparse_initializer()->ParseFromString(s);

  if (&g == streamGraph) {
    if (auto err = writeNodesDirect(g, *streamNodes))
      return err;
  } else {
    for (const Node &n : g.nodes())
      if (auto err = exportNode(n, *gp.add_node()))
        return err;
  }

  for (const Value *v : g.outputs())
    exportValueInfo(*v, *gp.add_output());
  // value_info: intermediate values that carried one, in node order.
  for (const Node &n : g.nodes())
    for (const Value *v : n.outputs())
      if (v && v->hasValueInfo && !v->isGraphOutput() && v->type.isKnown())
        exportValueInfo(*v, *gp.add_value_info());
  for (const std::string &s : g.quantizationAnnotations)
    gp.add_quantization_annotation()->ParseFromString(s);
  return llvm::Error::success();
}

llvm::Error Exporter::exportModel(Model &m, onnx::ModelProto &p) {
  p.set_ir_version(m.irVersion);
  for (const OpsetId &o : m.opsets) {
    auto *op = p.add_opset_import();
    op->set_domain(o.domain);
    op->set_version(o.version);
  }
  if (!m.producerName.empty())
    p.set_producer_name(m.producerName);
  if (!m.producerVersion.empty())
    p.set_producer_version(m.producerVersion);
  if (!m.domain.empty())
    p.set_domain(m.domain);
  if (m.modelVersion)
    p.set_model_version(m.modelVersion);
  if (!m.docString.empty())
    p.set_doc_string(m.docString);
  exportProps(m.metadataProps, p.mutable_metadata_props());
  if (auto err = exportGraph(*m.graph, *p.mutable_graph()))
    return err;
  for (const TrainingInfo &ti : m.trainingInfo) {
    auto *tp = p.add_training_info();
    if (ti.initialization)
      if (auto err = exportGraph(*ti.initialization, *tp->mutable_initialization()))
        return err;
    if (ti.algorithm)
      if (auto err = exportGraph(*ti.algorithm, *tp->mutable_algorithm()))
        return err;
    for (const auto &kv : ti.initializationBinding) {
      auto *e = tp->add_initialization_binding();
      e->set_key(kv.first);
      e->set_value(kv.second);
    }
    for (const auto &kv : ti.updateBinding) {
      auto *e = tp->add_update_binding();
      e->set_key(kv.first);
      e->set_value(kv.second);
    }
  }
  for (const std::string &f : m.functions)
    p.add_functions()->ParseFromString(f);
  restoreUnknownFields(m.unknownFields, p);
  return llvm::Error::success();
}

llvm::Error Exporter::exportModelStreamingNodes(Model &m, onnx::ModelProto &p,
                                                ChunkedBytes &mainNodes,
                                                ChunkedBytes &mainInitializers) {
  streamGraph = m.graph.get();
  streamNodes = &mainNodes;
  streamInits = &mainInitializers;
  llvm::Error err = exportModel(m, p);
  streamGraph = nullptr;
  streamNodes = streamInits = nullptr;
  return err;
}

llvm::Error mpc::exportOnnx(Model &m, onnx::ModelProto &proto) {
  Exporter e(nullptr);
  return e.exportModel(m, proto);
}

static std::string serializeDeterministic(const pb::MessageLite &p) {
  std::string out;
  {
    pb::io::StringOutputStream sos(&out);
    pb::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    p.SerializeToCodedStream(&cos);
  }
  return out;
}

llvm::Expected<std::string> mpc::exportOnnxBytes(Model &m) {
  pb::Arena arena;
  onnx::ModelProto &p = *pb::Arena::CreateMessage<onnx::ModelProto>(&arena);
  if (auto err = exportOnnx(m, p))
    return std::move(err);
  return serializeDeterministic(p);
}

/// Writes `bytes` to `path` through a temporary file in the same folder.
static llvm::Error atomicWrite(llvm::StringRef path,
                               llvm::function_ref<llvm::Error(llvm::raw_fd_ostream &)> fill) {
  llvm::SmallString<256> tmp;
  int fd;
  std::string model = (llvm::sys::path::filename(path) + ".tmp-%%%%%%").str();
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  if (!llvm::sys::fs::is_directory(dir))
    return inputError("output folder '{0}' does not exist", dir);
  llvm::SmallString<256> pattern(dir);
  llvm::sys::path::append(pattern, model);
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(pattern, fd, tmp))
    return inputError("cannot create a file in '{0}': {1}", dir, ec.message());
  llvm::Error err = llvm::Error::success();
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    err = fill(os);
    os.close();
    if (!err && os.has_error()) {
      err = inputError("cannot write '{0}': {1}", path, os.error().message());
      os.clear_error();
    }
  }
  if (!err)
    if (std::error_code ec = llvm::sys::fs::rename(tmp, path))
      err = inputError("cannot write '{0}': {1}", path, ec.message());
  if (err)
    llvm::sys::fs::remove(tmp);
  return err;
}

/// The serialized model, in pieces that concatenate to what
/// serializeDeterministic gives for the whole ModelProto: `head` holds the
/// fields numbered below graph's 7, then comes the graph field (tag, length,
/// the streamed node bytes, the graph's other fields), then `tail`.
struct ModelBytes {
  std::string head, graphRest, tail;
  llvm::SmallString<16> graphTag;
  /// GraphProto fields 1 (nodes), 2 (name) and 5 (initializers); graphRest
  /// holds the graph's other fields (10 and above, unknown fields last).
  ChunkedBytes nodes, inits;
  NodeBytes graphName;
  size_t size() const {
    return head.size() + graphTag.size() + nodes.size() + graphName.size() + inits.size() +
           graphRest.size() + tail.size();
  }
};

/// ModelProto fields 1-6, which precede the graph (7), serialized.
static std::string serializeHead(const onnx::ModelProto &p, pb::Arena &arena) {
  onnx::ModelProto &head = *pb::Arena::CreateMessage<onnx::ModelProto>(&arena);
  if (p.has_ir_version())
    head.set_ir_version(p.ir_version());
  if (p.has_producer_name())
    head.set_producer_name(p.producer_name());
  if (p.has_producer_version())
    head.set_producer_version(p.producer_version());
  if (p.has_domain())
    head.set_domain(p.domain());
  if (p.has_model_version())
    head.set_model_version(p.model_version());
  if (p.has_doc_string())
    head.set_doc_string(p.doc_string());
  return serializeDeterministic(head);
}

static ModelBytes splitSerialize(onnx::ModelProto &p, ChunkedBytes nodes, ChunkedBytes inits,
                                 pb::Arena &arena) {
  ModelBytes b;
  // ModelProto fields 1-6 precede the graph (7); everything else follows it.
  b.head = serializeHead(p, arena);
  p.clear_ir_version();
  p.clear_producer_name();
  p.clear_producer_version();
  p.clear_domain();
  p.clear_model_version();
  p.clear_doc_string();
  onnx::GraphProto &g = *p.mutable_graph();
  if (g.has_name())
    putBytes(b.graphName, 2, g.name());
  g.clear_name();
  b.graphRest = serializeDeterministic(g);
  b.nodes = std::move(nodes);
  b.inits = std::move(inits);
  p.clear_graph();
  b.tail = serializeDeterministic(p);
  putTag(b.graphTag, 7, kLen);
  putVarint(b.graphTag,
            b.nodes.size() + b.graphName.size() + b.inits.size() + b.graphRest.size());
  return b;
}

/// Writes `b` from the graph's nodes on (the bytes of them still held).
static void writeFromNodes(llvm::raw_ostream &os, const ModelBytes &b) {
  b.nodes.writeTo(os);
  os.write(b.graphName.data(), b.graphName.size());
  b.inits.writeTo(os);
  os << b.graphRest << b.tail;
}

/// Writes a model without external data. The main graph's nodes (GraphProto
/// field 1, most of the file) go to the file while they are exported, once
/// more than `o.streamNodesAfter` bytes of them are held: the file is then
/// written through a few MiB of memory instead of a copy of the whole file.
/// The graph's length, which precedes them, is known only at the end: its
/// varint takes the width estimated when streaming starts (from the bytes so
/// far and the share of nodes written), and is filled in at the end. When the
/// estimate's width was wrong (a graph whose length crosses 2^28 bytes after
/// the estimate), the model is written again with every byte held.
static llvm::Error writePlainOnnxFile(Model &m, llvm::StringRef path, const ExportOptions &o) {
  bool rewrite = false;
  llvm::Error err = atomicWrite(path, [&](llvm::raw_fd_ostream &os) -> llvm::Error {
    pb::Arena arena;
    onnx::ModelProto &p = *pb::Arena::CreateMessage<onnx::ModelProto>(&arena);
    ChunkedBytes nodes, inits;
    Exporter e(nullptr);
    uint64_t lengthAt = 0;
    unsigned lengthWidth = 0; // 0: nothing streamed
    nodes.streamTo(o.streamNodesAfter, [&](const ChunkedBytes &held) {
      if (!lengthWidth) {
        // exportModel has set the fields before the graph (1-6) by now.
        os << serializeHead(p, arena);
        llvm::SmallString<16> tag;
        putTag(tag, 7, kLen);
        os << tag;
        double share = e.nodesTotal ? double(e.nodesDone) / e.nodesTotal : 1.0;
        uint64_t estimate = inits.size() + static_cast<uint64_t>(held.size() / std::max(share, 1e-9));
        lengthWidth = varintSize(std::min<uint64_t>(estimate, INT32_MAX));
        lengthAt = os.tell();
        os.write_zeros(lengthWidth);
      }
      held.writeTo(os);
    });
    if (auto err = e.exportModelStreamingNodes(m, p, nodes, inits))
      return err;
    ModelBytes bytes = splitSerialize(p, std::move(nodes), std::move(inits), arena);
    if (bytes.size() > INT32_MAX)
      return inputError("the model is larger than 2 GiB; write it with external data");
    if (!lengthWidth) {
      os << bytes.head << bytes.graphTag;
    } else if (bytes.graphTag.size() != 1 + lengthWidth) {
      rewrite = true;
      return inputError("the graph's length was mis-estimated"); // not shown: written again
    }
    writeFromNodes(os, bytes);
    if (lengthWidth)
      os.pwrite(bytes.graphTag.data() + 1, lengthWidth, lengthAt);
    if (o.stats)
      o.stats->bytesStreamed = lengthWidth ? bytes.nodes.size() - bytes.nodes.heldSize() : 0;
    return llvm::Error::success();
  });
  if (!rewrite)
    return err;
  llvm::consumeError(std::move(err));
  ExportOptions held = o;
  held.streamNodesAfter = SIZE_MAX;
  if (o.stats)
    ++o.stats->rewrites;
  return writePlainOnnxFile(m, path, held);
}

llvm::Error mpc::writeOnnxFile(Model &m, llvm::StringRef path, const ExportOptions &opts) {
  if (opts.externalDataFile.empty())
    return writePlainOnnxFile(m, path, opts);
  pb::Arena arena;
  onnx::ModelProto &p = *pb::Arena::CreateMessage<onnx::ModelProto>(&arena);
  ChunkedBytes nodes, inits;
  llvm::SmallString<256> dataPath(path);
  llvm::sys::path::remove_filename(dataPath);
  llvm::sys::path::append(dataPath, opts.externalDataFile);
  if (auto err = atomicWrite(dataPath, [&](llvm::raw_fd_ostream &os) {
        ExternalSink sink{&os, opts.externalDataFile, opts.externalThreshold, 0};
        Exporter e(&sink);
        return e.exportModelStreamingNodes(m, p, nodes, inits);
      }))
    return err;
  ModelBytes bytes = splitSerialize(p, std::move(nodes), std::move(inits), arena);
  if (bytes.size() > INT32_MAX)
    return inputError("the model is larger than 2 GiB; write it with external data");
  return atomicWrite(path, [&](llvm::raw_fd_ostream &os) {
    os << bytes.head << bytes.graphTag;
    writeFromNodes(os, bytes);
    return llvm::Error::success();
  });
}
