//===- Restarts.cpp - --max-restarts: bringing the ranks back -------------===//
//
// The restart loop of cleave-run --max-restarts: which rank failed and why,
// the checkpoint every rank resumes from, and the line that says so.
//
//===----------------------------------------------------------------------===//

#include "Restarts.h"

#include "cleave/Checkpoint.h"
#include "cleave/ExitCodes.h"
#include "cleave/TrainingLoop.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace cleave {

int combinedExit(const std::vector<RankOutcome> &ranks) {
  int code = kExitOk;
  auto rankOf = [](int c) {
    if (c == kExitOk)
      return 0;
    if (c == kExitPeerFailure)
      return 1;
    if (isRetryableExit(c))
      return 2;
    return 3; // Not retryable: the user's to fix.
  };
  for (const RankOutcome &r : ranks)
    if (rankOf(r.code) > rankOf(code))
      code = r.code;
  return code;
}

/// The rank to blame: one that failed by itself (an injected fault, an
/// error of its own) before one that stopped because of a peer.
static size_t failedRank(const std::vector<RankOutcome> &ranks) {
  for (int pass = 0; pass < 2; ++pass)
    for (size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].code != kExitOk &&
          (pass == 1 || ranks[r].code != kExitPeerFailure))
        return r;
  return 0;
}

/// N of a checkpoint directory ".../step-N".
static int64_t stepOfDir(const std::string &dir) {
  size_t dash = dir.find_last_of('-');
  return dash == std::string::npos
             ? 0
             : std::strtoll(dir.c_str() + dash + 1, nullptr, 10);
}

int runWithRestarts(const RunOptions &o, const RankAttempt &attempt) {
  using Clock = std::chrono::steady_clock;
  RunOptions now = o;
  for (long restart = 0;; ++restart) {
    std::vector<RankOutcome> ranks = attempt(now, restart < o.maxRestarts);
    int code = combinedExit(ranks);
    if (code == kExitOk || !isRetryableExit(code))
      return code;
    if (restart == o.maxRestarts) {
      if (o.maxRestarts > 0)
        std::fprintf(stderr,
                     "cleave-run: error: the run failed again after %ld "
                     "restart%s (--max-restarts %ld); giving up\n",
                     restart, restart == 1 ? "" : "s", o.maxRestarts);
      return code;
    }
    auto t0 = Clock::now();
    size_t failed = failedRank(ranks);
    int64_t reached = 0;
    for (const RankOutcome &r : ranks)
      reached = std::max(reached, r.stepsDone);
    // The newest complete checkpoint (every hash checked once, here), else
    // where the run started.
    std::string dir, err;
    std::vector<std::string> notes;
    now.train = o.train;
    if (checkpoint::findResumePoint(o.train.checkpointDir, &dir, &notes,
                                    &err)) {
      now.train.resume = dir;
      now.train.resumeVerified = true;
      now.train.resumeAuto = false;
    }
    for (const std::string &n : notes)
      std::fprintf(stderr, "cleave-run: warning: %s\n", n.c_str());
    int64_t from = now.train.resume.empty() ? 0 : stepOfDir(now.train.resume);
    if (!now.train.resumeVerified && !now.train.resume.empty())
      from = -1; // Where the run started: rank 0 will say.
    std::string why = ranks[failed].reason.empty()
                          ? "exit code " + std::to_string(ranks[failed].code)
                          : ranks[failed].reason;
    std::string whence =
        from < 0 ? "resuming from '" + now.train.resume + "'"
        : from == 0 && now.train.resume.empty()
            ? "starting again from step 0 (no checkpoint yet)"
            : "resuming from checkpoint step " + std::to_string(from);
    std::fprintf(stderr,
                 "cleave-run: restart %ld of %ld: rank %zu failed at step "
                 "%" PRId64 " (%s); %s, %" PRId64 " step%s lost (%.3f s to "
                 "choose the checkpoint)\n",
                 restart + 1, o.maxRestarts, failed, reached + 1, why.c_str(),
                 whence.c_str(), from < 0 ? 0 : reached - from,
                 reached - from == 1 ? "" : "s",
                 std::chrono::duration<double>(Clock::now() - t0).count());
    std::fflush(stderr);
  }
}

} // namespace cleave
