//===- FaultInjection.cpp - --inject-fault, the testing faults ------------===//
//
// The faults --inject-fault makes happen, for tests of failure handling and
// restarts (TrainOptions.cpp parses the option): the cooperative hang of a rank
// thread (which a restart under --ranks releases, as a thread cannot be
// killed), the once-per-process record of the faults that fired, and the damage
// done to a checkpoint by kind=corrupt-checkpoint.
//
//===----------------------------------------------------------------------===//

#include "FaultInjection.h"
#include "TrainingSupport.h"

#include "cleave/ExitCodes.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

namespace cleave::training {

namespace fs = std::filesystem;

namespace {
/// The process's record of fired faults and held hangs.
struct FaultState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t releases = 0; ///< Bumped by releaseInjectedHangs.
  std::set<std::tuple<int64_t, int64_t, int>> fired;
};
FaultState &faultState() {
  static FaultState state;
  return state;
}
} // namespace

static thread_local std::string gFaultNote;
std::string takeInjectedFaultNote() { return std::exchange(gFaultNote, {}); }

bool claimInjectedFault(const InjectedFault &f) {
  FaultState &s = faultState();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.fired.emplace(f.rank, f.step, static_cast<int>(f.kind)).second;
}

void releaseInjectedHangs() {
  FaultState &s = faultState();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.releases;
  s.cv.notify_all();
}

void holdInjectedHang(bool releasable) {
  FaultState &s = faultState();
  std::unique_lock<std::mutex> lock(s.mu);
  uint64_t seen = s.releases;
  s.cv.wait(lock, [&] { return releasable && s.releases != seen; });
}

int fireStepFault(const InjectedFault &f, const RankContext &ctx,
                  double slowSeconds) {
  std::fprintf(stderr, "%s: %sinjected fault at step %lld: %s\n",
               programName().c_str(), rankPrefix().c_str(),
               static_cast<long long>(f.step), faultKindName(f.kind));
  std::fflush(stderr);
  gFaultNote = std::string("injected ") + faultKindName(f.kind);
  // A rank that is a thread of this process (--ranks, or a one-rank run)
  // cannot be killed alone: its crash is simulated and its hang released
  // by a restart. Under a launcher the process is the rank.
  bool thread = !ctx.comm ||
                std::string(cleave_rt_communicator_kind(ctx.comm)) == "local";
  switch (f.kind) {
  case InjectedFault::Kind::Crash:
    if (!thread)
      ::raise(SIGKILL);
    setLeftByFault();
    return kExitInjectedFault;
  case InjectedFault::Kind::Stop:
    ::raise(SIGSTOP);
    return -1;
  case InjectedFault::Kind::Hang:
    holdInjectedHang(thread);
    setLeftByFault();
    return kExitInjectedFault;
  case InjectedFault::Kind::Slow:
    std::this_thread::sleep_for(std::chrono::duration<double>(slowSeconds));
    return -1;
  default:
    return -1;
  }
}

bool corruptCheckpoint(const std::string &dir, int64_t step,
                       std::string *damaged, std::string *error) {
  int64_t best = -1;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() == 5 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos)
      continue;
    int64_t n = std::strtoll(name.c_str() + 5, nullptr, 10);
    if (n <= step && n > best)
      best = n;
  }
  if (best < 0) {
    *error = "no checkpoint at or before step " + std::to_string(step) +
             " in '" + dir + "' to damage";
    return false;
  }
  *damaged = dir + "/step-" + std::to_string(best);
  std::string file = *damaged + "/model.safetensors";
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  std::streamoff size = f.tellg();
  if (!f || size <= 0) {
    *error = "cannot open '" + file + "' to damage it";
    return false;
  }
  // The last byte: tensor data, so the header still parses and only the
  // manifest's SHA-256 tells.
  char byte = 0;
  f.seekg(size - 1);
  f.get(byte);
  f.seekp(size - 1);
  f.put(static_cast<char>(~byte));
  if (!f) {
    *error = "cannot write '" + file + "'";
    return false;
  }
  return true;
}

} // namespace cleave::training
