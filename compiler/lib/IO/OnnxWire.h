//===- OnnxWire.h - What the ONNX importer reads, wire or parsed -*- C++ -*-===//
//
// Private to lib/IO. The importer builds the IR from views of a GraphProto's
// parts; a view comes either straight from the protobuf wire bytes of the
// file (OnnxWire.cpp: plain nodes, raw_data initializers) or from a message
// parsed by protobuf's generated classes (everything else), so both paths
// share one importGraph.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_LIB_IO_ONNXWIRE_H
#define MPC_LIB_IO_ONNXWIRE_H

#include "mpc/IR/Attribute.h"
#include "mpc/IR/Limits.h"
#include "mpc/IR/Type.h"
#include "mpc/Support/LargeAlloc.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <google/protobuf/arena.h>
#include <google/protobuf/unknown_field_set.h>
#include <string>
#include <vector>

namespace mpc {
namespace onnxio {

/// protobuf's nesting limit for a whole ModelProto. A graph at depth d
/// (mpc/IR/Limits.h) is a message 3d + 1 levels deep (model, graph, node,
/// attribute, graph, ...); the rest leaves room for what a graph at the limit
/// holds (value types, tensors), so that the importer, not the parse, refuses
/// a graph nested too deep and says so.
constexpr int kRecursionLimit = 3 * kMaxGraphDepth + 1 + 100;

/// A TensorProto. Wire views hold plain tensors only (raw_data, no external
/// or typed data, no unknown fields); `proto` is set for parsed ones and
/// answers for the fields a view does not carry.
struct TensorView {
  const onnx::TensorProto *proto = nullptr;
  llvm::StringRef name, docString;
  int32_t dataType = 0;
  llvm::SmallVector<int64_t, 4> dims;
  bool hasRawData = false;
  llvm::StringRef rawData;
};

/// A ValueInfoProto (graph input, output or value_info entry).
struct ValueInfoView {
  llvm::StringRef name, docString;
  /// The parsed type; null when the wire held a tensor type, which
  /// `tensorType` then holds but for its element type, `elemType` (checked on
  /// import).
  const onnx::TypeProto *type = nullptr;
  Type tensorType;
  int32_t elemType = 0;
};

/// An AttributeProto: plain wire bytes (scalar and list kinds), or parsed.
struct AttrRef {
  llvm::StringRef wire;
  const onnx::AttributeProto *proto = nullptr;
};

/// A NodeProto; its names and attributes are ranges of GraphView's lists.
struct NodeView {
  llvm::StringRef opType, domain, name, docString;
  /// The parsed node, null for a plain one read from the wire (which has no
  /// unknown fields).
  const onnx::NodeProto *proto = nullptr;
  unsigned firstName = 0, numInputs = 0, numOutputs = 0;
  unsigned firstAttr = 0, numAttrs = 0;
};

/// A GraphProto as the importer reads it.
struct GraphView {
  /// Nesting below the ModelProto (the main graph: 1), for parsing fallbacks.
  int depth = 1;
  llvm::StringRef name, docString;
  std::string unknownFields;
  std::vector<std::string> sparseInitializers;
  std::vector<std::string> quantizationAnnotations;
  std::vector<ValueInfoView> inputs, outputs, valueInfo;
  // The per-node lists of a large graph are tens of MB: LargeVector puts them
  // on huge pages.
  LargeVector<TensorView> initializers;
  LargeVector<NodeView> nodes;
  /// Every node's inputs then outputs, node after node.
  LargeVector<llvm::StringRef> names;
  LargeVector<AttrRef> attrs;

  llvm::ArrayRef<llvm::StringRef> inputsOf(const NodeView &n) const {
    return llvm::ArrayRef<llvm::StringRef>(names).slice(n.firstName, n.numInputs);
  }
  llvm::ArrayRef<llvm::StringRef> outputsOf(const NodeView &n) const {
    return llvm::ArrayRef<llvm::StringRef>(names).slice(n.firstName + n.numInputs, n.numOutputs);
  }
  llvm::ArrayRef<AttrRef> attrsOf(const NodeView &n) const {
    return llvm::ArrayRef<AttrRef>(attrs).slice(n.firstAttr, n.numAttrs);
  }
  /// Back to a default-constructed view, keeping the lists' capacity (for
  /// the next graph read into it).
  void clear() {
    depth = 1;
    name = docString = llvm::StringRef();
    unknownFields.clear();
    sparseInitializers.clear();
    quantizationAnnotations.clear();
    inputs.clear();
    outputs.clear();
    valueInfo.clear();
    initializers.clear();
    nodes.clear();
    names.clear();
    attrs.clear();
  }
};

/// Serialized unknown fields of a parsed message ("" when it has none).
template <typename Msg> std::string unknownFieldsOf(const Msg &msg) {
  if (msg.unknown_fields().empty())
    return {};
  std::string s;
  msg.unknown_fields().SerializeToString(&s);
  return s;
}

//===- Views of parsed messages (OnnxImport.cpp) --------------------------===//

TensorView viewTensor(const onnx::TensorProto &tp);
ValueInfoView viewValueInfo(const onnx::ValueInfoProto &vi);
void appendNode(GraphView &g, const onnx::NodeProto &np);
/// The graph's own fields (name, doc_string, sparse initializers, ...), not
/// its inputs, outputs, value_info, initializers and nodes.
void setGraphFields(GraphView &g, const onnx::GraphProto &gp);
/// Everything of `gp`.
void viewGraph(GraphView &g, const onnx::GraphProto &gp);

//===- Wire decoding (OnnxWire.cpp) ---------------------------------------===//

/// Parses `bytes` as a message `depth` levels below the ModelProto (so
/// protobuf's nesting limit counts as for the whole file).
bool parseAt(llvm::StringRef bytes, int depth, google::protobuf::MessageLite &msg);
/// parseAt into a new message in `arena`; null when the bytes do not parse.
template <typename Msg>
const Msg *parseIn(google::protobuf::Arena &arena, llvm::StringRef bytes, int depth) {
  Msg *m = google::protobuf::Arena::CreateMessage<Msg>(&arena);
  return parseAt(bytes, depth, *m) ? m : nullptr;
}

/// A serialized ModelProto read for import: the main graph as a view of the
/// wire bytes, every other field parsed into `rest`.
struct ModelWire {
  const onnx::ModelProto *rest = nullptr;
  bool hasGraph = false;
  GraphView graph;
};
/// False for malformed bytes, and for files left to a whole-message parse (a
/// graph field given twice, which protobuf merges). Parsed parts live in
/// `arena`; views point into `bytes`.
bool decodeModel(llvm::StringRef bytes, ModelWire &out, google::protobuf::Arena &arena);

/// An error naming the first graph nested deeper than kMaxGraphDepth in a
/// serialized ModelProto (main and training graphs); any depth is safe.
llvm::Error checkWireGraphDepth(llvm::StringRef modelBytes);

/// Fills `g` from the bytes of a GraphProto `depth` levels below the
/// ModelProto: its nodes, initializers and value infos from the wire where
/// they are plain, the rest parsed into `arena`. False for malformed bytes.
bool decodeGraph(llvm::StringRef bytes, int depth, GraphView &g,
                 google::protobuf::Arena &arena);

/// The graphs of an AttributeProto, as wire bytes: `g` (given at most once)
/// and the `graphs` list.
struct AttrGraphBytes {
  bool hasG = false;
  llvm::StringRef g;
  llvm::SmallVector<llvm::StringRef, 2> list;
  bool empty() const { return !hasG && list.empty(); }
};

/// Decodes a plain AttributeProto (the fields of AttrRef::wire), and with
/// `graphs` one whose graphs it then leaves there as bytes. False when it has
/// other fields (then `a` is partly filled: parse it instead).
bool decodePlainAttribute(llvm::StringRef bytes, Attribute &a, AttrGraphBytes *graphs = nullptr);

} // namespace onnxio
} // namespace mpc

#endif // MPC_LIB_IO_ONNXWIRE_H
