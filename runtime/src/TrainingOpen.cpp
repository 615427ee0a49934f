//===- TrainingOpen.cpp - Opening a trainer and resuming it ---------------===//
//
// Trainer::open: this rank's stage of the plan, its executor (and a
// local-SGD plan's sync entry), the dataset, the JSON log and the
// checkpoint layout; and resuming from a checkpoint, whose states every
// rank reads for its own shards, continuing at the step after it with the
// seed it recorded.
//
//===----------------------------------------------------------------------===//

#include "TrainerImpl.h"
#include "TrainingSupport.h"

#include "cleave/Checkpoint.h"
#include "cleave/Data.h"
#include "cleave/Json.h"
#include "cleave/TrainingLoop.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace cleave::training {

using namespace cleave::plan;

/// Reads the JSON array of objects in the plan's metadata `key` (absent:
/// nothing to read), calling `entry` on each; `entry` returns false for an
/// entry without the fields it needs, which `fields` describes.
template <typename Fn>
static bool readMetadataArray(cleave_rt_program program, const char *key,
                              const char *fields, std::string *error,
                              Fn entry) {
  const char *text = cleave_rt_program_metadata(program, key);
  if (!text)
    return true;
  json::Value doc;
  if (!json::parse(text, &doc, error) || !doc.is_array()) {
    *error =
        std::string("the plan's '") + key + "' metadata is not a JSON array";
    return false;
  }
  for (const json::Value &e : doc)
    if (!entry(e)) {
      *error = std::string("the plan's '") + key +
               "' metadata has an entry without " + fields;
      return false;
    }
  return true;
}

bool readUntiedParameters(cleave_rt_program program, UntiedParameters *out,
                          std::string *error) {
  return readMetadataArray(
      program, meta::kUntied.name, "string name, from and node", error,
      [&](const json::Value &entry) {
        const std::string *name = json::asString(json::get(entry, "name")),
                          *from = json::asString(json::get(entry, "from")),
                          *node = json::asString(json::get(entry, "node"));
        if (!name || !from || !node)
          return false;
        (*out)[*name] = {*from, *node};
        return true;
      });
}

bool readFoldedParameters(cleave_rt_program program, FoldedParameters *out,
                          std::string *error) {
  return readMetadataArray(
      program, meta::kFolded.name, "string name and copy and boolean in_source",
      error, [&](const json::Value &entry) {
        const std::string *name = json::asString(json::get(entry, "name")),
                          *copy = json::asString(json::get(entry, "copy"));
        const json::Value *inSource = json::get(entry, "in_source");
        if (!name || !copy || !inSource || !inSource->is_boolean())
          return false;
        (*out)[*name] = {*copy, inSource->get<bool>()};
        return true;
      });
}

int checkOnnxExportable(const UntiedParameters &untied) {
  for (const auto &[name, source] : untied)
    if (source.node.empty())
      return fail("--export-onnx: parameter '" + name +
                  "' was made by cleave-compile --untie from '" + source.from +
                  "', but the plan does not record which ONNX node reads it; "
                  "export with --export-safetensors instead");
  return -1;
}

int Trainer::Impl::open() {
  TRY(cleave_rt_program_stage(file, static_cast<size_t>(ctx.rank),
                              stage.out()));
  program = stage;
  TRY(cleave_rt_program_training_info(program, &info));
  if (!info.enabled)
    return fail("the plan is not a training plan, so training options "
                "(--steps, --data, --resume, ...) do not apply");
  if (o.saveEvery > 0 && o.checkpointDir.empty())
    return fail("--save-every needs --checkpoint-dir DIR");
  if (o.asyncCheckpoint && o.saveEvery <= 0)
    return fail("--async-checkpoint needs --save-every K and --checkpoint-dir "
                "DIR");
  // --inject-fault: checked against the run; a fault in the background
  // write goes to this rank's writer.
  const InjectedFault *saveFault = nullptr;
  for (const InjectedFault &f : o.faults) {
    bool inSave = f.kind == InjectedFault::Kind::CrashDuringSave ||
                  f.kind == InjectedFault::Kind::FailDuringSave;
    std::string what = "--inject-fault rank=" + std::to_string(f.rank) +
                       ",step=" + std::to_string(f.step) +
                       ",kind=" + faultKindName(f.kind);
    if (f.rank >= ctx.worldSize)
      return fail(what + ": the run has " + std::to_string(ctx.worldSize) +
                  (ctx.worldSize == 1 ? " rank" : " ranks"));
    if (inSave && !o.asyncCheckpoint)
      return fail(what + " needs --async-checkpoint");
    if (f.kind == InjectedFault::Kind::CorruptCheckpoint && o.saveEvery <= 0)
      return fail(what + " needs --save-every K and --checkpoint-dir DIR");
    // Rank 0 completes each checkpoint, so it is the one that sees it.
    if (f.kind == InjectedFault::Kind::CorruptCheckpoint && f.rank != 0)
      return fail(what + ": a checkpoint is damaged by rank 0 (rank=0)");
    if (inSave && f.rank == ctx.rank && claimInjectedFault(f))
      saveFault = &f;
  }
  if (saveFault)
    asyncSave = std::make_unique<AsyncCheckpointer>(
        saveFault->kind == InjectedFault::Kind::CrashDuringSave
            ? AsyncCheckpointer::Fault::Crash
            : AsyncCheckpointer::Fault::Fail,
        saveFault->step);
  else if (o.asyncCheckpoint)
    asyncSave = std::make_unique<AsyncCheckpointer>();
  if (o.slowRank >= ctx.worldSize)
    return fail("--slow-rank " + std::to_string(o.slowRank) + ": the run has " +
                std::to_string(ctx.worldSize) +
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
    TRY(cleave_rt_program_input_shard(
        program, info.data_inputs[i], static_cast<size_t>(ctx.rank),
        global.data(), sh.offsets.data(), &sharded));
    sh.sharded = sharded != 0;
    sh.bytes = cleave_rt_dtype_size(d.dtype);
    for (int64_t v : sh.local)
      sh.bytes *= static_cast<size_t>(v);
    // The values it may hold: the model's vocabulary for token ids, its
    // classes for labels (checked when the data is opened and per batch).
    data::ValueRange range;
    std::string key = std::string(plan::meta::kValidRangePrefix) + d.name;
    if (const char *v = cleave_rt_program_metadata(program, key.c_str())) {
      std::optional<std::vector<int64_t>> r = plan::parseMetadataRange(v);
      if (!r)
        return fail("the plan's metadata " + key + " = '" + v +
                    "' is not 'lo,hi[,extra]'");
      range = {true, r->size() == 3, (*r)[0], (*r)[1],
               r->size() == 3 ? (*r)[2] : 0};
    }
    specs.push_back({d.name, static_cast<DType>(d.dtype), global, range});
    shards.push_back(std::move(sh));
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
  if (!readUntiedParameters(program, &untied, &untiedError) ||
      !readFoldedParameters(program, &folded, &untiedError))
    return fail(untiedError);
  // --export-onnx is checked now, not after the last step.
  if (!o.exportOnnx.empty())
    if (int rc = checkOnnxExportable(untied); rc >= 0)
      return rc;

  TRY(cleave_rt_executor_create_ranked(program, backend.c_str(), ctx.comm,
                                       exec.out()));
  if (info.sync_every > 0) {
    TRY(cleave_rt_program_entry(program, "sync", syncProgram.out()));
    TRY(cleave_rt_executor_create_ranked(syncProgram, backend.c_str(), ctx.comm,
                                         syncExec.out()));
    for (size_t i = 0; i < cleave_rt_program_state_count(syncProgram); ++i) {
      cleave_rt_state_desc_t d;
      TRY(cleave_rt_program_state_desc(syncProgram, i, &d));
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
    int rc =
        printPerRank(ctx, what, cleave_rt_executor_initial_bytes_read(exec));
    if (rc >= 0)
      return rc;
  }

  // Resume before opening the data: the checkpoint carries the seed.
  seed = o.seed;
  if (o.resumeAuto && o.resume.empty() && isLeader())
    std::fprintf(stderr,
                 "%s: --resume=auto: no complete checkpoint in '%s'; "
                 "starting fresh\n",
                 programName().c_str(), o.checkpointDir.c_str());
  if (!o.resume.empty())
    if (int rc = resume(); rc >= 0)
      return rc;
  stepsDone = firstStep;
  if (int rc = openData(); rc >= 0)
    return rc;

  if (!o.logJson.empty() && isLeader()) {
    jsonLog.reset(std::fopen(o.logJson.c_str(), firstStep > 0 ? "a" : "w"));
    if (!jsonLog)
      return fail("cannot open '" + o.logJson +
                  "' for the JSON log: " + std::strerror(errno));
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
  progress = isLeader() && o.progressBar && ::isatty(2);

  if (dataset && isLeader())
    std::fprintf(stderr,
                 "%s: training %s with %s, data %s, seed "
                 "%" PRIu64 "\n",
                 programName().c_str(),
                 cleave_rt_program_metadata(program, meta::kModel.name)
                     ? cleave_rt_program_metadata(program, meta::kModel.name)
                     : "the plan",
                 info.optimizer[0] ? info.optimizer : "its optimizer",
                 dataset->describe().c_str(), seed);
  if (ctx.worldSize > 1 && isLeader())
    std::fprintf(stderr,
                 "%s: %" PRId64 " ranks (%s communicator) over mesh %s, "
                 "rank = row-major index of its coordinates (the last axis "
                 "fastest); global batch %" PRId64 "\n",
                 programName().c_str(), ctx.worldSize,
                 cleave_rt_communicator_kind(ctx.comm),
                 cleave_rt_program_mesh(program), batch);
  if (isLeader())
    for (const std::string &line : describeStages(file))
      std::fprintf(stderr, "%s: pipeline %s\n", programName().c_str(),
                   line.c_str());

  // Dynamic loss scaling (--precision=fp16): the plan reports whether the
  // step overflowed (and was skipped) and the loss scale for the next step.
  for (auto [name, index] :
       {std::pair<const char *, size_t *>{"found_inf", &foundInfOutput},
        {"loss_scale", &lossScaleOutput}}) {
    cleave_rt_status st = cleave_rt_program_find_output(program, name, index);
    if (st) {
      *index = SIZE_MAX;
      cleave_rt_status_free(st);
    }
  }
  // The metrics the log line and the JSON log carry (f32 outputs).
  if (const char *list =
          cleave_rt_program_metadata(program, plan::meta::kMetricOutputs.name))
    for (const std::string &name : plan::splitMetadataList(list)) {
      MetricOutput m{name, 0, {}};
      cleave_rt_tensor_desc_t desc;
      if (cleave_rt_status st =
              cleave_rt_program_find_output(program, name.c_str(), &m.index)) {
        cleave_rt_status_free(st);
        continue;
      }
      if (cleave_rt_status st =
              cleave_rt_program_output_desc(program, m.index, &desc)) {
        cleave_rt_status_free(st);
        continue;
      }
      if (desc.dtype != static_cast<uint32_t>(plan::DType::F32))
        continue;
      m.shape.assign(desc.dims, desc.dims + desc.rank);
      metricOutputs.push_back(std::move(m));
    }
  return -1;
}

int Trainer::Impl::resume() {
  // Rank 0 chooses the checkpoint and verifies every file's SHA-256; the
  // others take its choice and check only the sizes, so that no rank
  // reads more than its own shards of the tensors.
  std::string dir, err;
  bool found = true;
  if (ctx.rank == 0 && o.resumeVerified) {
    dir = o.resume;
  } else if (ctx.rank == 0) {
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
  // Rank 0 just did, in findResumePoint (or the restart that chose it).
  load.verifyHashes = false;
  load.readData = false;
  checkpoint::Checkpoint c;
  if (!checkpoint::load(dir, &c, &err, load))
    return fail(err);
  uint64_t bytesRead = 0;
  int rc = restore(exec, states, ctx, c, dir, &bytesRead);
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
         std::to_string(c.seed) +
         " of the checkpoint; the data order "
         "will not match the original run");
  if (isLeader())
    std::fprintf(stderr, "%s: resuming from '%s' at step %" PRId64 "\n",
                 programName().c_str(), dir.c_str(), firstStep);
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
        return fail(
            (arrays ? "data '" + name + "'" : "--data " + name + "=...") +
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
    bool ok =
        arrays ? data::openArrays(specs, std::move(given), seed, &dataset, &err)
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
    // Below the model's vocabulary: the fewest values any data input takes
    // (its valid range), else 256. openSynthetic refuses a --synthetic-vocab
    // above it.
    long vocab = o.syntheticVocab;
    if (vocab < 0) {
      vocab = 256;
      bool ranged = false;
      for (const data::InputSpec &s : specs)
        if (s.range.known && s.range.hi > 0 && s.range.lo <= 0) {
          vocab = ranged ? std::min<long>(vocab, s.range.hi) : s.range.hi;
          ranged = true;
        }
    }
    if (!data::openSynthetic(specs, seed, vocab, &dataset, &err))
      return fail(err);
  }
  return -1;
}

} // namespace cleave::training
