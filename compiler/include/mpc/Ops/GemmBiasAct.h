//===- GemmBiasAct.h - The fused GEMM + bias + activation op ----*- C++ -*-===//
//
// ai.mpc.training::GemmBiasAct (version 1; docs/training.md "Fused GEMM
// epilogues"): Y = act(op(A) @ op(B) + bias), written by
// `mpc rewrite --fuse-gemm-epilogues` in place of a MatMul/Gemm, an optional
// bias Add, an optional Relu/Gelu and an optional Cast. Inputs A [..., M, K]
// or [K] (transA only for a 2-D A), B [K, N] (or [N, K] with transB) and the
// optional bias [N] (leading axes of size 1 allowed; absent, or an empty
// name: no bias); attributes transA, transB, activation,
// to (the output element type, absent: A's), bias_after_rounding and
// bias_grad_of. The optional second output, bias_grad, is a weight
// gradient's bias gradient computed with the product (cuBLASLt's BGRADA /
// BGRADB): the stored operand bias_grad_of names (0: A, stored [K, M] with
// transA; 1: B, stored [K, N] without transB) summed over its first axis,
// the product's k, typed like Y; only without a bias input or activation.
// The schema, the registry's shape function, the CPU and CUDA kernels and
// the pass all read the attributes through gemmBiasActAttrsOf.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_OPS_GEMMBIASACT_H
#define MPC_OPS_GEMMBIASACT_H

#include "mpc/IR/DType.h"
#include "mpc/IR/Graph.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mpc {

constexpr const char *kGemmBiasActDomain = "ai.mpc.training";
constexpr const char *kGemmBiasActOp = "GemmBiasAct";

/// The activation after the bias; the names are the attribute's values.
enum class GemmActivation : uint8_t { None, Relu, Gelu, GeluTanh };

inline const char *gemmActivationName(GemmActivation a) {
  switch (a) {
  case GemmActivation::None: return "none";
  case GemmActivation::Relu: return "relu";
  case GemmActivation::Gelu: return "gelu";
  case GemmActivation::GeluTanh: return "gelu_tanh";
  }
  return "none";
}

/// False for a name that is not one of gemmActivationName's.
inline bool parseGemmActivation(llvm::StringRef s, GemmActivation &out) {
  for (GemmActivation a : {GemmActivation::None, GemmActivation::Relu, GemmActivation::Gelu,
                           GemmActivation::GeluTanh})
    if (s == gemmActivationName(a)) {
      out = a;
      return true;
    }
  return false;
}

struct GemmBiasActAttrs {
  bool transA = false, transB = false;
  GemmActivation act = GemmActivation::None;
  bool actKnown = true; ///< false: the activation attribute names no activation
  /// The `to` attribute (an ONNX element type); Undefined: Y is typed like A.
  DType to = DType::Undefined;
  /// 1: the product is rounded to A's type before the bias is added in that
  /// type, as a MatMul followed by an Add computes it (the CPU kernel then
  /// matches the unfused nodes bit for bit). 0: the bias joins the fp32
  /// accumulator and the sum is rounded once (ONNX Gemm's C, cuBLASLt's bias
  /// epilogue). Only meaningful when Y is typed like A.
  bool biasAfterRounding = false;
  /// The bias_grad_of attribute: which operand output 1 (bias_grad) sums
  /// over k; -1 absent, else 0 (A) or 1 (B); other values are kept for the
  /// shape function to refuse.
  int64_t biasGradOf = -1;

  /// Y's element type for an A of type `a`.
  DType outputType(DType a) const { return to == DType::Undefined ? a : to; }
};

inline bool isGemmBiasAct(const Node &n) {
  return n.opType == kGemmBiasActOp && n.domain == kGemmBiasActDomain;
}

inline GemmBiasActAttrs gemmBiasActAttrsOf(const Node &n) {
  GemmBiasActAttrs a;
  a.transA = n.intAttr("transA", 0) != 0;
  a.transB = n.intAttr("transB", 0) != 0;
  a.actKnown = parseGemmActivation(n.stringAttr("activation", "none"), a.act);
  int64_t to = n.intAttr("to", 0);
  a.to = isKnownDType(to) ? DType(to) : DType::Undefined;
  a.biasAfterRounding = n.intAttr("bias_after_rounding", 0) != 0;
  a.biasGradOf = n.intAttr("bias_grad_of", -1);
  return a;
}

/// The type rule: A and B share a float type T (float32, float16 or
/// bfloat16); Y is T, or float32 for a 16-bit T, or 16-bit for a float32 T
/// (a folded Cast); the bias, when present (not Undefined), is typed like A
/// or like Y. Returns an empty string when the types fit, else what is wrong.
inline std::string gemmBiasActTypeError(DType a, DType b, DType bias, DType y) {
  auto name = [](DType t) { return dtypeName(t).str(); };
  bool floatA = a == DType::F32 || isHalfPrecision(a);
  if (!floatA)
    return "A is " + name(a) + "; float32, float16 and bfloat16 are supported";
  if (b != a)
    return "B is " + name(b) + ", A is " + name(a) + ": they must match";
  bool yOk = y == a || (isHalfPrecision(a) && y == DType::F32) ||
             (a == DType::F32 && isHalfPrecision(y));
  if (!yOk)
    return "output type " + name(y) + " for " + name(a) +
           " operands: the output is their type, or float32 for 16-bit operands, or "
           "16-bit for float32 operands";
  if (bias != DType::Undefined && bias != a && bias != y)
    return "bias is " + name(bias) + "; it must be typed like A (" + name(a) + ") or like Y (" +
           name(y) + ")";
  return std::string();
}

} // namespace mpc

#endif // MPC_OPS_GEMMBIASACT_H
