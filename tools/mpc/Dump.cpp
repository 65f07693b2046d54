//===- Dump.cpp - Before/after dumps of the AMP rewrite --------------------===//
//
// Writes the graph before and after the rewrite as ONNX, as a Graphviz DOT
// rendering colored by the painting's decisions (and as SVG when `dot` is
// installed), and the effective lists. Output is deterministic: DOT ids come
// from graph and node positions, never from addresses. Graphs above
// kCollapseThreshold nodes are drawn as boxes of consecutive nodes that share
// a name prefix, so that `dot` lays them out in seconds.
//
//===----------------------------------------------------------------------===//
#include "Dump.h"
#include "Tool.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include <array>
#include <map>

using namespace mpc;
using namespace mpc::tool;

/// Graphs with more nodes (all graphs together) are collapsed into boxes.
/// Measured with Graphviz 2.43 on a transformer stack: 1,000 nodes lay out in
/// about a second, 2,000 in several.
static constexpr unsigned kCollapseThreshold = 1000;
/// Above this many nodes edge labels are external (`xlabel`): ordinary edge
/// labels become layout nodes and slow `dot` down tenfold.
static constexpr unsigned kInlineEdgeLabelLimit = 300;
/// The most boxes a collapsed rendering may have.
static constexpr unsigned kMaxBoxes = 300;
/// Graph inputs/outputs drawn in a collapsed rendering, at most.
static constexpr unsigned kMaxIoNodes = 64;
/// Seconds `dot -Tsvg` may take.
static constexpr unsigned kDotTimeoutSeconds = 60;

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

/// A file name component: graph names may contain '/', spaces or dots.
static std::string sanitizeComponent(llvm::StringRef s, llvm::StringRef fallback) {
  std::string out;
  for (char c : s)
    out.push_back(llvm::isAlnum(c) || c == '-' || c == '_' || c == '.' ? c : '_');
  if (out.empty())
    out = fallback.str();
  // No hidden files, and never "." or "..".
  for (char &c : out) {
    if (c != '.')
      break;
    c = '_';
  }
  if (out.size() > 120)
    out.resize(120);
  return out;
}

static std::string dumpPath(const DumpTarget &t, const Model &m, llvm::StringRef suffix) {
  llvm::SmallString<256> p(t.dir);
  llvm::StringRef graphName = m.graph ? llvm::StringRef(m.graph->name) : "";
  llvm::sys::path::append(p, sanitizeComponent(t.stamp, "mpc") + "_" +
                                 sanitizeComponent(graphName, "graph") + "_" + suffix);
  return std::string(p);
}

/// Renders `dotPath` to `svgPath` with Graphviz. A missing or failing `dot`
/// is a warning: the DOT file is the primary rendering.
static void renderSvg(llvm::StringRef dotPath, llvm::StringRef svgPath) {
  llvm::ErrorOr<std::string> prog = llvm::sys::findProgramByName("dot");
  if (!prog) {
    llvm::sys::fs::remove(svgPath); // never leave a stale rendering of another run
    static bool warned = false;     // one note per run, not one per dump
    if (!warned)
      warn("graphviz 'dot' not found in PATH; wrote " + quoteName(dotPath) +
           " without an SVG rendering");
    warned = true;
    return;
  }
  llvm::SmallString<256> tmp, errLog;
  if (llvm::sys::fs::createUniqueFile(svgPath + kTempSuffix, tmp) ||
      llvm::sys::fs::createTemporaryFile("mpc-dot", "log", errLog)) {
    warn("cannot create a temporary file for " + quoteName(svgPath) + "; no SVG rendering");
    if (!tmp.empty())
      llvm::sys::fs::remove(tmp);
    return;
  }
  llvm::StringRef args[] = {*prog, "-Tsvg", "-o", tmp, dotPath};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(""),
                                                 llvm::StringRef(errLog)};
  std::string errMsg;
  bool execFailed = false;
  int rc = llvm::sys::ExecuteAndWait(*prog, args, llvm::None, redirects, kDotTimeoutSeconds,
                                     /*MemoryLimit=*/0, &errMsg, &execFailed);
  std::string why;
  if (execFailed || rc < 0) {
    if (llvm::StringRef(errMsg).contains("timed out"))
      why = "it did not finish in " + std::to_string(kDotTimeoutSeconds) + " s";
    else
      why = errMsg.empty() ? std::string("it crashed") : errMsg;
  } else if (rc != 0) {
    why = "exit status " + std::to_string(rc);
    if (auto buf = llvm::MemoryBuffer::getFile(errLog)) {
      llvm::StringRef first = (*buf)->getBuffer().split('\n').first.trim();
      if (!first.empty())
        why += ": " + first.str();
    }
  }
  llvm::sys::fs::remove(errLog);
  if (why.empty() && llvm::sys::fs::rename(tmp, svgPath))
    why = "cannot rename the rendering into place";
  if (!why.empty()) {
    llvm::sys::fs::remove(tmp);
    llvm::sys::fs::remove(svgPath); // never leave a stale rendering of another run
    warn("graphviz 'dot' could not render " + quoteName(svgPath) + " (" + why +
         "); the .dot file is written");
  }
}

//===----------------------------------------------------------------------===//
// Decisions and colors
//===----------------------------------------------------------------------===//

namespace {
/// How a node is drawn.
enum class Paint : uint8_t {
  Allow,     ///< painted allow: runs in 16-bit
  Deny,      ///< painted deny
  InferKept, ///< infer op kept fp32
  ClearKept, ///< clear op kept fp32
  Other,     ///< unlisted, or no float slot
  Inserted,  ///< a Cast the rewrite inserted
  New,       ///< another node with no decision
};
constexpr unsigned kNumPaints = 7;

struct PaintStyle {
  const char *fill;
  const char *name;
};

/// Finds the decision of a node of the dumped model. Decisions name their node
/// by (graph, name, op); nodes sharing that key are matched in order, so
/// unnamed nodes work too. Node pointers are not used: after the rewrite the
/// input model's nodes may have been erased and their addresses reused.
class DecisionIndex {
public:
  explicit DecisionIndex(const std::vector<NodeDecision> &ds) : decisions(ds) {
    for (unsigned i = 0; i < ds.size(); ++i)
      byKey[key(ds[i].graph, ds[i].name, ds[i].opType)].push_back(i);
  }
  const NodeDecision *take(const Node &n) {
    auto it = byKey.find(key(n.getParent()->name, n.name, n.qualifiedOpType()));
    if (it == byKey.end())
      return nullptr;
    unsigned &pos = next[it->first()];
    return pos < it->second.size() ? &decisions[it->second[pos++]] : nullptr;
  }

private:
  static std::string key(llvm::StringRef g, llvm::StringRef n, llvm::StringRef op) {
    return (g + "\x1f" + n + "\x1f" + op).str();
  }
  const std::vector<NodeDecision> &decisions;
  llvm::StringMap<std::vector<unsigned>> byKey;
  llvm::StringMap<unsigned> next;
};
} // namespace

static const PaintStyle kPaintStyles[kNumPaints] = {
    {"#8fd19e", "allow"},      {"#f28b82", "deny"},  {"#fde68a", "infer fp32"},
    {"#d1d5db", "clear fp32"}, {"#ffffff", "other"}, {"#bfdbfe", "inserted cast"},
    {"#ffffff", "new"},
};

static Paint paintOf(const Node &n, const NodeDecision *d) {
  if (!d)
    return n.opType == "Cast" && n.domain.empty() ? Paint::Inserted : Paint::New;
  if (d->color == SlotColor::Allow)
    return Paint::Allow;
  if (d->color == SlotColor::Deny)
    return Paint::Deny;
  if (d->cls == AmpClass::Infer)
    return Paint::InferKept;
  if (d->cls == AmpClass::Clear)
    return Paint::ClearKept;
  return Paint::Other;
}

//===----------------------------------------------------------------------===//
// DOT text
//===----------------------------------------------------------------------===//

/// Escapes a string for a double-quoted DOT string; `\n` stays a line break.
static std::string dotEscape(llvm::StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

static bool isHalfValue(const Value *v) { return v && isHalfPrecision(v->type.tensorElemType()); }

static std::string typeLabel(const Value *v) {
  DType t = v->type.tensorElemType();
  return t == DType::Undefined ? "?" : dtypeName(t).str();
}

static void writeEdgeAttrs(llvm::raw_ostream &os, llvm::StringRef label, bool half, bool dashed,
                           bool external) {
  os << " [" << (external ? "xlabel" : "label") << "=\"" << dotEscape(label) << "\"";
  if (half)
    os << ", color=\"#1d4ed8\", fontcolor=\"#1d4ed8\", penwidth=2.2, style=\""
       << (dashed ? "bold,dashed" : "bold") << "\"";
  else if (dashed)
    os << ", style=dashed";
  os << "];\n";
}

static const char kLegend[] =
    "green: 16-bit (allow)   red: deny   yellow: infer kept fp32   grey: clear kept fp32   "
    "white: unlisted / not float   diamond: inserted cast   double border: partly converted   "
    "blue edges: 16-bit tensors";

static void writeHeader(llvm::raw_ostream &os, llvm::StringRef title, llvm::StringRef note) {
  os << "digraph \"" << dotEscape(title) << "\" {\n";
  os << "  graph [fontname=\"Helvetica\", fontsize=12, labelloc=t, label=\"" << dotEscape(title);
  if (!note.empty())
    os << "\\n" << dotEscape(note);
  os << "\\n" << kLegend << "\"];\n";
  os << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, "
        "fillcolor=\"#ffffff\"];\n";
  os << "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#4b5563\"];\n";
}

static void writeIoNode(llvm::raw_ostream &os, llvm::StringRef indent, llvm::StringRef id,
                        const Value *v, bool isOutput) {
  std::string type;
  llvm::raw_string_ostream ts(type);
  ts << typeLabel(v);
  if (v->type.isTensor() && v->type.hasShape) {
    ts << "[";
    for (size_t i = 0; i < v->type.dims.size(); ++i) {
      const Dim &d = v->type.dims[i];
      ts << (i ? "," : "");
      if (d.isKnown())
        ts << d.value;
      else
        ts << (d.param.empty() ? "?" : d.param);
    }
    ts << "]";
  }
  os << indent << id << " [shape=" << (isOutput ? "doubleoctagon" : "ellipse")
     << ", style=filled, fillcolor=\"#f3f4f6\", label=\"" << dotEscape(v->name()) << "\\n"
     << dotEscape(ts.str()) << "\"];\n";
}

namespace {
/// Full rendering: one DOT node per IR node, nested graphs as clusters.
class FullRenderer {
public:
  FullRenderer(llvm::raw_ostream &os, const std::vector<NodeDecision> &ds) : os(os), index(ds) {}

  void render(const Graph &g, bool externalLabels) {
    renderGraph(g, "  ");
    for (const Edge &e : edges) {
      os << "  " << e.from << " -> " << e.to;
      writeEdgeAttrs(os, typeLabel(e.value), isHalfValue(e.value), e.captured, externalLabels);
    }
  }

private:
  struct Edge {
    std::string from, to;
    const Value *value;
    bool captured;
  };
  llvm::raw_ostream &os;
  DecisionIndex index;
  unsigned nextGraph = 0;
  llvm::DenseMap<const Value *, std::string> source;
  std::vector<Edge> edges;

  void renderNode(const Node &n, const std::string &id, llvm::StringRef indent) {
    const NodeDecision *d = index.take(n);
    Paint p = paintOf(n, d);
    std::string op = n.qualifiedOpType();
    os << indent << id << " [";
    if (p == Paint::Inserted) {
      DType to = static_cast<DType>(n.intAttr("to", 0));
      os << "shape=diamond, style=filled, fontsize=8, height=0.3, label=\"Cast to "
         << (isKnownDType(n.intAttr("to", 0)) ? dtypeName(to) : "?") << "\\ninserted\", ";
    } else {
      os << "label=\"" << dotEscape(op);
      if (!n.name.empty())
        os << "\\n" << dotEscape(n.name);
      if (d && d->partial)
        os << "\\npartial: some slots stay fp32";
      if (p == Paint::New)
        os << "\\n(new)";
      os << "\", ";
      if (d && d->partial)
        os << "peripheries=2, ";
    }
    os << "fillcolor=\"" << kPaintStyles[static_cast<unsigned>(p)].fill << "\", tooltip=\"";
    if (d) {
      os << "class " << dotEscape(ampClassName(d->cls)) << "; "
         << kPaintStyles[static_cast<unsigned>(p)].name << ": "
         << dotEscape(ampReasonText(d->reason));
      if (!d->detail.empty())
        os << " (" << dotEscape(d->detail) << ")";
    } else {
      os << dotEscape(n.name);
    }
    os << "\"];\n";
  }

  void renderGraph(const Graph &g, llvm::StringRef indent) {
    std::string gid = "g" + std::to_string(nextGraph++);
    unsigned k = 0;
    for (const Value *v : g.inputs()) {
      std::string id = gid + "_in" + std::to_string(k++);
      // Inputs with a default (IR < 4 weights) are drawn like initializers: not at all.
      if (v->initializer())
        continue;
      writeIoNode(os, indent, id, v, /*isOutput=*/false);
      source[v] = id;
    }
    unsigned i = 0;
    std::vector<std::pair<const Node *, std::string>> ids;
    for (const Node &n : g.nodes()) {
      std::string id = gid + "_n" + std::to_string(i++);
      renderNode(n, id, indent);
      for (const Value *v : n.outputs())
        if (v)
          source[v] = id;
      ids.push_back({&n, id});
    }
    for (auto &[n, id] : ids)
      for (const Attribute &a : n->attrs)
        for (const auto &sub : a.graphs) {
          os << indent << "subgraph cluster_" << nextGraph << " {\n";
          os << indent << "  label=\"" << dotEscape(a.name) << " of " << dotEscape(n->opType)
             << (n->name.empty() ? " (unnamed)" : " '" + dotEscape(n->name) + "'")
             << "\"; style=dashed; color=\"#6b7280\";\n";
          renderGraph(*sub, (indent + "  ").str());
          os << indent << "}\n";
        }
    for (auto &[n, id] : ids)
      for (const Value *v : n->inputs()) {
        if (!v)
          continue;
        auto it = source.find(v);
        if (it != source.end())
          edges.push_back({it->second, id, v, v->graph() != &g});
      }
    k = 0;
    for (const Value *v : g.outputs()) {
      std::string id = gid + "_out" + std::to_string(k++);
      writeIoNode(os, indent, id, v, /*isOutput=*/true);
      auto it = source.find(v);
      if (it != source.end())
        edges.push_back({it->second, id, v, v->graph() != &g});
    }
  }
};

/// Collapsed rendering of the main graph: boxes of consecutive nodes.
class CollapsedRenderer {
public:
  CollapsedRenderer(llvm::raw_ostream &os, const std::vector<NodeDecision> &ds)
      : os(os), index(ds) {}

  /// Computes the boxes; returns the note for the graph label.
  std::string plan(const Graph &g, unsigned totalNodes);
  void render(const Graph &g);

private:
  struct Box {
    std::string prefix, lastPrefix;
    unsigned first = 0, last = 0, count = 0, nested = 0, half = 0;
    std::array<unsigned, kNumPaints> paints{};
    std::map<std::string, unsigned> ops;
  };
  llvm::raw_ostream &os;
  DecisionIndex index;
  std::vector<Box> boxes;
  std::vector<unsigned> boxOf; ///< node position -> box
  bool drawIo = true;

  static unsigned countNested(const Node &n) {
    unsigned c = 0;
    for (const Attribute &a : n.attrs)
      for (const auto &sub : a.graphs)
        for (const Node &inner : sub->nodes())
          c += 1 + countNested(inner);
    return c;
  }
};
} // namespace

/// The first `depth` scope components of a node name, without its last one
/// ("/encoder/layer.3/attention/MatMul" at depth 2: "encoder/layer.3").
static std::string namePrefix(llvm::StringRef name, unsigned depth) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  name.split(parts, '/', -1, /*KeepEmpty=*/false);
  std::string out;
  for (unsigned i = 0; i + 1 < parts.size() && i < depth; ++i)
    out += (i ? "/" : "") + parts[i].str();
  return out;
}

/// Boxes of consecutive nodes with equal keys, at most `cap` nodes each.
static std::vector<unsigned> runStarts(llvm::ArrayRef<std::string> keys, unsigned cap) {
  std::vector<unsigned> starts;
  unsigned len = 0;
  for (unsigned i = 0; i < keys.size(); ++i) {
    if (starts.empty() || keys[i] != keys[starts.back()] || len >= cap) {
      starts.push_back(i);
      len = 0;
    }
    ++len;
  }
  return starts;
}

std::string CollapsedRenderer::plan(const Graph &g, unsigned totalNodes) {
  std::vector<const Node *> nodes;
  for (const Node &n : g.nodes())
    nodes.push_back(&n);
  unsigned n = nodes.size();
  unsigned cap = std::max(1u, (n + kMaxBoxes / 2 - 1) / (kMaxBoxes / 2));
  unsigned maxDepth = 0;
  for (const Node *node : nodes) {
    llvm::SmallVector<llvm::StringRef, 8> parts;
    llvm::StringRef(node->name).split(parts, '/', -1, false);
    maxDepth = std::max<unsigned>(maxDepth, parts.empty() ? 0 : parts.size() - 1);
  }
  maxDepth = std::min(maxDepth, 12u);
  // The deepest prefix that still gives few enough boxes; depth 0 means
  // plain runs of `cap` consecutive nodes.
  unsigned depth = 0;
  std::vector<std::string> keys(n), best(n);
  for (unsigned d = 1; d <= maxDepth; ++d) {
    for (unsigned i = 0; i < n; ++i)
      keys[i] = namePrefix(nodes[i]->name, d);
    if (runStarts(keys, cap).size() > kMaxBoxes)
      break;
    depth = d;
    best.swap(keys);
  }
  bool merged = false;
  if (depth == 0 && maxDepth > 0) {
    // Even the outermost scopes are too many ("block0/" ... "block9999/"):
    // keep their boundaries but pack neighbouring scopes into one box.
    for (unsigned i = 0; i < n; ++i)
      best[i] = namePrefix(nodes[i]->name, 1);
    depth = 1;
    merged = true;
  }
  if (depth == 0)
    std::fill(best.begin(), best.end(), std::string());
  std::vector<unsigned> starts = runStarts(best, cap);
  if (merged) {
    std::vector<unsigned> packed;
    unsigned size = 0;
    for (unsigned r = 0; r < starts.size(); ++r) {
      unsigned len = (r + 1 < starts.size() ? starts[r + 1] : n) - starts[r];
      if (!packed.empty() && size + len <= cap) {
        size += len;
        continue;
      }
      packed.push_back(starts[r]);
      size = len;
    }
    starts.swap(packed);
  }
  boxOf.assign(n, 0);
  for (unsigned b = 0; b < starts.size(); ++b) {
    Box box;
    box.first = starts[b];
    box.last = b + 1 < starts.size() ? starts[b + 1] - 1 : n - 1;
    box.prefix = best[box.first];
    box.lastPrefix = best[box.last];
    for (unsigned i = box.first; i <= box.last; ++i) {
      const Node &node = *nodes[i];
      boxOf[i] = b;
      Paint p = paintOf(node, index.take(node));
      ++box.paints[static_cast<unsigned>(p)];
      ++box.ops[node.qualifiedOpType()];
      ++box.count;
      box.nested += countNested(node);
      if (llvm::any_of(node.outputs(), isHalfValue))
        ++box.half;
    }
    boxes.push_back(std::move(box));
  }
  unsigned numInputs = llvm::count_if(g.inputs(), [](const Value *v) { return !v->initializer(); });
  drawIo = numInputs <= kMaxIoNodes && g.outputs().size() <= kMaxIoNodes;
  std::string note;
  llvm::raw_string_ostream ns(note);
  ns << totalNodes << " nodes: too many to draw one by one (more than " << kCollapseThreshold
     << "), collapsed into " << boxes.size() << " boxes of consecutive nodes";
  if (merged)
    ns << " by outermost node-name scope, neighbouring scopes packed together (at most " << cap
       << " nodes a box)";
  else if (depth > 0)
    ns << " by node-name prefix (depth " << depth << ", at most " << cap << " nodes a box)";
  else
    ns << " (at most " << cap << " nodes a box)";
  ns << "; boxes are colored by their majority";
  if (totalNodes != n)
    ns << "; nodes of nested graphs are counted in their owner's box, not drawn";
  if (!drawIo)
    ns << "; graph inputs and outputs not drawn";
  return ns.str();
}

void CollapsedRenderer::render(const Graph &g) {
  for (unsigned b = 0; b < boxes.size(); ++b) {
    const Box &box = boxes[b];
    unsigned major = 0;
    for (unsigned p = 1; p < kNumPaints; ++p)
      if (box.paints[p] > box.paints[major])
        major = p;
    std::string label;
    llvm::raw_string_ostream ls(label);
    auto scope = [](const std::string &p) { return p.empty() ? "(unscoped)" : p + "/*"; };
    if (!box.prefix.empty() && box.prefix == box.lastPrefix)
      ls << scope(box.prefix) << "\n";
    else if (!box.prefix.empty() || !box.lastPrefix.empty())
      ls << scope(box.prefix) << " .. " << scope(box.lastPrefix) << "\n";
    ls << "nodes " << box.first << "-" << box.last << " (" << box.count << ")";
    if (box.nested)
      ls << " + " << box.nested << " nested";
    ls << "\n";
    bool firstPaint = true;
    for (unsigned p = 0; p < kNumPaints; ++p)
      if (box.paints[p]) {
        ls << (firstPaint ? "" : ", ") << kPaintStyles[p].name << " " << box.paints[p];
        firstPaint = false;
      }
    // The most frequent ops, ties by name.
    std::vector<std::pair<std::string, unsigned>> ops(box.ops.begin(), box.ops.end());
    std::stable_sort(ops.begin(), ops.end(),
                     [](const auto &a, const auto &b) { return a.second > b.second; });
    ls << "\n";
    for (unsigned i = 0; i < ops.size() && i < 4; ++i)
      ls << (i ? ", " : "") << ops[i].first << " " << ops[i].second;
    if (ops.size() > 4)
      ls << ", ...";
    os << "  b" << b << " [label=\"" << dotEscape(ls.str()) << "\", fillcolor=\""
       << kPaintStyles[major].fill << "\""
       << (box.half && box.half != box.count ? ", peripheries=2" : "") << "];\n";
  }
  // Aggregated edges between boxes (and graph inputs/outputs), in id order.
  struct Agg {
    unsigned count = 0;
    bool half = false;
    std::map<std::string, unsigned> types;
  };
  std::map<std::pair<std::string, std::string>, Agg> agg;
  llvm::DenseMap<const Value *, std::string> source;
  auto boxId = [](unsigned b) { return "b" + std::to_string(b); };
  if (drawIo) {
    unsigned k = 0;
    for (const Value *v : g.inputs()) {
      std::string id = "in" + std::to_string(k++);
      if (v->initializer())
        continue;
      writeIoNode(os, "  ", id, v, false);
      source[v] = id;
    }
  }
  unsigned i = 0;
  for (const Node &n : g.nodes()) {
    for (const Value *v : n.outputs())
      if (v)
        source[v] = boxId(boxOf[i]);
    ++i;
  }
  auto addEdge = [&](const Value *v, const std::string &to) {
    auto it = source.find(v);
    if (it == source.end() || it->second == to)
      return;
    Agg &a = agg[{it->second, to}];
    ++a.count;
    a.half |= isHalfValue(v);
    ++a.types[typeLabel(v)];
  };
  i = 0;
  for (const Node &n : g.nodes()) {
    std::string to = boxId(boxOf[i++]);
    for (const Value *v : n.inputs())
      if (v)
        addEdge(v, to);
  }
  if (drawIo) {
    unsigned k = 0;
    for (const Value *v : g.outputs()) {
      std::string id = "out" + std::to_string(k++);
      writeIoNode(os, "  ", id, v, true);
      addEdge(v, id);
    }
  }
  for (auto &[ends, a] : agg) {
    std::string label;
    for (auto &[type, count] : a.types)
      label += (label.empty() ? "" : " ") + type + (count > 1 ? " x" + std::to_string(count) : "");
    os << "  " << ends.first << " -> " << ends.second;
    writeEdgeAttrs(os, label, a.half, /*dashed=*/false, /*external=*/false);
  }
}

static unsigned countAllNodes(const Graph &g) {
  unsigned c = 0;
  for (const Node &n : g.nodes()) {
    ++c;
    for (const Attribute &a : n.attrs)
      for (const auto &sub : a.graphs)
        c += countAllNodes(*sub);
  }
  return c;
}

/// The DOT rendering of the model's main graph.
static std::string renderDot(const Model &m, llvm::StringRef phase,
                             const std::vector<NodeDecision> &decisions) {
  std::string dot;
  llvm::raw_string_ostream os(dot);
  const Graph &g = *m.graph;
  unsigned total = countAllNodes(g);
  std::string title =
      (g.name.empty() ? std::string("graph") : g.name) + " - " + phase.str() + " the AMP rewrite";
  if (total > kCollapseThreshold) {
    CollapsedRenderer r(os, decisions);
    std::string note = r.plan(g, total);
    writeHeader(os, title, note);
    r.render(g);
  } else {
    writeHeader(os, title, std::to_string(total) + " nodes");
    FullRenderer(os, decisions).render(g, total > kInlineEdgeLabelLimit);
  }
  os << "}\n";
  return os.str();
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

static bool anyExternalData(const Model &m) {
  bool any = false;
  forEachGraph(*m.graph, [&](Graph &g) {
    for (const Value *v : g.initializers())
      any |= v->initializer() && v->initializer()->isExternal();
  });
  return any;
}

llvm::Error tool::dumpGraph(const DumpTarget &t, llvm::StringRef phase, Model &m,
                            const std::vector<NodeDecision> &decisions) {
  if (!m.graph)
    return llvm::Error::success();
  std::string base = dumpPath(t, m, phase);
  ExportOptions eo;
  if (anyExternalData(m))
    eo.externalDataFile = llvm::sys::path::filename(base).str() + ".onnx.data";
  if (llvm::Error err = writeOnnxFile(m, base + ".onnx", eo))
    return err;
  std::string dotPath = base + ".dot";
  if (llvm::Error err = writeFileAtomically(dotPath, renderDot(m, phase, decisions)))
    return err;
  renderSvg(dotPath, base + ".svg");
  return llvm::Error::success();
}

std::vector<std::string> tool::dumpFiles(const DumpTarget &t, const Model &m) {
  std::vector<std::string> out;
  if (!m.graph)
    return out;
  for (const char *phase : {"before", "after"}) {
    std::string base = dumpPath(t, m, phase);
    for (const char *ext : {".onnx", ".onnx.data", ".dot", ".svg"})
      out.push_back(base + ext);
  }
  out.push_back(dumpPath(t, m, "lists.txt"));
  return out;
}

llvm::Error tool::dumpLists(const DumpTarget &t, const Model &m, const AmpLists &lists,
                            const AmpOptions &opts) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "# mpc AMP configuration for graph '" << (m.graph ? m.graph->name : "") << "'\n";
  os << "target: " << dtypeName(opts.target) << "\n";
  os << "level: " << ampLevelName(opts.level) << "\n";
  os << "keep-io-types: " << (opts.keepIoTypes ? "true" : "false") << "\n";
  os << "deny-nodes: " << (opts.denyNodesRegex.empty() ? "(none)" : opts.denyNodesRegex) << "\n";
  static const AmpClass kLists[kNumAmpLists] = {AmpClass::Allow, AmpClass::Infer, AmpClass::Deny,
                                                AmpClass::Clear};
  for (unsigned c = 0; c < kNumAmpLists; ++c) {
    std::vector<std::string> add = opts.edits.add[c], remove = opts.edits.remove[c];
    llvm::sort(add);
    llvm::sort(remove);
    if (!add.empty())
      os << ampClassName(kLists[c]) << " additions: " << llvm::join(add, ", ") << "\n";
    if (!remove.empty())
      os << ampClassName(kLists[c]) << " removals: " << llvm::join(remove, ", ") << "\n";
  }
  for (AmpClass c : kLists) {
    std::vector<std::string> entries = lists.entries(c);
    os << "\n[" << ampClassName(c) << "] " << entries.size() << " ops\n";
    for (const std::string &e : entries)
      os << e << "\n";
  }
  return writeFileAtomically(dumpPath(t, m, "lists.txt"), os.str());
}
