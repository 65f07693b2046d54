//===- ParseLiterals.cpp - Types, tensor data and attribute values ---------===//
//
// The parser's leaves: types and shapes, tensor literals (lists, splats,
// hex, external data confined to the model's folder) and attribute values,
// whose kind follows from their spelling.
//
//===----------------------------------------------------------------------===//
#include "Parser.h"
#include "mpc/IR/Limits.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Text/Text.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include <cerrno>
#include <cstring>

using namespace mpc;
using namespace mpc::text;

// Types and tensor data
//===----------------------------------------------------------------------===//

bool Parser::parseShape(Type &t) {
  if (!expect(Tok::LBracket))
    return false;
  if (consumeIf(Tok::Star))
    return expect(Tok::RBracket); // unknown rank
  t.hasShape = true;
  if (consumeIf(Tok::RBracket))
    return true;
  do {
    const Token &d = cur();
    if (d.is(Tok::Int)) {
      int64_t v;
      if (!parseInt(d, v))
        return false;
      if (v < 0)
        return error(d, "dimension " + d.text + " is negative");
      t.dims.push_back(Dim::known(v));
    } else if (d.is(Tok::Question)) {
      t.dims.push_back(Dim());
    } else if (d.is(Tok::Ident) || d.is(Tok::String)) {
      if (d.text.empty())
        return error(d, "a symbolic dimension needs a name");
      t.dims.push_back(Dim::symbolic(d.text));
    } else {
      return unexpected("a dimension");
    }
    consume();
  } while (consumeIf(Tok::Comma));
  return expect(Tok::RBracket);
}

bool Parser::parseType(Type &t) {
  t = Type();
  if (consumeIf(Tok::Question))
    return true;
  if (!cur().is(Tok::Ident))
    return unexpected("a type");
  Token kw = cur();
  if ((kw.text == "seq" || kw.text == "opt") && peek().is(Tok::Less)) {
    consume();
    consume();
    Type inner;
    if (!parseType(inner) || !expect(Tok::Greater))
      return false;
    t = Type::wrap(kw.text == "seq" ? TypeKind::Sequence : TypeKind::Optional, std::move(inner));
    return true;
  }
  if ((kw.text == "map" || kw.text == "sparse") && peek().is(Tok::Less)) {
    consume();
    consume();
    auto key = parseDType(cur().text);
    if (!cur().is(Tok::Ident) || !key)
      return unexpected("an element type");
    consume();
    t.elem = *key;
    if (kw.text == "map") {
      t.kind = TypeKind::Map;
      Type inner;
      if (!expect(Tok::Comma) || !parseType(inner))
        return false;
      t.inner = std::make_unique<Type>(std::move(inner));
    } else {
      t.kind = TypeKind::SparseTensor;
      if (cur().is(Tok::LBracket) && !parseShape(t))
        return false;
    }
    return expect(Tok::Greater);
  }
  auto e = parseDType(kw.text);
  if (!e)
    return error(kw, "unknown type " + quoteName(kw.text));
  consume();
  t.kind = TypeKind::Tensor;
  t.elem = *e;
  if (cur().is(Tok::LBracket))
    return parseShape(t);
  return true;
}

/// A type that must be a tensor of a known shape (initializers, dense<>).
bool Parser::parseTensorType(Tensor &t) {
  Token at = cur();
  Type ty;
  if (!parseType(ty))
    return false;
  if (!ty.isTensor() || ty.elem == DType::Undefined)
    return error(at, "expected a tensor type, found '" + typeString(ty) + "'");
  if (!ty.hasShape || ty.numElements() < 0)
    return error(at, "tensor type '" + typeString(ty) + "' needs a known shape");
  t.dtype = ty.elem;
  t.dims.clear();
  for (const Dim &d : ty.dims)
    t.dims.push_back(d.value);
  return true;
}

template <typename T> static void store(uint8_t *dst, T v) { std::memcpy(dst, &v, sizeof(T)); }

bool Parser::encodeScalar(const Token &tok, DType dt, uint8_t *dst) {
  bool isNum = tok.is(Tok::Int) || tok.is(Tok::Float) || tok.isIdent("inf") || tok.isIdent("nan");
  if (isFloatingPoint(dt)) {
    if (!isNum)
      return error(tok, "expected a value of type " + dtypeName(dt).str() + ", found " +
                            describeToken(tok));
    const char *s = tok.text.c_str();
    if (dt == DType::F32) {
      store(dst, std::strtof(s, nullptr));
      return true;
    }
    double d = std::strtod(s, nullptr);
    if (dt == DType::F64) {
      store(dst, d);
      return true;
    }
    llvm::APFloat f(d);
    bool lost;
    f.convert(dt == DType::F16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    store(dst, static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue()));
    return true;
  }
  if (dt == DType::Bool && (tok.isIdent("true") || tok.isIdent("false"))) {
    store<uint8_t>(dst, tok.text == "true");
    return true;
  }
  if (!tok.is(Tok::Int))
    return error(tok, "expected a value of type " + dtypeName(dt).str() + ", found " +
                          describeToken(tok));
  if (dt == DType::U64) {
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(tok.text.c_str(), &end, 10);
    if (tok.text[0] == '-' || errno == ERANGE || *end)
      return error(tok, "value " + tok.text + " does not fit u64");
    store<uint64_t>(dst, v);
    return true;
  }
  int64_t v;
  if (!parseInt(tok, v))
    return false;
  auto fits = [&](int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  bool ok = true;
  switch (dt) {
  case DType::I8:
    ok = fits(INT8_MIN, INT8_MAX);
    store<int8_t>(dst, static_cast<int8_t>(v));
    break;
  case DType::U8:
  case DType::Bool:
    ok = fits(0, UINT8_MAX);
    store<uint8_t>(dst, static_cast<uint8_t>(v));
    break;
  case DType::I16:
    ok = fits(INT16_MIN, INT16_MAX);
    store<int16_t>(dst, static_cast<int16_t>(v));
    break;
  case DType::U16:
    ok = fits(0, UINT16_MAX);
    store<uint16_t>(dst, static_cast<uint16_t>(v));
    break;
  case DType::I32:
    ok = fits(INT32_MIN, INT32_MAX);
    store<int32_t>(dst, static_cast<int32_t>(v));
    break;
  case DType::U32:
    ok = fits(0, UINT32_MAX);
    store<uint32_t>(dst, static_cast<uint32_t>(v));
    break;
  case DType::I64:
    store<int64_t>(dst, v);
    break;
  default:
    return error(tok, "elements of type " + dtypeName(dt).str() + " must be given as hex data");
  }
  if (!ok)
    return error(tok, "value " + tok.text + " does not fit " + dtypeName(dt).str());
  return true;
}

bool Parser::parseExternal(Tensor &t) {
  namespace fs = llvm::sys::fs;
  namespace path = llvm::sys::path;
  Token at = cur();
  consume(); // 'external'
  ExternalRef r;
  if (!expect(Tok::LParen))
    return false;
  if (!cur().is(Tok::String))
    return unexpected("a location string");
  r.location = cur().text;
  consume();
  while (consumeIf(Tok::Comma)) {
    Token key = cur();
    if (!key.isIdent("offset") && !key.isIdent("length"))
      return unexpected("'offset' or 'length'");
    consume();
    int64_t v;
    if (!expect(Tok::Equal) || !parseInt(cur(), v))
      return false;
    if (v < 0)
      return error(cur(), key.text + " must not be negative");
    consume();
    if (key.text == "offset")
      r.offset = static_cast<uint64_t>(v);
    else
      r.length = v;
  }
  if (!expect(Tok::RParen))
    return false;

  // The same confinement rules as ONNX import: relative, no "..", and the
  // real path (symlinks resolved) inside the folder of the text file.
  if (r.location.empty() || path::is_absolute(r.location))
    return error(at, "external data location " + quoteName(r.location) +
                         " must be a relative path inside the model's folder");
  for (auto it = path::begin(r.location), e = path::end(r.location); it != e; ++it)
    if (*it == "..")
      return error(at, "external data location " + quoteName(r.location) + " escapes the model's folder");
  llvm::SmallString<256> full(model->baseDir), realFull, realBase;
  path::append(full, r.location);
  if (fs::real_path(full, realFull) || fs::real_path(model->baseDir, realBase))
    return error(at, "external data file " + quoteName(r.location) + " not found");
  llvm::StringRef rf = realFull, rb = realBase;
  if (!rf.startswith(rb) || rf.size() <= rb.size() || !path::is_separator(rf[rb.size()]))
    return error(at,
                 "external data location " + quoteName(r.location) +
                     " resolves outside the model's folder");
  r.path = std::string(realFull);
  if (r.length >= 0 && static_cast<uint64_t>(r.length) != t.byteSize())
    return error(at, llvm::formatv("external data length {0} does not match its shape ({1} "
                                   "bytes)",
                                   r.length, t.byteSize()));
  uint64_t size = 0;
  if (fs::file_size(r.path, size) || r.offset + t.byteSize() > size)
    return error(at, "external data file " + quoteName(r.location) + " is shorter than offset + length");
  t.setExternal(std::move(r));
  return true;
}

bool Parser::parseTensorData(Tensor &t) {
  Token at = cur();
  int64_t n = t.numElements();
  size_t elemSize = dtypeBits(t.dtype) / 8;
  bool isString = t.dtype == DType::String;
  bool numeric = !isString && !printsAsHex(t.dtype);
  std::vector<uint8_t> bytes(isString ? 0 : t.byteSize());

  if (at.isIdent("external"))
    return parseExternal(t);
  if (at.isIdent("elided"))
    return error(at, "tensor data was elided by the printer and cannot be parsed");
  if (at.isIdent("zeros")) {
    consume();
    if (isString)
      t.strings().assign(n, std::string());
    else
      t.setBytes(std::move(bytes));
    return true;
  }
  if (at.isIdent("hex")) {
    consume();
    if (isString)
      return error(at, "string tensors cannot be given as hex data");
    if (!cur().is(Tok::String))
      return unexpected("a hex string");
    llvm::StringRef hex = cur().text;
    std::string decoded;
    if (hex.size() % 2 || !llvm::tryGetFromHex(hex, decoded))
      return error(cur(), "malformed hex data");
    if (decoded.size() != bytes.size())
      return error(cur(), llvm::formatv("hex data has {0} bytes, type needs {1}", decoded.size(),
                                        bytes.size()));
    consume();
    t.setBytes(std::vector<uint8_t>(decoded.begin(), decoded.end()));
    return true;
  }
  if (!numeric && !isString && !at.is(Tok::LBracket))
    return error(at, "data of type " + dtypeName(t.dtype).str() + " must be given as hex");
  if (at.isIdent("iota")) {
    consume();
    if (!numeric)
      return error(at, "iota needs a numeric element type");
    for (int64_t i = 0; i < n; ++i) {
      Token num = at;
      num.kind = Tok::Int;
      num.text = std::to_string(i);
      if (!encodeScalar(num, t.dtype, bytes.data() + i * elemSize))
        return false;
    }
    t.setBytes(std::move(bytes));
    return true;
  }
  if (at.isIdent("splat")) {
    consume();
    if (!expect(Tok::LParen))
      return false;
    Token v = cur();
    consume();
    if (!expect(Tok::RParen))
      return false;
    if (isString) {
      if (!v.is(Tok::String))
        return error(v, "expected a string, found " + describeToken(v));
      t.strings().assign(n, v.text);
      return true;
    }
    for (int64_t i = 0; i < n; ++i)
      if (!encodeScalar(v, t.dtype, bytes.data() + i * elemSize))
        return false;
    t.setBytes(std::move(bytes));
    return true;
  }
  if (!at.is(Tok::LBracket))
    return unexpected("tensor data ('[', 'splat', 'zeros', 'iota', 'hex' or 'external')");
  consume();
  int64_t count = 0;
  std::vector<std::string> strs;
  std::vector<uint8_t> packed;
  if (!cur().is(Tok::RBracket)) {
    do {
      const Token &v = cur();
      if (isString) {
        if (!v.is(Tok::String))
          return error(v, "expected a string, found " + describeToken(v));
        strs.push_back(v.text);
      } else {
        if (!numeric)
          return error(v, "data of type " + dtypeName(t.dtype).str() + " must be given as hex");
        packed.resize(packed.size() + elemSize);
        if (!encodeScalar(v, t.dtype, packed.data() + packed.size() - elemSize))
          return false;
      }
      ++count;
      consume();
    } while (consumeIf(Tok::Comma));
  }
  if (!expect(Tok::RBracket))
    return false;
  if (count != n)
    return error(at, llvm::formatv("tensor data has {0} values, its type needs {1}", count, n));
  if (isString)
    t.strings() = std::move(strs);
  else
    t.setBytes(std::move(packed));
  return true;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

bool Parser::isFloatToken(const Token &t) {
  return t.is(Tok::Float) || t.isIdent("inf") || t.isIdent("nan");
}

static float floatOf(const Token &t) { return std::strtof(t.text.c_str(), nullptr); }

bool Parser::parseNestedGraph(Node &n, Scope &scope, Attribute &a) {
  auto g = std::make_unique<Graph>(*model, n.getParent(), &n);
  if (peek().is(Tok::GraphName)) // 'graph' '@name'
    g->name = peek().text;
  if (llvm::Error err = checkGraphDepth(*g))
    return error(cur(), llvm::toString(std::move(err)));
  Scope inner;
  inner.graph = g.get();
  inner.parent = &scope;
  if (!parseGraph(*g, inner))
    return false;
  a.graphs.push_back(std::move(g));
  return true;
}

bool Parser::parseOpaque(Attribute &a) {
  consume(); // 'opaque'
  int64_t kind;
  if (!expect(Tok::Less) || !parseInt(cur(), kind))
    return false;
  if (kind < 0 || kind > 14)
    return error(cur(), "unknown attribute kind " + cur().text);
  consume();
  a.kind = static_cast<AttrKind>(kind);
  if (consumeIf(Tok::Colon)) {
    do {
      std::string bytes;
      if (!cur().is(Tok::String))
        return unexpected("a hex string");
      if (cur().text.size() % 2 || !llvm::tryGetFromHex(cur().text, bytes))
        return error(cur(), "malformed hex data");
      a.opaque.push_back(std::move(bytes));
      consume();
    } while (consumeIf(Tok::Comma));
  }
  return expect(Tok::Greater);
}

bool Parser::parseAttrList(Node &n, Scope &scope, Attribute &a) {
  Token open = cur();
  consume(); // '['
  if (consumeIf(Tok::RBracket))
    return error(open, "an empty list needs its kind: ints[], floats[], strings[], tensors[] "
                       "or graphs[]");
  const Token &first = cur();
  bool numbers = first.is(Tok::Int) || isFloatToken(first);
  if (numbers) {
    std::vector<const Token *> elems;
    bool anyFloat = false;
    do {
      if (!cur().is(Tok::Int) && !isFloatToken(cur()))
        return unexpected("a number");
      anyFloat |= isFloatToken(cur());
      elems.push_back(&cur());
      consume();
    } while (consumeIf(Tok::Comma));
    a.kind = anyFloat ? AttrKind::Floats : AttrKind::Ints;
    for (const Token *t : elems) {
      if (anyFloat) {
        a.floats.push_back(floatOf(*t));
        continue;
      }
      int64_t v;
      if (!parseInt(*t, v))
        return false;
      a.ints.push_back(v);
    }
    return expect(Tok::RBracket);
  }
  if (first.is(Tok::String)) {
    a.kind = AttrKind::Strings;
    do {
      if (!cur().is(Tok::String))
        return unexpected("a string");
      a.strings.push_back(cur().text);
      consume();
    } while (consumeIf(Tok::Comma));
    return expect(Tok::RBracket);
  }
  if (first.isIdent("dense")) {
    a.kind = AttrKind::Tensors;
    do {
      if (!atIdent("dense"))
        return unexpected("'dense'");
      consume();
      a.tensors.emplace_back();
      if (!expect(Tok::Less) || !parseTensorType(a.tensors.back()) || !expect(Tok::Colon) ||
          !parseTensorData(a.tensors.back()) || !expect(Tok::Greater))
        return false;
    } while (consumeIf(Tok::Comma));
    return expect(Tok::RBracket);
  }
  if (first.isIdent("graph")) {
    a.kind = AttrKind::Graphs;
    do {
      if (!parseNestedGraph(n, scope, a))
        return false;
    } while (consumeIf(Tok::Comma));
    return expect(Tok::RBracket);
  }
  return unexpected("a list element");
}

bool Parser::parseAttrValue(Node &n, Scope &scope, Attribute &a) {
  const Token &t = cur();
  if (t.is(Tok::Int)) {
    a.kind = AttrKind::Int;
    if (!parseInt(t, a.i))
      return false;
    consume();
    return true;
  }
  if (isFloatToken(t)) {
    a.kind = AttrKind::Float;
    a.f = floatOf(t);
    consume();
    return true;
  }
  if (t.is(Tok::String)) {
    a.kind = AttrKind::String;
    a.s = t.text;
    consume();
    return true;
  }
  if (t.is(Tok::LBracket))
    return parseAttrList(n, scope, a);
  if (!t.is(Tok::Ident))
    return unexpected("an attribute value");
  static const std::pair<const char *, AttrKind> kEmptyLists[] = {{"ints", AttrKind::Ints},
                                                                  {"floats", AttrKind::Floats},
                                                                  {"strings", AttrKind::Strings},
                                                                  {"tensors", AttrKind::Tensors},
                                                                  {"graphs", AttrKind::Graphs}};
  for (const auto &kv : kEmptyLists)
    if (t.text == kv.first && peek().is(Tok::LBracket)) {
      consume();
      consume();
      a.kind = kv.second;
      return expect(Tok::RBracket);
    }
  if (t.text == "dense") {
    consume();
    a.kind = AttrKind::Tensor;
    a.tensors.emplace_back();
    return expect(Tok::Less) && parseTensorType(a.tensors[0]) && expect(Tok::Colon) &&
           parseTensorData(a.tensors[0]) && expect(Tok::Greater);
  }
  if (t.text == "graph") {
    a.kind = AttrKind::Graph;
    return parseNestedGraph(n, scope, a);
  }
  if (t.text == "opaque")
    return parseOpaque(a);
  if (auto dt = parseDType(t.text)) {
    a.kind = AttrKind::Int;
    a.i = static_cast<int64_t>(*dt);
    consume();
    return true;
  }
  return unexpected("an attribute value");
}

bool Parser::parseAttribute(Node &n, Scope &scope) {
  const Token nameTok = cur();
  if (!nameTok.is(Tok::Ident) && !nameTok.is(Tok::String))
    return unexpected("an attribute name");
  if (n.attr(nameTok.text))
    return error(nameTok, "attribute " + quoteName(nameTok.text) + " is given twice");
  consume();
  if (!expect(Tok::Equal))
    return false;
  Attribute a;
  a.name = nameTok.text;
  if (!parseAttrValue(n, scope, a))
    return false;
  n.attrs.push_back(std::move(a));
  return true;
}

//===----------------------------------------------------------------------===//
