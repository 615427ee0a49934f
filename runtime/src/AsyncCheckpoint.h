//===- AsyncCheckpoint.h - Checkpoints written beside training --*- C++ -*-===//
//
// --async-checkpoint: a save blocks the step only while this rank's shards
// are copied into host memory the checkpointer owns (page-locked on a GPU,
// cleave_rt_executor_host_alloc); a thread of this rank then writes them
// into the tensor file rank 0 laid out, syncs it, and tells rank 0 through
// a marker file in the checkpoint's temporary directory. Rank 0's thread,
// once every rank's marker is there, hashes the file, writes the manifest
// and renames the directory, as a synchronous save does: until then the
// previous checkpoint is the newest complete one, so a crash during the
// write loses nothing that was saved.
//
// At most one save is in flight: the next save waits for it. A failed
// write is reported (rank, path, reason) at the next step, the next save
// or the end of the run, which then exits non-zero.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_ASYNCCHECKPOINT_H
#define CLEAVE_RUNTIME_ASYNCCHECKPOINT_H

#include "TrainingSupport.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace cleave::training {

class AsyncCheckpointer {
public:
  /// Testing faults (--inject-fault rank=R,step=S,kind=K on this rank),
  /// halfway through the write of step S's checkpoint: `crash-during-save`
  /// kills the process, `fail-during-save` fails the write.
  enum class Fault { None, Crash, Fail };
  explicit AsyncCheckpointer(Fault fault = Fault::None, int64_t faultStep = 0)
      : fault(fault), faultStep(faultStep) {}
  AsyncCheckpointer(const AsyncCheckpointer &) = delete;
  AsyncCheckpointer &operator=(const AsyncCheckpointer &) = delete;
  /// Stops a save in flight between shards (the run failed) and joins it.
  ~AsyncCheckpointer();

  /// Waits for the save in flight, then starts saving `c`'s step: the
  /// layout (a collective over the world), the copy of this rank's shards
  /// out of `e`, and the thread that writes them. Returns an exit code on
  /// failure (the one in flight's included), -1 on success.
  int save(cleave_rt_executor e, const CheckpointLayout &layout,
           const RankContext &ctx, const std::string &dir,
           checkpoint::Checkpoint c);
  /// Joins the save in flight; its failure's exit code, or -1.
  int wait();
  /// Without blocking: the exit code of a save that has failed, or -1.
  int poll();
  /// Frees the host buffers (before `e`, which made them, is destroyed).
  void release();

private:
  /// A shard this rank writes, and its copy in host memory.
  struct Shard {
    size_t entry = 0; ///< In the layout.
    size_t state = 0; ///< This rank's state index.
    std::vector<int64_t> global, shape, start;
    size_t elemSize = 0;
    void *data = nullptr;
    size_t bytes = 0;
  };
  void write(checkpoint::ShardedSave save, checkpoint::Checkpoint c,
             int64_t rank, int64_t world, double timeout);
  int report();

  Fault fault;
  int64_t faultStep;
  cleave_rt_executor owner = nullptr;
  std::vector<Shard> shards;
  std::thread worker;
  std::atomic<bool> cancel{false}, done{false};
  // Written by the worker, read once it is joined.
  bool ok = true;
  std::string error, path;
  int64_t step = 0;
  std::string prefix; ///< rankPrefix() of this rank's messages.
  /// How long the last save held the step (the wait for the save before
  /// it, the layout, the copy), and the bytes it copied.
  double blockedMs = 0;
  uint64_t copiedBytes = 0;
};

} // namespace cleave::training

#endif // CLEAVE_RUNTIME_ASYNCCHECKPOINT_H
