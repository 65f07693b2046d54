//===- Syntax.cpp - Tokens and spelling rules of the text form -------------===//
//
// The lexer and the quoting rules. The lexer works on the whole buffer up
// front; models are small enough and the parser then gets free lookahead.
//
//===----------------------------------------------------------------------===//
#include "Syntax.h"
#include "llvm/ADT/StringExtras.h"

using namespace mpc;
using namespace mpc::text;

static bool isIdentStart(char c) { return llvm::isAlpha(c) || c == '_'; }
static bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_' || c == '.'; }

bool text::isBareName(llvm::StringRef s) { return !s.empty() && llvm::all_of(s, isIdentChar); }

bool text::isIdentifier(llvm::StringRef s) {
  return !s.empty() && isIdentStart(s[0]) && llvm::all_of(s, isIdentChar);
}

void text::printQuoted(llvm::raw_ostream &os, llvm::StringRef s) {
  os << '"';
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
      os << c;
    else
      os << '\\' << llvm::hexdigit(c >> 4) << llvm::hexdigit(c & 15);
  }
  os << '"';
}

void text::printIdentOrQuoted(llvm::raw_ostream &os, llvm::StringRef s, bool reserved) {
  if (!reserved && isIdentifier(s))
    os << s;
  else
    printQuoted(os, s);
}

void text::printValueName(llvm::raw_ostream &os, llvm::StringRef name) {
  os << '%';
  if (isBareName(name))
    os << name;
  else
    printQuoted(os, name);
}

void text::printGraphName(llvm::raw_ostream &os, llvm::StringRef name) {
  os << '@';
  if (isBareName(name))
    os << name;
  else
    printQuoted(os, name);
}

bool text::isDTypeAttribute(llvm::StringRef domain, llvm::StringRef opType, llvm::StringRef attr) {
  if (!domain.empty() && domain != "ai.onnx")
    return false;
  if (attr == "to")
    return opType == "Cast";
  if (attr == "dtype")
    return opType == "RandomNormal" || opType == "RandomUniform" || opType == "RandomNormalLike" ||
           opType == "RandomUniformLike" || opType == "EyeLike" || opType == "Multinomial" ||
           opType == "Bernoulli" || opType == "SequenceEmpty";
  return false;
}

bool text::printsAsHex(DType t) {
  switch (t) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
  case DType::U8:
  case DType::I8:
  case DType::U16:
  case DType::I16:
  case DType::U32:
  case DType::I32:
  case DType::U64:
  case DType::I64:
  case DType::Bool:
  case DType::String:
    return false;
  default:
    return true;
  }
}

llvm::StringRef text::tokenKindName(Tok k) {
  switch (k) {
  case Tok::Eof:
    return "end of input";
  case Tok::Error:
    return "error";
  case Tok::Ident:
    return "identifier";
  case Tok::ValueName:
    return "value name";
  case Tok::GraphName:
    return "graph name";
  case Tok::Int:
    return "integer";
  case Tok::Float:
    return "float";
  case Tok::String:
    return "string";
  case Tok::LParen:
    return "'('";
  case Tok::RParen:
    return "')'";
  case Tok::LBrace:
    return "'{'";
  case Tok::RBrace:
    return "'}'";
  case Tok::LBracket:
    return "'['";
  case Tok::RBracket:
    return "']'";
  case Tok::Less:
    return "'<'";
  case Tok::Greater:
    return "'>'";
  case Tok::Comma:
    return "','";
  case Tok::Colon:
    return "':'";
  case Tok::ColonColon:
    return "'::'";
  case Tok::Equal:
    return "'='";
  case Tok::Arrow:
    return "'->'";
  case Tok::Star:
    return "'*'";
  case Tok::Question:
    return "'?'";
  }
  return "token";
}

namespace {
/// Cursor over the buffer that tracks line and column (1-based, bytes).
class Lexer {
public:
  explicit Lexer(llvm::StringRef buf) : buf(buf) {}
  std::vector<Token> run();

private:
  llvm::StringRef buf;
  size_t pos = 0;
  unsigned line = 1, col = 1;

  char peek(size_t ahead = 0) const { return pos + ahead < buf.size() ? buf[pos + ahead] : '\0'; }
  void advance() {
    if (buf[pos] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    ++pos;
  }
  bool atEnd() const { return pos >= buf.size(); }
  void skipSpaceAndComments();
  Token lexString(Token t);
  Token lexNumber(Token t);
  Token lexName(Token t, Tok kind);
  static Token error(Token t, std::string msg) {
    t.kind = Tok::Error;
    t.text = std::move(msg);
    return t;
  }
};
} // namespace

void Lexer::skipSpaceAndComments() {
  while (!atEnd()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (!atEnd() && peek() != '\n')
        advance();
    } else {
      return;
    }
  }
}

Token Lexer::lexString(Token t) {
  advance(); // opening quote
  t.kind = Tok::String;
  while (true) {
    if (atEnd() || peek() == '\n')
      return error(t, "unterminated string");
    char c = peek();
    if (c == '"') {
      advance();
      return t;
    }
    if (c != '\\') {
      t.text.push_back(c);
      advance();
      continue;
    }
    advance();
    char e = peek();
    if (e == '\\' || e == '"') {
      t.text.push_back(e);
      advance();
    } else if (e == 'n' || e == 't') {
      t.text.push_back(e == 'n' ? '\n' : '\t');
      advance();
    } else if (llvm::isHexDigit(e) && llvm::isHexDigit(peek(1))) {
      t.text.push_back(static_cast<char>(llvm::hexFromNibbles(e, peek(1))));
      advance();
      advance();
    } else {
      return error(t, "invalid escape in string");
    }
  }
}

Token Lexer::lexNumber(Token t) {
  size_t start = pos;
  if (peek() == '-')
    advance();
  if (peek() == 'i' && buf.substr(pos).startswith("inf") && !isIdentChar(peek(3))) {
    for (int i = 0; i < 3; ++i)
      advance();
    t.kind = Tok::Float;
    t.text = "-inf";
    return t;
  }
  if (!llvm::isDigit(peek()))
    return error(t, "expected a digit after '-'");
  bool isFloat = false;
  while (llvm::isDigit(peek()))
    advance();
  if (peek() == '.') {
    isFloat = true;
    advance();
    while (llvm::isDigit(peek()))
      advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (llvm::isDigit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && llvm::isDigit(peek(2))))) {
    isFloat = true;
    advance();
    if (peek() == '+' || peek() == '-')
      advance();
    while (llvm::isDigit(peek()))
      advance();
  }
  if (isIdentStart(peek()))
    return error(t, "invalid character after a number");
  t.kind = isFloat ? Tok::Float : Tok::Int;
  t.text = buf.substr(start, pos - start).str();
  return t;
}

Token Lexer::lexName(Token t, Tok kind) {
  advance(); // sigil
  t.kind = kind;
  if (peek() == '"') {
    Token s = lexString(t);
    if (s.is(Tok::Error))
      return s;
    s.kind = kind;
    return s;
  }
  size_t start = pos;
  while (!atEnd() && isIdentChar(peek()))
    advance();
  if (pos == start)
    return error(t, kind == Tok::ValueName ? "expected a name after '%'"
                                           : "expected a name after '@'");
  t.text = buf.substr(start, pos - start).str();
  return t;
}

std::vector<Token> Lexer::run() {
  std::vector<Token> toks;
  while (true) {
    skipSpaceAndComments();
    Token t;
    t.line = line;
    t.col = col;
    if (atEnd()) {
      toks.push_back(t);
      return toks;
    }
    char c = peek();
    auto single = [&](Tok k) {
      advance();
      t.kind = k;
      return t;
    };
    if (c == '"')
      t = lexString(t);
    else if (c == '%')
      t = lexName(t, Tok::ValueName);
    else if (c == '@')
      t = lexName(t, Tok::GraphName);
    else if (llvm::isDigit(c) || (c == '-' && peek(1) != '>'))
      t = lexNumber(t);
    else if (isIdentStart(c)) {
      size_t start = pos;
      while (!atEnd() && isIdentChar(peek()))
        advance();
      t.kind = Tok::Ident;
      t.text = buf.substr(start, pos - start).str();
    } else if (c == '-') {
      advance();
      t = single(Tok::Arrow);
    } else if (c == ':' && peek(1) == ':') {
      advance();
      t = single(Tok::ColonColon);
    } else {
      switch (c) {
      case '(':
        t = single(Tok::LParen);
        break;
      case ')':
        t = single(Tok::RParen);
        break;
      case '{':
        t = single(Tok::LBrace);
        break;
      case '}':
        t = single(Tok::RBrace);
        break;
      case '[':
        t = single(Tok::LBracket);
        break;
      case ']':
        t = single(Tok::RBracket);
        break;
      case '<':
        t = single(Tok::Less);
        break;
      case '>':
        t = single(Tok::Greater);
        break;
      case ',':
        t = single(Tok::Comma);
        break;
      case ':':
        t = single(Tok::Colon);
        break;
      case '=':
        t = single(Tok::Equal);
        break;
      case '*':
        t = single(Tok::Star);
        break;
      case '?':
        t = single(Tok::Question);
        break;
      default:
        t = error(t, llvm::isPrint(c) ? std::string("unexpected character '") + c + "'"
                                      : "unexpected byte in input");
      }
    }
    toks.push_back(t);
    if (t.is(Tok::Error))
      return toks;
  }
}

std::vector<Token> text::tokenize(llvm::StringRef buffer) { return Lexer(buffer).run(); }
