//===- Parsers.h - Every attribute parser and where it is defined -*- C++ -*-===//
//
// One list of the attribute parsers registry rows name (the public ones of
// OpParams.h and IndexParams.h, and the element-wise ones elementwiseParser
// hands out), each declared with `<name>Where`: the location of its
// definition, recorded by MPC_DEFINED_BELOW (OpRegistry.h) on the line above
// it. The registry copies the location into its rows for `mpc ops --op`;
// tests/tools/test_ops.py checks that the line it names defines the parser.
// Private to runtime/ops.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPS_PARSERS_H
#define MPC_RUNTIME_OPS_PARSERS_H

#include "mpc/Runtime/OpRegistry.h"

namespace mpc {

#define MPC_ATTRIBUTE_PARSERS(X) \
  X(parseGemm) \
  X(parseSoftmax) \
  X(parseLayerNorm) \
  X(parseWindow) \
  X(parseFusedMatMul) \
  X(parseGemmBiasAct) \
  X(parseRecurrent) \
  X(parseReduce) \
  X(parseTranspose) \
  X(parseAxis0) \
  X(parseAxisMinus1) \
  X(parseArgReduce) \
  X(parseTopK) \
  X(parseCumulative) \
  X(parseTrilu) \
  X(parseDepthToSpace) \
  X(parseSpaceToDepth) \
  X(parseScatter) \
  X(parseEyeLike) \
  X(parseNonMaxSuppression) \
  X(parseQuantAxis) \
  X(parseGatherND) \
  X(parsePad) \
  X(parseNorm) \
  X(parseBatchNorm) \
  X(parseLoss) \
  X(parseCompress) \
  X(parseReverseSequence) \
  X(parseLRN) \
  X(parseRoiAlign) \
  X(parseEinsum) \
  X(parseAttention) \
  X(parseRotaryEmbedding) \
  X(parseResize) \
  X(parseShape) \
  X(parseConstantOfShape) \
  X(parseLeakyRelu) \
  X(parseAlpha1) \
  X(parseSelu) \
  X(parseHardSigmoid) \
  X(parseShrink) \
  X(parseClip6) \
  X(parseGelu) \
  X(parseIsInf) \
  X(parseMod) \
  X(parseBitShift)

#define MPC_DECLARE_PARSER(Fn)                                                 \
  ParsedParams Fn(const Node &n);                                              \
  extern const SourceLocation Fn##Where;
MPC_ATTRIBUTE_PARSERS(MPC_DECLARE_PARSER)
#undef MPC_DECLARE_PARSER

} // namespace mpc

#endif // MPC_RUNTIME_OPS_PARSERS_H
