//===- PlannerInternal.h - The layout planner's shared pieces ---*- C++ -*-===//
//
// Private to lib/Simulate: what the search (Planner.cpp) and the candidate
// evaluation (PlannerEvaluate.cpp) share about a profile, and the time
// format the evaluation and the reports (PlannerReports.cpp) print.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_SIMULATE_PLANNERINTERNAL_H
#define CLEAVE_LIB_SIMULATE_PLANNERINTERNAL_H

#include "cleave/Simulate/Planner.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cleave::sim::detail {

/// What a profile's stage program holds: memory (bytes per rank) and
/// flops (per microbatch). `kept` is the low-precision parameter copies
/// made once per step (mixed precision under ZeRO-1 and -2).
struct StageMemory {
  double parameters = 0, kept = 0, optimizerStates = 0, accumulators = 0,
         activations = 0, temporaries = 0, flops = 0;
  /// What lives through the step.
  double fixed() const {
    return parameters + kept + optimizerStates + accumulators;
  }
};

/// A profile: its plan, or why it did not compile, and its three stage
/// programs' memory as one layer, the embedding's extra and the head's.
struct Profile {
  ProfileKey key;
  plan::Plan plan;
  std::string error;
  StageMemory layer, embedding, head;
  /// Per (dp, pp) of a candidate mesh: the stage programs' costs.
  std::map<std::pair<int64_t, int64_t>, std::vector<StageCost>> costs;
};

/// Compiles `profile` (its key set) with `options.compileProfile` and reads
/// its stage programs' memory; sets `profile.error` where it fails. Safe to
/// run on several profiles at once when the callback is.
void compileProfile(Profile &profile, const PlannerOptions &options);

/// Evaluates candidate `c` on its profile: its prediction, or why it is
/// rejected. Costs the profile over the candidate's mesh first (once per
/// dp x pp). With an `incumbent` (the fastest feasible step found), a
/// candidate whose bubble-free work is well beyond it is rejected as
/// "slower" without replaying its schedule; an incumbent of 0 stops every
/// candidate that fits its states there.
void evaluate(Candidate &c, Profile &profile, const PlannerOptions &options,
              const Cluster &cluster, double incumbent);

/// `s` seconds as milliseconds, one decimal under 10 s.
std::string ms(double s);

} // namespace cleave::sim::detail

#endif // CLEAVE_LIB_SIMULATE_PLANNERINTERNAL_H
