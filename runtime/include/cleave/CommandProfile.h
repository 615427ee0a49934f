//===- CommandProfile.h - Where a run's time went, by command -*- C++ -*-===//
//
// cleave-run --profile: the executor times every command of the runs it
// profiles (cleave_rt_executor_set_profiling); printProfile prints the time
// per run by command kind and the costliest commands.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMMANDPROFILE_H
#define CLEAVE_COMMANDPROFILE_H

#include "cleave_rt.h"

#include <string>

namespace cleave::training {

/// Prints `e`'s profile on stdout: a line with the time per run (`what`:
/// "run", "step") in commands by kind, then the 20 costliest commands with
/// their share. Returns an exit code on failure, -1 on success.
int printProfile(cleave_rt_executor e, const std::string &what);

} // namespace cleave::training

#endif // CLEAVE_COMMANDPROFILE_H
