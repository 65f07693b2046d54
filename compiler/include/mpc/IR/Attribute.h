//===- Attribute.h - Node attributes ----------------------------*- C++ -*-===//
//
// A node attribute. The kind numbers are ONNX's AttributeProto.AttributeType.
// Graph attributes (If/Loop/Scan bodies) are owned IR graphs; sparse tensors
// and type protos, which no pass inspects, are kept as serialized bytes.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_ATTRIBUTE_H
#define MPC_IR_ATTRIBUTE_H

#include "mpc/IR/RareVector.h"
#include "mpc/IR/Tensor.h"
#include <memory>
#include <string>
#include <vector>

namespace mpc {

class Graph;

enum class AttrKind : uint8_t {
  Undefined = 0,
  Float = 1,
  Int = 2,
  String = 3,
  Tensor = 4,
  Graph = 5,
  Floats = 6,
  Ints = 7,
  Strings = 8,
  Tensors = 9,
  Graphs = 10,
  SparseTensor = 11,
  SparseTensors = 12,
  TypeProto = 13,
  TypeProtos = 14,
};

struct Attribute {
  std::string name;
  AttrKind kind = AttrKind::Undefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  RareString docString;
  /// Set inside function bodies: the attribute refers to the caller's one.
  RareString refAttrName;
  RareString unknownFields;

  // The list payloads: at most one is set (RareVector, one pointer each).
  RareVector<float> floats;
  RareVector<int64_t> ints;
  RareVector<std::string> strings;
  RareVector<Tensor> tensors;                ///< Tensor: exactly one
  RareVector<std::unique_ptr<Graph>> graphs; ///< Graph: exactly one
  RareVector<std::string> opaque;            ///< serialized sparse tensors / type protos

  Attribute() = default;
  Attribute(Attribute &&) = default;
  Attribute &operator=(Attribute &&) = default;
  ~Attribute();

  /// A copy of every field but the graphs (an attribute without subgraphs
  /// copies whole; graph attributes need a graph clone).
  Attribute copyWithoutGraphs() const;

  static Attribute makeInt(std::string name, int64_t v);
  static Attribute makeFloat(std::string name, float v);
  static Attribute makeString(std::string name, std::string v);
  static Attribute makeInts(std::string name, std::vector<int64_t> v);
  static Attribute makeTensor(std::string name, Tensor t);
};

} // namespace mpc

#endif // MPC_IR_ATTRIBUTE_H
