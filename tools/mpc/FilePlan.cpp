//===- FilePlan.cpp - The files a command reads and writes -----------------===//
//
// Two paths are one file when both exist and have the same device and inode
// (llvm::sys::fs::equivalent: symbolic links followed, hard links alike), or
// when they resolve to the same absolute path: real_path of the longest
// existing folder, then the rest, so that a file not yet written is compared
// through the links of its folder.
//
//===----------------------------------------------------------------------===//
#include "FilePlan.h"
#include "mpc/IR/Graph.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mpc;
using namespace mpc::tool;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

/// `p` made absolute, through the links of its longest existing prefix.
static std::string resolvedPath(llvm::StringRef p) {
  llvm::SmallString<256> real;
  if (!fs::real_path(p, real))
    return std::string(real);
  llvm::SmallString<256> abs(p);
  fs::make_absolute(abs);
  path::remove_dots(abs, /*remove_dot_dot=*/true);
  llvm::SmallString<256> parent(abs);
  path::remove_filename(parent);
  if (parent.empty() || parent == abs)
    return std::string(abs);
  llvm::SmallString<256> out(resolvedPath(parent));
  path::append(out, path::filename(abs));
  return std::string(out);
}

static bool sameFile(llvm::StringRef a, llvm::StringRef b) {
  bool eq = false;
  if (fs::exists(a) && fs::exists(b) && !fs::equivalent(a, b, eq) && eq)
    return true;
  return resolvedPath(a) == resolvedPath(b);
}

void FilePlan::read(llvm::StringRef p, llvm::StringRef what) {
  if (!p.empty())
    reads.push_back({p.str(), what.str(), false});
}

void FilePlan::write(llvm::StringRef p, llvm::StringRef what) {
  if (!p.empty())
    writes.push_back({p.str(), what.str(), false});
}

void FilePlan::writeFolder(llvm::StringRef p, llvm::StringRef what) {
  if (!p.empty())
    writes.push_back({p.str(), what.str(), true});
}

void FilePlan::readExternalData(const Model &m, llvm::StringRef modelPath) {
  llvm::StringSet<> seen;
  std::string what = "external data of " + quoteName(modelPath);
  auto add = [&](const Tensor &t) {
    const ExternalRef *ref = t.externalRef();
    if (!ref || !seen.insert(ref->path).second)
      return;
    // Named as the user sees it: the location beside the model.
    llvm::SmallString<256> shown(modelPath);
    path::remove_filename(shown);
    path::append(shown, ref->location);
    read(shown, what);
  };
  auto visit = [&](Graph &g) {
    for (const Value *v : g.initializers())
      if (const Tensor *t = v->initializer())
        add(*t);
    for (const Node &n : g.nodes())
      for (const Attribute &a : n.attrs)
        for (const Tensor &t : a.tensors)
          add(t);
  };
  if (m.graph)
    forEachGraph(*m.graph, visit);
  for (const TrainingInfo &ti : m.trainingInfo)
    for (const std::unique_ptr<Graph> *g : {&ti.initialization, &ti.algorithm})
      if (*g)
        forEachGraph(**g, visit);
}

llvm::Error FilePlan::check() const {
  for (const Entry &w : writes)
    for (const Entry &r : reads)
      if (sameFile(w.path, r.path))
        return inputError("the {0} '{1}' is the {2} '{3}'; mpc never overwrites a file it "
                          "reads",
                          w.what, w.path, r.what, r.path);
  // A file written over a folder fails only at its rename, after the work
  // (and after any file written before it).
  for (const Entry &w : writes) {
    if (!w.folder && fs::is_directory(w.path))
      return inputError("the {0} '{1}' is a folder; give a file name", w.what, w.path);
    if (w.folder && fs::exists(w.path) && !fs::is_directory(w.path))
      return inputError("the {0} '{1}' is a file, not a folder", w.what, w.path);
  }
  for (size_t i = 0; i < writes.size(); ++i)
    for (size_t j = i + 1; j < writes.size(); ++j)
      if (sameFile(writes[i].path, writes[j].path))
        return inputError("the {0} '{1}' and the {2} '{3}' are the same file", writes[i].what,
                          writes[i].path, writes[j].what, writes[j].path);
  return llvm::Error::success();
}

/// True for `<name>.tmp-` and six lowercase hex digits.
static bool isTemporaryOf(llvm::StringRef file, llvm::StringRef name) {
  llvm::StringRef suffix(kTempSuffix);
  size_t digits = suffix.count('%');
  llvm::StringRef prefix = suffix.take_until([](char c) { return c == '%'; });
  if (!file.consume_front(name) || !file.consume_front(prefix) || file.size() != digits)
    return false;
  return llvm::all_of(file, [](char c) { return llvm::isDigit(c) || (c >= 'a' && c <= 'f'); });
}

void FilePlan::removeStaleTemporaries() const {
  for (const Entry &w : writes) {
    if (w.folder)
      continue;
    llvm::SmallString<256> dir(w.path);
    path::remove_filename(dir);
    if (dir.empty())
      dir = ".";
    llvm::StringRef name = path::filename(w.path);
    std::error_code ec;
    std::vector<std::string> stale;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      llvm::StringRef file = path::filename(it->path());
      fs::file_status st;
      if (!isTemporaryOf(file, name) || fs::status(it->path(), st, /*follow=*/false) ||
          st.type() != fs::file_type::regular_file)
        continue;
      if (llvm::none_of(reads, [&](const Entry &r) { return sameFile(it->path(), r.path); }))
        stale.push_back(it->path());
    }
    for (const std::string &s : stale)
      fs::remove(s);
  }
}
