//===- TypeInference.h - Element types from the schemas ---------*- C++ -*-===//
//
// Fills in the element types of values the model gave no type for, using the
// operator signatures: an output whose type parameter also types an input
// takes that input's type; fixed types are taken as written; attribute-typed
// outputs (Cast.to, ConstantOfShape.value, ...) read the attribute. Shapes are
// not inferred here.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_OPS_TYPEINFERENCE_H
#define MPC_OPS_TYPEINFERENCE_H

#include "mpc/IR/Graph.h"
#include "mpc/Ops/OpSignature.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mpc {

/// The element-type rule of one node output: the type it must have given the
/// node's inputs and attributes, or an unknown Type when no rule applies.
Type inferOutputType(const Node &n, unsigned outputIndex, const OpSignature *sig);
/// The same with the inputs' types read through `typeOf` (the verifier's types
/// inferred so far, without writing them into the model).
Type inferOutputType(const Node &n, unsigned outputIndex, const OpSignature *sig,
                     llvm::function_ref<const Type &(const Value *)> typeOf);

/// Infers every unknown value type in `g` and its nested graphs, in order.
/// The type of output `outputIndex` that the node's attributes fix (Cast's
/// `to`, a Constant's value, the random generators' `dtype`, ...); unknown
/// for ops whose output types follow their inputs.
Type attributeOutputType(const Node &n, unsigned outputIndex);

void inferTypes(Graph &g);
/// Infers types in every graph of the model (main graph and training graphs).
void inferTypes(Model &m);

/// The type parameter of input/output port `port` ("#in3"/"#out1" for ports
/// of a fixed type or beyond the signature), merging parameters that must
/// agree across one node (sequence element and container types).
/// Like typeParamOfPort without allocating: "" for a port of a fixed type or
/// beyond the signature (each such port is its own parameter).
llvm::StringRef typeParamRef(const Node &n, const OpSignature *sig, bool isInput, unsigned port);
std::string typeParamOfPort(const Node &n, const OpSignature *sig, bool isInput,
                            unsigned port);

} // namespace mpc

#endif // MPC_OPS_TYPEINFERENCE_H
