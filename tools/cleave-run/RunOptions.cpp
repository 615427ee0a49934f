//===- RunOptions.cpp - cleave-run's command line -------------------------===//
//
// cleave-run's options as a CLI11 app: CLI11 splits the command line,
// takes each option's value, refuses unknown options and writes --help
// from the options' descriptions, grouped in the help's order (inputs,
// outputs, execution, training, ranks). The values are checked here after
// parsing, with messages that name the option and the bad value; the
// training options go through the runtime's table
// (training::applyTrainOption), which the Python module shares.
//
// CLI11 reports errors by throwing, so this file is compiled with
// exceptions and catches every one of them here: parseRunArgs returns.
//
//===----------------------------------------------------------------------===//

#include "RunOptions.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

namespace cleave {

namespace {

const char kUsage[] =
    "usage: cleave-run MODEL.cleave [INPUT...] [options]\n"
    "       TRAIN [INPUT...] [options]   (a binary from cleave-compile "
    "--emit=exe, plan inside)\n";

// clang-format off
const char kDescription[] =
    "Runs a compiled Cleave plan on the CPU.\n";

const char kFooter[] =
    "Inputs: every input must be given, positionally or with --input.\n"
    "Formats, by extension:\n"
    "  .npy  numpy format 1.0/2.0/3.0, little-endian, C order; dtypes\n"
    "        f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1\n"
    "  .pb   a serialized onnx.TensorProto (raw_data or typed fields)\n"
    "The shape and dtype must equal the plan's exactly; a bfloat16 input\n"
    "may be given as uint16 data holding its bit patterns.\n"
    "\n"
    "Training: a line per logged step goes to stdout; a progress bar to\n"
    "stderr when it is a terminal. A local-SGD plan (cleave-compile\n"
    "--sync=local:H) runs its 'sync' entry after every H-th step and logs\n"
    "rank 0's own loss.\n"
    "\n"
    "Ranks (plans compiled for a mesh, e.g. a program with cleave.mesh): a\n"
    "pipelined plan holds one program per stage of its 'pp' mesh axis; each\n"
    "rank runs its stage's, with the same inputs and outputs. Under mpirun or\n"
    "srun (OpenMPI), each process is one rank: run\n"
    "'mpirun -np N cleave-run MODEL.cleave ...' without --ranks. Rank 0\n"
    "writes the outputs; an error on any rank ends the job (MPI_Abort).\n"
    "Under torchrun ('torchrun --nproc-per-node=N --no-python cleave-run\n"
    "...'), or with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT\n"
    "set, the ranks meet over Gloo (CLEAVE_COMM=gloo asks for it under\n"
    "mpirun or srun); see docs/guide/cleave-run.md.\n"
    "\n"
    "Exit status (stable; cleave/ExitCodes.h):\n"
    "  0   success\n"
    "  1   a user or input error (plan, data, option value, checkpoint\n"
    "      directory): running again will not help\n"
    "  2   a bad command line\n"
    "  75  retryable: a rank stopped because a peer failed, exited, hung\n"
    "      past --comm-timeout or aborted (EX_TEMPFAIL); run again with\n"
    "      --resume=auto\n"
    "  76  retryable: a rank failed by --inject-fault (testing)\n"
    "  >128  a rank killed by a signal (128 + its number): retryable\n"
    "With --ranks, --max-restarts N restarts every rank from the newest\n"
    "complete checkpoint after a retryable failure; under mpirun or srun\n"
    "the job script does (docs/guide/cleave-run.md#restarts).\n";

/// Help of the training options (training::trainOptionNames()): the
/// value's name (empty for a flag), the help group and the text.
struct TrainOptionHelp {
  const char *name, *value, *group, *help;
};
const char kTraining[] =
    "Training (plans compiled for training; each run is one step)";
const char kExecution[] = "Execution and statistics";
const char kRanks[] = "Ranks";
const TrainOptionHelp kTrainHelp[] = {
    {"profile", "", kExecution,
     "time every command of the timed runs (of a\n"
     "training plan: of every step after the first)\n"
     "and print the time per run by command kind and\n"
     "the 20 costliest commands (cpu backend)"},
    {"profile-json", "FILE", kExecution,
     "--profile, and every command's mean time per\n"
     "run written to FILE as JSON (index, kind,\n"
     "label, ms), to set beside cleave-sim's; rank\n"
     "r > 0 of a multi-rank run writes FILE with\n"
     ".rank<r> before its extension"},
    {"trace", "FILE", kExecution,
     "for a pipelined plan or one with step markers:\n"
     "the last run's (or training step's) measured\n"
     "timeline of every rank's steps as Chrome trace\n"
     "JSON (chrome://tracing, Perfetto), written by\n"
     "rank 0 atomically, and a line with the\n"
     "measured pipeline bubble"},
    {"measure-memory", "", kExecution,
     "measure what the last run (or training step)\n"
     "writes of the arena: every byte that holds no\n"
     "constant, state or input is filled with a\n"
     "poison pattern first, and rank 0 prints per\n"
     "rank the highest arena offset the run wrote\n"
     "(the high-water mark) beside the compiler's\n"
     "arena and the bytes written (cpu backend only;\n"
     "the fill adds to that run's time)"},
    {"steps", "N", kTraining,
     "train until step N (counted from the start,\n"
     "also when resuming); required for training"},
    {"data", "NAME=FILE.npy", kTraining,
     "the dataset of data input NAME, samples along\n"
     "the first dimension (one per data input);\n"
     "batch rows follow a permutation seeded by\n"
     "--seed, redrawn each epoch"},
    {"tokens", "FILE.bin", kTraining,
     "a token stream for a language model: each\n"
     "batch row takes T+1 tokens at a seeded offset,\n"
     "inputs = window[:T], labels = window[1:]"},
    {"token-dtype", "uint16|uint32", kTraining,
     "the token file's element type (default\n"
     "uint16)"},
    {"synthetic", "", kTraining,
     "random data (integers below --synthetic-vocab,\n"
     "default the model's vocabulary: the fewest\n"
     "values a data input takes (its valid range: an\n"
     "embedding's rows, the classes), else 256;\n"
     "floats in [-1, 1))"},
    {"synthetic-vocab", "N", kTraining,
     "vocabulary size of synthetic integer data (at\n"
     "most the model's)"},
    {"seed", "S", kTraining,
     "data-order seed (default 0; a resumed run\n"
     "takes the checkpoint's)"},
    {"log-every", "K", kTraining, "log every K steps and the last (default 1)"},
    {"log-json", "FILE", kTraining,
     "also write each logged step as one JSON object\n"
     "per line (step, loss, lr, grad_norm,\n"
     "tokens_per_s or samples_per_s, step_ms,\n"
     "peak_bytes)"},
    {"save-every", "K", kTraining,
     "save a checkpoint every K steps into\n"
     "--checkpoint-dir"},
    {"checkpoint-dir", "DIR", kTraining,
     "DIR/step-<N>/ (model.safetensors, index.json,\n"
     "manifest.json with SHA-256s), written\n"
     "atomically; DIR/latest names the newest"},
    {"async-checkpoint", "", kTraining,
     "a save blocks the step only to copy its states\n"
     "to host memory (page-locked on a GPU); a\n"
     "thread of each rank writes the checkpoint\n"
     "beside the next steps, then renames it into\n"
     "place. One save in flight: the next waits for\n"
     "it. A failed write ends the run non-zero at the\n"
     "next step"},
    {"resume", "PATH|auto", kTraining,
     "continue from a checkpoint: PATH/step-<N>, or\n"
     "the newest complete one in PATH (incomplete or\n"
     "damaged ones are skipped with a warning);\n"
     "auto: the newest complete one in\n"
     "--checkpoint-dir, or a fresh start if it holds\n"
     "none (for job scripts that run a job again)"},
    {"export-safetensors", "FILE", kTraining,
     "write the trained parameters at the end"},
    {"export-onnx", "FILE", kTraining,
     "write the source ONNX model with the trained\n"
     "parameters at the end"},
    {"onnx-model", "FILE", kTraining,
     "the source model for --export-onnx (default:\n"
     "the path recorded in the plan)"},
    {"slow-rank", "R:F", kRanks,
     "a straggler: after each training step (and\n"
     "each run of a local-SGD plan's sync entry)\n"
     "rank R sleeps F - 1 times the wall time that\n"
     "run took on it, so its steps take F times as\n"
     "long (F >= 1; for measurements)"},
    {"inject-fault", "rank=R,step=S,kind=K", kRanks,
     "TESTING ONLY: rank R fails at the start of\n"
     "training step S (repeatable; each fault fires\n"
     "once per process). K: crash (under mpirun or\n"
     "srun SIGKILL; with --ranks a simulated rank\n"
     "death its peers detect), hang (stops\n"
     "answering; with --ranks until a restart\n"
     "releases it), stop (SIGSTOP: the process),\n"
     "slow (sleeps half --comm-timeout, at most\n"
     "1 s), corrupt-checkpoint (after step S, damages\n"
     "the newest checkpoint at or before it), and\n"
     "with --async-checkpoint crash-during-save\n"
     "(SIGKILL) or fail-during-save (a write error)\n"
     "halfway through writing step S's checkpoint.\n"
     "Replaces --debug-fault"},
};
// clang-format on

/// The usage lines first, then the description, the options by group and
/// the footer.
class HelpFormatter : public CLI::Formatter {
public:
  std::string make_usage(const CLI::App *, std::string) const override {
    return kUsage;
  }
  std::string make_help(const CLI::App *app, std::string name,
                        CLI::AppFormatMode mode) const override {
    return make_usage(app, name) + "\n" + make_description(app) +
           make_positionals(app) + make_groups(app, mode) + "\n" +
           make_footer(app);
  }
};

/// The command line's words, before their values are checked.
struct RawArgs {
  std::vector<std::string> positional, inputs;
  std::string outputDir, backend, weightsDir, warmup, repeat, ranks, threads,
      bind, commTimeout, flightRecorder, flightRecorderSize, maxRestarts;
  bool noOutput = false, printOutputs = false, printStats = false;
  /// The values of each training option given, in command-line order (an
  /// empty string for each use of a flag).
  std::map<std::string, std::vector<std::string>> train;
};

/// Declares cleave-run's options on `app`, storing into `raw`.
void declareOptions(CLI::App &app, RawArgs &raw) {
  app.formatter(std::make_shared<HelpFormatter>());
  app.get_formatter()->column_width(27);
  app.description(kDescription);
  app.footer(kFooter);
  // Unknown options are reported by parseRunArgs, naming the first.
  app.allow_extras();
  // Repeating an option keeps its last value (--input and --data collect).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  auto text = [&](const char *name, std::string &into, const char *value,
                  const char *group, const char *help) {
    return app.add_option(name, into, help)->type_name(value)->group(group);
  };
  const char *inputs = "Inputs";
  app.add_option("INPUT", raw.positional,
                 "the plan (MODEL.cleave, unless the plan is\n"
                 "inside this binary), then tensor files for the\n"
                 "plan's inputs, in input order")
      ->type_name("")
      ->group(inputs);
  app.add_option("--input", raw.inputs,
                 "the file for the input named NAME\n"
                 "(repeatable; mixes with positional inputs,\n"
                 "which fill the inputs not named, in order)")
      ->type_name("NAME=FILE")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group(inputs);

  const char *outputs = "Outputs";
  text("--output-dir", raw.outputDir, "DIR", outputs,
       "write each output as DIR/<name>.npy (default:\n"
       "the current directory); characters of the name\n"
       "outside [A-Za-z0-9_.-] become '_'. Files are\n"
       "written atomically. bfloat16 outputs are written\n"
       "as float32 (numpy has no bfloat16), float16 as\n"
       "'<f2', bool as '|b1'. The directory is\n"
       "created if missing. For a training plan, only\n"
       "given explicitly: the outputs of the last step\n"
       "(loss, grad_norm, grad.<name> with\n"
       "--return-gradients).");
  app.add_flag("--no-output", raw.noOutput, "do not write output files")
      ->group(outputs);
  app.add_flag("--print-outputs", raw.printOutputs,
               "print each output's name, shape, dtype and\n"
               "first values")
      ->group(outputs);

  text("--backend", raw.backend, "NAME", kExecution,
       "backend to run on: cpu (default) or cuda (plans\n"
       "compiled with --target=cuda; needs the NVIDIA\n"
       "driver and a GPU)");
  text("--threads", raw.threads, "N", kExecution,
       "threads per rank for the generated kernels'\n"
       "loop nests and the library GEMMs (default:\n"
       "OMP_NUM_THREADS, else the cores divided among\n"
       "the ranks on this machine); results are the\n"
       "same for every count");
  text("--weights-dir", raw.weightsDir, "DIR", kExecution,
       "look in DIR for the files the plan references\n"
       "(the model's external data, by file name)\n"
       "instead of the folder it was compiled from");
  text("--warmup", raw.warmup, "N", kExecution,
       "untimed runs before the timed ones (default 0)");
  text("--repeat", raw.repeat, "N", kExecution,
       "timed runs (default 1); outputs come from the\n"
       "last run");
  app.add_flag("--print-stats", raw.printStats,
               "print the device (for cuda: GPU, driver and\n"
               "NCCL versions), the plan's peak memory (arena\n"
               "bytes and constant bytes), the load time and\n"
               "the run time (min and mean over the timed\n"
               "runs); for a pipelined plan, each stage's\n"
               "commands, arena, state bytes and markers")
      ->group(kExecution);

  // The training options, from the runtime's table (each must have help).
  for (const TrainOptionHelp &h : kTrainHelp) {
    std::vector<std::string> &values = raw.train[h.name];
    std::string flag = std::string("--") + h.name;
    if (!*h.value) {
      app.add_flag_callback(
             flag, [&values] { values.emplace_back(); }, h.help)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->group(h.group);
      continue;
    }
    app.add_option(flag, values, h.help)
        ->type_name(h.value)
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->group(h.group);
  }

  text("--ranks", raw.ranks, "N", kRanks,
       "run the plan's N ranks as threads of this\n"
       "process (local communicator); N must equal the\n"
       "mesh's size. Input files hold global tensors;\n"
       "each rank reads its shard of sharded inputs,\n"
       "and sharded outputs are assembled into global\n"
       "files. In training each data-parallel rank\n"
       "feeds its shard of the global batch that one\n"
       "rank would see. Only rank 0 prints logs; error\n"
       "lines name their rank.");
  text("--bind", raw.bind, "core|none", kRanks,
       "with --ranks: rank r's thread (and its\n"
       "kernels' threads) runs on cores rT to\n"
       "rT + T - 1 of this process's CPU set, modulo\n"
       "its size, T the threads per rank (default\n"
       "core, as mpirun --bind-to core); with more\n"
       "ranks than cores, consecutive ranks (tp\n"
       "fastest) land on different cores. none\n"
       "leaves the placement to the OS");
  text("--comm-timeout", raw.commTimeout, "S", kRanks,
       "a collective waits at most S seconds for a\n"
       "peer (default 300), then every rank stops with\n"
       "a message naming the rank that never came and\n"
       "the collective");
  text("--max-restarts", raw.maxRestarts, "N", kRanks,
       "with --ranks (and in a one-rank run): after a\n"
       "retryable failure (a rank crashed, hung past\n"
       "--comm-timeout, exited) bring every rank back\n"
       "from the newest complete checkpoint in\n"
       "--checkpoint-dir, with a fresh communicator, up\n"
       "to N times (default 0); a line per restart\n"
       "names the rank, why, the step resumed from and\n"
       "the steps lost. Needs --checkpoint-dir. Under\n"
       "mpirun or srun the job script restarts (exit\n"
       "status 75, --resume=auto)");
  text("--flight-recorder", raw.flightRecorder, "DIR", kRanks,
       "every rank keeps a ring of its last\n"
       "collectives, sends and receives (number, kind,\n"
       "group, bytes, source node, enqueue, start and\n"
       "end times) and writes it as DIR/rank-<r>.json\n"
       "when a collective fails or times out, when it\n"
       "aborts, on SIGUSR1 and on SIGSEGV, SIGBUS or\n"
       "SIGABRT; tools/cleave-flight DIR names the\n"
       "first collective where the ranks disagree and\n"
       "the rank that never arrived");
  text("--flight-recorder-size", raw.flightRecorderSize, "N", kRanks,
       "records the ring keeps per rank (default\n"
       "2048)");
  // Last in the help, as its own group.
  app.set_help_flag("-h,--help", "print this help")->group("Help");
}

/// "option --name needs a value" for CLI11's missing-argument errors,
/// which name the option first ("--name: 1 required N missing").
std::string describeParseError(const CLI::ParseError &e) {
  std::string what = e.what();
  size_t colon = what.find(':');
  if (e.get_name() == "ArgumentMismatch" && what.rfind("--", 0) == 0 &&
      colon != std::string::npos &&
      what.find("missing", colon) != std::string::npos)
    return "option " + what.substr(0, colon) + " needs a value";
  return what;
}

/// The arguments after argv[0], reversed (as CLI::App::parse takes them),
/// with each value-taking option joined to the next word ("--steps=N"):
/// an option's value is the next word even when it starts with '-'
/// (--comm-timeout -1 is a bad timeout, not a missing one).
std::vector<std::string> joinValues(const CLI::App &app, int argc,
                                    const char *const *argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (; i < argc; ++i)
        args.push_back(argv[i]);
      break;
    }
    const CLI::Option *opt =
        arg.rfind("--", 0) == 0 && arg.find('=') == std::string::npos
            ? app.get_option_no_throw(arg)
            : nullptr;
    if (opt && !opt->get_positional() && opt->get_expected_min() > 0 &&
        i + 1 < argc)
      arg += std::string("=") + argv[++i];
    args.push_back(arg);
  }
  return {args.rbegin(), args.rend()};
}

/// Checks the raw values into *o; false with *error naming the option.
bool checkValues(const CLI::App &app, const RawArgs &raw, bool embedded,
                 RunOptions *o, std::string *error) {
  auto usage = [&](const std::string &message) {
    *error = message;
    return false;
  };
  auto given = [&](const char *name) { return app.count(name) > 0; };
  // Unknown options (CLI11's extras, in order); other extras are
  // positional arguments CLI11 saw after an unknown one.
  for (const std::string &extra : app.remaining())
    if (extra.rfind("--debug-fault", 0) == 0)
      return usage("--debug-fault was replaced by --inject-fault "
                   "rank=R,step=S,kind=K (e.g. --inject-fault "
                   "rank=1,step=3,kind=hang)");
    else if (extra.size() > 1 && extra[0] == '-')
      return usage("unknown option '" + extra + "'");
  std::vector<std::string> positional = raw.positional;
  for (const std::string &extra : app.remaining())
    positional.push_back(extra);
  for (const std::string &arg : positional) {
    if (o->model.empty() && !embedded)
      o->model = arg;
    else
      o->positional.push_back(arg);
  }

  o->noOutput = raw.noOutput;
  o->printOutputs = raw.printOutputs;
  o->printStats = raw.printStats;
  if (given("--weights-dir"))
    o->weightsDir = raw.weightsDir;
  if (given("--output-dir")) {
    o->outputDir = raw.outputDir;
    o->outputDirGiven = true;
  }
  if (given("--backend"))
    o->backend = raw.backend;
  for (const std::string &v : raw.inputs) {
    size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
      return usage("--input expects NAME=FILE, got '" + v + "'");
    o->named.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  }
  if (given("--warmup") &&
      !training::parseCount(raw.warmup.c_str(), &o->warmup))
    return usage("--warmup expects a non-negative integer, got '" + raw.warmup +
                 "'");
  if (given("--repeat") &&
      !training::parseCount(raw.repeat.c_str(), &o->repeat))
    return usage("--repeat expects a non-negative integer, got '" + raw.repeat +
                 "'");
  if (given("--ranks") &&
      (!training::parseCount(raw.ranks.c_str(), &o->ranks) || o->ranks < 1 ||
       o->ranks > 4096))
    return usage("--ranks expects a rank count from 1 to 4096, got '" +
                 raw.ranks + "'");
  if (given("--threads") &&
      (!training::parseCount(raw.threads.c_str(), &o->threads) ||
       o->threads < 1 || o->threads > 4096))
    return usage("--threads expects a thread count from 1 to 4096, got '" +
                 raw.threads + "'");
  if (given("--bind")) {
    if (raw.bind != "core" && raw.bind != "none")
      return usage("--bind expects 'core' or 'none', got '" + raw.bind + "'");
    o->bindRanks = raw.bind == "core";
  }
  if (given("--comm-timeout")) {
    const char *v = raw.commTimeout.c_str();
    char *end = nullptr;
    errno = 0;
    double t = std::strtod(v, &end);
    if (errno || end == v || *end || !(t > 0) || t > 1e7)
      return usage("--comm-timeout expects a positive number of seconds, "
                   "got '" +
                   raw.commTimeout + "'");
    o->commTimeout = t;
  }
  if (given("--flight-recorder")) {
    if (raw.flightRecorder.empty())
      return usage("--flight-recorder expects a directory");
    o->flightRecorder = raw.flightRecorder;
  }
  if (given("--flight-recorder-size") &&
      (!training::parseCount(raw.flightRecorderSize.c_str(),
                             &o->flightRecorderSize) ||
       o->flightRecorderSize < 1 || o->flightRecorderSize > (1 << 24)))
    return usage("--flight-recorder-size expects a record count from 1 to "
                 "16777216, got '" +
                 raw.flightRecorderSize + "'");
  if (given("--flight-recorder-size") && o->flightRecorder.empty())
    return usage("--flight-recorder-size needs --flight-recorder DIR");
  if (given("--max-restarts") &&
      !training::parseCount(raw.maxRestarts.c_str(), &o->maxRestarts))
    return usage("--max-restarts expects a non-negative integer, got '" +
                 raw.maxRestarts + "'");
  // The training options: one table with the Python module's.
  for (const auto &[name, values] : raw.train)
    for (const std::string &v : values) {
      bool takesValue = false;
      training::isTrainOption(name, &takesValue);
      if (!training::applyTrainOption(name, takesValue ? v.c_str() : nullptr,
                                      o->train, error))
        return false;
    }

  if (o->model.empty() && !embedded)
    return usage("no model given");
  if (o->repeat < 1)
    return usage("--repeat must be at least 1");
  if (o->maxRestarts > 0 && o->train.checkpointDir.empty())
    return usage("--max-restarts restarts from the checkpoints in "
                 "--checkpoint-dir DIR: give it (and --save-every K)");
  if (o->train.profile && o->backend != "cpu")
    return usage("--profile times commands on the cpu backend only, not on "
                 "--backend " +
                 o->backend);
  if (o->train.measureMemory && o->backend != "cpu")
    return usage("--measure-memory fills and reads back the arena in host "
                 "memory, so it runs on the cpu backend only, not on "
                 "--backend " +
                 o->backend);
  return true;
}

} // namespace

RunArgs parseRunArgs(int argc, const char *const *argv, bool embedded,
                     RunOptions *o, std::string *error) {
  CLI::App app;
  RawArgs raw;
  try {
    declareOptions(app, raw);
    app.parse(joinValues(app, argc, argv));
  } catch (const CLI::CallForHelp &) {
    return RunArgs::Help;
  } catch (const CLI::ParseError &e) {
    *error = describeParseError(e);
    return RunArgs::Usage;
  } catch (const std::exception &e) {
    *error = e.what();
    return RunArgs::Usage;
  }
  return checkValues(app, raw, embedded, o, error) ? RunArgs::Run
                                                   : RunArgs::Usage;
}

const char *runUsage() { return kUsage; }

std::string runHelp() {
  CLI::App app;
  RawArgs raw;
  try {
    declareOptions(app, raw);
    return app.help();
  } catch (const std::exception &e) {
    return std::string(kUsage) + "\n(cannot list the options: " + e.what() +
           ")\n";
  }
}

} // namespace cleave
