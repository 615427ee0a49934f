//===- TrainingSupport.h - Pieces the training loop's files share -*- C++ -*-=//
//
// Internal to cleave_train: messages with the program name and the rank,
// the small world-wide collectives the loop agrees through, and the
// checkpoint code (TrainingCheckpoint.cpp), which works on the states of
// every stage of a pipelined plan.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAININGSUPPORT_H
#define CLEAVE_RUNTIME_TRAININGSUPPORT_H

#include "cleave/Checkpoint.h"
#include "cleave/TrainingLoop.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::training {

/// Prints "<program>: [rank R: ]error: <message>" on stderr; returns 1.
int fail(const std::string &message);
/// Prints "<program>: warning: <message>" on stderr, on rank 0 only.
void warn(const std::string &message);
/// fail() with the status's message; frees the status.
int statusFail(cleave_rt_status s);

/// Returns fail()'s exit code from the enclosing function if `expr` fails.
#define TRY(expr)                                                              \
  do {                                                                         \
    if (cleave_rt_status s_ = (expr))                                          \
      return statusFail(s_);                                                   \
  } while (0)

/// The longest checkpoint path rank 0 hands to the other ranks.
constexpr size_t kMaxPath = 4096;

// The world-wide helpers below are collectives: every rank calls them in
// the same order. Each returns an exit code on failure, -1 on success.

/// Rank 0's `text` on every rank (at most kMaxPath bytes).
int shareFromRank0(const RankContext &ctx, std::string *text);
/// Prints "<what>: v0, v1, ..." on rank 0 with each rank's `value`.
int printPerRank(const RankContext &ctx, const std::string &what,
                 uint64_t value);
/// Sets *all to whether every rank says `ok`.
int allAgree(const RankContext &ctx, bool ok, bool *all);

/// A state tensor of one stage plan, with its shapes.
struct StateInfo {
  cleave_rt_state_desc_t desc;
  std::vector<int64_t> shape;  ///< The stage's (the shard's) shape.
  std::vector<int64_t> global; ///< The global shape (= shape if replicated).
  /// Where each rank's shard starts in the global tensor (sharded states
  /// only; meaningful for the ranks that run this stage).
  std::vector<std::vector<int64_t>> offsets;
  /// A state that differs between ranks holding the same shard (local
  /// SGD's replicas, cleave_rt_program_state_replica): > 1 replicas, stored
  /// with a leading dimension of that size; shape, global and offsets
  /// include it (desc.sharded is then set).
  int64_t replicas = 1;
};

/// The states of a checkpoint and who holds them. A plan that is not
/// pipelined has one stage, itself. In a pipelined plan each stage holds
/// its own states; the checkpoint holds each global name once, saved by
/// the lowest stage holding it (a tied parameter held by two stages has
/// equal copies), and every rank restores its own stage's states.
class CheckpointLayout {
public:
  CheckpointLayout() = default;
  CheckpointLayout(const CheckpointLayout &) = delete;
  CheckpointLayout &operator=(const CheckpointLayout &) = delete;
  ~CheckpointLayout();

  /// Reads the states of every stage of `file` (the program as loaded)
  /// for `ctx`'s rank, whose own program is `mine`. Returns an exit code
  /// on failure, -1 on success.
  int build(cleave_rt_program file, cleave_rt_program mine,
            const RankContext &ctx);

  /// One tensor of the checkpoint, as its saving stage holds it.
  struct Entry {
    StateInfo info;
    int64_t stage = 0; ///< The stage that saves it.
    size_t index = 0;  ///< Its index among that stage's states.
    int64_t mine = -1; ///< Its index among this rank's states, or -1.
  };
  std::vector<Entry> entries;
  /// This rank's states (indices as in its executor).
  std::vector<StateInfo> mine;
  std::vector<int64_t> stageOfRank; ///< Per rank of the world.
  int64_t myStage = 0;
  bool pipelined = false;

private:
  std::vector<cleave_rt_program> stages; ///< Owned stage handles.
};

/// Reads every state of the checkpoint into records of global tensors, on
/// rank 0 (the other ranks get records without data): a sharded state, or
/// any state of a pipelined plan, is gathered from the ranks holding it.
/// A collective over the world.
int snapshot(cleave_rt_executor e, const CheckpointLayout &layout,
             const RankContext &ctx, std::vector<checkpoint::StateRecord> *out);

/// Starts a checkpoint of `c`'s step (its records get the states' names,
/// dtypes and global shapes, without data): rank 0 lays out the tensor file
/// in a temporary directory (beginShardedSave) and every rank gets its
/// path in save->tensorFile. A collective over the world.
int beginSave(const CheckpointLayout &layout, const RankContext &ctx,
              const std::string &dir, checkpoint::Checkpoint &c,
              checkpoint::ShardedSave *save);

/// A shard this rank writes into a checkpoint: entry `entry` of the
/// layout, at `start` of its global tensor.
struct OwnedShard {
  size_t entry;
  std::vector<int64_t> start;
};
/// The shards this rank writes: those of its stage's entries of which it
/// is the lowest holding rank.
std::vector<OwnedShard> ownedShards(const CheckpointLayout &layout,
                                    const RankContext &ctx);

/// Saves a checkpoint with every rank writing the shards it owns (the
/// lowest rank of the saving stage holding each distinct shard) into one
/// tensor file that rank 0 laid out; no rank gathers a global tensor.
/// *path is set on rank 0. A collective over the world.
int saveSharded(cleave_rt_executor e, const CheckpointLayout &layout,
                const RankContext &ctx, const std::string &dir,
                checkpoint::Checkpoint &c, std::string *path);

/// Restores this rank's states from a checkpoint (each rank reads only its
/// shards); every state must be there with the same dtype and global
/// shape. Warns (rank 0) about checkpoint tensors no stage holds.
int restore(cleave_rt_executor e, const CheckpointLayout &layout,
            const RankContext &ctx, const checkpoint::Checkpoint &c,
            const std::string &dir, uint64_t *bytesRead);

} // namespace cleave::training

#endif // CLEAVE_RUNTIME_TRAININGSUPPORT_H
