//===- TrainingDriver.cpp - What training drivers share -------------------===//
//
// The pieces cleave-run, the binaries of cleave-compile --emit=exe and the
// Python module share around the training loop: the program name and rank
// in messages, the output files of a run, the description of a pipelined
// plan's stages, and the small world-wide collectives the loop agrees
// through.
//
//===----------------------------------------------------------------------===//

#include "FaultInjection.h"
#include "TrainerImpl.h"
#include "TrainingSupport.h"

#include "cleave/FileUtil.h"
#include "cleave/TensorFile.h"
#include "cleave/TrainingLoop.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

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

static thread_local cleave_rt_status_code_t gLastStatusCode = CLEAVE_RT_OK;
cleave_rt_status_code_t takeLastStatusCode() {
  return std::exchange(gLastStatusCode, CLEAVE_RT_OK);
}

int statusFail(cleave_rt_status s) {
  gLastStatusCode = cleave_rt_status_code(s);
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
        plan::copyShard(shape, local, offsets,
                        dtypeSize(static_cast<DType>(d.dtype)), whole.data(),
                        all.data() + r * bytes,
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

bool anyTrainingOption(const TrainOptions &o) {
  return o.steps >= 0 || !o.data.empty() || !o.tokens.empty() || o.synthetic ||
         o.seedGiven || !o.logJson.empty() || o.saveEvery > 0 ||
         !o.checkpointDir.empty() || !o.resume.empty() ||
         !o.exportPath.empty() || !o.exportOnnx.empty() || o.slowRank >= 0;
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

void setLeftByFault() { gLeftByFault = true; }

} // namespace cleave::training
