//===- Syntax.h - Tokens and spelling rules of the text form ----*- C++ -*-===//
//
// Shared by the printer and the parser so both agree on what needs quoting,
// how strings are escaped and which attributes hold element types.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_LIB_TEXT_SYNTAX_H
#define MPC_LIB_TEXT_SYNTAX_H

#include "mpc/IR/DType.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace mpc {
namespace text {

enum class Tok : uint8_t {
  Eof,
  Error,     ///< text is the message
  Ident,     ///< [A-Za-z_][A-Za-z0-9_.]*
  ValueName, ///< %name, text is the decoded name
  GraphName, ///< @name, text is the decoded name
  Int,       ///< -?[0-9]+
  Float,     ///< -?[0-9]+ with '.' or exponent, or -inf
  String,    ///< text is the decoded bytes
  LParen,
  RParen,
  LBrace,
  RBrace,
  LBracket,
  RBracket,
  Less,
  Greater,
  Comma,
  Colon,
  ColonColon,
  Equal,
  Arrow,
  Star,
  Question,
};

struct Token {
  Tok kind = Tok::Eof;
  std::string text;
  unsigned line = 1, col = 1;

  bool is(Tok k) const { return kind == k; }
  bool isIdent(llvm::StringRef s) const { return kind == Tok::Ident && text == s; }
};

/// Splits a buffer into tokens; the last token is Eof or an Error.
std::vector<Token> tokenize(llvm::StringRef buffer);

/// Name of a token kind for "expected ..." messages.
llvm::StringRef tokenKindName(Tok k);

/// True when a value or graph name prints without quotes ([A-Za-z0-9_.]+).
bool isBareName(llvm::StringRef s);
/// True for [A-Za-z_][A-Za-z0-9_.]* (op types, domains, attribute names, dims).
bool isIdentifier(llvm::StringRef s);
/// Writes `s` as a quoted string with \HH escapes.
void printQuoted(llvm::raw_ostream &os, llvm::StringRef s);
/// Writes an identifier bare, or quoted when it is not one (or is a keyword
/// of the context, as `reserved` says).
void printIdentOrQuoted(llvm::raw_ostream &os, llvm::StringRef s, bool reserved = false);
/// Writes `%name` / `@name`, quoting when needed.
void printValueName(llvm::raw_ostream &os, llvm::StringRef name);
void printGraphName(llvm::raw_ostream &os, llvm::StringRef name);

/// True when node attribute `attr` of a default-domain op holds an element type
/// (Cast.to, RandomNormal.dtype, ...), so it prints as a dtype name.
bool isDTypeAttribute(llvm::StringRef domain, llvm::StringRef opType, llvm::StringRef attr);
/// True when tensor elements of this type print as `hex` data.
bool printsAsHex(DType t);

} // namespace text
} // namespace mpc

#endif // MPC_LIB_TEXT_SYNTAX_H
