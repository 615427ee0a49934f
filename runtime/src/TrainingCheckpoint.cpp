//===- TrainingCheckpoint.cpp - Checkpoints of a partitioned run ----------===//
//
// A checkpoint holds global tensors by name, whatever mesh wrote it. Each
// rank holds its shards of its stage's states: saving, every rank writes
// the shards it owns into one tensor file that rank 0 laid out; resuming,
// every rank reads only its shards; exporting gathers the global tensors
// on rank 0. With a pipelined plan the stages hold different states; the
// checkpoint is their union, each tensor saved by the lowest stage holding
// it, so it resumes on any mesh whose plan has the same states.
//
//===----------------------------------------------------------------------===//

#include "TrainingSupport.h"

#include "cleave/TensorFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <unistd.h>

namespace cleave::training {

using namespace cleave::plan;

/// Reads state `index` of `program` (a stage's plan) into *st: shapes and,
/// for a sharded state, every rank's shard offsets.
static int readStateInfo(cleave_rt_program program, size_t index,
                         const RankContext &ctx, StateInfo *st) {
  TRY(cleave_rt_program_state_desc(program, index, &st->desc));
  const cleave_rt_tensor_desc_t &t = st->desc.tensor;
  st->shape.assign(t.dims, t.dims + t.rank);
  st->global = st->shape;
  int64_t replicas = 1, replica = 0;
  TRY(cleave_rt_program_state_replica(program, index, 0, &replicas, &replica));
  st->replicas = replicas;
  if (!st->desc.sharded && replicas == 1)
    return -1;
  for (int64_t k = 0; k < ctx.worldSize; ++k) {
    std::vector<int64_t> offsets(t.rank);
    int sharded = 0;
    TRY(cleave_rt_program_state_shard(program, index, static_cast<size_t>(k),
                                      st->global.data(), offsets.data(),
                                      &sharded));
    // A varying state: replica r of the stored tensor is at index r of a
    // leading dimension.
    if (replicas > 1) {
      TRY(cleave_rt_program_state_replica(
          program, index, static_cast<size_t>(k), &replicas, &replica));
      offsets.insert(offsets.begin(), replica);
    }
    st->offsets.push_back(std::move(offsets));
  }
  if (replicas > 1) {
    st->shape.insert(st->shape.begin(), 1);
    st->global.insert(st->global.begin(), replicas);
    st->desc.sharded = 1;
  }
  return -1;
}

/// Where rank `rank`'s shard of `st` starts (zeros when replicated).
static std::vector<int64_t> shardStart(const StateInfo &st, int64_t rank) {
  return st.desc.sharded ? st.offsets[rank]
                         : std::vector<int64_t>(st.global.size(), 0);
}

CheckpointLayout::~CheckpointLayout() {
  for (cleave_rt_program p : stages)
    cleave_rt_program_destroy(p);
}

int CheckpointLayout::build(cleave_rt_program file, cleave_rt_program own,
                            const RankContext &ctx) {
  size_t count = cleave_rt_program_stage_count(file);
  pipelined = count > 0;
  stageOfRank.assign(ctx.worldSize, 0);
  for (int64_t k = 0; pipelined && k < ctx.worldSize; ++k) {
    size_t s = 0;
    TRY(cleave_rt_program_stage_of_rank(file, static_cast<size_t>(k), &s));
    stageOfRank[k] = static_cast<int64_t>(s);
  }
  myStage = stageOfRank[ctx.rank];
  mine.resize(cleave_rt_program_state_count(own));
  std::map<std::string, size_t> myIndex;
  for (size_t i = 0; i < mine.size(); ++i) {
    int rc = readStateInfo(own, i, ctx, &mine[i]);
    if (rc >= 0)
      return rc;
    myIndex[mine[i].desc.global_name] = i;
  }
  // Every stage's states, the first holder of each name saving it (the
  // validator has checked that the holders agree on its global shape).
  std::map<std::string, size_t> seen;
  for (size_t s = 0; s < std::max<size_t>(count, 1); ++s) {
    cleave_rt_program stage = own;
    if (pipelined && static_cast<int64_t>(s) != myStage) {
      cleave_rt_program h = nullptr;
      TRY(cleave_rt_program_stage_at(file, s, &h));
      stages.push_back(h);
      stage = h;
    }
    for (size_t i = 0; i < cleave_rt_program_state_count(stage); ++i) {
      Entry e;
      int rc = readStateInfo(stage, i, ctx, &e.info);
      if (rc >= 0)
        return rc;
      if (!seen.emplace(e.info.desc.global_name, entries.size()).second)
        continue;
      e.stage = static_cast<int64_t>(s);
      e.index = i;
      auto it = myIndex.find(e.info.desc.global_name);
      e.mine = it == myIndex.end() ? -1 : static_cast<int64_t>(it->second);
      entries.push_back(std::move(e));
    }
  }
  return -1;
}

int snapshot(cleave_rt_executor e, const CheckpointLayout &layout,
             const RankContext &ctx,
             std::vector<checkpoint::StateRecord> *out) {
  out->clear();
  std::vector<uint8_t> local, all;
  for (const CheckpointLayout::Entry &entry : layout.entries) {
    const StateInfo &st = entry.info;
    const cleave_rt_state_desc_t &d = st.desc;
    checkpoint::StateRecord r;
    r.name = d.global_name;
    r.kind = static_cast<StateKind>(d.kind);
    r.parameter = d.parameter;
    r.slot = d.slot;
    r.dtype = static_cast<DType>(d.tensor.dtype);
    r.shape = st.global;
    // Ranks of other stages contribute zeros of the saving stage's size.
    local.assign(d.tensor.byte_size, 0);
    if (entry.stage == layout.myStage)
      TRY(cleave_rt_executor_read_state(e, static_cast<size_t>(entry.mine),
                                        local.data(), local.size()));
    if (ctx.worldSize == 1 || (!d.sharded && !layout.pipelined)) {
      r.data = local; // the whole tensor, held by every rank
      out->push_back(std::move(r));
      continue;
    }
    all.resize(local.size() * ctx.worldSize);
    TRY(cleave_rt_communicator_gather(ctx.comm, local.data(), local.size(),
                                      all.data()));
    if (ctx.rank == 0) {
      size_t globalBytes = cleave_rt_dtype_size(d.tensor.dtype);
      for (int64_t v : st.global)
        globalBytes *= static_cast<size_t>(v);
      r.data.assign(globalBytes, 0);
      for (int64_t k = 0; k < ctx.worldSize; ++k)
        if (layout.stageOfRank[k] == entry.stage)
          plan::copyShard(st.global, st.shape, shardStart(st, k),
                          dtypeSize(r.dtype), r.data.data(),
                          all.data() + k * local.size(), /*toGlobal=*/true);
      // An export of a varying state is replica 0's (after a final
      // averaging every replica's).
      if (st.replicas > 1) {
        r.shape.erase(r.shape.begin());
        r.data.resize(globalBytes / static_cast<size_t>(st.replicas));
      }
    }
    out->push_back(std::move(r));
  }
  return -1;
}

int beginSave(const CheckpointLayout &layout, const RankContext &ctx,
              const std::string &dir, checkpoint::Checkpoint &c,
              checkpoint::ShardedSave *save) {
  c.states.clear();
  for (const CheckpointLayout::Entry &entry : layout.entries) {
    const StateInfo &st = entry.info;
    checkpoint::StateRecord r;
    r.name = st.desc.global_name;
    r.kind = static_cast<StateKind>(st.desc.kind);
    r.parameter = st.desc.parameter;
    r.slot = st.desc.slot;
    r.dtype = static_cast<DType>(st.desc.tensor.dtype);
    r.shape = st.global;
    c.states.push_back(std::move(r));
  }
  std::string err, file;
  bool ok = ctx.rank == 0 ? checkpoint::beginShardedSave(dir, c, save, &err)
                          : checkpoint::layoutShardedSave(c, save, &err);
  if (ctx.rank == 0 && ok && save->tensorFile.size() > kMaxPath) {
    ok = false;
    err = "the checkpoint path '" + save->tensorFile + "' is too long";
  }
  file = ok ? save->tensorFile : "";
  int rc = shareFromRank0(ctx, &file);
  if (rc >= 0)
    return rc;
  if (!ok)
    return fail(err);
  if (file.empty())
    return fail("rank 0 could not start the checkpoint in '" + dir + "'");
  save->tensorFile = file;
  return -1;
}

std::vector<OwnedShard> ownedShards(const CheckpointLayout &layout,
                                    const RankContext &ctx) {
  std::vector<OwnedShard> owned;
  for (size_t i = 0; i < layout.entries.size(); ++i) {
    const CheckpointLayout::Entry &entry = layout.entries[i];
    if (entry.stage != layout.myStage)
      continue;
    const StateInfo &st = entry.info;
    // Only the lowest rank of the saving stage holding this shard writes
    // it (a replicated state: the stage's lowest rank).
    std::vector<int64_t> mine = shardStart(st, ctx.rank);
    bool owner = true;
    for (int64_t k = 0; owner && k < ctx.rank; ++k)
      owner = layout.stageOfRank[k] != entry.stage || shardStart(st, k) != mine;
    if (owner)
      owned.push_back({i, std::move(mine)});
  }
  return owned;
}

int saveSharded(cleave_rt_executor e, const CheckpointLayout &layout,
                const RankContext &ctx, const std::string &dir,
                checkpoint::Checkpoint &c, std::string *path) {
  checkpoint::ShardedSave save;
  if (int rc = beginSave(layout, ctx, dir, c, &save); rc >= 0)
    return rc;
  const std::string &file = save.tensorFile;
  std::string err;
  int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  bool ok = fd >= 0;
  if (!ok)
    err = "cannot open '" + file + "': " + std::strerror(errno);
  std::vector<uint8_t> local;
  for (const OwnedShard &shard :
       ok ? ownedShards(layout, ctx) : std::vector<OwnedShard>()) {
    const CheckpointLayout::Entry &entry = layout.entries[shard.entry];
    const StateInfo &st = entry.info;
    local.resize(st.desc.tensor.byte_size);
    // A failure here still reaches allAgree below, so no rank waits for
    // one that gave up.
    if (cleave_rt_status s = cleave_rt_executor_read_state(
            e, static_cast<size_t>(entry.mine), local.data(), local.size())) {
      err = cleave_rt_status_message(s);
      cleave_rt_status_free(s);
      ok = false;
      break;
    }
    ok = checkpoint::writeShard(
        fd, save, shard.entry, st.global, st.shape, shard.start,
        cleave_rt_dtype_size(st.desc.tensor.dtype), local.data(), &err);
    if (!ok)
      break;
  }
  if (fd >= 0 && (::fsync(fd) != 0 || ::close(fd) != 0) && ok) {
    ok = false;
    err = "cannot fsync '" + file + "': " + std::strerror(errno);
  }
  bool all = false;
  int rc = allAgree(ctx, ok, &all);
  if (rc >= 0)
    return rc;
  if (!ok)
    return fail("cannot write the checkpoint of step " +
                std::to_string(c.step) + ": " + err);
  if (!all)
    return fail("another rank could not write its shards of the checkpoint "
                "of step " +
                std::to_string(c.step));
  if (ctx.rank == 0 && !checkpoint::finishShardedSave(save, c, path, &err))
    return fail("cannot save the checkpoint of step " + std::to_string(c.step) +
                ": " + err);
  return -1;
}

int restore(cleave_rt_executor e, const CheckpointLayout &layout,
            const RankContext &ctx, const checkpoint::Checkpoint &c,
            const std::string &dir, uint64_t *bytesRead) {
  // Each state is read from the tensor file shard by shard.
  int fd = ::open(c.tensorFile.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open '" + c.tensorFile + "': " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  std::vector<uint8_t> shard;
  std::map<std::string, const checkpoint::StateRecord *> byName;
  for (const checkpoint::StateRecord &r : c.states)
    byName[r.name] = &r;
  for (size_t i = 0; i < layout.mine.size(); ++i) {
    const StateInfo &st = layout.mine[i];
    const cleave_rt_state_desc_t &d = st.desc;
    auto it = byName.find(d.global_name);
    if (it == byName.end())
      return fail("checkpoint '" + dir + "' has no tensor '" + d.global_name +
                  "' that the plan needs; was it saved by another model?");
    const checkpoint::StateRecord &r = *it->second;
    if (static_cast<uint32_t>(r.dtype) != d.tensor.dtype ||
        r.shape != st.global) {
      // One copy per data-parallel replica on one side only (--sync).
      auto tail = [](const std::vector<int64_t> &v) {
        return std::vector<int64_t>(v.begin() + (v.empty() ? 0 : 1), v.end());
      };
      std::string why;
      if (st.replicas == 1 && tail(r.shape) == st.global)
        why = " (the checkpoint holds one copy per data-parallel replica, "
              "saved by a --sync=local or delayed run whose replicas "
              "differ; this plan holds one)";
      else if (st.replicas > 1 && tail(st.global) == r.shape)
        why = " (this plan holds one copy per data-parallel replica "
              "(--sync=local or delayed); the checkpoint holds one)";
      return fail("checkpoint '" + dir + "': tensor '" + d.global_name +
                  "' is " + tensorfile::shapeToString(r.shape) + " " +
                  dtypeName(r.dtype) + " but the plan has " +
                  tensorfile::shapeToString(st.global) + " " +
                  cleave_rt_dtype_name(d.tensor.dtype) + why);
    }
    // Checkpoints hold global tensors: this rank reads its shard.
    shard.resize(d.tensor.byte_size);
    std::string err;
    if (!checkpoint::readShard(fd, c, r, st.shape, shardStart(st, ctx.rank),
                               shard.data(), bytesRead, &err))
      return fail(err);
    TRY(cleave_rt_executor_write_state(e, i, shard.data(), shard.size()));
  }
  // Tensors no stage holds (the other stages' own are not this rank's).
  for (const CheckpointLayout::Entry &entry : layout.entries)
    byName.erase(entry.info.desc.global_name);
  for (const auto &kv : byName)
    warn("checkpoint tensor '" + kv.first +
         "' is not a state of the plan; "
         "ignored");
  return -1;
}

} // namespace cleave::training
