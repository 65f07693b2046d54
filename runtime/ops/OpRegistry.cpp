//===- OpRegistry.cpp - The op registry and its lookups --------------------===//
#include "mpc/Runtime/OpRegistry.h"
#include "mpc/Ops/OptimizerStep.h"
#include "OpRows.h"
#include "Parsers.h"
#include "mpc/IR/Graph.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

using namespace mpc;

char UnknownOperandError::ID;

/// Where `fn` is defined, from the lists of ShapeFunctions.h and Parsers.h
/// (no file for null or for a function missing from its list).
template <typename Fn>
static SourceLocation definedAt(Fn fn,
                                llvm::ArrayRef<std::pair<Fn, const SourceLocation *>> sites) {
  for (const auto &s : sites)
    if (fn && s.first == fn)
      return *s.second;
  return SourceLocation();
}

llvm::ArrayRef<OpDef> mpc::opRegistry() {
  // Built on first use (not by a global constructor): the default domain's
  // rows, then ai.mpc.training's and com.microsoft's, each with where its
  // shape function and parser are defined.
  static const std::vector<OpDef> rows = [] {
    std::vector<OpDef> r = ops::onnxOps();
    for (std::vector<OpDef> more : {ops::trainingOps(), ops::contribOps()})
      r.insert(r.end(), more.begin(), more.end());
#define MPC_SITE(Fn) {&Fn, &Fn##Where},
    using namespace shapes;
    const std::pair<ShapeFn, const SourceLocation *> shapeSites[] = {
        MPC_SHAPE_FUNCTIONS(MPC_SITE)};
    const std::pair<ParseFn, const SourceLocation *> parseSites[] = {
        MPC_ATTRIBUTE_PARSERS(MPC_SITE)};
#undef MPC_SITE
    for (OpDef &d : r) {
      d.shapeWhere = definedAt<ShapeFn>(d.shape, shapeSites);
      d.parseWhere = definedAt<ParseFn>(d.parse, parseSites);
    }
    return r;
  }();
  return rows;
}

const OpDef *mpc::findOp(llvm::StringRef opType, llvm::StringRef domain, int64_t opset) {
  static const OpRowIndex<OpDef> index(opRegistry());
  return index.find(opType, domain, opset);
}

const OpDef *mpc::findOp(const Node &n) { return findOp(n.opType, n.domain, n.opsetVersion()); }

llvm::StringRef mpc::costClassName(CostClass c) {
  switch (c) {
  case CostClass::Data:
    return "data";
  case CostClass::Elementwise:
    return "elementwise";
  case CostClass::Reduction:
    return "reduction";
  case CostClass::Window:
    return "window";
  case CostClass::Gemm:
    return "gemm";
  }
  llvm_unreachable("bad CostClass");
}

llvm::StringRef mpc::inPlaceName(InPlace p) {
  switch (p) {
  case InPlace::None:
    return "none";
  case InPlace::Operands:
    return "operands";
  case InPlace::WhereBranches:
    return "where-branches";
  case InPlace::Data:
    return "data";
  }
  llvm_unreachable("bad InPlace");
}

llvm::SmallVector<unsigned, 2> mpc::inPlaceOperands(const Node &n, unsigned output) {
  if (const OptimizerStepLayout *l = findOptimizerStep(n.opType, n.domain)) {
    if (output >= l->numOutputs()) // the 16-bit weight copy reads no old copy
      return {};
    return {output == 0 ? 0u : output + 1};
  }
  if (const OptimizerStepLayout *l = findMultiTensorStep(n.opType, n.domain)) {
    unsigned group = output / l->groupOutputs(), o = output % l->groupOutputs();
    return {l->multiFirstGroup() + group * l->groupInputs() + (o == 0 ? 0u : o + 1)};
  }
  const OpDef *row = findOp(n);
  if (!row || n.numOutputs() != 1 || output != 0)
    return {};
  switch (row->inPlace) {
  case InPlace::Operands:
    return {0u, 1u};
  case InPlace::WhereBranches:
    return {1u, 2u};
  case InPlace::None:
  case InPlace::Data: // a reshape's copy is not written element by element
    return {};
  }
  llvm_unreachable("bad InPlace");
}

std::string mpc::sourceRelativePath(const char *file) {
  if (!file)
    return "";
  // __FILE__ is the path the build gave the compiler: absolute, or (Ninja)
  // relative to the build tree, where every compile runs. MPC_SOURCE_ROOT
  // and MPC_BINARY_ROOT are both trees' paths (runtime/CMakeLists.txt).
  llvm::SmallString<256> path(file);
  if (!llvm::sys::path::is_absolute(path)) {
    llvm::SmallString<256> abs(MPC_BINARY_ROOT);
    llvm::sys::path::append(abs, path);
    path = abs;
  }
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  llvm::SmallString<256> root(MPC_SOURCE_ROOT);
  llvm::sys::path::remove_dots(root, /*remove_dot_dot=*/true);
  llvm::StringRef rel = path;
  if (rel.consume_front(root) && rel.consume_front("/"))
    return rel.str();
  return path.str().str();
}

std::string SourceLocation::text() const {
  return sourceRelativePath(file) + ":" + std::to_string(line);
}
