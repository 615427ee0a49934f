//===- TrainingLoop.h - The training loop drivers share ---------*- C++ -*-===//
//
// The loop that trains a training plan: data (npy, token stream, synthetic;
// each data-parallel rank its shard of the global batch), the learning-rate
// schedule, step logs (text and JSON, rank 0 only), checkpoints and resume,
// exports (safetensors, ONNX). cleave-run, binaries written by
// cleave-compile --emit=exe and MPI launches all drive it, over the C API.

#ifndef CLEAVE_TRAININGLOOP_H
#define CLEAVE_TRAININGLOOP_H

#include "cleave/Checkpoint.h"
#include "cleave/Data.h"
#include "cleave/TensorFile.h"
#include "cleave_rt.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cleave::training {

/// A fault --inject-fault makes happen (for tests of failure handling and
/// restarts): rank `rank` fails at the start of step `step` (1-based). Each
/// fires once per process, so a rank that --max-restarts brings back does
/// not fail again where it failed before.
struct InjectedFault {
  enum class Kind {
    /// The rank dies: under mpirun or srun the process is killed (SIGKILL);
    /// with --ranks, where a rank is a thread, the rank leaves without a
    /// word to its peers (they find out at once) and ends with
    /// kExitInjectedFault.
    Crash,
    /// The rank stops answering. With --ranks the thread waits until a
    /// restart releases it (releaseInjectedHangs); else for ever.
    Hang,
    /// The whole process stops (SIGSTOP; under a launcher).
    Stop,
    /// A straggler for that step: the rank sleeps half the communication
    /// timeout (at most 1 s) before it.
    Slow,
    /// After the step, the newest checkpoint written at or before it is
    /// damaged (a resume skips it and takes the one before).
    CorruptCheckpoint,
    /// With --async-checkpoint, halfway through the background write of
    /// step `step`'s checkpoint: the process is killed, or the write fails.
    CrashDuringSave,
    FailDuringSave,
  };
  int64_t rank = 0, step = 0;
  Kind kind = Kind::Crash;
};

/// The name --inject-fault spells `kind` with ("crash", "hang", ...).
const char *faultKindName(InjectedFault::Kind kind);

/// Wakes every rank thread that an injected hang holds (it then ends with
/// kExitInjectedFault): a restart under --ranks calls it, as a thread cannot
/// be killed. A real hang is not released.
void releaseInjectedHangs();

/// "injected crash" (the kind) if this thread's rank last ended by an
/// injected fault, else ""; forgets it.
std::string takeInjectedFaultNote();

struct TrainOptions {
  long steps = -1; ///< Total steps to reach (a resumed run continues to it).
  std::vector<std::pair<std::string, std::string>> data; ///< --data NAME=FILE
  std::string tokens, tokenDType = "uint16";
  bool synthetic = false;
  /// -1: the model's vocabulary (the fewest values a data input's valid
  /// range holds), else 256.
  long syntheticVocab = -1;
  uint64_t seed = 0;
  bool seedGiven = false;
  long logEvery = 1;
  std::string logJson;
  long saveEvery = 0;
  std::string checkpointDir, resume, exportPath;
  /// --resume=auto, resolved by resolveAutoResume: `resume` is then the
  /// checkpoint directory, or empty to start fresh.
  bool resumeAuto = false;
  /// `resume` is a step directory whose files were just verified (a
  /// restart chose it), so rank 0 does not read them twice.
  bool resumeVerified = false;
  /// --async-checkpoint: a save blocks the step only to copy its states to
  /// host memory; a thread of each rank writes them (AsyncCheckpoint.h).
  bool asyncCheckpoint = false;
  /// --export-onnx OUT: the source model (--onnx-model, default the plan's
  /// `source_model` metadata) with the trained parameters written back.
  std::string exportOnnx, onnxModel;
  /// --inject-fault rank=R,step=S,kind=K (testing only), each use one
  /// fault; see InjectedFault.
  std::vector<InjectedFault> faults;
  /// --output-dir DIR: every output of the last step (loss, grad_norm and,
  /// in plans compiled with --return-gradients, grad.<name>) as .npy.
  std::string outputDir;
  /// --trace FILE: the last step's measured pipeline timeline
  /// (writePipelineTrace).
  std::string tracePath;
  /// --measure-memory: the last step is measured
  /// (cleave_rt_executor_measure_memory) and every rank's figures printed
  /// (reportMemory).
  bool measureMemory = false;
  /// --profile: every command of the timed runs (of a training plan: of
  /// every step after the first) is timed and rank 0's profile printed
  /// (printProfile).
  bool profile = false;
  /// --profile-json FILE: --profile, and every command's mean time per run
  /// written to FILE as JSON by every rank (writeProfileJson,
  /// profileJsonPath), for comparing a plan's measured commands with
  /// cleave-sim's.
  std::string profileJson;
  /// --slow-rank R:F (a straggler, for measurements): after each step (and
  /// each run of the plan's sync entry) rank R sleeps (F - 1) times the
  /// wall time that run took on it, so its compute takes F times as long.
  int64_t slowRank = -1;
  double slowFactor = 1.0;
  /// Data given as arrays, one per data input by name, samples along the
  /// first dimension (what --data reads from files; the Python module).
  std::vector<std::pair<std::string, tensorfile::HostTensor>> dataArrays;
  /// Set: no dataset is needed, each Trainer::step is handed its batch.
  bool batchesGiven = false;
  /// The progress bar on stderr when it is a terminal.
  bool progressBar = true;
};

/// The rank this thread runs for (a plan over a mesh runs one rank per
/// thread with --ranks, or one per process under mpirun).
struct RankContext {
  cleave_rt_communicator comm = nullptr; ///< Null for a one-rank run.
  int64_t rank = 0, worldSize = 1;
};

/// One step's figures, as the step log prints them.
struct StepMetrics {
  int64_t step = 0; ///< Steps done, this one included.
  double loss = 0, lr = 0;
  bool hasGradNorm = false;
  double gradNorm = 0;
  /// fp16 dynamic loss scaling: the scale for the next step, and whether
  /// this step overflowed (its update was skipped).
  bool hasLossScale = false, skipped = false;
  double lossScale = 0;
  double stepMs = 0;
  double rate = 0; ///< Tokens per second (tokenModel) or samples per second.
  bool tokenModel = false;
  uint64_t peakBytes = 0; ///< The plan's arena.
  /// The plan's metric outputs (meta::kMetricOutputs), by name: their
  /// elements, row-major, and shape.
  struct Metric {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<double> values;
  };
  std::vector<Metric> metrics;
};

/// The training loop of one rank, a step at a time: runTraining is open,
/// step until --steps, finish; the Python module's Trainer drives the same
/// object. Every function returns an exit code on failure (after the
/// message went out through fail()), -1 on success; over several ranks
/// every rank calls them in the same order (they hold collectives).
class Trainer {
public:
  Trainer();
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  /// Checks the options against the plan, makes this rank's executors,
  /// resumes from o.resume and opens the data. `program` is the plan as
  /// loaded (of a pipelined plan, the whole file); it must outlive the
  /// trainer.
  int open(const TrainOptions &o, cleave_rt_program program,
           const std::string &backend, const RankContext &ctx = {});
  /// One step on the dataset's next batch, or on `batch` (one global
  /// tensor per data input in dataInputs() order, each of its full byte
  /// size); logs it and saves a checkpoint as the options ask. Fills *m.
  int step(const std::vector<const void *> *batch, StepMetrics *m);
  /// After the last step: the outputs, trace, memory report and exports
  /// the options ask for.
  int finish();
  /// Saves a checkpoint of the current state into `dir` (*path set on
  /// rank 0).
  int saveCheckpoint(const std::string &dir, std::string *path);
  /// Writes the parameters and buffers as safetensors and/or the source
  /// ONNX model (`sourceModel`, default the plan's source_model metadata)
  /// with them written back; an empty path skips that file.
  int exportParameters(const std::string &safetensorsPath,
                       const std::string &onnxPath,
                       const std::string &sourceModel);
  /// Every state as a global tensor on rank 0 (the others get records
  /// without data).
  int snapshot(std::vector<checkpoint::StateRecord> *records);

  /// The data inputs with their global shapes.
  const std::vector<data::InputSpec> &dataInputs() const;
  int64_t stepsDone() const;
  uint64_t seed() const;
  /// The total the step log counts to (--steps); -1 for none.
  void setTotalSteps(long steps);
  cleave_rt_executor executor() const;
  cleave_rt_program program() const; ///< This rank's (stage) program.

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// The training options of cleave-run, by name without the dashes
/// ("steps", "data", "log-every", ...): cleave-run parses its command line
/// through these, and the Python module its keyword arguments. `value` is
/// null for a flag. Returns false with *error set for an unknown name or a
/// bad value.
bool applyTrainOption(const std::string &name, const char *value,
                      TrainOptions &o, std::string *error);
/// Parses a count option's value: a decimal integer from 0 to 10^9.
bool parseCount(const char *text, long *out);
/// Whether `name` is a training option, and whether it takes a value.
bool isTrainOption(const std::string &name, bool *takesValue = nullptr);
/// Every training option's name, in the order cleave-run's help lists them.
const std::vector<std::string> &trainOptionNames();

/// The file name an output is written to: `<name>.npy`, with characters
/// other than letters, digits, '_', '.' and '-' replaced by '_'.
std::string outputFileName(const std::string &name);

/// Checks that no two outputs of `program` would be written to one file and
/// creates `dir`; on failure sets *error.
bool prepareOutputDir(cleave_rt_program program, const std::string &dir,
                      std::string *error);

/// Writes every output of the executor's last run as DIR/<name>.npy
/// (atomically, bfloat16 as float32); returns an exit code on failure, else
/// -1. Over several ranks every rank calls it: a sharded output's parts are
/// gathered through ctx.comm and rank 0 writes the global tensor; a
/// replicated output is rank 0's copy.
int writeOutputs(cleave_rt_program program, cleave_rt_executor executor,
                 const std::string &dir, const RankContext &ctx = {});

/// True if any training option was given (so the plan must be a training
/// plan).
bool anyTrainingOption(const TrainOptions &o);

/// One line per stage of a pipelined plan ("stage 1: 42 commands, arena
/// 4096 bytes, states 1024 bytes, 8 markers"); none for a plan that is not
/// pipelined.
std::vector<std::string> describeStages(cleave_rt_program program);

/// The name messages start with ("cleave-run: error: ..."); "cleave" by
/// default.
void setProgramName(const std::string &name);
const std::string &programName();

/// Sets this thread's rank: with more than one rank every message is
/// prefixed "rank R: ", and only rank 0 prints logs and writes files.
void setRank(int64_t rank, int64_t worldSize);
/// "rank R: " or "".
const std::string &rankPrefix();
/// True on rank 0.
bool isLeader();
/// With `quiet`, fail() on this thread records its message without
/// printing it (the Python module raises it instead).
void setQuietErrors(bool quiet);
/// The last message fail() recorded on this thread ("rank R: ..." over
/// several ranks), and forgets it.
std::string takeLastError();
/// True if this thread's rank left through an injected crash (its driver
/// must not abort the peers: they are to find out by themselves).
bool leftByFault();
/// The status code of the last error that fail() reported on this thread
/// through a cleave_rt_status (CLEAVE_RT_OK if none), and forgets it.
cleave_rt_status_code_t takeLastStatusCode();

/// --resume=auto: without a complete checkpoint in --checkpoint-dir (every
/// file of a step-<N> there of the size its manifest says) the run starts
/// fresh (o->resume cleared), else it resumes from the newest complete one
/// (o->resume set to the directory; a damaged one is skipped then). False
/// with *error when --checkpoint-dir is missing. Does nothing for another
/// --resume.
bool resolveAutoResume(TrainOptions *o, std::string *error);

/// The steps this thread's last runTraining had done when it returned (its
/// progress at a failure).
int64_t lastStepsDone();

/// Runs the training loop of a training plan for `ctx`'s rank; returns the
/// exit code. `program` is the plan as loaded (of a pipelined plan the
/// whole file: the rank runs its stage, and checkpoints and exports cover
/// every stage's states). Every rank feeds its shard of the same global
/// batch a one-rank run would see. With o.resume, rank 0 chooses and verifies
/// the checkpoint and every rank reads only its shards of it; a driver calls
/// cleave_rt_program_skip_referenced_values first (once, before the ranks
/// start) so that the plan's initial values are not read for nothing.
int runTraining(const TrainOptions &o, cleave_rt_program program,
                const std::string &backend, const RankContext &ctx = {});

} // namespace cleave::training

#endif // CLEAVE_TRAININGLOOP_H
