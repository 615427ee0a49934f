//===- CommandProfile.h - Where a run's time went, by command -*- C++ -*-===//
//
// cleave-run --profile: the executor times every command of the runs it
// profiles (cleave_rt_executor_set_profiling); printProfile prints the time
// per run by command kind and the costliest commands; writeProfileJson
// writes every command's time (--profile-json).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMMANDPROFILE_H
#define CLEAVE_COMMANDPROFILE_H

#include "cleave_rt.h"

#include <cstdint>
#include <string>

namespace cleave::training {

/// Prints `e`'s profile on stdout: a line with the time per run (`what`:
/// "run", "step") in commands by kind, then the 20 costliest commands with
/// their share. Returns an exit code on failure, -1 on success.
int printProfile(cleave_rt_executor e, const std::string &what);

/// Writes `e`'s profile to `path` (atomically) as JSON:
///   {"runs" (or "steps"): N, "commands": [{"index": I, "kind": K, "label": L,
///                             "ms": mean milliseconds per run}, ...]}
/// with every command in plan order (`what` as in printProfile). Returns an
/// exit code on failure, -1 on success.
int writeProfileJson(cleave_rt_executor e, const std::string &what,
                     const std::string &path);

/// Where rank `rank` writes --profile-json FILE: FILE for rank 0, FILE with
/// ".rank<N>" before its extension for the others (p.json, p.rank1.json).
std::string profileJsonPath(const std::string &file, int64_t rank);

} // namespace cleave::training

#endif // CLEAVE_COMMANDPROFILE_H
