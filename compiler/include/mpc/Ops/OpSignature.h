//===- OpSignature.h - Operator signatures from the ONNX schemas -*- C++ -*-===//
//
// The formal inputs/outputs of an operator and the element types each type
// parameter allows, taken from libonnx's OpSchemaRegistry. libonnx 1.12 knows
// the default domain up to opset 17; mpc's rows (OpSignature.cpp) carry every
// schema change of opsets 18 to the newest release it knows, so default-domain
// signatures are exact up to there. Other domains' opsets newer than libonnx's
// use the newest schema libonnx has (a "fallback", reported in verbose mode;
// neither its types nor its attributes are checked).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_OPS_OPSIGNATURE_H
#define MPC_OPS_OPSIGNATURE_H

#include "mpc/IR/Attribute.h"
#include "mpc/IR/DType.h"
#include "mpc/IR/Type.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mpc {

class Node;
class Model;

enum class FormalOption : uint8_t { Single, Optional, Variadic };

struct FormalParam {
  std::string name;
  /// A type parameter name ("T") or a fixed type string ("tensor(int64)").
  std::string typeStr;
  FormalOption option = FormalOption::Single;
  bool homogeneous = true;
  int minArity = 1;
  /// For a fixed tensor type ("tensor(int64)"): its element type, parsed once.
  DType fixedElem = DType::Undefined;
  /// Index of the constraint named by typeStr in OpSignature::constraints, -1
  /// for a fixed type; resolved once (OpSignature::constraintOf).
  int constraintIndex = -1;
};

/// The types one type parameter admits: tensors of `tensorTypes`, sequences of
/// tensors of `seqTypes`, optionals of `optionalTypes` (tensor or sequence).
struct TypeConstraint {
  std::string param;
  llvm::SmallVector<DType, 8> tensorTypes;
  llvm::SmallVector<DType, 8> seqTypes;
  llvm::SmallVector<DType, 8> optionalTypes;
  bool allowsOther = false; ///< maps, sparse tensors

  /// Does the parameter admit `t` with its innermost element type replaced by `e`?
  bool admits(const Type &t, DType e) const;
  bool admitsTensor(DType e) const;
};

/// An attribute the schema defines: its name, the one kind it takes, and
/// whether a node must carry it.
struct FormalAttr {
  std::string name;
  AttrKind kind = AttrKind::Undefined;
  bool required = false;
};

struct OpSignature {
  std::string domain;
  std::string opType;
  int sinceVersion = 0;
  std::vector<FormalParam> inputs;
  std::vector<FormalParam> outputs;
  std::vector<TypeConstraint> constraints;
  int minInputs = 0, maxInputs = 0, minOutputs = 0, maxOutputs = 0;
  /// The schema's attributes are the op's at this version: libonnx's, brought
  /// to default-domain opsets newer than libonnx by mpc's attribute rows
  /// (OpSignature.cpp, kAttrPatches); false for other domains' versions
  /// newer than libonnx, so nothing is checked against them.
  bool attributesKnown = false;
  /// Nodes may carry attributes the schema does not define (checked for the
  /// default domain only: other domains' schemas may take free attributes).
  bool closedAttributes = false;
  std::vector<FormalAttr> attributes;

  /// The schema's attribute `name`, null when it defines none by that name.
  const FormalAttr *attribute(llvm::StringRef name) const;

  /// The constraint for a type parameter, null for fixed types.
  const TypeConstraint *constraint(llvm::StringRef param) const;
  /// The constraint of a formal of this signature, null for fixed types.
  const TypeConstraint *constraintOf(const FormalParam &f) const {
    return f.constraintIndex < 0 ? nullptr : &constraints[f.constraintIndex];
  }
  /// The formal of input port `port` (variadic formals cover the tail); null
  /// beyond the last formal.
  const FormalParam *inputFormal(unsigned port) const;
  const FormalParam *outputFormal(unsigned port) const;
};

/// Result of a signature lookup.
struct SignatureLookup {
  const OpSignature *sig = nullptr;
  /// `sig` is an older version of the op than the model's opset has (an
  /// opset newer than libonnx's of a domain mpc has no rows for): its types
  /// may be narrower than the real ones, so they are not checked.
  bool fallback = false;
};

/// Looks up the signature of `opType` in `domain` at `opsetVersion`. Results
/// are cached; the returned pointers live until program exit.
SignatureLookup lookupSignature(llvm::StringRef domain, llvm::StringRef opType,
                                int64_t opsetVersion);
/// The signature for a node, using the model's opset imports.
SignatureLookup lookupSignature(const Node &n);
/// Dense indices for the (domain, op type) pairs of one model's nodes, each
/// pair's signature looked up once. Passes that visit every node (type
/// inference, the verifier, the AMP painting) resolve ops here rather than
/// hash names per node; the model's opset imports must not change while an
/// index is in use.
class OpIndex {
public:
  /// The index of `n`'s (domain, op type); a new pair gets the next index.
  unsigned indexOf(const Node &n);
  const SignatureLookup &signature(unsigned index) const { return sigs[index]; }
  SignatureLookup signatureOf(const Node &n) { return sigs[indexOf(n)]; }
  unsigned size() const { return static_cast<unsigned>(sigs.size()); }

private:
  llvm::StringMap<unsigned> defaultOps;                    ///< op type -> index
  llvm::StringMap<llvm::StringMap<unsigned>> otherDomains; ///< domain -> op type -> index
  /// Cache (an op type's slot or the next) in front of defaultOps for op types
  /// of up to 16 bytes (all but a few): two words compared, no string hashed.
  struct CacheEntry {
    uint64_t lo = 0, hi = 0;
    size_t len = ~size_t(0);
    unsigned index = 0;
  };
  std::array<CacheEntry, 64> cache;
  std::vector<SignatureLookup> sigs;

  unsigned mapIndexOf(const Node &n);
};

/// The newest opset libonnx's registry knows for a domain (17 for "").
int64_t newestKnownOpset(llvm::StringRef domain);

/// The newest opset of `domain` in any ONNX release mpc knows of (ONNX 1.22:
/// 27 for the default domain, 5 for ai.onnx.ml, 1 for ai.onnx.training and
/// ai.onnx.preview.training), or libonnx's newest if that is newer; -1 for
/// the domains ONNX does not define (custom domains), which are not checked.
int64_t newestReleasedOpset(llvm::StringRef domain);

/// True when an ONNX schema (libonnx's, or mpc's own rows), or an op added to
/// the default domain by an ONNX release after libonnx's up to the newest one
/// mpc knows of (newestReleasedOpset), defines `opType` in `domain` at some
/// version. Every op mpc's runtime has a kernel for is among them.
bool isKnownOp(llvm::StringRef domain, llvm::StringRef opType);

/// Refuses a model that imports an opset of an ONNX domain newer than any
/// release mpc knows of (newestReleasedOpset): its ops would silently be read
/// with other versions' schemas. Opsets between libonnx's newest and that
/// release keep the documented fallback. One line naming domain and version.
llvm::Error checkOpsetImports(const Model &m);

/// Registers the libonnx schemas of the ai.mpc.training gradient ops
/// (docs/training.md) and their domain's version range. Idempotent and
/// thread-safe; lookupSignature() and newestKnownOpset() call it, and tools
/// that call libonnx's checker or shape inference directly call it first.
void registerTrainingSchemas();

/// Registers the libonnx schemas of the com.microsoft ops mpc runs
/// (FusedMatMul, ConvGrad) and that domain's version range. Idempotent and
/// thread-safe; registerTrainingSchemas() calls it.
void registerContribSchemas();

/// Parses "tensor(float16)", "seq(tensor(float))", "optional(...)".
bool parseTypeString(llvm::StringRef s, Type &out);

} // namespace mpc

#endif // MPC_OPS_OPSIGNATURE_H
