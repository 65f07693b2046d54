//===- FilePlan.h - The files a command reads and writes --------*- C++ -*-===//
//
// mpc never writes a file it reads. Every command lists what it reads (models
// and the external data files their tensors refer to, inputs, data, CSV
// logs, checkpoints to resume from) and what it writes (outputs and their
// .data companions, reports, logs, plots, dump files, checkpoints, the files
// of an outputs folder and the folders themselves) in a FilePlan, and calls
// check() before any work: a written path that is a read file, literally,
// through `..`, a symbolic link or a hard link (the same inode), is refused
// with one line naming both paths. So are two outputs that are one file.
//
// After the check, removeStaleTemporaries() deletes what an earlier run
// killed mid-write left beside the files this run writes: `<file>.tmp-XXXXXX`
// (six lowercase hex digits), the pattern of every atomic write in mpc
// (kTempSuffix), and nothing else.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TOOLS_FILEPLAN_H
#define MPC_TOOLS_FILEPLAN_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mpc {
class Model;
namespace tool {

/// The suffix model of every temporary file mpc writes beside its target
/// (llvm::sys::fs::createUniqueFile replaces each % by a hex digit); the
/// exporter (compiler/lib/IO) and NpyIO use the same pattern.
constexpr const char *kTempSuffix = ".tmp-%%%%%%";

class FilePlan {
public:
  /// `what` names the file in messages: "input model", "--data file".
  void read(llvm::StringRef path, llvm::StringRef what);
  /// The external data files that the tensors of `m` (initializers and
  /// tensor attributes, in every graph) refer to; `modelPath` names the model.
  void readExternalData(const Model &m, llvm::StringRef modelPath);
  /// A file the command writes (atomically: its temporaries are its own).
  void write(llvm::StringRef path, llvm::StringRef what);
  /// A folder the command creates or writes into; its files are added with
  /// write().
  void writeFolder(llvm::StringRef path, llvm::StringRef what);

  /// Refuses a written path that is a read one, or two written files that
  /// are one. Call again after adding files (it rechecks everything).
  llvm::Error check() const;

  /// Removes `<file>.tmp-XXXXXX` beside every written file (never a file
  /// that is read). Call after check() passed.
  void removeStaleTemporaries() const;

private:
  struct Entry {
    std::string path, what;
    bool folder = false;
  };
  std::vector<Entry> reads, writes;
};

} // namespace tool
} // namespace mpc

#endif // MPC_TOOLS_FILEPLAN_H
