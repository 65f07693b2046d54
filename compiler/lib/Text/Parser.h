//===- Parser.h - The text parser's state -----------------------*- C++ -*-===//
//
// Private to lib/Text: the parser class, split over Parser.cpp (names,
// statements, graphs) and ParseLiterals.cpp (types, tensor data, attributes).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_LIB_TEXT_PARSER_H
#define MPC_LIB_TEXT_PARSER_H

#include "Syntax.h"
#include "mpc/IR/Graph.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace mpc {
namespace text {

/// The names one graph defines, chained to the enclosing graph's scope.
struct Scope {
  Graph *graph = nullptr;
  Scope *parent = nullptr;
  llvm::StringMap<Value *> names;
  /// Names defined by graphs nested in this one (they may not be reused here).
  llvm::StringSet<> nestedNames;
  /// A forward capture was resolved here: the node list needs sorting.
  bool needsSort = false;
};

/// An operand of a nested graph's node naming a value not defined yet.
struct PendingUse {
  Node *user;
  unsigned operand;
  Graph *origin;
  Token tok;
};

/// One entry of a graph's declared output list.
struct OutputDecl {
  Token tok;
  bool hasName = false;
  bool hasType = false;
  Type type;
};

class Parser {
public:
  Parser(llvm::StringRef buffer, llvm::StringRef bufferName)
      : toks(tokenize(buffer)), bufferName(bufferName.str()) {}

  llvm::Expected<std::unique_ptr<Model>> run();

private:
  std::vector<Token> toks;
  size_t idx = 0;
  std::string bufferName;
  std::string firstError;
  std::unique_ptr<Model> model;
  llvm::StringMap<std::vector<PendingUse>> pending;
  /// Values whose type came from inference (an output declaration may refine it).
  llvm::DenseSet<const Value *> inferred;

  // Token helpers.
  const Token &cur() const { return toks[idx]; }
  const Token &peek(size_t n = 1) const { return toks[std::min(idx + n, toks.size() - 1)]; }
  void consume() {
    if (idx + 1 < toks.size())
      ++idx;
  }
  bool atIdent(llvm::StringRef kw) const { return cur().isIdent(kw); }
  bool consumeIf(Tok k) {
    if (!cur().is(k))
      return false;
    consume();
    return true;
  }
  bool error(const Token &at, const llvm::Twine &msg);
  bool unexpected(llvm::StringRef expected);
  bool expect(Tok k);
  bool expectIdent(llvm::StringRef kw);

  // Grammar.
  bool parseModel();
  bool parseHeader();
  bool parseGraph(Graph &g, Scope &scope);
  bool parseOutputs(Graph &g, Scope &scope, const std::vector<OutputDecl> &decls);
  bool parseInit(Graph &g, Scope &scope);
  bool parseNode(Graph &g, Scope &scope);
  bool parseOperand(Node &n, Scope &scope);
  bool parseAttribute(Node &n, Scope &scope);
  bool parseAttrValue(Node &n, Scope &scope, Attribute &a);
  bool parseAttrList(Node &n, Scope &scope, Attribute &a);
  bool parseNestedGraph(Node &n, Scope &scope, Attribute &a);
  bool parseOpaque(Attribute &a);
  bool parseType(Type &t);
  bool parseShape(Type &t);
  bool parseTensorType(Tensor &t);
  bool parseTensorData(Tensor &t);
  bool parseExternal(Tensor &t);
  bool encodeScalar(const Token &tok, DType dt, uint8_t *dst);
  bool parseInt(const Token &tok, int64_t &out);
  static bool isFloatToken(const Token &t);
  bool parseTraining(Scope &mainScope);

  // Names.
  Value *lookup(const Scope &scope, llvm::StringRef name) const;
  bool define(Scope &scope, Value *v, const Token &at);
  bool closeScope(Scope &scope, const Token &at);
};

/// A type as the text form spells it, for messages.
std::string typeString(const Type &t);
/// A token for "found ..." messages.
std::string describeToken(const Token &t);

} // namespace text
} // namespace mpc

#endif // MPC_LIB_TEXT_PARSER_H
