//===- Train.cpp - `mpc run --train`: train a training model ---------------===//
//
// The command line around mpc::Trainer (runtime/Trainer.h): flags, progress
// on stderr, the CSV log, checkpoints and the curves plot. Every input
// problem (flags, model, checkpoint, data, output folders) is found before
// the first step, so a bad run prints one line and writes nothing. Files are
// written whole (temporary file, rename) at evaluation points and at the end.
//
// Checkpoints (format: mpc/Runtime/Checkpoint.h) are written to
// DIR/checkpoint.onnx. Resuming restores the state and the step count; the
// batch order depends only on (seed, step), so N steps in one run and
// K + (N-K) steps across a resume give the same bytes.
//
//===----------------------------------------------------------------------===//
#include "MemoryBudget.h"
#include "Plot.h"
#include "Profile.h"
#include "Tool.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Runtime/Checkpoint.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/NpyIO.h"
#include "mpc/Runtime/Trainer.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Verify/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <chrono>
#include <cmath>

using namespace mpc;
using namespace mpc::tool;

static const char kTrainUsage[] =
    R"(usage: mpc run TRAIN.onnx --train --data FILE.npz --batch B [options]

Trains a training model (docs/training.md): each step runs
training_info[0].algorithm on one batch and applies update_binding. Batches
follow a seeded permutation per epoch, or the data order with --shuffle none
(the last partial batch is dropped).
The inference graph is evaluated on the held-out split every --eval-every
steps and at the end (accuracy for integer labels, mean squared error for
float labels). Prints progress on stderr and a final line on stdout:
"final: step N loss L eval_accuracy A skipped K".

data: FILE.npz (stored, not compressed) holds one array per algorithm input
(data inputs and the labels input), sharing the first (sample) dimension.
Arrays named <input>_test form the held-out split; without them the last
--holdout fraction is held out.

options:
  --data FILE.npz     the training data (required)
  --batch B           samples per step (required)
  --steps N           train until step N (a resumed run continues from the
                      checkpoint's step up to N)
  --epochs E          train until the end of epoch E (default 1); not with
                      --steps
  --eval-every K      evaluate, log progress and checkpoint every K steps
                      (default: progress every 10% of the steps)
  --holdout F         held-out fraction without <input>_test arrays
                      (default 0.1; 0 disables evaluation)
  --checkpoint DIR    write DIR/checkpoint.onnx (atomically) at evaluation
                      points and after the last step
  --resume DIR|FILE   continue from DIR/checkpoint.onnx (or FILE), bit for
                      bit as if the run had not stopped
  --shuffle seeded|none
                      batch order: a permutation per epoch drawn from --seed
                      (default) or the data's own order every epoch; the
                      algorithm is in docs/training.md (a resumed run keeps
                      the checkpoint's)
  --seed S            seed of the batch order (default 0; a resumed run keeps
                      the checkpoint's)
  --log FILE.csv      per-step log: step,epoch,loss,loss_scale,skipped,
                      grad_zero_frac,eval_accuracy,eval_loss
  --plot FILE.svg     loss (and evaluation) curves, as `mpc plot` draws them
  --device cpu|cuda   backend (default cpu)
  --no-fallback       with --device cuda: refuse a node the CUDA backend has
                      no kernel for instead of running it on the CPU with
                      copies around it (the default; a line before the final
                      one says what ran where)
  --tf32              with --device cuda: fp32 matrix products on Tensor
                      Cores in TF32 (10-bit mantissa); default strict fp32
  --cuda-graph on|off with --device cuda: after a warm-up step, capture the
                      step once as a CUDA graph and replay it (default on;
                      steps with a CPU fallback node always run eagerly)
  --threads N         threads for the CPU backend's matrix products
  --max-memory SIZE   the backend holds at most SIZE bytes at once (a number
                      with an optional unit B, KiB, MiB, GiB or TiB: 12GiB,
                      1.5MiB, 4096): a training step that does not fit stops
                      before the first step with one line giving its bytes
                      (persistent + step plan peak + workspace) against SIZE
  --profile           time every node of the step and print the share of the
                      step spent in the inserted loss-scaling subgraphs
  --stats             print the bytes copied between host and backend
                      memory per step (batch, state, logged values) and
                      outside steps (setup, checkpoints, evaluation), and
                      the step plan's and the backend's peak memory (also
                      exactly: 'memory bytes: ...'; with --device cuda also
                      the device memory in use, from cudaMemGetInfo, before
                      the model and after the first step)
  --placement-only    with --device cuda: print the training step's line
                      'cuda: N nodes; cpu fallback: ...' and nothing else,
                      decided by the CUDA kernel table on this machine (no
                      GPU needed, no step runs): the step is planned for
                      --batch rows of --data

exit status: 0 success, 1 bad input (one line on stderr, nothing written),
2 bad usage.
)";

namespace {
struct TrainArgs {
  std::string model, data, checkpoint, resume, log, plot;
  BackendChoice backend;
  int64_t batch = 0;
  uint64_t steps = 0, epochs = 0, evalEvery = 0, seed = 0;
  bool seedGiven = false;
  /// --shuffle: "" (not given: seeded, or the checkpoint's), "seeded" or "none".
  std::string shuffle;
  double holdout = 0.1;
  bool profile = false, stats = false, placementOnly = false;
};

/// One row of the CSV log.
struct LogRow {
  StepResult step;
  bool evaluated = false;
  EvalResult eval;
};
} // namespace

static std::string parseArgs(llvm::ArrayRef<const char *> argv, TrainArgs &a) {
  ArgScanner s(argv);
  auto positive = [](const std::string &v, uint64_t &out) {
    return !llvm::StringRef(v).getAsInteger(10, out) && out > 0;
  };
  while (!s.done()) {
    std::string v;
    bool missing = false;
    llvm::StringRef cur = s.peek();
    uint64_t u = 0;
    if (s.flag("--profile")) {
      a.profile = true;
    } else if (s.flag("--stats")) {
      a.stats = true;
    } else if (s.flag("--placement-only")) {
      a.placementOnly = true;
    } else if (s.flag("--train")) {
      continue;
    } else if (s.value("--data", v, missing)) {
      a.data = v;
    } else if (s.value("--batch", v, missing)) {
      if (!missing && (!positive(v, u) || u > (uint64_t(1) << 40)))
        return "--batch takes a positive integer";
      a.batch = int64_t(u);
    } else if (s.value("--steps", v, missing)) {
      if (!missing && !positive(v, a.steps))
        return "--steps takes a positive integer";
    } else if (s.value("--epochs", v, missing)) {
      if (!missing && !positive(v, a.epochs))
        return "--epochs takes a positive integer";
    } else if (s.value("--eval-every", v, missing)) {
      if (!missing && !positive(v, a.evalEvery))
        return "--eval-every takes a positive integer";
    } else if (s.value("--holdout", v, missing)) {
      double f;
      if (!missing && (llvm::StringRef(v).getAsDouble(f) || !(f >= 0 && f < 1)))
        return "--holdout takes a fraction in [0, 1)";
      a.holdout = missing ? a.holdout : f;
    } else if (s.value("--checkpoint", v, missing)) {
      a.checkpoint = v;
    } else if (s.value("--resume", v, missing)) {
      a.resume = v;
    } else if (s.value("--seed", v, missing)) {
      if (!missing && llvm::StringRef(v).getAsInteger(10, a.seed))
        return "--seed takes an unsigned integer";
      a.seedGiven = true;
    } else if (s.value("--shuffle", v, missing)) {
      if (!missing && v != "none" && v != "seeded")
        return "--shuffle must be none or seeded, not " + quoteName(v);
      a.shuffle = v;
    } else if (s.value("--log", v, missing)) {
      a.log = v;
    } else if (s.value("--plot", v, missing)) {
      a.plot = v;
    } else if (scanBackendOption(s, a.backend, v, missing)) {
      if (!v.empty())
        return v;
    } else {
      std::string err = s.positional(a.model, "model", " with --train");
      if (!err.empty())
        return err;
      continue;
    }
    if (missing)
      return "option " + quoteName(cur) + " needs a value";
  }
  if (a.model.empty())
    return "no model given";
  if (a.data.empty())
    return "--train needs --data FILE.npz";
  if (!a.batch)
    return "--train needs --batch B";
  if (a.steps && a.epochs)
    return "give --steps or --epochs, not both";
  if (a.seedGiven && a.shuffle == "none")
    return "--seed has no effect with --shuffle none";
  if (a.placementOnly) {
    if (std::string err = checkPlacementOnly(a.backend); !err.empty())
      return err;
    if (!a.checkpoint.empty() || !a.log.empty() || !a.plot.empty() || a.profile || a.stats)
      return "--placement-only runs no step: not with --checkpoint, --log, --plot, --profile "
             "or --stats";
    if (a.backend.maxMemory)
      return "--placement-only runs no step: not with --max-memory";
  }
  return checkBackendChoice(a.backend);
}

//===----------------------------------------------------------------------===//
// Checkpoints (the format: runtime/core/Checkpoint.cpp)
//===----------------------------------------------------------------------===//

/// The checkpoint file in folder `dir`.
static std::string checkpointIn(llvm::StringRef dir) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, "checkpoint.onnx");
  return std::string(p);
}

/// The file --resume names: FILE, or DIR/checkpoint.onnx.
static std::string resumeFile(const std::string &where) {
  return llvm::sys::fs::is_directory(where) ? checkpointIn(where) : where;
}

/// Loads and checks the checkpoint --resume names, of the model whose hash
/// is `hash`.
static llvm::Expected<std::unique_ptr<Model>>
loadCheckpoint(const std::string &where, const std::string &hash, CheckpointPosition &at) {
  std::string path = resumeFile(where);
  if (!llvm::sys::fs::exists(path))
    return inputError("--resume: no checkpoint '{0}'", path);
  return readCheckpoint(path, hash, at, loadModel);
}

/// Writes DIR/checkpoint.onnx with the trainer's current state.
static llvm::Error saveCheckpoint(Model &m, Trainer &t, const std::string &dir,
                                  const std::string &hash, int64_t batch) {
  // First: a step that failed on the device leaves nothing to write.
  if (llvm::Error e = t.syncModel())
    return e;
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return inputError("cannot create '{0}': {1}", dir, ec.message());
  CheckpointPosition at;
  at.step = t.stepsDone();
  at.epoch = t.stepsDone() / uint64_t(t.batchesPerEpoch());
  at.seed = t.seed();
  at.batch = batch;
  at.shuffle = t.shuffle();
  return writeCheckpoint(m, at, hash, checkpointIn(dir));
}

//===----------------------------------------------------------------------===//
// Logs and progress
//===----------------------------------------------------------------------===//

static std::string fmtDouble(double v, const char *spec = "%.9g") {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format(spec, v);
  return s;
}

static std::string csvOf(const std::vector<LogRow> &rows) {
  std::string out = "step,epoch,loss,loss_scale,skipped,grad_zero_frac,eval_accuracy,"
                    "eval_loss\n";
  for (const LogRow &r : rows) {
    const StepResult &s = r.step;
    out += std::to_string(s.step) + "," + std::to_string(s.epoch) + "," + fmtDouble(s.loss) + "," +
           (s.hasLossScale ? fmtDouble(s.lossScaleAfter) : "") + "," + (s.skipped ? "1" : "0") +
           "," + (s.hasGradZeroFraction ? fmtDouble(s.gradZeroFraction) : "") + "," +
           (r.evaluated && r.eval.hasAccuracy ? fmtDouble(r.eval.accuracy) : "") + "," +
           (r.evaluated && r.eval.hasLoss ? fmtDouble(r.eval.loss) : "") + "\n";
  }
  return out;
}

static std::string plotOf(const std::vector<LogRow> &rows, const std::string &title) {
  PlotPanel loss, acc;
  loss.yLabel = "loss";
  acc.yLabel = "eval accuracy";
  PlotSeries train{"train loss", {}}, evalLoss{"eval loss", {}}, evalAcc{"eval accuracy", {}};
  for (const LogRow &r : rows) {
    double x = double(r.step.step);
    train.points.emplace_back(x, r.step.loss);
    if (r.evaluated && r.eval.hasLoss)
      evalLoss.points.emplace_back(x, r.eval.loss);
    if (r.evaluated && r.eval.hasAccuracy)
      evalAcc.points.emplace_back(x, r.eval.accuracy);
  }
  loss.series.push_back(std::move(train));
  if (!evalLoss.points.empty())
    loss.series.push_back(std::move(evalLoss));
  std::vector<PlotPanel> panels{std::move(loss)};
  if (!evalAcc.points.empty()) {
    acc.series.push_back(std::move(evalAcc));
    panels.push_back(std::move(acc));
  }
  return renderPlotSvg(panels, title, "step");
}

static std::string describeEval(const EvalResult &e) {
  std::string s;
  if (e.hasAccuracy)
    s += " eval_accuracy " + fmtDouble(e.accuracy, "%.4f");
  if (e.hasLoss)
    s += " eval_loss " + fmtDouble(e.loss, "%.6g");
  return s;
}

/// A folder for an output file must exist before training starts.
static llvm::Error checkOutputFolder(const std::string &file, const char *flag) {
  if (file.empty())
    return llvm::Error::success();
  llvm::SmallString<256> dir(file);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  if (!llvm::sys::fs::is_directory(dir))
    return inputError("{0} {1}: folder '{2}' does not exist", flag, file, dir);
  if (llvm::sys::fs::is_directory(file))
    return inputError("{0} {1}: is a folder", flag, file);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// The command
//===----------------------------------------------------------------------===//

int tool::runTrain(llvm::ArrayRef<const char *> args, const char *const *) {
  if (wantsHelp(args)) {
    llvm::outs() << kTrainUsage;
    return Ok;
  }
  TrainArgs a;
  std::string usage = parseArgs(args, a);
  if (!usage.empty())
    return usageError("run --train", usage);

  FilePlan files;
  files.read(a.model, "training model");
  files.read(a.data, "--data file");
  if (!a.resume.empty())
    files.read(resumeFile(a.resume), "checkpoint to resume from");
  files.write(a.log, "--log file");
  files.write(a.plot, "--plot file");
  files.writeFolder(a.checkpoint, "--checkpoint folder");
  if (!a.checkpoint.empty())
    files.write(checkpointIn(a.checkpoint), "checkpoint");
  if (llvm::Error err = files.check())
    return fail(std::move(err));
  for (auto [file, flag] :
       {std::pair<const std::string *, const char *>{&a.log, "--log"}, {&a.plot, "--plot"}})
    if (llvm::Error err = checkOutputFolder(*file, flag))
      return fail(std::move(err));
  if (!a.checkpoint.empty() && llvm::sys::fs::exists(a.checkpoint) &&
      !llvm::sys::fs::is_directory(a.checkpoint))
    return fail(llvm::Twine("--checkpoint ") + a.checkpoint + ": exists and is not a folder");
  if (!llvm::sys::fs::exists(a.data))
    return fail("--data: file " + quoteName(a.data) + " does not exist");

  std::unique_ptr<Backend> backend;
  if (llvm::Error err = createRunBackend(a.backend, a.placementOnly).moveInto(backend))
    return fail(std::move(err));
  // --stats on a GPU: the device memory in use before anything of the model.
  DeviceMemorySample memBefore, memAfter;
  if (a.stats)
    memBefore = sampleDeviceMemory(*backend);

  auto loaded = loadModel(a.model);
  if (!loaded)
    return fail(loaded.takeError());
  std::unique_ptr<Model> model = std::move(*loaded);
  if (llvm::Error err = verifyModel(*model))
    return fail(llvm::Twine(a.model) + ": " + llvm::toString(std::move(err)));
  if (!model->isTraining())
    return fail(llvm::Twine(a.model) + ": not a training model (no training_info; see "
                                       "docs/training.md)");
  files.readExternalData(*model, a.model);
  if (llvm::Error err = files.check())
    return fail(std::move(err));
  auto hash = trainingModelHash(*model);
  if (!hash)
    return fail(hash.takeError());

  CheckpointPosition at;
  at.seed = a.seed;
  at.shuffle = a.shuffle != "none";
  if (!a.resume.empty()) {
    auto ck = loadCheckpoint(a.resume, *hash, at);
    if (!ck)
      return fail(ck.takeError());
    if (a.seedGiven && a.seed != at.seed)
      return fail(llvm::formatv("--seed {0}: the checkpoint was trained with seed {1} (a "
                                "resumed run keeps it)",
                                a.seed, at.seed)
                      .str());
    if (!a.shuffle.empty() && (a.shuffle != "none") != at.shuffle)
      return fail(llvm::formatv("--shuffle {0}: the checkpoint was trained with --shuffle {1} "
                                "(a resumed run keeps it)",
                                a.shuffle, at.shuffle ? "seeded" : "none")
                      .str());
    if (at.batch != a.batch)
      return fail(llvm::formatv("--batch {0}: the checkpoint was trained with --batch {1}", a.batch,
                                at.batch)
                      .str());
    model = std::move(*ck);
    files.readExternalData(*model, resumeFile(a.resume));
    if (llvm::Error err = files.check())
      return fail(std::move(err));
  }

  auto trainer = Trainer::create(*model, *backend, a.batch);
  if (!trainer)
    return fail(llvm::Twine(a.model) + ": " + llvm::toString(trainer.takeError()));
  Trainer &t = **trainer;
  {
    auto arrays = readNpzFile(a.data);
    if (!arrays)
      return fail(arrays.takeError());
    if (llvm::Error err = t.setData(std::move(*arrays), a.holdout))
      return fail(llvm::Twine(a.data) + ": " + llvm::toString(std::move(err)));
  }
  uint64_t nb = uint64_t(t.batchesPerEpoch());
  if (!a.resume.empty() && at.epoch != at.step / nb)
    return fail(llvm::formatv("checkpoint at step {0} is in epoch {1}, but this data makes "
                              "{2} batches per epoch (different data or --holdout?)",
                              at.step, at.epoch, nb)
                    .str());
  t.setPosition(at.seed, at.step);
  t.setShuffle(at.shuffle);
  if (a.placementOnly) {
    // The step planned (every node prepared), not run.
    if (llvm::Error err = t.planStep())
      return fail(llvm::Twine(a.model) + ": " + llvm::toString(std::move(err)));
    if (t.stepExecutor().isDynamic())
      return fail(inputError("--placement-only: the training step of {0} runs in dynamic mode "
                             "(control flow or data-dependent shapes), which places nodes as "
                             "it runs them",
                             quoteName(a.model)));
    llvm::outs() << backend->placementLine() << "\n";
    return Ok;
  }
  // The step planned (everything but its arena and workspace allocated),
  // and refused when it cannot fit --max-memory: before any step or file.
  PlannedMemory need;
  if (a.stats || a.backend.maxMemory) {
    if (llvm::Error err = t.planStep())
      return fail(llvm::Twine(a.model) + ": " + llvm::toString(std::move(err)));
    need = plannedMemory(*backend, t.stepExecutor());
    if (llvm::Error err =
            applyMemoryBudget(*backend, need, a.backend.maxMemory,
                              "the training step of", a.model, "step plan peak"))
      return fail(std::move(err));
  }
  files.removeStaleTemporaries();
  // --steps and --epochs count from the start of training, so that the same
  // command line, resumed, ends where an uninterrupted run ends.
  uint64_t last = a.steps ? a.steps : (a.epochs ? a.epochs : 1) * nb;
  if (last <= at.step)
    return fail(llvm::formatv("the checkpoint is at step {0}, already at or past the last "
                              "step {1}",
                              at.step, last)
                    .str());
  uint64_t total = last - at.step;
  uint64_t every = a.evalEvery ? a.evalEvery : std::max<uint64_t>(1, last / 10);

  bool tty = llvm::sys::Process::StandardErrIsDisplayed();
  llvm::raw_ostream &err = llvm::errs();
  std::vector<LogRow> rows;
  uint64_t skipped = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto lastDraw = t0;
  bool lineOpen = false;
  size_t drawnWidth = 0;
  auto closeLine = [&] {
    if (lineOpen)
      err << "\n";
    lineOpen = false;
    drawnWidth = 0;
  };
  auto writeFiles = [&]() -> llvm::Error {
    if (!a.log.empty())
      if (llvm::Error e = writeFileAtomically(a.log, csvOf(rows)))
        return e;
    return llvm::Error::success();
  };

  if (a.profile)
    t.stepExecutor().setProfiling(true);
  std::vector<double> stepMs; // time of each step alone (no evaluation, no files)
  stepMs.reserve(total);
  // Steps are launched without waiting for their logged values (a device
  // backend copies them back asynchronously); a result is handled when it
  // arrives, and the run waits for all of them at evaluation points (the
  // state must be that of the evaluated step) and at the end.
  uint64_t handled = 0;
  int failed = 0;
  auto handle = [&](const StepResult &r) -> bool {
    uint64_t i = handled++;
    rows.push_back(LogRow{r, false, {}});
    LogRow &row = rows.back();
    skipped += r.skipped;
    if (r.skipped) {
      closeLine();
      std::string what = "step " + std::to_string(r.step) + " skipped: non-finite gradient";
      if (!r.nonFiniteGradients.empty())
        what += " of " + llvm::join(r.nonFiniteGradients, ", ");
      if (r.hasLossScale)
        what += "; loss scale " + fmtDouble(r.lossScaleBefore, "%g") + " -> " +
                fmtDouble(r.lossScaleAfter, "%g");
      err << what << "\n";
    }
    bool evalPoint = r.step % every == 0 || r.step == last;
    if (evalPoint && (a.evalEvery || r.step == last)) {
      auto e = t.evaluate();
      if (!e) {
        closeLine();
        failed = fail(e.takeError());
        return false;
      }
      row.evaluated = e->samples > 0;
      row.eval = *e;
      if (!a.checkpoint.empty())
        if (llvm::Error e2 = saveCheckpoint(*model, t, a.checkpoint, *hash, a.batch)) {
          closeLine();
          failed = fail(std::move(e2));
          return false;
        }
      if (llvm::Error e2 = writeFiles()) {
        closeLine();
        failed = fail(std::move(e2));
        return false;
      }
    }
    std::string scale = r.hasLossScale ? " scale " + fmtDouble(r.lossScaleAfter, "%g") : "";
    auto now = std::chrono::steady_clock::now();
    if (tty) {
      // One line redrawn in place (at most every 100 ms); an evaluation ends
      // it, so that each evaluation stays on screen.
      if (now - lastDraw > std::chrono::milliseconds(100) || r.step == last || evalPoint) {
        double secs = std::chrono::duration<double>(now - t0).count();
        std::string line = "step " + std::to_string(r.step) + "/" + std::to_string(last) +
                           " loss " + fmtDouble(r.loss, "%.6g") + scale + " skipped " +
                           std::to_string(skipped) + " " +
                           fmtDouble(secs > 0 ? double(i + 1) / secs : 0, "%.1f") + " steps/s" +
                           (row.evaluated ? describeEval(row.eval) : "");
        size_t width = line.size();
        line.resize(std::max(width, drawnWidth), ' ');
        err << "\r" << line;
        drawnWidth = width;
        lineOpen = true;
        lastDraw = now;
        if (row.evaluated)
          closeLine();
      }
    } else if (evalPoint) {
      err << "step " << r.step << "/" << last << " epoch " << r.epoch << " loss "
          << fmtDouble(r.loss, "%.6g") << scale << " skipped " << skipped
          << (row.evaluated ? describeEval(row.eval) : "") << "\n";
    }
    return true;
  };
  // The steady rate: the wall time of the steps after the first kWarmSteps
  // (on a device: each of the two sets of state addresses run eagerly, then
  // captured), from when those have finished to the last step's result, the
  // device's work included and the handling of results (evaluation,
  // checkpoints, files) left out. A step's own time above is only its launch
  // where steps are queued without a wait.
  constexpr uint64_t kWarmSteps = 4;
  using Clock = std::chrono::steady_clock;
  Clock::time_point steadyStart;
  Clock::duration handling{};
  std::vector<double> warmNodeSeconds; // --profile: node times after the warm-up
  // Takes the results that have arrived (with `wait`: every pending one). A
  // step that failed on the device is found here, when its record is taken:
  // after the rows of the steps before it, before its own. 0, or the exit
  // status of the failure.
  auto takeResults = [&](bool wait) -> int {
    while (true) {
      auto r = t.nextResult(wait);
      if (!r) {
        closeLine();
        return fail(r.takeError());
      }
      if (!*r)
        return 0;
      auto h0 = Clock::now();
      if (!handle(**r))
        return failed;
      handling += Clock::now() - h0;
    }
  };
  for (uint64_t i = 0; i < total; ++i) {
    if (i == kWarmSteps) {
      if (int status = takeResults(true))
        return status;
      steadyStart = Clock::now();
      handling = Clock::duration{};
      if (a.profile) // the profile by op type leaves the warm-up out too
        warmNodeSeconds.assign(t.stepExecutor().nodeSeconds().begin(),
                               t.stepExecutor().nodeSeconds().end());
    }
    auto s0 = Clock::now();
    auto k = t.launchStep();
    stepMs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s0).count());
    if (a.stats && i == 0)
      memAfter = sampleDeviceMemory(*backend);
    if (!k) {
      closeLine();
      return fail(k.takeError());
    }
    bool evalPoint = *k % every == 0 || *k == last;
    if (int status = takeResults(evalPoint))
      return status;
  }
  double steadyMs =
      total > kWarmSteps
          ? std::chrono::duration<double, std::milli>(Clock::now() - steadyStart - handling)
                    .count() /
                double(total - kWarmSteps)
          : 0;
  closeLine();
  if (!a.plot.empty())
    if (llvm::Error e =
            writeFileAtomically(a.plot, plotOf(rows, llvm::sys::path::filename(a.model).str())))
      return fail(std::move(e));

  std::vector<double> sorted = stepMs;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2];
  err << "time: " << stepMs.size() << " step(s), median " << fmtDouble(median, "%.4f")
      << " ms per step (" << fmtDouble(median > 0 ? 1000.0 / median : 0, "%.1f")
      << " steps/s), evaluation excluded";
  if (total > kWarmSteps)
    err << "; steps " << (at.step + kWarmSteps + 1) << "-" << last << ": "
        << fmtDouble(steadyMs, "%.4f") << " ms per step ("
        << fmtDouble(steadyMs > 0 ? 1000.0 / steadyMs : 0, "%.1f")
        << " steps/s) by wall time, the device's work included";
  err << "\n";
  if (a.stats) {
    const TrainerTransfers &x = t.transfers();
    auto perStep = [&](uint64_t bytes) {
      return std::to_string(x.steps ? bytes / x.steps : 0);
    };
    err << "stats: " << x.steps << " step(s), state "
        << (x.deviceState ? "in backend buffers" : "copied around each step");
    if (x.deviceState)
      err << " (" << x.stateTensors << " tensor(s), " << formatBytes(x.stateBytes) << "; "
          << x.inPlaceTensors << " updated in place, " << formatBytes(x.inPlaceBytes) << "; "
          << x.doubleBufferedTensors << " double-buffered, "
          << formatBytes(x.doubleBufferedBytes) << ")";
    err << "; per step: " << perStep(x.stepHostToDevice) << " bytes host->backend, "
        << perStep(x.stepDeviceToHost) << " bytes backend->host, " << perStep(x.stateCopied)
        << " bytes of state copied, " << perStep(x.readback)
        << " bytes read back for logs; outside steps: " << x.setup << " bytes uploaded, "
        << x.synced << " bytes copied out (checkpoints, evaluation)\n";
    // The step's activations (its static plan) against all the backend held.
    const MemoryStats &ms = t.stepExecutor().memoryStats();
    err << "memory: step plan peak " << formatBytes(ms.plannedPeak) << ", persistent "
        << formatBytes(ms.persistent) << ", backend peak "
        << formatBytes(backend->peakAllocatedBytes()) << "\n";
    err << plannedMemoryLine(*backend, need, "step plan peak") << "\n";
    std::string device = deviceMemoryLine(*backend, memBefore, memAfter, need, "the first step");
    if (!device.empty())
      err << device << "\n";
  }
  if (a.profile) {
    // Nodes the rewrite inserted for loss scaling carry this doc string.
    const Executor &ex = t.stepExecutor();
    double all = 0, scaling = 0;
    size_t nScaling = 0;
    for (size_t i = 0; i < ex.nodeSeconds().size(); ++i) {
      all += ex.nodeSeconds()[i];
      if (llvm::StringRef(ex.scheduledNodes()[i]->docString).startswith("mpc loss scaling:")) {
        scaling += ex.nodeSeconds()[i];
        ++nScaling;
      }
    }
    double stepSeconds = 0;
    for (double ms : stepMs)
      stepSeconds += ms / 1000.0;
    err << "profile: " << ex.scheduledNodes().size() << " node(s) per step; " << nScaling
        << " loss-scaling node(s) take "
        << fmtDouble(all > 0 ? 100.0 * scaling / all : 0, "%.2f") << "% of node time, "
        << fmtDouble(stepSeconds > 0 ? 100.0 * scaling / stepSeconds : 0, "%.2f")
        << "% of step time\n";
    std::vector<double> secs(ex.nodeSeconds().begin(), ex.nodeSeconds().end());
    for (size_t i = 0; i < secs.size() && i < warmNodeSeconds.size(); ++i)
      secs[i] = std::max(0.0, secs[i] - warmNodeSeconds[i]);
    bool warm = total > kWarmSteps;
    std::string what = warm ? "steps " + std::to_string(at.step + kWarmSteps + 1) + "-" +
                                  std::to_string(last)
                            : "all " + std::to_string(total) + " step(s)";
    printTimeByOpType(err, ex.scheduledNodes(), secs,
                      unsigned(warm ? total - kWarmSteps : total), "step", what);
  }

  std::string placement = backend->placementLine();
  if (!placement.empty())
    llvm::outs() << placement << "\n";
  const LogRow &fin = rows.back();
  llvm::outs() << "final: step " << fin.step.step << " loss " << fmtDouble(fin.step.loss, "%.6g");
  if (fin.evaluated && fin.eval.hasAccuracy)
    llvm::outs() << " eval_accuracy " << fmtDouble(fin.eval.accuracy, "%.4f");
  else if (fin.evaluated && fin.eval.hasLoss)
    llvm::outs() << " eval_mse " << fmtDouble(fin.eval.loss, "%.6g");
  else
    llvm::outs() << " eval_accuracy -";
  llvm::outs() << " skipped " << skipped << "\n";
  return Ok;
}
