//===- Program.h - The object behind cleave_rt_program ---------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_PROGRAM_H
#define CLEAVE_RUNTIME_PROGRAM_H

#include "Backend.h"

/// A loaded plan file, or one stage of a pipelined one.
struct cleave_rt_program_t {
  /// The whole file as loaded (with its stages, when pipelined).
  cleave::rt::PlanRef file;
  /// The plan this handle describes and runs: the file's own for a plan
  /// that is not pipelined, the stage's for a stage handle. For a whole
  /// pipelined file it is stage 0's, whose inputs, outputs and training
  /// record every stage shares; what differs per stage (states, commands,
  /// the arena) is summed or refused there.
  cleave::rt::PlanRef plan;
  /// The stage this handle is (cleave_rt_program_stage), or -1 for a file.
  int64_t stage = -1;
  /// The named entry this handle is (cleave_rt_program_entry: an index into
  /// file->entries), or -1.
  int64_t entry = -1;
  uint64_t constantBytes = 0;
  uint64_t referencedBytes = 0; ///< Of constants referenced from files.
  size_t referencedFiles = 0;
  std::vector<std::string> stateNames; ///< StateTensor::globalName() each.
  std::string meshString;              ///< file->mesh.str().

  /// True for a whole pipelined file (not one of its stages).
  bool wholePipeline() const { return stage < 0 && file->isPipelined(); }
};

namespace cleave::rt {

/// "the plan is pipelined over pp=4 (mesh dp=2,pp=4, 8 ranks)", for
/// messages about a pipelined plan.
std::string describePipeline(const plan::Plan &file);

/// The plan rank `rank` of `program`'s mesh runs (its stage's for a
/// pipelined file), sharing ownership of the file. Fails for a stage handle
/// whose stage the rank does not run.
cleave_rt_status planForRank(cleave_rt_program program, int64_t rank,
                             PlanRef *out);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_PROGRAM_H
