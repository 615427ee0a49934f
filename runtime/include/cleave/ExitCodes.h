//===- ExitCodes.h - Exit codes of cleave-run's runs ----------*- C++ -*-===//
//
// What a run's exit status tells a job script or a launcher: whether
// running again (with --resume=auto) can help. cleave-run, the binaries of
// cleave-compile --emit=exe and their ranks under mpirun or srun end with
// one of these; they are stable, and documented in cleave-run --help and
// docs/guide/cleave-run.md#restarts.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_EXITCODES_H
#define CLEAVE_EXITCODES_H

namespace cleave {

/// The run finished.
constexpr int kExitOk = 0;
/// A user or input error (a bad plan, data file, option value or
/// checkpoint directory): running again will not help.
constexpr int kExitError = 1;
/// A bad command line (an unknown option, a missing value).
constexpr int kExitUsage = 2;
/// Retryable: this rank stopped because a peer failed, exited, hung past
/// --comm-timeout or aborted the communicator (EX_TEMPFAIL). A job script
/// runs the job again with --resume=auto.
constexpr int kExitPeerFailure = 75;
/// Retryable: this rank itself failed by an injected fault
/// (--inject-fault ...,kind=crash under --ranks, where a crash is a
/// simulated rank death; under mpirun an injected crash is a SIGKILL, and
/// the launcher reports the signal).
constexpr int kExitInjectedFault = 76;

/// Whether a run that ended with `code` may succeed when run again from its
/// newest checkpoint: a peer failure, an injected fault, or a rank killed
/// by a signal (a shell reports 128 + the signal's number).
constexpr bool isRetryableExit(int code) {
  return code == kExitPeerFailure || code == kExitInjectedFault ||
         (code > 128 && code < 128 + 65);
}

} // namespace cleave

#endif // CLEAVE_EXITCODES_H
