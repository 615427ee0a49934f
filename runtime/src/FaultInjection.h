//===- FaultInjection.h - --inject-fault, the testing faults ----*- C++ -*-===//
//
// Internal to cleave_train: the faults --inject-fault makes happen
// (FaultInjection.cpp). TrainingLoop.h declares what drivers call
// (releaseInjectedHangs, takeInjectedFaultNote).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_FAULTINJECTION_H
#define CLEAVE_RUNTIME_FAULTINJECTION_H

#include "cleave/TrainingLoop.h"

#include <string>

namespace cleave::training {

/// Parses --inject-fault's value, rank=R,step=S,kind=K (in any order;
/// TrainOptions.cpp, beside the option table).
bool parseInjectedFault(const std::string &text, InjectedFault *out,
                        std::string *error);

/// True the first time `f` is claimed in this process: it fires then only,
/// so a rank that --max-restarts brings back does not fail again where it
/// failed before.
bool claimInjectedFault(const InjectedFault &f);

/// Fires a fault of the start of a step (crash, hang, stop, slow) on this
/// rank: returns the exit code the rank ends with, or -1 if it goes on
/// (slow sleeps `slowSeconds` first). A crash under a launcher does not
/// return.
int fireStepFault(const InjectedFault &f, const RankContext &ctx,
                  double slowSeconds);

/// Waits for releaseInjectedHangs if `releasable`, else for ever.
void holdInjectedHang(bool releasable);

/// Damages the newest checkpoint step-<N> in `dir` with N <= `step` (a byte
/// of its tensor file, so its SHA-256 no longer matches); *damaged is its
/// directory.
bool corruptCheckpoint(const std::string &dir, int64_t step,
                       std::string *damaged, std::string *error);

/// Records that this rank left on purpose (an injected fault), for
/// leftByFault.
void setLeftByFault();

} // namespace cleave::training

#endif // CLEAVE_RUNTIME_FAULTINJECTION_H
