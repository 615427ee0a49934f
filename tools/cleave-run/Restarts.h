//===- Restarts.h - --max-restarts: bringing the ranks back -----*- C++ -*-===//
//
// cleave-run --max-restarts N: after a retryable failure of ranks that run
// in this process (--ranks threads, or a one-rank run), every rank is
// brought back from the newest complete checkpoint, up to N times.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TOOLS_CLEAVE_RUN_RESTARTS_H
#define CLEAVE_TOOLS_CLEAVE_RUN_RESTARTS_H

#include "RunOptions.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cleave {

/// How one rank of an attempt ended.
struct RankOutcome {
  int code = 0;          ///< Its exit code (cleave/ExitCodes.h).
  int64_t stepsDone = 0; ///< Training steps done when it returned.
  std::string reason;    ///< Its error message (empty on success).
};

/// The exit code of the process whose ranks ended so: a user error wins,
/// then an injected fault, then a peer failure.
int combinedExit(const std::vector<RankOutcome> &ranks);

/// One run of every rank with these options.
using RankAttempt =
    std::function<std::vector<RankOutcome>(const RunOptions &, bool retry)>;

/// Runs `attempt`, and after each retryable failure runs it again from the
/// newest complete checkpoint in --checkpoint-dir (else from where the run
/// started), at most o.maxRestarts times; prints a line per restart (the
/// failed rank, why, the step resumed from, the steps lost). `retry` tells
/// the attempt that a restart may follow a failure (so it releases the
/// ranks an injected hang holds). Returns the exit code.
int runWithRestarts(const RunOptions &o, const RankAttempt &attempt);

} // namespace cleave

#endif // CLEAVE_TOOLS_CLEAVE_RUN_RESTARTS_H
