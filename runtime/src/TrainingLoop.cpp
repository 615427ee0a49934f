//===- TrainingLoop.cpp - The training loop drivers share ------------------===//
//
// Each step: fill the data inputs from the dataset, the learning rate and the
// step number, run the plan (which updates the parameters and optimizer state
// in place), read the loss and the gradient norm, log, and every K steps save
// a checkpoint. Batches depend only on (seed, step), so a resumed run
// reproduces an uninterrupted one bit for bit.
//
//===----------------------------------------------------------------------===//

#include "cleave/TrainingLoop.h"
#include "cleave/CommandProfile.h"

#include "TrainingSupport.h"

#include <csignal>
#include <thread>

#include "cleave/Checkpoint.h"
#include "cleave/Data.h"
#include "cleave/FileUtil.h"
#include "cleave/Json.h"
#include "cleave/MemoryReport.h"
#include "cleave/OnnxExport.h"
#include "cleave/PipelineTrace.h"
#include "cleave/TensorFile.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <unistd.h>
#include <utility>

namespace cleave::training {

using namespace cleave::plan;

static std::string gProgram = "cleave";
void setProgramName(const std::string &name) { gProgram = name; }
const std::string &programName() { return gProgram; }

static thread_local std::string gRankPrefix;
static thread_local bool gLeader = true;
static thread_local bool gLeftByFault = false;
bool leftByFault() { return gLeftByFault; }

void setRank(int64_t rank, int64_t worldSize) {
  gRankPrefix = worldSize > 1 ? "rank " + std::to_string(rank) + ": " : "";
  gLeader = rank == 0;
}
const std::string &rankPrefix() { return gRankPrefix; }
bool isLeader() { return gLeader; }

static thread_local std::string gLastError;
static thread_local bool gQuietErrors = false;
void setQuietErrors(bool quiet) { gQuietErrors = quiet; }
std::string takeLastError() { return std::exchange(gLastError, {}); }

int fail(const std::string &message) {
  gLastError = gRankPrefix + message;
  if (!gQuietErrors)
    std::fprintf(stderr, "%s: %serror: %s\n", gProgram.c_str(),
                 gRankPrefix.c_str(), message.c_str());
  return 1;
}

void warn(const std::string &message) {
  if (gLeader)
    std::fprintf(stderr, "%s: warning: %s\n", gProgram.c_str(),
                 message.c_str());
}

int statusFail(cleave_rt_status s) {
  std::string msg = cleave_rt_status_message(s);
  cleave_rt_status_free(s);
  return fail(msg);
}

std::string outputFileName(const std::string &name) {
  std::string s = name;
  for (char &c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' &&
        c != '-')
      c = '_';
  if (s.empty() || s == "." || s == "..")
    s = "output" + s;
  return s + ".npy";
}

bool prepareOutputDir(cleave_rt_program program, const std::string &dir,
                      std::string *error) {
  std::map<std::string, std::string> fileOwners;
  for (size_t i = 0; i < cleave_rt_program_output_count(program); ++i) {
    cleave_rt_tensor_desc_t d;
    if (cleave_rt_status s = cleave_rt_program_output_desc(program, i, &d)) {
      *error = cleave_rt_status_message(s);
      cleave_rt_status_free(s);
      return false;
    }
    std::string file = outputFileName(d.name);
    auto it = fileOwners.emplace(file, d.name);
    if (!it.second) {
      *error = "outputs '" + it.first->second + "' and '" + d.name +
               "' would both be written to '" + file + "'";
      return false;
    }
  }
  return makeDirectories(dir, error);
}

int writeOutputs(cleave_rt_program program, cleave_rt_executor e,
                 const std::string &dir, const RankContext &ctx) {
  std::string err;
  std::vector<uint8_t> all, whole;
  for (size_t i = 0; i < cleave_rt_program_output_count(program); ++i) {
    cleave_rt_tensor_desc_t d;
    TRY(cleave_rt_program_output_desc(program, i, &d));
    const void *data;
    size_t bytes;
    TRY(cleave_rt_executor_output(e, i, &data, &bytes));
    std::vector<int64_t> local(d.dims, d.dims + d.rank), shape(d.rank),
        offsets(d.rank);
    int sharded = 0;
    TRY(cleave_rt_program_output_shard(program, i, 0, shape.data(),
                                       offsets.data(), &sharded));
    if (sharded && ctx.worldSize > 1) {
      all.resize(bytes * ctx.worldSize);
      TRY(cleave_rt_communicator_gather(ctx.comm, data, bytes, all.data()));
      if (ctx.rank != 0)
        continue;
      whole.assign(all.size(), 0);
      for (int64_t r = 0; r < ctx.worldSize; ++r) {
        TRY(cleave_rt_program_output_shard(program, i, static_cast<size_t>(r),
                                           shape.data(), offsets.data(),
                                           &sharded));
        plan::copyShard(shape, local, offsets, dtypeSize(static_cast<DType>(d.dtype)),
                        whole.data(), all.data() + r * bytes,
                        /*toGlobal=*/true);
      }
      data = whole.data();
      bytes = whole.size();
    } else if (ctx.rank != 0) {
      continue;
    }
    if (!tensorfile::writeNpyFile(dir + "/" + outputFileName(d.name),
                                  static_cast<DType>(d.dtype), shape, data,
                                  bytes, &err))
      return fail("output '" + std::string(d.name) + "': " + err);
  }
  return -1;
}

/// A parameter cleave-compile --untie made: the initializer it was copied
/// from and the ONNX node that reads it.
struct UntiedParameter {
  std::string from, node;
};
using UntiedParameters = std::map<std::string, UntiedParameter>;

/// Reads the plan's `untied` metadata (a JSON array of {"name", "from",
/// "node"} objects).
static bool readUntiedParameters(cleave_rt_program program,
                                 UntiedParameters *out, std::string *error) {
  const char *text = cleave_rt_program_metadata(program, "untied");
  if (!text)
    return true;
  json::Value doc;
  if (!json::parse(text, &doc, error) || doc.kind != json::Value::Array) {
    *error = "the plan's 'untied' metadata is not a JSON array";
    return false;
  }
  for (const json::Value &entry : doc.items) {
    const json::Value *name = entry.get("name"), *from = entry.get("from"),
                      *node = entry.get("node");
    if (!name || !from || !node || name->kind != json::Value::String ||
        from->kind != json::Value::String || node->kind != json::Value::String) {
      *error = "the plan's 'untied' metadata has an entry without string "
               "name, from and node";
      return false;
    }
    (*out)[name->text] = {from->text, node->text};
  }
  return true;
}

bool anyTrainingOption(const TrainOptions &o) {
  return o.steps >= 0 || !o.data.empty() || !o.tokens.empty() || o.synthetic ||
         o.seedGiven || !o.logJson.empty() || o.saveEvery > 0 ||
         !o.checkpointDir.empty() || !o.resume.empty() || !o.exportPath.empty() ||
         !o.exportOnnx.empty() || o.slowRank >= 0;
}

std::vector<std::string> describeStages(cleave_rt_program program) {
  std::vector<std::string> lines;
  for (size_t c = 0; c < cleave_rt_program_stage_count(program); ++c) {
    cleave_rt_program stage = nullptr;
    if (cleave_rt_status s = cleave_rt_program_stage_at(program, c, &stage)) {
      lines.push_back("stage " + std::to_string(c) + ": " +
                      cleave_rt_status_message(s));
      cleave_rt_status_free(s);
      continue;
    }
    uint64_t stateBytes = 0;
    for (size_t i = 0; i < cleave_rt_program_state_count(stage); ++i) {
      cleave_rt_state_desc_t d;
      if (cleave_rt_status s = cleave_rt_program_state_desc(stage, i, &d))
        cleave_rt_status_free(s);
      else
        stateBytes += d.tensor.byte_size;
    }
    lines.push_back(
        "stage " + std::to_string(c) + ": " +
        std::to_string(cleave_rt_program_command_count(stage)) +
        " commands, arena " +
        std::to_string(cleave_rt_program_peak_bytes(stage)) +
        " bytes, states " + std::to_string(stateBytes) + " bytes, " +
        std::to_string(cleave_rt_program_marker_count(stage)) + " markers");
    cleave_rt_program_destroy(stage);
  }
  return lines;
}

namespace {
/// Owns the executor.
struct ExecutorHolder {
  cleave_rt_executor e = nullptr;
  ~ExecutorHolder() { cleave_rt_executor_destroy(e); }
};

/// Owns a program handle (a rank's stage).
struct ProgramHolder {
  cleave_rt_program p = nullptr;
  ~ProgramHolder() { cleave_rt_program_destroy(p); }
};
} // namespace

/// Rank 0's `text` on every rank (at most kMaxPath bytes; longer is an
/// error on rank 0 before this is called). A collective over the world.
int shareFromRank0(const RankContext &ctx, std::string *text) {
  if (ctx.worldSize <= 1)
    return -1;
  std::vector<char> mine(kMaxPath + 1, 0), all(mine.size() * ctx.worldSize);
  if (ctx.rank == 0)
    std::strncpy(mine.data(), text->c_str(), kMaxPath);
  TRY(cleave_rt_communicator_gather(ctx.comm, mine.data(), mine.size(),
                                    all.data()));
  *text = all.data();
  return -1;
}

/// Prints "<what>: v0, v1, ..." on rank 0 with each rank's `value` (a
/// collective over the world).
int printPerRank(const RankContext &ctx, const std::string &what,
                 uint64_t value) {
  std::vector<uint64_t> all(ctx.worldSize > 1 ? ctx.worldSize : 1, value);
  if (ctx.worldSize > 1)
    TRY(cleave_rt_communicator_gather(ctx.comm, &value, sizeof(value),
                                      all.data()));
  if (!gLeader)
    return -1;
  std::string list;
  for (size_t r = 0; r < all.size(); ++r)
    list += (r ? ", " : "") + std::to_string(all[r]);
  std::fprintf(stderr, "%s: %s: %s\n", gProgram.c_str(), what.c_str(),
               list.c_str());
  return -1;
}

/// Whether every rank says `ok` (a collective over the world).
int allAgree(const RankContext &ctx, bool ok, bool *all) {
  *all = ok;
  if (ctx.worldSize <= 1)
    return -1;
  uint8_t mine = ok ? 1 : 0;
  std::vector<uint8_t> every(ctx.worldSize);
  TRY(cleave_rt_communicator_gather(ctx.comm, &mine, 1, every.data()));
  for (uint8_t v : every)
    *all = *all && v;
  return -1;
}

static std::string jsonNumber(double v, const char *fmt) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

/// Parameters that --untie made go back into the ONNX model as new
/// initializers read by their node; one whose node is unknown cannot.
/// Returns an exit code on failure, -1 on success.
static int checkOnnxExportable(const UntiedParameters &untied) {
  for (const auto &[name, source] : untied)
    if (source.node.empty())
      return fail("--export-onnx: parameter '" + name +
                  "' was made by cleave-compile --untie from '" + source.from +
                  "', but the plan does not record which ONNX node reads it; "
                  "export with --export-safetensors instead");
  return -1;
}

/// Writes the source ONNX model with the trained parameters; returns an exit
/// code on failure, -1 on success.
static int exportOnnx(const std::string &path, const std::string &sourceModel,
                      cleave_rt_program program,
                      const UntiedParameters &untied,
                      const std::vector<checkpoint::StateRecord> &records) {
  std::string source = sourceModel;
  if (source.empty()) {
    const char *recorded = cleave_rt_program_metadata(program, "source_model");
    if (!recorded || !*recorded)
      return fail("--export-onnx: the plan does not record its source model; "
                  "name it with --onnx-model FILE");
    source = recorded;
  }
  std::vector<uint8_t> model, exported;
  std::string err;
  if (!readWholeFile(source, &model, &err))
    return fail("--export-onnx: cannot read the source model '" + source +
                "': " + err);
  std::vector<onnxexport::Weight> weights;
  for (const checkpoint::StateRecord &r : records) {
    if (r.kind != StateKind::Parameter && r.kind != StateKind::Buffer)
      continue;
    onnxexport::Weight w;
    w.name = r.name;
    w.dtype = static_cast<uint32_t>(r.dtype);
    w.shape = r.shape;
    w.data = r.data.data();
    w.size = r.data.size();
    if (auto it = untied.find(r.name); it != untied.end()) {
      w.copyOf = it->second.from;
      w.node = it->second.node;
    }
    weights.push_back(std::move(w));
  }
  if (!onnxexport::replaceInitializers(model, weights, &exported, &err))
    return fail("--export-onnx: cannot update '" + source + "': " + err);
  if (!writeFileAtomically(path, exported.data(), exported.size(),
                           &err))
    return fail("--export-onnx: cannot write '" + path + "': " + err);
  std::fprintf(stderr, "%s: wrote the trained model '%s'\n", gProgram.c_str(),
               path.c_str());
  return -1;
}

//===----------------------------------------------------------------------===//
// Trainer: the training loop, a step at a time
//===----------------------------------------------------------------------===//

struct Trainer::Impl {
  TrainOptions o;
  cleave_rt_program file = nullptr;
  std::string backend;
  RankContext ctx;

  // This rank's program: its stage of a pipelined plan. The file's other
  // stages matter only to checkpoints.
  ProgramHolder stage;
  cleave_rt_program program = nullptr;
  cleave_rt_training_info_t info;

  /// A data input: the global tensor the dataset makes, and the shard this
  /// rank feeds when it is sharded (over dp).
  struct Shard {
    bool sharded = false;
    std::vector<int64_t> local, offsets;
    size_t bytes = 0;
  };
  std::vector<data::InputSpec> specs;
  std::vector<Shard> shards;

  CheckpointLayout states;
  UntiedParameters untied;
  ExecutorHolder exec;
  // Local SGD / DiLoCo: the plan's sync entry runs after every
  // info.sync_every-th step on the states it borrows from the step.
  ProgramHolder syncProgram;
  ExecutorHolder syncExec;
  std::vector<std::pair<size_t, size_t>> syncStates; // (step's, entry's)
  std::vector<uint8_t> syncBytes;

  uint64_t seed = 0;
  int64_t firstStep = 0, stepsDone = 0;
  std::unique_ptr<data::Dataset> dataset;
  std::unique_ptr<FILE, int (*)(FILE *)> jsonLog{nullptr, [](FILE *f) {
                                                   return f ? std::fclose(f)
                                                            : 0;
                                                 }};
  int64_t batch = 1, perStep = 1;
  bool tokenModel = false, progress = false;
  uint64_t peak = 0;
  size_t foundInfOutput = SIZE_MAX, lossScaleOutput = SIZE_MAX;
  std::vector<std::vector<uint8_t>> batchData;
  std::vector<uint8_t> shardData;
  /// Per data input: the values it may hold (plan metadata
  /// kValidRangePrefix + name: lo, hi and an extra allowed value), if the
  /// plan says.
  struct ValidRange {
    bool known = false, hasExtra = false;
    int64_t lo = 0, hi = 0, extra = 0;
  };
  std::vector<ValidRange> validRanges;
  int checkRanges(const std::vector<const void *> &batch);
  long nonFinite = 0;

  int open();
  int openData();
  int resume();
  int runSync();
  int copySyncStates(bool toSync);
  void straggle(std::chrono::steady_clock::time_point start);
  int setBatch(const std::vector<const void *> *given);
  void log(const StepMetrics &m);
  int step(const std::vector<const void *> *given, StepMetrics *m);
  int finish();
  int exportParameters(const std::string &safetensorsPath,
                       const std::string &onnxPath,
                       const std::string &sourceModel);
};

Trainer::Trainer() : impl(std::make_unique<Impl>()) {}
Trainer::~Trainer() = default;

int Trainer::open(const TrainOptions &o, cleave_rt_program file,
                  const std::string &backend, const RankContext &ctx) {
  impl->o = o;
  impl->file = file;
  impl->backend = backend;
  impl->ctx = ctx;
  return impl->open();
}

const std::vector<data::InputSpec> &Trainer::dataInputs() const {
  return impl->specs;
}
int64_t Trainer::stepsDone() const { return impl->stepsDone; }
uint64_t Trainer::seed() const { return impl->seed; }
void Trainer::setTotalSteps(long steps) { impl->o.steps = steps; }
cleave_rt_executor Trainer::executor() const { return impl->exec.e; }
cleave_rt_program Trainer::program() const { return impl->program; }

int Trainer::step(const std::vector<const void *> *batch, StepMetrics *m) {
  return impl->step(batch, m);
}
int Trainer::finish() { return impl->finish(); }

int Trainer::saveCheckpoint(const std::string &dir, std::string *path) {
  Impl &t = *impl;
  checkpoint::Checkpoint c;
  c.step = t.stepsDone;
  c.seed = t.seed;
  c.optimizer = t.info.optimizer;
  c.samplesConsumed = t.stepsDone * t.batch;
  return saveSharded(t.exec.e, t.states, t.ctx, dir, c, path);
}

int Trainer::snapshot(std::vector<checkpoint::StateRecord> *records) {
  return training::snapshot(impl->exec.e, impl->states, impl->ctx, records);
}

int Trainer::Impl::open() {
  TRY(cleave_rt_program_stage(file, static_cast<size_t>(ctx.rank), &stage.p));
  program = stage.p;
  TRY(cleave_rt_program_training_info(program, &info));
  if (!info.enabled)
    return fail("the plan is not a training plan, so training options "
                "(--steps, --data, --resume, ...) do not apply");
  if (o.saveEvery > 0 && o.checkpointDir.empty())
    return fail("--save-every needs --checkpoint-dir DIR");
  if (o.slowRank >= ctx.worldSize)
    return fail("--slow-rank " + std::to_string(o.slowRank) +
                ": the run has " + std::to_string(ctx.worldSize) +
                (ctx.worldSize == 1 ? " rank" : " ranks"));

  // Data inputs. The dataset makes the global batch; a rank whose data
  // inputs are sharded (over dp) feeds its shard of it.
  for (size_t i = 0; i < info.data_input_count; ++i) {
    cleave_rt_tensor_desc_t d;
    TRY(cleave_rt_program_input_desc(program, info.data_inputs[i], &d));
    Shard sh;
    sh.local.assign(d.dims, d.dims + d.rank);
    std::vector<int64_t> global(d.rank);
    sh.offsets.resize(d.rank);
    int sharded = 0;
    TRY(cleave_rt_program_input_shard(program, info.data_inputs[i],
                                      static_cast<size_t>(ctx.rank),
                                      global.data(), sh.offsets.data(),
                                      &sharded));
    sh.sharded = sharded != 0;
    sh.bytes = cleave_rt_dtype_size(d.dtype);
    for (int64_t v : sh.local)
      sh.bytes *= static_cast<size_t>(v);
    specs.push_back({d.name, static_cast<DType>(d.dtype), global});
    shards.push_back(std::move(sh));
    ValidRange range;
    std::string key = std::string(plan::kValidRangePrefix) + d.name;
    if (const char *v = cleave_rt_program_metadata(program, key.c_str())) {
      long long lo = 0, hi = 0, extra = 0;
      int fields = std::sscanf(v, "%lld,%lld,%lld", &lo, &hi, &extra);
      if (fields < 2)
        return fail("the plan's metadata " + key + " = '" + v +
                    "' is not 'lo,hi[,extra]'");
      range = {true, fields == 3, lo, hi, extra};
    }
    validRanges.push_back(range);
  }
  int sources = (!o.data.empty()) + (!o.tokens.empty()) + o.synthetic +
                (!o.dataArrays.empty());
  if (sources > 1)
    return fail("give only one of --data, --tokens and --synthetic");
  if (sources == 0 && !specs.empty() && !o.batchesGiven) {
    std::string names;
    for (const data::InputSpec &s : specs)
      names += (names.empty() ? "'" : ", '") + s.name + "'";
    return fail("the plan reads data inputs " + names +
                ": give --data NAME=FILE.npy for each, --tokens FILE.bin or "
                "--synthetic");
  }

  // States: this rank's, and the checkpoint's (every stage's).
  int layoutRc = states.build(file, program, ctx);
  if (layoutRc >= 0)
    return layoutRc;
  std::string outputError;
  if (!o.outputDir.empty() &&
      !prepareOutputDir(program, o.outputDir, &outputError))
    return fail(outputError);
  std::string untiedError;
  if (!readUntiedParameters(program, &untied, &untiedError))
    return fail(untiedError);
  // --export-onnx is checked now, not after the last step.
  if (!o.exportOnnx.empty())
    if (int rc = checkOnnxExportable(untied); rc >= 0)
      return rc;

  TRY(cleave_rt_executor_create_ranked(program, backend.c_str(), ctx.comm,
                                       &exec.e));
  if (info.sync_every > 0) {
    TRY(cleave_rt_program_entry(program, "sync", &syncProgram.p));
    TRY(cleave_rt_executor_create_ranked(syncProgram.p, backend.c_str(),
                                         ctx.comm, &syncExec.e));
    for (size_t i = 0; i < cleave_rt_program_state_count(syncProgram.p); ++i) {
      cleave_rt_state_desc_t d;
      TRY(cleave_rt_program_state_desc(syncProgram.p, i, &d));
      size_t mine = 0;
      TRY(cleave_rt_program_find_state(program, d.global_name, &mine));
      syncStates.push_back({mine, i});
    }
  }
  // Initial values referenced from files: what each rank read (its shards).
  uint64_t referenced = cleave_rt_program_referenced_bytes(file);
  if (referenced && o.resume.empty()) {
    size_t files = cleave_rt_program_referenced_files(file);
    std::string what = "initial parameters: " + std::to_string(referenced) +
                       " bytes referenced from " + std::to_string(files) +
                       (files == 1 ? " file" : " files") +
                       "; bytes read per rank";
    int rc = printPerRank(
        ctx, what, cleave_rt_executor_initial_bytes_read(exec.e));
    if (rc >= 0)
      return rc;
  }

  // Resume before opening the data: the checkpoint carries the seed.
  seed = o.seed;
  if (!o.resume.empty())
    if (int rc = resume(); rc >= 0)
      return rc;
  stepsDone = firstStep;
  if (int rc = openData(); rc >= 0)
    return rc;

  if (!o.logJson.empty() && gLeader) {
    jsonLog.reset(std::fopen(o.logJson.c_str(), firstStep > 0 ? "a" : "w"));
    if (!jsonLog)
      return fail("cannot open '" + o.logJson + "' for the JSON log: " +
                  std::strerror(errno));
  }

  // The global batch (all data-parallel ranks together), for rates and
  // learning-rate scaling.
  batch = info.batch_size > 0 ? info.batch_size : 1;
  if (!specs.empty() && !specs[0].shape.empty() &&
      (shards[0].sharded || info.batch_size <= 0))
    batch = specs[0].shape[0];
  // Tokens per second only for models whose data are token ids (an
  // integer [batch, sequence, ...] input); samples per second otherwise.
  if (info.sequence_length > 0 && info.data_input_count > 0) {
    cleave_rt_tensor_desc_t first;
    TRY(cleave_rt_program_input_desc(program, info.data_inputs[0], &first));
    DType dtype = static_cast<DType>(first.dtype);
    tokenModel = dtype == DType::U16 || dtype == DType::U32 ||
                 dtype == DType::I32 || dtype == DType::I64;
  }
  perStep = tokenModel ? batch * info.sequence_length : batch;
  peak = cleave_rt_program_peak_bytes(program);
  progress = gLeader && o.progressBar && ::isatty(2);

  if (dataset && gLeader)
    std::fprintf(stderr, "%s: training %s with %s, data %s, seed "
                 "%" PRIu64 "\n",
                 gProgram.c_str(), cleave_rt_program_metadata(program, "model")
                     ? cleave_rt_program_metadata(program, "model")
                     : "the plan",
                 info.optimizer[0] ? info.optimizer : "its optimizer",
                 dataset->describe().c_str(), seed);
  if (ctx.worldSize > 1 && gLeader)
    std::fprintf(stderr,
                 "%s: %" PRId64 " ranks (%s communicator) over mesh %s, "
                 "rank = row-major index of its coordinates (the last axis "
                 "fastest); global batch %" PRId64 "\n",
                 gProgram.c_str(), ctx.worldSize,
                 cleave_rt_communicator_kind(ctx.comm),
                 cleave_rt_program_mesh(program), batch);
  if (gLeader)
    for (const std::string &line : describeStages(file))
      std::fprintf(stderr, "%s: pipeline %s\n", gProgram.c_str(), line.c_str());

  // Dynamic loss scaling (--precision=fp16): the plan reports whether the
  // step overflowed (and was skipped) and the loss scale for the next step.
  for (auto [name, index] : {std::pair<const char *, size_t *>{
                                 "found_inf", &foundInfOutput},
                             {"loss_scale", &lossScaleOutput}}) {
    cleave_rt_status st = cleave_rt_program_find_output(program, name, index);
    if (st) {
      *index = SIZE_MAX;
      cleave_rt_status_free(st);
    }
  }
  return -1;
}

int Trainer::Impl::resume() {
  // Rank 0 chooses the checkpoint and verifies every file's SHA-256; the
  // others take its choice and check only the sizes, so that no rank
  // reads more than its own shards of the tensors.
  std::string dir, err;
  bool found = true;
  if (ctx.rank == 0) {
    std::vector<std::string> notes;
    found = checkpoint::findResumePoint(o.resume, &dir, &notes, &err);
    for (const std::string &n : notes)
      warn(n);
    if (found && dir.size() > kMaxPath) {
      found = false;
      err = "the checkpoint path '" + dir + "' is longer than " +
            std::to_string(kMaxPath) + " bytes";
    }
  }
  if (ctx.worldSize > 1) {
    std::string shared = found ? dir : "";
    int rc = shareFromRank0(ctx, &shared);
    if (rc >= 0)
      return rc;
    if (ctx.rank != 0) {
      dir = shared;
      if (dir.empty())
        return fail("rank 0 found no checkpoint to resume from in '" +
                    o.resume + "'");
    }
  }
  if (!found)
    return fail(err);
  checkpoint::LoadOptions load;
  load.verifyHashes = false; // Rank 0 just did, in findResumePoint.
  load.readData = false;
  checkpoint::Checkpoint c;
  if (!checkpoint::load(dir, &c, &err, load))
    return fail(err);
  uint64_t bytesRead = 0;
  int rc = restore(exec.e, states, ctx, c, dir, &bytesRead);
  if (rc >= 0)
    return rc;
  rc = printPerRank(ctx, "checkpoint bytes read per rank", bytesRead);
  if (rc >= 0)
    return rc;
  firstStep = c.step;
  if (!o.seedGiven)
    seed = c.seed;
  else if (o.seed != c.seed)
    warn("--seed " + std::to_string(o.seed) + " differs from the seed " +
         std::to_string(c.seed) + " of the checkpoint; the data order "
         "will not match the original run");
  if (gLeader)
    std::fprintf(stderr, "%s: resuming from '%s' at step %" PRId64 "\n",
                 gProgram.c_str(), dir.c_str(), firstStep);
  return -1;
}

int Trainer::Impl::openData() {
  std::string err;
  auto dataInputNames = [&] {
    std::string names;
    for (const data::InputSpec &s : specs)
      names += (names.empty() ? "'" : ", '") + s.name + "'";
    return names.empty() ? std::string("none") : names;
  };
  if (!o.data.empty() || !o.dataArrays.empty()) {
    // Files (--data NAME=FILE) or arrays, one per data input, by name.
    bool arrays = !o.dataArrays.empty();
    std::vector<std::string> files(specs.size());
    std::vector<tensorfile::HostTensor> given(specs.size());
    std::vector<bool> seen(specs.size(), false);
    size_t count = arrays ? o.dataArrays.size() : o.data.size();
    for (size_t j = 0; j < count; ++j) {
      const std::string &name =
          arrays ? o.dataArrays[j].first : o.data[j].first;
      size_t k = 0;
      while (k < specs.size() && specs[k].name != name)
        ++k;
      if (k == specs.size())
        return fail((arrays ? "data '" + name + "'"
                            : "--data " + name + "=...") +
                    ": the plan has no data input named '" + name +
                    "' (its data inputs: " + dataInputNames() + ")");
      if (seen[k])
        return fail("data input '" + name + "' is given twice");
      seen[k] = true;
      if (arrays)
        given[k] = o.dataArrays[j].second;
      else
        files[k] = o.data[j].second;
    }
    for (size_t k = 0; k < specs.size(); ++k)
      if (!seen[k])
        return fail("data input '" + specs[k].name + "' is not given" +
                    (arrays ? std::string()
                            : "; add --data " + specs[k].name + "=FILE.npy"));
    bool ok = arrays ? data::openArrays(specs, std::move(given), seed,
                                        &dataset, &err)
                     : data::openNpy(specs, files, seed, &dataset, &err);
    if (!ok)
      return fail(err);
  } else if (!o.tokens.empty()) {
    DType t;
    if (o.tokenDType == "uint16")
      t = DType::U16;
    else if (o.tokenDType == "uint32")
      t = DType::U32;
    else
      return fail("--token-dtype must be uint16 or uint32, got '" +
                  o.tokenDType + "'");
    if (!data::openTokens(specs, o.tokens, t, seed, &dataset, &err))
      return fail(err);
  } else if (o.synthetic) {
    long vocab = o.syntheticVocab;
    if (vocab < 0) {
      const char *v = cleave_rt_program_metadata(program, "vocab_size");
      // The fewest values any data input takes (its valid range), else 256.
      vocab = 256;
      bool ranged = false;
      for (const ValidRange &r : validRanges)
        if (r.known && r.hi > 0 && r.lo <= 0) {
          vocab = ranged ? std::min<long>(vocab, r.hi) : r.hi;
          ranged = true;
        }
      if (v) {
        char *end = nullptr;
        errno = 0;
        vocab = std::strtol(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0' || vocab <= 0)
          return fail("the plan's vocab_size metadata '" + std::string(v) +
                      "' is not a positive integer; give --synthetic-vocab N");
      }
    }
    if (!data::openSynthetic(specs, seed, vocab, &dataset, &err))
      return fail(err);
  }
  return -1;
}

// --slow-rank R:F: rank R sleeps F - 1 times the time since `start` (the
// run it just finished took), so its runs take F times as long.
void Trainer::Impl::straggle(std::chrono::steady_clock::time_point start) {
  if (ctx.rank != o.slowRank || !(o.slowFactor > 1.0))
    return;
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::this_thread::sleep_for(took * (o.slowFactor - 1.0));
}

// Copies each borrowed state between the step's executor and the sync
// entry's, into the entry (toSync) or back.
int Trainer::Impl::copySyncStates(bool toSync) {
  for (auto [mine, theirs] : syncStates) {
    cleave_rt_state_desc_t d;
    TRY(cleave_rt_program_state_desc(syncProgram.p, theirs, &d));
    syncBytes.resize(d.tensor.byte_size);
    if (toSync) {
      TRY(cleave_rt_executor_read_state(exec.e, mine, syncBytes.data(),
                                        syncBytes.size()));
      TRY(cleave_rt_executor_write_state(syncExec.e, theirs, syncBytes.data(),
                                         syncBytes.size()));
    } else {
      TRY(cleave_rt_executor_read_state(syncExec.e, theirs, syncBytes.data(),
                                        syncBytes.size()));
      TRY(cleave_rt_executor_write_state(exec.e, mine, syncBytes.data(),
                                         syncBytes.size()));
    }
  }
  return -1;
}

int Trainer::Impl::runSync() {
  auto start = std::chrono::steady_clock::now();
  if (int rc = copySyncStates(true); rc >= 0)
    return rc;
  TRY(cleave_rt_executor_run(syncExec.e));
  if (int rc = copySyncStates(false); rc >= 0)
    return rc;
  straggle(start);
  return -1;
}

/// Sets the data inputs: from the dataset, or from `given` (global
/// tensors, one per data input); a sharded input gets this rank's shard.
/// The integer at element `i` of `data`, of type `t` (an integer type).
static int64_t integerAt(DType t, const void *data, size_t i) {
  switch (t) {
  case DType::I8: return static_cast<const int8_t *>(data)[i];
  case DType::U8: return static_cast<const uint8_t *>(data)[i];
  case DType::I16: return static_cast<const int16_t *>(data)[i];
  case DType::U16: return static_cast<const uint16_t *>(data)[i];
  case DType::I32: return static_cast<const int32_t *>(data)[i];
  case DType::U32: return static_cast<const uint32_t *>(data)[i];
  case DType::I64: return static_cast<const int64_t *>(data)[i];
  case DType::U64: {
    uint64_t v = static_cast<const uint64_t *>(data)[i];
    return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                : static_cast<int64_t>(v);
  }
  default: return 0;
  }
}

int Trainer::Impl::checkRanges(const std::vector<const void *> &batch) {
  for (size_t k = 0; k < specs.size(); ++k) {
    const ValidRange &r = validRanges[k];
    if (!r.known)
      continue;
    size_t n = 1;
    for (int64_t d : specs[k].shape)
      n *= static_cast<size_t>(d);
    for (size_t i = 0; i < n; ++i) {
      int64_t v = integerAt(specs[k].dtype, batch[k], i);
      if ((v >= r.lo && v < r.hi) || (r.hasExtra && v == r.extra))
        continue;
      return fail("step " + std::to_string(stepsDone + 1) + ": data input '" +
                  specs[k].name + "' holds " + std::to_string(v) +
                  " at element " + std::to_string(i) +
                  " of its batch, outside [" + std::to_string(r.lo) + ", " +
                  std::to_string(r.hi) + ")" +
                  (r.hasExtra ? " (or " + std::to_string(r.extra) + ")"
                              : std::string()) +
                  ", the values the model takes there (a token id beyond "
                  "the vocabulary, a label beyond the classes?)");
    }
  }
  return -1;
}

int Trainer::Impl::setBatch(const std::vector<const void *> *given) {
  if (given) {
    if (given->size() != specs.size())
      return fail("a batch needs " + std::to_string(specs.size()) +
                  " data inputs, got " + std::to_string(given->size()));
  } else if (dataset) {
    dataset->fill(stepsDone, &batchData);
  } else {
    if (specs.empty())
      return -1;
    return fail("no data for step " + std::to_string(stepsDone + 1) +
                ": the trainer has no dataset, so every step needs a batch");
  }
  std::vector<const void *> whole(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    whole[i] = given ? (*given)[i] : batchData[i].data();
  if (int rc = checkRanges(whole); rc >= 0)
    return rc;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Shard &sh = shards[i];
    const void *global = whole[i];
    size_t globalBytes = dtypeSize(specs[i].dtype);
    for (int64_t d : specs[i].shape)
      globalBytes *= static_cast<size_t>(d);
    if (!sh.sharded) {
      TRY(cleave_rt_executor_set_input(exec.e, info.data_inputs[i], global,
                                       globalBytes));
      continue;
    }
    shardData.resize(sh.bytes);
    plan::copyShard(specs[i].shape, sh.local, sh.offsets,
                    dtypeSize(specs[i].dtype),
                    // Read only (toGlobal false).
                    const_cast<uint8_t *>(static_cast<const uint8_t *>(global)),
                    shardData.data(),
                    /*toGlobal=*/false);
    TRY(cleave_rt_executor_set_input(exec.e, info.data_inputs[i],
                                     shardData.data(), shardData.size()));
  }
  return -1;
}

/// The step's log line (stdout) and JSON record, on rank 0.
void Trainer::Impl::log(const StepMetrics &m) {
  int stepWidth = std::max<int>(6, std::to_string(o.steps).size());
  std::string total = o.steps >= 0 ? "/" + std::to_string(o.steps) : "";
  if (progress)
    std::fprintf(stderr, "\r\033[K");
  std::printf(" step %*" PRId64 "%s | loss %.4f | lr %.3e", stepWidth, m.step,
              total.c_str(), m.loss, m.lr);
  if (m.hasGradNorm)
    std::printf(" | grad norm %.3f", m.gradNorm);
  std::printf(" | %.0f %s/s | %.1f ms/step | peak mem %.1f MiB\n", m.rate,
              tokenModel ? "tokens" : "samples", m.stepMs,
              static_cast<double>(peak) / (1024.0 * 1024.0));
  std::fflush(stdout);
  if (!jsonLog)
    return;
  std::string line =
      "{\"step\": " + std::to_string(m.step) +
      ", \"loss\": " + jsonNumber(m.loss, "%.9g") +
      (std::isfinite(m.loss) ? ""
                             : std::string(", \"loss_nonfinite\": \"") +
                                   (std::isnan(m.loss) ? "nan" : "inf") +
                                   "\"") +
      ", \"lr\": " + jsonNumber(m.lr, "%.17g") +
      (m.hasGradNorm ? ", \"grad_norm\": " + jsonNumber(m.gradNorm, "%.9g")
                     : std::string()) +
      (m.hasLossScale ? ", \"loss_scale\": " + jsonNumber(m.lossScale, "%.9g") +
                            ", \"skipped\": " + (m.skipped ? "true" : "false")
                      : std::string()) +
      ", \"" + (tokenModel ? "tokens_per_s" : "samples_per_s") +
      "\": " + jsonNumber(m.rate, "%.1f") +
      ", \"step_ms\": " + jsonNumber(m.stepMs, "%.3f") +
      ", \"peak_bytes\": " + std::to_string(peak) + "}\n";
  std::fputs(line.c_str(), jsonLog.get());
  std::fflush(jsonLog.get());
}

int Trainer::Impl::step(const std::vector<const void *> *given,
                        StepMetrics *out) {
  int64_t step = stepsDone;
  if (ctx.rank == o.faultRank && step + 1 == o.faultStep) {
    std::fprintf(stderr, "%s: %sinjected fault at step %" PRId64 ": %s\n",
                 gProgram.c_str(), gRankPrefix.c_str(), step + 1,
                 o.faultMode.c_str());
    std::fflush(stderr);
    if (o.faultMode == "crash")
      ::raise(SIGKILL);
    if (o.faultMode == "stop")
      ::raise(SIGSTOP);
    if (o.faultMode == "hang")
      for (;;)
        std::this_thread::sleep_for(std::chrono::hours(1));
    gLeftByFault = true;
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  if (int rc = setBatch(given); rc >= 0)
    return rc;
  double lr = cleave_rt_learning_rate(&info, step, batch);
  float lrF = static_cast<float>(lr), stepF = static_cast<float>(step);
  TRY(cleave_rt_executor_set_input(exec.e, info.lr_input, &lrF, 4));
  if (info.step_input >= 0)
    TRY(cleave_rt_executor_set_input(exec.e, info.step_input, &stepF, 4));
  bool last = step + 1 == o.steps;
  // --trace: the markers of the last step.
  if (!o.tracePath.empty() && last)
    TRY(cleave_rt_executor_set_tracing(exec.e, 1));
  // --measure-memory: what the last step writes of the arena.
  if (o.measureMemory && last)
    TRY(cleave_rt_executor_measure_memory(exec.e, 1));
  // --profile: every step after the first (which warms the caches), or the
  // only one.
  if (o.profile && (step == firstStep + 1 || (step == firstStep && last)))
    TRY(cleave_rt_executor_set_profiling(exec.e, 1));
  auto runStart = std::chrono::steady_clock::now();
  TRY(cleave_rt_executor_run(exec.e));
  straggle(runStart);
  if (info.sync_every > 0 && (step + 1) % info.sync_every == 0)
    if (int rc = runSync(); rc >= 0)
      return rc;
  stepsDone = step + 1;

  StepMetrics m;
  m.step = stepsDone;
  m.lr = lr;
  m.tokenModel = tokenModel;
  m.peakBytes = peak;
  const void *p;
  size_t n;
  float loss = 0, gradNorm = 0;
  TRY(cleave_rt_executor_output(exec.e, info.loss_output, &p, &n));
  std::memcpy(&loss, p, 4);
  m.loss = loss;
  if (info.grad_norm_output >= 0) {
    TRY(cleave_rt_executor_output(exec.e, info.grad_norm_output, &p, &n));
    std::memcpy(&gradNorm, p, 4);
    m.gradNorm = gradNorm;
    m.hasGradNorm = true;
  }
  if (foundInfOutput != SIZE_MAX && lossScaleOutput != SIZE_MAX) {
    float foundInf = 0, lossScale = 0;
    TRY(cleave_rt_executor_output(exec.e, foundInfOutput, &p, &n));
    std::memcpy(&foundInf, p, 4);
    TRY(cleave_rt_executor_output(exec.e, lossScaleOutput, &p, &n));
    std::memcpy(&lossScale, p, 4);
    m.hasLossScale = true;
    m.lossScale = lossScale;
    m.skipped = foundInf != 0;
    if (m.skipped && gLeader) {
      int stepWidth = std::max<int>(6, std::to_string(o.steps).size());
      if (progress)
        std::fprintf(stderr, "\r\033[K");
      std::printf(" step %*" PRId64 "/%ld | skipped step (overflow), loss "
                  "scale %g\n",
                  stepWidth, m.step, o.steps, lossScale);
    }
  }
  m.stepMs = std::chrono::duration<double, std::milli>(
                 std::chrono::steady_clock::now() - t0)
                 .count();
  m.rate = m.stepMs > 0 ? perStep / (m.stepMs / 1000.0) : 0;
  if (!std::isfinite(m.loss) && !m.skipped) {
    ++nonFinite;
    warn("step " + std::to_string(m.step) + ": loss is " +
         (std::isnan(m.loss) ? "NaN" : "infinite"));
  }
  if (gLeader && o.logEvery > 0 &&
      (m.step % o.logEvery == 0 || m.step == o.steps))
    log(m);
  if (progress && o.steps > 0) {
    int width = 30;
    int filled = static_cast<int>(width * m.step / std::max<long>(1, o.steps));
    std::fprintf(stderr, "\r[%.*s%*s] %" PRId64 "/%ld", filled,
                 "==============================", width - filled, "", m.step,
                 o.steps);
    std::fflush(stderr);
  }
  // Every rank writes the shards it owns into one file that rank 0 laid
  // out and completes (one rank: all of it).
  if (o.saveEvery > 0 && m.step % o.saveEvery == 0) {
    checkpoint::Checkpoint c;
    c.step = m.step;
    c.seed = seed;
    c.optimizer = info.optimizer;
    c.samplesConsumed = m.step * batch;
    std::string path;
    if (int rc = saveSharded(exec.e, states, ctx, o.checkpointDir, c, &path);
        rc >= 0)
      return rc;
    if (gLeader) {
      if (progress)
        std::fprintf(stderr, "\r\033[K");
      std::fprintf(stderr, "%s: saved checkpoint '%s'\n", gProgram.c_str(),
                   path.c_str());
    }
  }
  if (out)
    *out = m;
  return -1;
}

int Trainer::Impl::finish() {
  if (progress)
    std::fprintf(stderr, "\r\033[K");
  bool ran = stepsDone > firstStep;
  if (!ran && o.steps >= 0)
    warn("nothing to do: already at step " + std::to_string(firstStep) +
         " of --steps " + std::to_string(o.steps));
  if (nonFinite)
    warn(std::to_string(nonFinite) + " step(s) had a non-finite loss");

  if (!o.outputDir.empty() && ran) {
    int rc = writeOutputs(program, exec.e, o.outputDir, ctx);
    if (rc >= 0)
      return rc;
  }
  if (!o.tracePath.empty()) {
    if (!ran) {
      warn("--trace: no step ran, so no trace is written");
    } else {
      int rc = writePipelineTrace(file, exec.e, o.tracePath, ctx);
      if (rc >= 0)
        return rc;
    }
  }
  if (o.profile && ran && ctx.rank == 0) {
    int rc = printProfile(exec.e, "step");
    if (rc >= 0)
      return rc;
  }
  if (!o.profileJson.empty() && ran) {
    int rc = writeProfileJson(exec.e, "step",
                              profileJsonPath(o.profileJson, ctx.rank));
    if (rc >= 0)
      return rc;
  }
  if (o.measureMemory) {
    if (!ran) {
      warn("--measure-memory: no step ran, so nothing was measured");
    } else {
      int rc = reportMemory(file, exec.e, "step", ctx);
      if (rc >= 0)
        return rc;
    }
  }
  return exportParameters(o.exportPath, o.exportOnnx, o.onnxModel);
}

int Trainer::exportParameters(const std::string &safetensorsPath,
                              const std::string &onnxPath,
                              const std::string &sourceModel) {
  return impl->exportParameters(safetensorsPath, onnxPath, sourceModel);
}

int Trainer::Impl::exportParameters(const std::string &safetensorsPath,
                                    const std::string &onnxPath,
                                    const std::string &sourceModel) {
  if (safetensorsPath.empty() && onnxPath.empty())
    return -1;
  if (!onnxPath.empty())
    if (int rc = checkOnnxExportable(untied); rc >= 0)
      return rc;
  std::vector<checkpoint::StateRecord> records;
  int rc = training::snapshot(exec.e, states, ctx, &records);
  if (rc >= 0)
    return rc;
  if (!gLeader)
    return -1;
  if (!safetensorsPath.empty()) {
    std::vector<safetensors::HostTensorRef> refs;
    for (const checkpoint::StateRecord &r : records)
      if (r.kind == StateKind::Parameter || r.kind == StateKind::Buffer)
        refs.push_back({r.name, r.dtype, r.shape, r.data.data(), r.data.size()});
    std::string err;
    if (!checkpoint::writeSafetensorsFile(
            safetensorsPath, refs,
            {{"format", "pt"}, {"step", std::to_string(stepsDone)}}, &err))
      return fail("cannot export the parameters: " + err);
  }
  if (!onnxPath.empty())
    if (int rc = exportOnnx(onnxPath, sourceModel, program, untied, records);
        rc >= 0)
      return rc;
  return -1;
}

int runTraining(const TrainOptions &o, cleave_rt_program file,
                const std::string &backend, const RankContext &ctx) {
  if (o.steps < 0) {
    // Say what the plan is before asking for --steps.
    ProgramHolder stage;
    cleave_rt_training_info_t info;
    TRY(cleave_rt_program_stage(file, static_cast<size_t>(ctx.rank), &stage.p));
    TRY(cleave_rt_program_training_info(stage.p, &info));
    if (info.enabled)
      return fail("this is a training plan: give --steps N");
  }
  Trainer trainer;
  if (int rc = trainer.open(o, file, backend, ctx); rc >= 0)
    return rc;
  while (trainer.stepsDone() < o.steps)
    if (int rc = trainer.step(nullptr, nullptr); rc >= 0)
      return rc;
  int rc = trainer.finish();
  return rc >= 0 ? rc : 0;
}

} // namespace cleave::training
