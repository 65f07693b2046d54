//===- OpRows.h - Helpers to write registry rows ----------------*- C++ -*-===//
//
// MPC_OP(type, domain, since, shape, cost) is a row valid from opset `since`
// on, recording where it is written; the with* functions set the optional
// facts. Private to runtime/ops.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPS_OPROWS_H
#define MPC_RUNTIME_OPS_OPROWS_H

#include "ShapeFunctions.h"
#include "mpc/Runtime/OpParams.h"
#include <vector>

namespace mpc {
namespace ops {

inline OpDef makeOp(const char *type, const char *domain, int64_t since, ShapeFn shape,
                    const char *shapeName, CostClass cost, SourceLocation where) {
  return OpDef{type,          domain, since,   kMaxOpsetVersion, shape, cost,
               InPlace::None, false,  nullptr, where, shape ? shapeName : nullptr, nullptr,
               SourceLocation(), SourceLocation()};
}
inline OpDef withInPlace(OpDef d, InPlace p) {
  d.inPlace = p;
  return d;
}
inline OpDef withValueDependentShape(OpDef d) {
  d.valueDependentShape = true;
  return d;
}
inline OpDef withParamsNamed(OpDef d, ParseFn parse, const char *name) {
  d.parse = parse;
  d.parseName = name;
  return d;
}

// The rows of each file (OnnxOps.cpp, TrainingOps.cpp, ContribOps.cpp).
std::vector<OpDef> onnxOps();
std::vector<OpDef> trainingOps();
std::vector<OpDef> contribOps();

} // namespace ops
} // namespace mpc

#define MPC_OP(Type, Domain, Since, Shape, Cost)                               \
  ::mpc::ops::makeOp(Type, Domain, Since, Shape, #Shape, ::mpc::CostClass::Cost,   \
                     MPC_SOURCE_LOCATION)
/// withParams(row, parser): the row parses its attributes with `parser`.
#define withParams(Row, Parse) ::mpc::ops::withParamsNamed(Row, Parse, #Parse)

#endif // MPC_RUNTIME_OPS_OPROWS_H
