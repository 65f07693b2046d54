//===- Parser.cpp - Text to model ------------------------------------------===//
//
// Recursive descent over the token vector from Syntax.cpp. Each graph has a
// scope chained to its enclosing graph's; a nested graph's use of a name no
// scope defines yet is kept pending until an enclosing graph defines it (a
// forward capture), and that graph is sorted topologically when it ends.
// The parser checks names and syntax only: arities and types are the
// Verifier's job, so verifier tests can be written as text.
//
//===----------------------------------------------------------------------===//
#include "Parser.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Ops/TypeInference.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Text/Text.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include <cerrno>
#include <cstdlib>

using namespace mpc;
using namespace mpc::text;

std::string text::typeString(const Type &t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printType(t, os);
  return os.str();
}

std::string text::describeToken(const Token &t) {
  switch (t.kind) {
  case Tok::Ident:
  case Tok::Int:
  case Tok::Float:
    return quoteName(t.text);
  case Tok::ValueName:
    return quoteName("%" + t.text);
  case Tok::GraphName:
    return quoteName("@" + t.text);
  default:
    return tokenKindName(t.kind).str();
  }
}
bool Parser::error(const Token &at, const llvm::Twine &msg) {
  if (firstError.empty())
    firstError =
        llvm::formatv("{0}:{1}:{2}: error: {3}", escapeName(bufferName), at.line, at.col, msg.str()).str();
  return false;
}

bool Parser::unexpected(llvm::StringRef expected) {
  if (cur().is(Tok::Error))
    return error(cur(), cur().text);
  return error(cur(), "expected " + expected + ", found " + describeToken(cur()));
}

bool Parser::expect(Tok k) {
  if (consumeIf(k))
    return true;
  return unexpected(tokenKindName(k));
}

bool Parser::expectIdent(llvm::StringRef kw) {
  if (atIdent(kw)) {
    consume();
    return true;
  }
  return unexpected(quoteName(kw));
}

bool Parser::parseInt(const Token &tok, int64_t &out) {
  if (!tok.is(Tok::Int))
    return error(tok, "expected an integer, found " + describeToken(tok));
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(tok.text.c_str(), &end, 10);
  if (errno == ERANGE || *end)
    return error(tok, "integer " + quoteName(tok.text) + " is out of range");
  out = v;
  return true;
}

//===----------------------------------------------------------------------===//
// Names and scopes
//===----------------------------------------------------------------------===//

Value *Parser::lookup(const Scope &scope, llvm::StringRef name) const {
  for (const Scope *s = &scope; s; s = s->parent) {
    auto it = s->names.find(name);
    if (it != s->names.end())
      return it->second;
  }
  return nullptr;
}

static bool isNestedIn(const Graph *g, const Graph *ancestor) {
  for (const Graph *p = g->parent(); p; p = p->parent())
    if (p == ancestor)
      return true;
  return false;
}

bool Parser::define(Scope &scope, Value *v, const Token &at) {
  const std::string &name = v->name();
  if (lookup(scope, name))
    return error(at, "value " + quoteName("%" + name) + " is already defined");
  if (scope.nestedNames.count(name))
    return error(at, "value " + quoteName("%" + name) + " is already defined in a nested graph");
  scope.names[name] = v;

  auto it = pending.find(name);
  if (it == pending.end())
    return true;
  std::vector<PendingUse> keep;
  for (const PendingUse &u : it->second) {
    if (u.origin == scope.graph)
      return error(u.tok, "value " + quoteName("%" + name) + " is used before its definition");
    if (!isNestedIn(u.origin, scope.graph)) {
      keep.push_back(u);
      continue;
    }
    if (Node *producer = v->producer())
      for (Graph *g = u.user->getParent(); g && g != scope.graph; g = g->parent())
        if (g->owningNode() == producer)
          return error(u.tok, "value " + quoteName("%" + name) +
                                  " is captured by a graph of the node that "
                                  "defines it");
    u.user->setInput(u.operand, v);
    scope.needsSort = true;
  }
  if (keep.empty())
    pending.erase(it);
  else
    it->second = std::move(keep);
  return true;
}

bool Parser::closeScope(Scope &scope, const Token &at) {
  Graph &g = *scope.graph;
  if (scope.needsSort && !g.sortTopologically())
    return error(at, "the nodes of graph " + quoteName("@" + g.name) + " form a cycle through captured values");
  g.renumber();
  if (scope.parent) {
    for (const auto &kv : scope.names)
      scope.parent->nestedNames.insert(kv.getKey());
    for (const auto &kv : scope.nestedNames)
      scope.parent->nestedNames.insert(kv.getKey());
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Statements and graphs
//===----------------------------------------------------------------------===//

bool Parser::parseOperand(Node &n, Scope &scope) {
  const Token &t = cur();
  if (t.isIdent("_")) {
    n.addInput(nullptr);
    consume();
    return true;
  }
  if (!t.is(Tok::ValueName))
    return unexpected("an operand ('%name' or '_')");
  if (Value *v = lookup(scope, t.text)) {
    n.addInput(v);
  } else if (!scope.parent) {
    return error(t, "use of undefined value " + quoteName("%" + t.text));
  } else {
    // Maybe a capture of a value an enclosing graph defines further down.
    n.addInput(nullptr);
    pending[t.text].push_back({&n, n.numInputs() - 1, scope.graph, t});
  }
  consume();
  return true;
}

bool Parser::parseNode(Graph &g, Scope &scope) {
  std::vector<Token> results; // ValueName or the '_' identifier
  if (cur().is(Tok::ValueName) ||
      (atIdent("_") && (peek().is(Tok::Comma) || peek().is(Tok::Equal)))) {
    do {
      if (!cur().is(Tok::ValueName) && !atIdent("_"))
        return unexpected("a result name or '_'");
      results.push_back(cur());
      consume();
    } while (consumeIf(Tok::Comma));
    if (!expect(Tok::Equal))
      return false;
  }
  std::string domain;
  if ((cur().is(Tok::Ident) || cur().is(Tok::String)) && peek().is(Tok::ColonColon)) {
    domain = cur().text;
    consume();
    consume();
  }
  if (!cur().is(Tok::Ident) && !cur().is(Tok::String))
    return unexpected("an op name");
  Node *n = g.createNode(cur().text, domain);
  consume();

  if (!expect(Tok::LParen))
    return false;
  if (!cur().is(Tok::RParen)) {
    do {
      if (!parseOperand(*n, scope))
        return false;
    } while (consumeIf(Tok::Comma));
  }
  if (!expect(Tok::RParen))
    return false;

  if (consumeIf(Tok::LBrace)) {
    if (!cur().is(Tok::RBrace)) {
      do {
        if (!parseAttribute(*n, scope))
          return false;
      } while (consumeIf(Tok::Comma));
    }
    if (!expect(Tok::RBrace))
      return false;
  }

  unsigned present = llvm::count_if(results, [](const Token &t) { return t.is(Tok::ValueName); });
  std::vector<Type> types;
  bool typed = false;
  if (cur().is(Tok::Colon)) {
    Token colon = cur();
    consume();
    typed = true;
    do {
      types.emplace_back();
      if (!parseType(types.back()))
        return false;
    } while (consumeIf(Tok::Comma));
    if (types.size() != present)
      return error(colon,
                   llvm::formatv("expected {0} result type(s), found {1}", present, types.size()));
  }
  if (atIdent("name") && peek().is(Tok::Equal)) {
    consume();
    consume();
    if (!cur().is(Tok::String))
      return unexpected("a node name string");
    n->name = cur().text;
    if (!n->name.empty())
      model->reserveName(n->name);
    consume();
  }

  n->resizeOutputs(static_cast<unsigned>(results.size()));
  unsigned k = 0;
  for (unsigned i = 0; i < results.size(); ++i) {
    if (!results[i].is(Tok::ValueName))
      continue;
    Value *v = n->setOutput(i, results[i].text, typed ? types[k++] : Type());
    v->hasValueInfo = true;
    if (!define(scope, v, results[i]))
      return false;
  }
  if (!typed) {
    SignatureLookup lk = lookupSignature(*n);
    for (unsigned i = 0; i < n->numOutputs(); ++i)
      if (Value *v = n->output(i)) {
        v->type = inferOutputType(*n, i, lk.sig);
        inferred.insert(v);
      }
  }
  return true;
}

bool Parser::parseInit(Graph &g, Scope &scope) {
  consume(); // 'init'
  Token nameTok = cur();
  if (!expect(Tok::ValueName) || !expect(Tok::Colon))
    return false;
  Tensor t;
  if (!parseTensorType(t) || !expect(Tok::Equal) || !parseTensorData(t))
    return false;
  auto it = scope.names.find(nameTok.text);
  if (it != scope.names.end() && it->second->kind() == ValueKind::GraphInput &&
      !it->second->initializer()) {
    g.setInputDefault(it->second, std::move(t));
    return true;
  }
  Value *v = g.addInitializer(nameTok.text, std::move(t));
  return define(scope, v, nameTok);
}

bool Parser::parseOutputs(Graph &g, Scope &scope, const std::vector<OutputDecl> &decls) {
  Token ret = cur();
  consume(); // 'return'
  std::vector<std::pair<Value *, Token>> rets;
  if (cur().is(Tok::ValueName)) {
    do {
      if (!cur().is(Tok::ValueName))
        return unexpected("a value name");
      Value *v = lookup(scope, cur().text);
      if (!v)
        return error(cur(), "use of undefined value " + quoteName("%" + cur().text));
      rets.emplace_back(v, cur());
      consume();
    } while (consumeIf(Tok::Comma));
  }
  if (rets.size() != decls.size())
    return error(ret, llvm::formatv("graph '@{0}' declares {1} output(s) but returns {2}", escapeName(g.name),
                                    decls.size(), rets.size()));
  for (size_t i = 0; i < decls.size(); ++i) {
    const OutputDecl &d = decls[i];
    Value *v = rets[i].first;
    if (d.hasName && d.tok.text != v->name())
      return error(rets[i].second, llvm::formatv("output {0} is declared as '%{1}' but '%{2}' "
                                                 "is returned",
                                                 i, escapeName(d.tok.text), escapeName(v->name())));
    if (d.hasType) {
      if (!v->type.isKnown() || inferred.count(v)) {
        v->type = d.type;
        inferred.erase(v);
      } else if (v->type != d.type) {
        return error(d.tok, "output " + quoteName("%" + v->name()) + " is declared as '" + typeString(d.type) +
                                "' but has type '" + typeString(v->type) + "'");
      }
    }
    g.addOutput(v);
  }
  return true;
}

bool Parser::parseGraph(Graph &g, Scope &scope) {
  Token start = cur();
  if (!expectIdent("graph"))
    return false;
  if (!cur().is(Tok::GraphName))
    return unexpected("a graph name ('@name')");
  g.name = cur().text;
  consume();

  if (!expect(Tok::LParen))
    return false;
  if (!cur().is(Tok::RParen)) {
    do {
      Token nameTok = cur();
      Type t;
      if (!expect(Tok::ValueName) || !expect(Tok::Colon) || !parseType(t))
        return false;
      Value *v = g.addInput(nameTok.text, std::move(t));
      if (!define(scope, v, nameTok))
        return false;
    } while (consumeIf(Tok::Comma));
  }
  if (!expect(Tok::RParen) || !expect(Tok::Arrow) || !expect(Tok::LParen))
    return false;
  std::vector<OutputDecl> decls;
  if (!cur().is(Tok::RParen)) {
    do {
      OutputDecl d;
      d.tok = cur();
      if (consumeIf(Tok::ValueName)) {
        d.hasName = true;
        if (consumeIf(Tok::Colon)) {
          d.hasType = true;
          if (!parseType(d.type))
            return false;
        }
      } else {
        d.hasType = true;
        if (!parseType(d.type))
          return false;
      }
      decls.push_back(std::move(d));
    } while (consumeIf(Tok::Comma));
  }
  if (!expect(Tok::RParen) || !expect(Tok::LBrace))
    return false;

  while (!atIdent("return")) {
    if (cur().is(Tok::Eof) || cur().is(Tok::RBrace))
      return unexpected("'return'");
    bool ok =
        atIdent("init") && peek().is(Tok::ValueName) ? parseInit(g, scope) : parseNode(g, scope);
    if (!ok)
      return false;
  }
  if (!parseOutputs(g, scope, decls) || !expect(Tok::RBrace))
    return false;
  return closeScope(scope, start);
}

bool Parser::parseTraining(Scope &mainScope) {
  consume(); // 'training'
  if (!expect(Tok::LBrace))
    return false;
  TrainingInfo ti;
  auto parseStage = [&](std::unique_ptr<Graph> &out) {
    consume();
    out = std::make_unique<Graph>(*model, model->graph.get());
    Scope s;
    s.graph = out.get();
    s.parent = &mainScope;
    return parseGraph(*out, s);
  };
  if (atIdent("initialization") && !parseStage(ti.initialization))
    return false;
  if (atIdent("algorithm") && !parseStage(ti.algorithm))
    return false;
  while (atIdent("initialization_binding") || atIdent("update_binding")) {
    auto &list = atIdent("update_binding") ? ti.updateBinding : ti.initializationBinding;
    consume();
    Token key = cur();
    if (!expect(Tok::ValueName) || !expect(Tok::Equal))
      return false;
    Token value = cur();
    if (!expect(Tok::ValueName))
      return false;
    list.emplace_back(key.text, value.text);
  }
  if (!cur().is(Tok::RBrace))
    return unexpected("'initialization', 'algorithm', a binding or '}'");
  consume();
  model->trainingInfo.push_back(std::move(ti));
  return true;
}

bool Parser::parseHeader() {
  bool sawOpset = false;
  while (atIdent("ir") || atIdent("opset")) {
    if (atIdent("ir")) {
      consume();
      if (!parseInt(cur(), model->irVersion))
        return false;
      consume();
      continue;
    }
    consume();
    if (!cur().is(Tok::Ident) && !cur().is(Tok::String))
      return unexpected("an opset domain");
    Token domTok = cur();
    std::string domain = domTok.text == "ai.onnx" ? "" : domTok.text;
    consume();
    int64_t version;
    if (!parseInt(cur(), version))
      return false;
    consume();
    if (!sawOpset)
      model->opsets.clear();
    sawOpset = true;
    for (const OpsetId &o : model->opsets)
      if (o.domain == domain)
        return error(domTok, "opset for domain " + quoteName(domTok.text) + " is given twice");
    model->opsets.push_back({domain, version});
  }
  return true;
}

bool Parser::parseModel() {
  model->opsets.push_back({"", 17});
  if (!parseHeader())
    return false;
  model->graph = std::make_unique<Graph>(*model);
  Scope mainScope;
  mainScope.graph = model->graph.get();
  if (!parseGraph(*model->graph, mainScope))
    return false;
  while (atIdent("training"))
    if (!parseTraining(mainScope))
      return false;
  if (!cur().is(Tok::Eof))
    return unexpected(model->trainingInfo.empty() ? "end of input or 'training'" : "end of input");
  if (!pending.empty()) {
    const PendingUse *first = nullptr;
    for (const auto &kv : pending)
      for (const PendingUse &u : kv.getValue())
        if (!first ||
            std::make_pair(u.tok.line, u.tok.col) < std::make_pair(first->tok.line, first->tok.col))
          first = &u;
    return error(first->tok, "use of undefined value " + quoteName("%" + first->tok.text));
  }
  return true;
}

llvm::Expected<std::unique_ptr<Model>> Parser::run() {
  model = std::make_unique<Model>();
  llvm::SmallString<256> dir(bufferName);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  llvm::sys::fs::make_absolute(dir);
  model->baseDir = std::string(dir);
  if (!parseModel())
    return llvm::make_error<InputError>(firstError);
  return std::move(model);
}

llvm::Expected<std::unique_ptr<Model>> mpc::parseModelText(llvm::StringRef text,
                                                           llvm::StringRef bufferName) {
  return Parser(text, bufferName).run();
}
