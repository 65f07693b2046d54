//===- IndexParams.cpp - Attribute parsers of the index and shape ops ------===//
//
// Shape's start/end and ConstantOfShape's fill value, read once per node
// (IndexParams.h); a value attribute that does not hold exactly one element
// is refused with attributeError.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/IndexParams.h"
#include "Parsers.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/HostTensor.h"
#include <cstring>

using namespace mpc;

MPC_DEFINED_BELOW(mpc::parseShape)
ParsedParams mpc::parseShape(const Node &n) {
  auto p = std::make_unique<ShapeParams>();
  p->start = n.intAttr("start", 0);
  if (const Attribute *a = n.attr("end")) {
    p->end = a->i;
    p->hasEnd = true;
  }
  return std::unique_ptr<OpParams>(std::move(p));
}

MPC_DEFINED_BELOW(mpc::parseConstantOfShape)
ParsedParams mpc::parseConstantOfShape(const Node &n) {
  auto p = std::make_unique<FillParams>();
  const Attribute *a = n.attr("value");
  if (!a) {
    float zero = 0.0f;
    p->bytes.resize(sizeof(zero));
    std::memcpy(p->bytes.data(), &zero, sizeof(zero));
    return std::unique_ptr<OpParams>(std::move(p));
  }
  if (a->tensors.empty())
    return attributeError(n, "value", "not a tensor", "it must be a tensor of one element");
  auto t = hostTensorFromIR(a->tensors[0]);
  if (!t)
    return t.takeError();
  if (t->numElements() != 1)
    return attributeError(n, "value", "a tensor of " + llvm::Twine(t->numElements()) +
                                          " elements",
                          "it must hold exactly one element");
  p->dtype = t->dtype;
  p->bytes = t->bytes;
  return std::unique_ptr<OpParams>(std::move(p));
}
