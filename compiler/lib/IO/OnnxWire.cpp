//===- OnnxWire.cpp - Reading ONNX protobuf wire bytes ---------------------===//
//
// Reads the hot parts of a model, the main graph's nodes and initializers,
// straight from the file's protobuf wire bytes with protobuf's own
// CodedInputStream and WireFormatLite: names are StringRefs into the file
// buffer, tensor data is copied once, into the IR. A message holding anything
// else (tensor or graph attributes, typed or external data, unknown fields,
// a singular message given twice, which protobuf merges) is parsed with its
// generated class instead, so the IR comes out the same either way.
//
//===----------------------------------------------------------------------===//
#include "OnnxWire.h"
#include "mpc/IR/Limits.h"
#include "mpc/Support/Diagnostics.h"
#include <cstring>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <utility>

using namespace mpc;
using namespace mpc::onnxio;
namespace pb = google::protobuf;
using WFL = pb::internal::WireFormatLite;

static constexpr uint32_t tagOf(int field, WFL::WireType wire) { return WFL::MakeTag(field, wire); }
static constexpr WFL::WireType kVarint = WFL::WIRETYPE_VARINT;
static constexpr WFL::WireType kLen = WFL::WIRETYPE_LENGTH_DELIMITED;
static constexpr WFL::WireType kFixed32 = WFL::WIRETYPE_FIXED32;

namespace {

/// One message's bytes; length-delimited fields come back as StringRefs into
/// them. Readers return false for malformed bytes. A plain loop over the
/// bytes: a CodedInputStream per message cost more than decoding the small
/// messages (value infos, dimensions) themselves. It is at least as strict as
/// protobuf's parser (groups, over-long tags and sizes are refused), so any
/// message it refuses is left to that parser, which decides.
class WireReader {
public:
  explicit WireReader(llvm::StringRef bytes)
      : p(reinterpret_cast<const uint8_t *>(bytes.data())), end(p + bytes.size()),
        start(p) {}

  bool atEnd() const { return p >= end; }
  int position() const { return static_cast<int>(p - start); }
  /// 0 for a malformed tag (0 is no valid tag).
  uint32_t tag() {
    uint64_t v;
    if (!varint(v, 5) || v > UINT32_MAX || (v >> 3) == 0)
      return 0;
    return static_cast<uint32_t>(v);
  }
  bool skip(uint32_t tag) {
    uint64_t v;
    switch (WFL::GetTagWireType(tag)) {
    case WFL::WIRETYPE_VARINT:
      return varint(v, 10);
    case WFL::WIRETYPE_FIXED64:
      return advance(8);
    case WFL::WIRETYPE_FIXED32:
      return advance(4);
    case WFL::WIRETYPE_LENGTH_DELIMITED: {
      llvm::StringRef s;
      return bytes(s);
    }
    default: // groups: left to protobuf
      return false;
    }
  }

  bool bytes(llvm::StringRef &out) {
    uint64_t len;
    if (!varint(len, 5) || len > INT32_MAX || len > static_cast<uint64_t>(end - p))
      return false;
    out = llvm::StringRef(reinterpret_cast<const char *>(p), static_cast<size_t>(len));
    p += len;
    return true;
  }
  bool string(std::string &out) {
    llvm::StringRef s;
    if (!bytes(s))
      return false;
    out.assign(s.data(), s.size());
    return true;
  }
  bool string(RareString &out) {
    llvm::StringRef s;
    if (!bytes(s))
      return false;
    out = s;
    return true;
  }
  /// A repeated string field: one more element.
  bool addString(std::vector<std::string> &out) {
    out.emplace_back();
    return string(out.back());
  }
  /// A value of field type F (varint int32/int64/enum, or fixed32 float).
  template <typename T, WFL::FieldType F> bool scalar(T &v) {
    if constexpr (F == WFL::TYPE_FLOAT) {
      static_assert(sizeof(T) == 4, "a float");
      if (end - p < 4)
        return false;
      std::memcpy(&v, p, 4); // little-endian, as our hosts
      p += 4;
      return true;
    } else {
      static_assert(F == WFL::TYPE_INT64 || F == WFL::TYPE_INT32 || F == WFL::TYPE_ENUM,
                    "a varint type");
      uint64_t x;
      if (!varint(x, 10))
        return false;
      // int32 and enum values keep the low 32 bits, as protobuf does.
      v = static_cast<T>(static_cast<int64_t>(x));
      return true;
    }
  }
  /// A repeated scalar field: one value, or a packed run when `tag` is
  /// length-delimited.
  template <typename T, WFL::FieldType F, typename Vec> bool repeated(uint32_t tag, Vec &out) {
    T v;
    if (WFL::GetTagWireType(tag) != kLen) {
      if (!scalar<T, F>(v))
        return false;
      out.push_back(v);
      return true;
    }
    llvm::StringRef run;
    if (!bytes(run))
      return false;
    WireReader packed(run);
    while (!packed.atEnd()) {
      if (!packed.scalar<T, F>(v))
        return false;
      out.push_back(v);
    }
    return true;
  }

private:
  const uint8_t *p, *end, *start;

  bool advance(size_t n) {
    if (static_cast<size_t>(end - p) < n)
      return false;
    p += n;
    return true;
  }
  /// A varint of at most `maxBytes` bytes (bits past 64 are dropped, as
  /// protobuf drops them).
  bool varint(uint64_t &v, int maxBytes) {
    v = 0;
    for (int i = 0; i < maxBytes && p < end; ++i) {
      uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if (!(b & 0x80))
        return true;
    }
    return false;
  }
};

} // namespace

bool onnxio::parseAt(llvm::StringRef bytes, int depth, pb::MessageLite &msg) {
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                              static_cast<int>(bytes.size()));
  in.SetRecursionLimit(kRecursionLimit - depth);
  return msg.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

/// Calls `field(reader, tag)` for each field of the message in `bytes`, which
/// reads the field's value; false as soon as one returns false (malformed
/// bytes, or a field the caller leaves to protobuf).
template <typename Fn> static bool forEachField(llvm::StringRef bytes, Fn field) {
  WireReader r(bytes);
  while (!r.atEnd())
    if (!field(r, r.tag()))
      return false;
  return true;
}

bool onnxio::decodePlainAttribute(llvm::StringRef bytes, Attribute &a, AttrGraphBytes *graphs) {
  return forEachField(bytes, [&](WireReader &r, uint32_t tag) {
    int type = 0;
    switch (tag) {
    case tagOf(1, kLen):
      return r.string(a.name);
    case tagOf(2, kFixed32):
      return r.scalar<float, WFL::TYPE_FLOAT>(a.f);
    case tagOf(3, kVarint):
      return r.scalar<int64_t, WFL::TYPE_INT64>(a.i);
    case tagOf(4, kLen):
      return r.string(a.s);
    case tagOf(7, kFixed32):
    case tagOf(7, kLen):
      return r.repeated<float, WFL::TYPE_FLOAT>(tag, a.floats.mut());
    case tagOf(8, kVarint):
    case tagOf(8, kLen):
      return r.repeated<int64_t, WFL::TYPE_INT64>(tag, a.ints.mut());
    case tagOf(9, kLen):
      return r.addString(a.strings.mut());
    case tagOf(13, kLen):
      return r.string(a.docString);
    case tagOf(20, kVarint):
      // An enum value this ONNX build lacks is an unknown field to protobuf.
      if (!r.scalar<int, WFL::TYPE_ENUM>(type) || !onnx::AttributeProto_AttributeType_IsValid(type))
        return false;
      a.kind = static_cast<AttrKind>(type);
      return true;
    case tagOf(21, kLen):
      return r.string(a.refAttrName);
    case tagOf(6, kLen): // g: protobuf merges a second one, which is left to it
      return graphs && !std::exchange(graphs->hasG, true) && r.bytes(graphs->g);
    case tagOf(11, kLen):
      return graphs && r.bytes(graphs->list.emplace_back());
    default: // tensors, type protos, unknown fields
      return false;
    }
  });
}

/// A message of the main graph: read from the wire when `decode` takes it,
/// else parsed as a `Msg` (at `depth`) and handed to `parsed`. False when it
/// does not parse.
template <typename Msg, typename Decode, typename Parsed>
static bool decodeOrParse(llvm::StringRef bytes, int depth, pb::Arena &arena, Decode decode,
                          Parsed parsed) {
  if (decode())
    return true;
  const Msg *m = parseIn<Msg>(arena, bytes, depth);
  if (!m)
    return false;
  parsed(*m);
  return true;
}

/// A NodeProto without unknown fields; attributes are checked later, one by
/// one (decodePlainAttribute).
static bool decodeNode(llvm::StringRef bytes, GraphView &g) {
  NodeView n;
  n.firstName = static_cast<unsigned>(g.names.size());
  n.firstAttr = static_cast<unsigned>(g.attrs.size());
  llvm::SmallVector<llvm::StringRef, 4> outputs; // inputs and outputs may interleave
  bool ok = forEachField(bytes, [&](WireReader &r, uint32_t tag) {
    switch (tag) {
    case tagOf(1, kLen):
      return r.bytes(g.names.emplace_back());
    case tagOf(2, kLen):
      return r.bytes(outputs.emplace_back());
    case tagOf(3, kLen):
      return r.bytes(n.name);
    case tagOf(4, kLen):
      return r.bytes(n.opType);
    case tagOf(5, kLen):
      return r.bytes(g.attrs.emplace_back().wire);
    case tagOf(6, kLen):
      return r.bytes(n.docString);
    case tagOf(7, kLen):
      return r.bytes(n.domain);
    default: // unknown fields
      return false;
    }
  });
  if (!ok) {
    g.names.resize(n.firstName);
    g.attrs.resize(n.firstAttr);
    return false;
  }
  n.numInputs = static_cast<unsigned>(g.names.size()) - n.firstName;
  n.numOutputs = static_cast<unsigned>(outputs.size());
  n.numAttrs = static_cast<unsigned>(g.attrs.size()) - n.firstAttr;
  g.names.insert(g.names.end(), outputs.begin(), outputs.end());
  g.nodes.push_back(n);
  return true;
}

/// A TensorProto with raw_data and only dims, data_type, name and
/// doc_string besides.
static bool decodeTensor(llvm::StringRef bytes, LargeVector<TensorView> &list) {
  TensorView &t = list.emplace_back();
  bool ok = forEachField(bytes, [&](WireReader &r, uint32_t tag) {
    switch (tag) {
    case tagOf(1, kVarint):
    case tagOf(1, kLen):
      return r.repeated<int64_t, WFL::TYPE_INT64>(tag, t.dims);
    case tagOf(2, kVarint):
      return r.scalar<int32_t, WFL::TYPE_INT32>(t.dataType);
    case tagOf(8, kLen):
      return r.bytes(t.name);
    case tagOf(9, kLen):
      return t.hasRawData = r.bytes(t.rawData);
    case tagOf(12, kLen):
      return r.bytes(t.docString);
    default: // typed or external data, segments, unknown fields
      return false;
    }
  });
  if (ok && t.hasRawData)
    return true;
  list.pop_back();
  return false;
}

/// A TensorShapeProto.Dimension; dim_value and dim_param are a oneof.
static bool decodeDim(llvm::StringRef bytes, Dim &d) {
  return forEachField(bytes, [&](WireReader &r, uint32_t tag) {
    switch (tag) {
    case tagOf(1, kVarint):
      d.param.clear();
      return r.scalar<int64_t, WFL::TYPE_INT64>(d.value);
    case tagOf(2, kLen):
      d.value = -1;
      return r.string(d.param);
    case tagOf(3, kLen):
      return r.string(d.denotation);
    default:
      return false;
    }
  });
}

/// A TypeProto.Tensor: elem_type, and a shape given at most once (protobuf
/// merges repeated ones).
static bool decodeTensorType(llvm::StringRef bytes, ValueInfoView &vi) {
  Type &t = vi.tensorType;
  llvm::StringRef shape;
  bool ok = forEachField(bytes, [&](WireReader &r, uint32_t tag) {
    switch (tag) {
    case tagOf(1, kVarint):
      return r.scalar<int32_t, WFL::TYPE_INT32>(vi.elemType);
    case tagOf(2, kLen):
      return !std::exchange(t.hasShape, true) && r.bytes(shape);
    default:
      return false;
    }
  });
  // A dimension takes four or five bytes (tag, length, a small dim_value):
  // room for them all, usually, without growing.
  t.dims.reserve(shape.size() / 4 + 1);
  return ok && forEachField(shape, [&](WireReader &r, uint32_t tag) {
           llvm::StringRef dim;
           return tag == tagOf(1, kLen) && r.bytes(dim) && decodeDim(dim, t.dims.emplace_back());
         });
}

/// A ValueInfoProto whose type, if any, is a tensor type (TypeProto fields
/// tensor_type 1 and denotation 6; message fields given at most once).
static bool decodeValueInfoFields(llvm::StringRef bytes, ValueInfoView &vi) {
  llvm::StringRef type, tensor;
  bool hasType = false, hasTensor = false;
  bool ok = forEachField(bytes, [&](WireReader &r, uint32_t tag) {
    switch (tag) {
    case tagOf(1, kLen):
      return r.bytes(vi.name);
    case tagOf(2, kLen):
      return !std::exchange(hasType, true) && r.bytes(type);
    case tagOf(3, kLen):
      return r.bytes(vi.docString);
    default:
      return false;
    }
  });
  if (!ok)
    return false;
  if (!hasType) {
    vi.type = &onnx::TypeProto::default_instance();
    return true;
  }
  vi.tensorType.kind = TypeKind::Tensor;
  ok = forEachField(type, [&](WireReader &r, uint32_t tag) {
    switch (tag) {
    case tagOf(1, kLen):
      return !std::exchange(hasTensor, true) && r.bytes(tensor) && decodeTensorType(tensor, vi);
    case tagOf(6, kLen):
      return r.string(vi.tensorType.denotation);
    default:
      return false;
    }
  });
  // Without a tensor_type (a denotation alone) the parsed path decides.
  return ok && hasTensor;
}

static bool decodeValueInfo(llvm::StringRef bytes, std::vector<ValueInfoView> &list) {
  if (decodeValueInfoFields(bytes, list.emplace_back()))
    return true;
  list.pop_back();
  return false;
}

/// Sizes the view lists of a GraphProto's bytes, so that they grow once:
/// counts its nodes, initializers and value infos, and guesses four names and one
/// attribute per node (unused room costs no memory until it is written).
static void reserveLists(llvm::StringRef bytes, GraphView &g) {
  size_t nodes = 0, initializers = 0, inputs = 0, outputs = 0, valueInfo = 0;
  WireReader r(bytes);
  while (!r.atEnd()) {
    uint32_t tag = r.tag();
    nodes += tag == tagOf(1, kLen);
    initializers += tag == tagOf(5, kLen);
    inputs += tag == tagOf(11, kLen);
    outputs += tag == tagOf(12, kLen);
    valueInfo += tag == tagOf(13, kLen);
    if (tag == 0 || !r.skip(tag))
      break; // decodeGraph says so
  }
  g.nodes.reserve(nodes);
  g.initializers.reserve(initializers);
  g.inputs.reserve(inputs);
  g.outputs.reserve(outputs);
  g.valueInfo.reserve(valueInfo);
  g.names.reserve(4 * nodes);
  g.attrs.reserve(nodes);
}

bool onnxio::decodeGraph(llvm::StringRef bytes, int depth, GraphView &g, pb::Arena &arena) {
  g.depth = depth;
  reserveLists(bytes, g);
  WireReader r(bytes);
  std::string rest; // the graph's other fields, parsed as a GraphProto
  bool restOnlyNames = true; // rest holds name and doc_string fields only
  llvm::StringRef field;
  while (!r.atEnd()) {
    int start = r.position();
    uint32_t tag = r.tag();
    bool ok = false;
    switch (tag) {
    case tagOf(1, kLen):
      ok = r.bytes(field) && decodeOrParse<onnx::NodeProto>(
                                 field, depth + 1, arena, [&] { return decodeNode(field, g); },
                                 [&](const onnx::NodeProto &np) { appendNode(g, np); });
      break;
    case tagOf(5, kLen):
      ok = r.bytes(field) &&
           decodeOrParse<onnx::TensorProto>(
               field, depth + 1, arena, [&] { return decodeTensor(field, g.initializers); },
               [&](const onnx::TensorProto &tp) { g.initializers.push_back(viewTensor(tp)); });
      break;
    case tagOf(11, kLen):
    case tagOf(12, kLen):
    case tagOf(13, kLen): {
      auto &list = tag == tagOf(11, kLen)   ? g.inputs
                   : tag == tagOf(12, kLen) ? g.outputs
                                            : g.valueInfo;
      ok = r.bytes(field) &&
           decodeOrParse<onnx::ValueInfoProto>(
               field, depth + 1, arena, [&] { return decodeValueInfo(field, list); },
               [&](const onnx::ValueInfoProto &vi) { list.push_back(viewValueInfo(vi)); });
      break;
    }
    case tagOf(2, kLen): // name and doc_string: the last one given counts
      ok = r.bytes(g.name);
      rest.append(bytes.data() + start, static_cast<size_t>(r.position() - start));
      break;
    case tagOf(10, kLen):
      ok = r.bytes(g.docString);
      rest.append(bytes.data() + start, static_cast<size_t>(r.position() - start));
      break;
    default:
      ok = tag != 0 && r.skip(tag);
      rest.append(bytes.data() + start, static_cast<size_t>(r.position() - start));
      restOnlyNames = false;
      break;
    }
    if (!ok)
      return false;
  }
  if (restOnlyNames) // nothing else to parse (nested graphs, usually)
    return true;
  const auto *gp = parseIn<onnx::GraphProto>(arena, rest, depth);
  if (!gp)
    return false;
  setGraphFields(g, *gp);
  return true;
}

bool onnxio::decodeModel(llvm::StringRef bytes, ModelWire &out, pb::Arena &arena) {
  WireReader r(bytes);
  llvm::StringRef graph;
  std::string rest; // every field but the graph, in file order
  while (!r.atEnd()) {
    int start = r.position();
    uint32_t tag = r.tag();
    if (tag == tagOf(7, kLen)) { // ModelProto.graph
      if (out.hasGraph || !r.bytes(graph))
        return false;
      out.hasGraph = true;
      continue;
    }
    if (tag == 0 || !r.skip(tag))
      return false;
    rest.append(bytes.data() + start, static_cast<size_t>(r.position() - start));
  }
  out.rest = parseIn<onnx::ModelProto>(arena, rest, 0);
  return out.rest && (!out.hasGraph || decodeGraph(graph, 1, out.graph, arena));
}

//===----------------------------------------------------------------------===//
// Nesting depth
//===----------------------------------------------------------------------===//

namespace {
/// Looks for a graph nested deeper than kMaxGraphDepth in wire bytes, without
/// parsing them: recursion stops at the limit, so any depth is safe.
/// Malformed bytes end the look where they start (the parse reports them).
struct DepthScan {
  /// The nodes holding the graphs entered, outermost first.
  std::vector<std::string> path;
  llvm::StringRef deepName;
  int deepDepth = 0;

  static llvm::StringRef graphName(llvm::StringRef graph) {
    llvm::StringRef name;
    forEachField(graph, [&](WireReader &r, uint32_t tag) {
      return tag == tagOf(2, kLen) ? r.bytes(name) : tag != 0 && r.skip(tag);
    });
    return name;
  }

  /// True when the GraphProto `bytes`, at `depth`, holds a graph nested too deep.
  bool graph(llvm::StringRef bytes, int depth) {
    uint64_t order = 0;
    bool found = false;
    forEachField(bytes, [&](WireReader &r, uint32_t tag) {
      llvm::StringRef nodeBytes;
      if (tag != tagOf(1, kLen))
        return tag != 0 && r.skip(tag);
      if (!r.bytes(nodeBytes))
        return false;
      found = node(nodeBytes, order++, depth);
      return !found;
    });
    return found;
  }

  bool node(llvm::StringRef bytes, uint64_t order, int depth) {
    llvm::StringRef name, op, domain;
    llvm::SmallVector<llvm::StringRef, 2> bodies;
    forEachField(bytes, [&](WireReader &r, uint32_t tag) {
      llvm::StringRef attr;
      switch (tag) {
      case tagOf(3, kLen):
        return r.bytes(name);
      case tagOf(4, kLen):
        return r.bytes(op);
      case tagOf(7, kLen):
        return r.bytes(domain);
      case tagOf(5, kLen): // AttributeProto: g (6) and graphs (11)
        return r.bytes(attr) && forEachField(attr, [&](WireReader &a, uint32_t atag) {
                 if (atag == tagOf(6, kLen) || atag == tagOf(11, kLen))
                   return a.bytes(bodies.emplace_back());
                 return atag != 0 && a.skip(atag);
               });
      default:
        return tag != 0 && r.skip(tag);
      }
    });
    if (bodies.empty())
      return false;
    std::string qualified =
        domain.empty() || domain == "ai.onnx" ? op.str() : (domain + "::" + op).str();
    path.push_back(describeNode(name, order, qualified));
    for (llvm::StringRef body : bodies) {
      if (depth + 1 > kMaxGraphDepth) {
        deepName = graphName(body);
        deepDepth = depth + 1;
        return true;
      }
      if (graph(body, depth + 1))
        return true;
    }
    path.pop_back();
    return false;
  }
};
} // namespace

llvm::Error onnxio::checkWireGraphDepth(llvm::StringRef modelBytes) {
  DepthScan scan;
  bool found = false;
  forEachField(modelBytes, [&](WireReader &r, uint32_t tag) {
    llvm::StringRef field;
    if (tag == tagOf(7, kLen)) // ModelProto.graph, at depth 0
      return r.bytes(field) && !(found = scan.graph(field, 0));
    if (tag != tagOf(20, kLen)) // ModelProto.training_info
      return tag != 0 && r.skip(tag);
    // TrainingInfoProto: initialization (1) and algorithm (2), at depth 1.
    return r.bytes(field) && forEachField(field, [&](WireReader &t, uint32_t ttag) {
             llvm::StringRef g;
             if (ttag == tagOf(1, kLen) || ttag == tagOf(2, kLen))
               return t.bytes(g) && !(found = scan.graph(g, 1));
             return ttag != 0 && t.skip(ttag);
           });
  });
  if (!found)
    return llvm::Error::success();
  return graphDepthError(scan.deepName, scan.deepDepth, scan.path);
}
