//===- Printer.cpp - Model to text -----------------------------------------===//
//
// Writes the text form described in Text.h. Output depends only on the IR's
// contents and list orders (attributes sorted by name), never on addresses,
// so the same model always prints the same bytes.
//
//===----------------------------------------------------------------------===//
#include "Syntax.h"
#include "mpc/Text/Text.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace mpc;
using namespace mpc::text;

/// Writes a float with round-trip precision. `forceFloat` appends ".0" when
/// the digits alone would read back as an integer (attributes).
static void printFloat(llvm::raw_ostream &os, double v, bool isDouble, bool forceFloat) {
  if (std::isnan(v)) {
    os << "nan";
    return;
  }
  if (std::isinf(v)) {
    os << (v < 0 ? "-inf" : "inf");
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof(buf), isDouble ? "%.17g" : "%.9g", v);
  os << buf;
  if (forceFloat && !std::strpbrk(buf, ".e"))
    os << ".0";
}

void mpc::printType(const Type &t, llvm::raw_ostream &os) {
  auto printShape = [&] {
    if (!t.hasShape)
      return;
    os << '[';
    llvm::interleave(
        t.dims, os,
        [&](const Dim &d) {
          if (d.isKnown())
            os << d.value;
          else if (d.param.empty())
            os << '?';
          else
            printIdentOrQuoted(os, d.param.ref());
        },
        ",");
    os << ']';
  };
  auto printInner = [&] {
    if (t.inner)
      printType(*t.inner, os);
    else
      os << '?';
  };
  switch (t.kind) {
  case TypeKind::Unknown:
    os << '?';
    return;
  case TypeKind::Tensor:
    os << dtypeName(t.elem);
    printShape();
    return;
  case TypeKind::SparseTensor:
    os << "sparse<" << dtypeName(t.elem);
    printShape();
    os << '>';
    return;
  case TypeKind::Sequence:
    os << "seq<";
    printInner();
    os << '>';
    return;
  case TypeKind::Optional:
    os << "opt<";
    printInner();
    os << '>';
    return;
  case TypeKind::Map:
    os << "map<" << dtypeName(t.elem) << ", ";
    printInner();
    os << '>';
    return;
  }
}

namespace {

class Printer {
public:
  Printer(llvm::raw_ostream &os, const PrintOptions &opts) : os(os), opts(opts) {}

  void printModel(const Model &m);
  void printGraph(const Graph &g, unsigned indent);

private:
  llvm::raw_ostream &os;
  const PrintOptions &opts;

  void indentBy(unsigned n) { os.indent(2 * n); }
  void printTypedValue(const Value &v);
  void printNode(const Node &n, unsigned indent);
  void printAttrValue(const Node &n, const Attribute &a, unsigned indent);
  void printTensorLiteral(const Tensor &t);
  void printTensorData(const Tensor &t);
  void printElement(const Tensor &t, int64_t i);
};

} // namespace

void Printer::printTypedValue(const Value &v) {
  printValueName(os, v.name());
  os << ": ";
  printType(v.type, os);
}

template <typename T> static T loadAt(const Tensor &t, int64_t i) {
  T v;
  std::memcpy(&v, t.bytes().data() + i * sizeof(T), sizeof(T));
  return v;
}

void Printer::printElement(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::F32:
    printFloat(os, loadAt<float>(t, i), /*isDouble=*/false, /*forceFloat=*/false);
    return;
  case DType::F64:
    printFloat(os, loadAt<double>(t, i), /*isDouble=*/true, /*forceFloat=*/false);
    return;
  case DType::F16:
  case DType::BF16:
    printFloat(os, t.getAsDouble(i), /*isDouble=*/false, /*forceFloat=*/false);
    return;
  case DType::Bool: {
    uint8_t b = loadAt<uint8_t>(t, i);
    if (b <= 1)
      os << (b ? "true" : "false");
    else
      os << unsigned(b);
    return;
  }
  case DType::U64:
    os << loadAt<uint64_t>(t, i);
    return;
  case DType::I64:
    os << loadAt<int64_t>(t, i);
    return;
  case DType::String:
    printQuoted(os, t.strings()[i]);
    return;
  default:
    os << static_cast<int64_t>(t.getAsDouble(i));
    return;
  }
}

void Printer::printTensorData(const Tensor &t) {
  if (const auto &ext = t.externalRef()) {
    os << "external(";
    printQuoted(os, ext->location);
    os << ", offset = " << ext->offset;
    if (ext->length >= 0)
      os << ", length = " << ext->length;
    os << ')';
    return;
  }
  int64_t n = t.numElements();
  if (t.dtype == DType::String) {
    os << '[';
    llvm::interleaveComma(t.strings(), os, [&](const std::string &s) { printQuoted(os, s); });
    os << ']';
    return;
  }
  llvm::ArrayRef<uint8_t> bytes = t.bytes();
  if (printsAsHex(t.dtype)) {
    os << "hex \"";
    for (uint8_t b : bytes)
      os << llvm::hexdigit(b >> 4, /*LowerCase=*/true) << llvm::hexdigit(b & 15, true);
    os << '"';
    return;
  }
  if (n >= 2) {
    if (llvm::all_of(bytes, [](uint8_t b) { return b == 0; })) {
      os << "zeros";
      return;
    }
    size_t elemSize = dtypeBits(t.dtype) / 8;
    bool splat = true;
    for (int64_t i = 1; i < n && splat; ++i)
      splat = std::memcmp(bytes.data(), bytes.data() + i * elemSize, elemSize) == 0;
    if (splat) {
      os << "splat(";
      printElement(t, 0);
      os << ')';
      return;
    }
    bool iota = true;
    for (int64_t i = 0; i < n && iota; ++i)
      iota = t.getAsDouble(i) == static_cast<double>(i);
    if (iota) {
      os << "iota";
      return;
    }
  }
  if (opts.maxTensorElements && static_cast<uint64_t>(n) > opts.maxTensorElements) {
    os << "elided";
    return;
  }
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i)
      os << ", ";
    printElement(t, i);
  }
  os << ']';
}

void Printer::printTensorLiteral(const Tensor &t) {
  os << "dense<";
  printType(Type::tensor(t.dtype, t.dims), os);
  os << ": ";
  printTensorData(t);
  os << '>';
}

static const char *emptyListKeyword(AttrKind k) {
  switch (k) {
  case AttrKind::Floats:
    return "floats";
  case AttrKind::Ints:
    return "ints";
  case AttrKind::Strings:
    return "strings";
  case AttrKind::Tensors:
    return "tensors";
  case AttrKind::Graphs:
    return "graphs";
  default:
    return nullptr;
  }
}

void Printer::printAttrValue(const Node &n, const Attribute &a, unsigned indent) {
  auto printList = [&](size_t size, llvm::function_ref<void(size_t)> elem) {
    if (size == 0) {
      os << emptyListKeyword(a.kind) << "[]";
      return;
    }
    os << '[';
    for (size_t i = 0; i < size; ++i) {
      if (i)
        os << ", ";
      elem(i);
    }
    os << ']';
  };
  switch (a.kind) {
  case AttrKind::Int:
    if (isDTypeAttribute(n.domain, n.opType, a.name) && isKnownDType(a.i) && a.i != 0)
      os << dtypeName(static_cast<DType>(a.i));
    else
      os << a.i;
    return;
  case AttrKind::Float:
    printFloat(os, a.f, /*isDouble=*/false, /*forceFloat=*/true);
    return;
  case AttrKind::String:
    printQuoted(os, a.s);
    return;
  case AttrKind::Ints:
    printList(a.ints.size(), [&](size_t i) { os << a.ints[i]; });
    return;
  case AttrKind::Floats:
    printList(a.floats.size(), [&](size_t i) { printFloat(os, a.floats[i], false, true); });
    return;
  case AttrKind::Strings:
    printList(a.strings.size(), [&](size_t i) { printQuoted(os, a.strings[i]); });
    return;
  case AttrKind::Tensor:
    if (a.tensors.size() == 1) {
      printTensorLiteral(a.tensors[0]);
      return;
    }
    break; // malformed: print as opaque
  case AttrKind::Tensors:
    printList(a.tensors.size(), [&](size_t i) { printTensorLiteral(a.tensors[i]); });
    return;
  case AttrKind::Graph:
    if (a.graphs.size() == 1) {
      printGraph(*a.graphs[0], indent);
      return;
    }
    break;
  case AttrKind::Graphs:
    printList(a.graphs.size(), [&](size_t i) { printGraph(*a.graphs[i], indent); });
    return;
  default:
    break;
  }
  // Sparse tensors, type protos and malformed attributes: kind and bytes.
  os << "opaque<" << static_cast<unsigned>(a.kind);
  for (size_t i = 0; i < a.opaque.size(); ++i) {
    os << (i ? ", \"" : ": \"");
    for (unsigned char b : a.opaque[i])
      os << llvm::hexdigit(b >> 4, true) << llvm::hexdigit(b & 15, true);
    os << '"';
  }
  os << '>';
}

void Printer::printNode(const Node &n, unsigned indent) {
  indentBy(indent);
  bool anyResult = false;
  if (n.numOutputs()) {
    llvm::interleaveComma(n.outputs(), os, [&](const Value *v) {
      if (v)
        printValueName(os, v->name());
      else
        os << '_';
    });
    os << " = ";
  }
  if (!n.domain.empty()) {
    printIdentOrQuoted(os, n.domain);
    os << "::";
  }
  printIdentOrQuoted(os, n.opType,
                     /*reserved=*/n.domain.empty() && (n.opType == "init" || n.opType == "return"));
  os << '(';
  llvm::interleaveComma(n.inputs(), os, [&](const Value *v) {
    if (v)
      printValueName(os, v->name());
    else
      os << '_';
  });
  os << ')';

  if (!n.attrs.empty()) {
    std::vector<const Attribute *> sorted;
    for (const Attribute &a : n.attrs)
      sorted.push_back(&a);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Attribute *x, const Attribute *y) { return x->name < y->name; });
    // Bodies go one attribute per line so nested graphs indent cleanly.
    bool multiline = llvm::any_of(sorted, [](const Attribute *a) { return !a->graphs.empty(); });
    os << (multiline ? " {\n" : " {");
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (multiline)
        indentBy(indent + 1);
      printIdentOrQuoted(os, sorted[i]->name);
      os << " = ";
      printAttrValue(n, *sorted[i], indent + 1);
      if (i + 1 < sorted.size())
        os << (multiline ? ",\n" : ", ");
    }
    if (multiline) {
      os << '\n';
      indentBy(indent);
    }
    os << '}';
  }

  for (const Value *v : n.outputs()) {
    if (!v)
      continue;
    os << (anyResult ? ", " : " : ");
    anyResult = true;
    printType(v->type, os);
  }
  if (!n.name.empty()) {
    os << " name=";
    printQuoted(os, n.name);
  }
  os << '\n';
}

void Printer::printGraph(const Graph &g, unsigned indent) {
  // The caller has indented the first line (graphs appear inside attributes).
  os << "graph ";
  printGraphName(os, g.name);
  os << '(';
  llvm::interleaveComma(g.inputs(), os, [&](const Value *v) { printTypedValue(*v); });
  os << ") -> (";
  llvm::interleaveComma(g.outputs(), os, [&](const Value *v) { printTypedValue(*v); });
  os << ") {\n";
  for (const Value *v : g.initializers()) {
    indentBy(indent + 1);
    os << "init ";
    printValueName(os, v->name());
    os << ": ";
    const Tensor &t = *v->initializer();
    printType(Type::tensor(t.dtype, t.dims), os);
    os << " = ";
    printTensorData(t);
    os << '\n';
  }
  for (const Node &n : g.nodes())
    printNode(n, indent + 1);
  indentBy(indent + 1);
  os << "return";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    os << (i ? ", " : " ");
    printValueName(os, g.outputs()[i]->name());
  }
  os << '\n';
  indentBy(indent);
  os << '}';
}

/// True when the opset imports are the parser's default (ai.onnx 17 only).
static bool isDefaultOpsets(const Model &m) {
  return m.opsets.size() == 1 && (m.opsets[0].domain.empty() || m.opsets[0].domain == "ai.onnx") &&
         m.opsets[0].version == 17;
}

void Printer::printModel(const Model &m) {
  if (m.irVersion != 8)
    os << "ir " << m.irVersion << '\n';
  if (!isDefaultOpsets(m))
    for (const OpsetId &o : m.opsets) {
      os << "opset ";
      printIdentOrQuoted(os,
                         o.domain.empty() ? llvm::StringRef("ai.onnx") : llvm::StringRef(o.domain));
      os << ' ' << o.version << '\n';
    }
  if (m.graph) {
    printGraph(*m.graph, 0);
    os << '\n';
  }
  for (const TrainingInfo &ti : m.trainingInfo) {
    os << "training {\n";
    if (ti.initialization) {
      indentBy(1);
      os << "initialization ";
      printGraph(*ti.initialization, 1);
      os << '\n';
    }
    if (ti.algorithm) {
      indentBy(1);
      os << "algorithm ";
      printGraph(*ti.algorithm, 1);
      os << '\n';
    }
    auto printBindings = [&](const char *kw,
                             const std::vector<std::pair<std::string, std::string>> &bs) {
      for (const auto &b : bs) {
        indentBy(1);
        os << kw << ' ';
        printValueName(os, b.first);
        os << " = ";
        printValueName(os, b.second);
        os << '\n';
      }
    };
    printBindings("initialization_binding", ti.initializationBinding);
    printBindings("update_binding", ti.updateBinding);
    os << "}\n";
  }
}

void mpc::printModel(const Model &m, llvm::raw_ostream &os, const PrintOptions &opts) {
  Printer(os, opts).printModel(m);
}

void mpc::printModel(const Model &m, llvm::raw_ostream &os) { printModel(m, os, PrintOptions()); }

void mpc::printGraph(const Graph &g, llvm::raw_ostream &os, const PrintOptions &opts) {
  Printer(os, opts).printGraph(g, 0);
  os << '\n';
}

void mpc::printGraph(const Graph &g, llvm::raw_ostream &os) { printGraph(g, os, PrintOptions()); }

std::string mpc::modelToText(const Model &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printModel(m, os);
  os.flush();
  return s;
}
