//===- RecurrentShapes.cpp - Registry shape functions -----------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): LSTM. GRU and RNN
// still share their activation parsing with the CPU kernels (RnnKernels.cpp).
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../ShapeHelpers.h"
#include "../ShapeFunctions.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>
#include <cmath>

using namespace mpc;
using namespace mpc::shapes;

int64_t shapes::numDirections(const Node &n) {
  return n.stringAttr("direction", "forward") == "bidirectional" ? 2 : 1;
}

llvm::Error shapes::checkLstmAttrs(const Node &n) {
  if (n.intAttr("layout", 0) != 0)
    return nodeError(n, "layout = 1 is not supported");
  if (n.attr("clip"))
    return nodeError(n, "the clip attribute is not supported");
  if (n.intAttr("input_forget", 0) != 0)
    return nodeError(n, "input_forget = 1 is not supported");
  if (const Attribute *a = n.attr("activations")) {
    for (size_t i = 0; i < a->strings.size(); ++i) {
      const char *expect = i % 3 == 0 ? "Sigmoid" : "Tanh";
      if (a->strings[i] != expect)
        return nodeError(n, "activation " + a->strings[i] +
                                " is not supported (only Sigmoid, Tanh, Tanh)");
    }
  }
  return llvm::Error::success();
}

llvm::Error shapes::shapeLSTM(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = checkLstmAttrs(q.node))
    return e;
  const auto &x = q.inputs[0].shape, &w = q.inputs[1].shape;
  int64_t dirs = numDirections(q.node);
  int64_t hidden = q.node.intAttr("hidden_size", w.size() == 3 ? w[1] / 4 : 0);
  if (x.size() != 3 || w.size() != 3 || w[0] != dirs || w[1] != 4 * hidden ||
      w[2] != x[2])
    return nodeError(q.node, "input " + formatShape(x) + " and weight " +
                                 formatShape(w) + " do not match");
  if (q.inputs.size() > 4 && q.inputs[4].dtype != DType::Undefined) {
    const HostTensor *lens = q.values[4];
    if (!lens)
      return nodeError(q.node, "sequence_lens must be known before running");
    for (int64_t i = 0; i < lens->numElements(); ++i)
      if (lens->getAsInt64(i) != x[0])
        return nodeError(q.node, "sequence_lens shorter than the input are not supported");
  }
  DType t = q.inputs[0].dtype;
  out = {ShapedType{t, {x[0], dirs, x[1], hidden}}, ShapedType{t, {dirs, x[1], hidden}},
         ShapedType{t, {dirs, x[1], hidden}}};
  out.resize(q.node.numOutputs());
  return llvm::Error::success();
}
