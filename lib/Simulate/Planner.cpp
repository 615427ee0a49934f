//===- Planner.cpp - Search the parallel layouts of a training step -------===//
//
// See Planner.h: the search. Chains of profiles, one per tensor-, context-
// and expert-parallel layout, walk their variants (recompute policy, ZeRO
// stage) and microbatch sizes best first; each profile's candidate layouts are
// evaluated (PlannerEvaluate.cpp) and pruned against the best found so far.
// Each round compiles its profiles on llvm's thread pool.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <thread>

namespace cleave::sim {

using namespace detail;

namespace {

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

/// What the candidates of one profile came to.
struct Outcome {
  bool anyFits = false, allFit = true, statesFit = false;
  double best = HUGE_VAL;
  /// The fastest of its layouts over memory that a variant saving more
  /// memory could make fit, without what runs outside the steps: no such
  /// variant beats it.
  double bound = HUGE_VAL;
  /// Per ZeRO stage: some layout over memory would fit with it and might
  /// beat the best found.
  std::array<bool, 4> zeroHelps = {false, false, false, false};
};

/// A profile's variant: a recompute policy (its index in the options) and a
/// ZeRO stage.
struct Variant {
  size_t policy;
  int zero;
};

/// The profiles of one tensor-, context- and expert-parallel layout (tp,
/// with or without sequence parallelism; cp with its attention
/// partitioning; ep), a variant at a time, a microbatch size at a time.
struct Chain {
  int64_t tp = 1;
  bool sp = false;
  int64_t cp = 1;
  std::string mode;
  int64_t ep = 1;
  size_t size = 0, variant = 0;
  double previous = HUGE_VAL;
  Outcome sized;
  bool done = false;
  /// A lower bound on what its next profile can give (valid within a
  /// microbatch size; a priority only across sizes).
  double bound = -HUGE_VAL;
  bool boundValid = false;
  /// Per variant, at this microbatch size and the one before: 0 compiled
  /// and no layout fits, 1 some layout fits, -1 not compiled.
  std::vector<int> fits, fitsBefore;
};

/// Why the layout of `d` (its dp, pp and chunks set) cannot be tried on
/// `profile`, or "": a profile that did not compile, layers or a batch
/// that do not divide, too few microbatches. Sets d.microbatches where
/// the batch divides.
std::string whyNotTried(const Profile &profile, const PlannerOptions &options,
                        Candidate &d) {
  int64_t l = options.layers, stages = d.pp * d.chunks,
          rows = d.dp * d.ep * d.microbatchSize;
  if (!profile.error.empty())
    return "its profile (" + profile.key.str() +
           ") did not compile: " + profile.error;
  if (l % stages)
    return "the " + std::to_string(l) + " layers do not split into " +
           std::to_string(stages) + " equal stages";
  if (options.globalBatch % rows)
    return "the global batch " + std::to_string(options.globalBatch) +
           (d.ep > 1 ? " does not split into dp x ep x microbatch = "
                     : " does not split into dp x microbatch = ") +
           std::to_string(rows);
  d.microbatches = options.globalBatch / rows;
  if (d.microbatches < d.pp)
    return "fewer microbatches (" + std::to_string(d.microbatches) +
           ") than pipeline ranks (" + std::to_string(d.pp) + ")";
  return "";
}

/// The search: its space, its chains and the best step found so far.
class LayoutSearch {
public:
  LayoutSearch(const PlannerOptions &options, const Cluster &cluster,
               PlanSearch &out)
      : options(options), cluster(cluster), out(out), g(options.devices),
        l(options.layers),
        threads(std::max(1u, std::thread::hardware_concurrency())),
        pool(llvm::hardware_concurrency(threads)) {}

  /// Checks the options and lays out the space; returns an error or "".
  std::string prepare();
  /// Compiles and evaluates profiles, round by round, until no chain is
  /// left that could beat the best found.
  void run();

private:
  /// Evaluates every candidate of `profile` into `out`.
  Outcome candidatesOf(Profile &profile);
  /// The candidates of `profile` worth a schedule: every dp x pp over the
  /// devices its tp x cp x ep leaves, 1F1B and interleaved with up to maxChunks
  /// chunks, and without a pipeline each bucket size with overlap. Those that
  /// cannot be tried go to out.rejected.
  std::vector<Candidate> layoutsOf(Profile &profile);
  /// Replays `d` (a candidate of `profile`) if it fits its states, and
  /// files it into `out` and `o`.
  void record(Candidate &d, Profile &profile, Outcome &o);
  /// The context-parallel sizes to try, into `cps`; returns an error or "".
  std::string contextParallelSizes(std::vector<int64_t> &cps) const;
  /// The expert-parallel sizes to try, into `eps`; returns an error or "".
  std::string expertParallelSizes(std::vector<int64_t> &eps) const;
  ProfileKey keyOf(const Chain &c) const;
  void settle(Chain &c) const;
  void nextSize(Chain &c);
  /// After `c`'s profile: its next variant, its next microbatch size, or
  /// its end.
  void advance(Chain &c, const Profile &profile, const Outcome &o);
  /// Best first: the live chains whose next profiles promise the most, one
  /// per thread; a chain that cannot beat the best found ends.
  std::vector<Chain *> liveChains();
  /// Compiles the next profile of each of `live` on the pool.
  void compileRound(const std::vector<Chain *> &live);

  const PlannerOptions &options;
  const Cluster &cluster;
  PlanSearch &out;
  int64_t g, l;
  /// The fastest feasible step found so far.
  double incumbent = HUGE_VAL;
  std::vector<int64_t> sizes;
  std::vector<Variant> variants;
  std::vector<Chain> chains;
  std::vector<std::unique_ptr<Profile>> profiles;
  /// Tensor-, context- and expert-parallel sizes whose states alone fit no
  /// layout (a larger cp leaves fewer devices to a pipeline).
  std::set<std::array<int64_t, 3>> deadSplits;
  /// Profiles per round: the machine's hardware threads.
  unsigned threads;
  llvm::DefaultThreadPool pool;
};

std::string
LayoutSearch::contextParallelSizes(std::vector<int64_t> &cps) const {
  int64_t seq = options.sequence;
  if (options.contextParallel.empty()) {
    cps.push_back(1);
    for (int64_t t = 2; t <= std::min(g, cluster.devicesPerNode); t *= 2)
      if (g % t == 0 && seq > 0 && seq % t == 0)
        cps.push_back(t);
    return "";
  }
  for (int64_t cp : options.contextParallel) {
    if (cp < 1 || g % cp)
      return "context-parallel size " + std::to_string(cp) +
             " does not divide the " + std::to_string(g) + " devices";
    if (cp > 1 && (seq < 1 || seq % cp))
      return "context-parallel size " + std::to_string(cp) +
             " does not divide the sequence (" + std::to_string(seq) +
             ", dimension 1 of the data inputs)";
    cps.push_back(cp);
  }
  std::sort(cps.begin(), cps.end());
  cps.erase(std::unique(cps.begin(), cps.end()), cps.end());
  return "";
}

std::string LayoutSearch::expertParallelSizes(std::vector<int64_t> &eps) const {
  eps = options.expertParallel;
  if (eps.empty())
    eps.push_back(1);
  for (int64_t ep : eps)
    if (ep < 1 || g % ep)
      return "expert-parallel size " + std::to_string(ep) +
             " does not divide the " + std::to_string(g) + " devices";
  std::sort(eps.begin(), eps.end());
  eps.erase(std::unique(eps.begin(), eps.end()), eps.end());
  return "";
}

std::string LayoutSearch::prepare() {
  if (g < 1 || options.globalBatch < 1)
    return "the planner needs the devices and the global batch";
  if (l < kProfileLayers)
    return "the planner costs a model by its repeated layers; this one has " +
           std::to_string(l) + ", fewer than " + std::to_string(kProfileLayers);
  if (!options.compileProfile)
    return "the planner has no compiler";
  std::vector<int64_t> tps = options.tensorParallel;
  if (tps.empty())
    for (int64_t t = 1; t <= std::min(g, cluster.devicesPerNode); t *= 2)
      tps.push_back(t);
  for (int64_t b : options.microbatchSizes)
    if (b > 0 && options.globalBatch % b == 0)
      sizes.push_back(b);
  std::sort(sizes.begin(), sizes.end());
  std::vector<int> zeros;
  for (int z : options.zero) {
    if (z < 0 || z > 3)
      return "ZeRO stage " + std::to_string(z) + " is not 0, 1, 2 or 3";
    zeros.push_back(z);
  }
  std::sort(zeros.begin(), zeros.end());
  zeros.erase(std::unique(zeros.begin(), zeros.end()), zeros.end());
  if (sizes.empty() || zeros.empty() || options.recompute.empty())
    return "no microbatch size, ZeRO stage or recompute policy to try";
  std::vector<int64_t> cps, eps;
  if (std::string e = contextParallelSizes(cps); !e.empty())
    return e;
  if (std::string e = expertParallelSizes(eps); !e.empty())
    return e;
  out.tensorParallel = tps;
  out.contextParallel = cps;
  out.expertParallel = eps;
  // Each cp above 1 with each attention partitioning.
  std::vector<std::pair<int64_t, std::string>> contexts;
  for (int64_t cp : cps) {
    if (cp == 1)
      contexts.push_back({1, ""});
    else
      for (const std::string &mode : options.contextParallelModes)
        contexts.push_back({cp, mode});
  }
  if (cps.back() > 1 && options.contextParallelModes.empty())
    return "no attention partitioning to try context parallelism with";
  // The variants in the order they cost time: every recompute policy with
  // ZeRO-0 and -1 (which add no communication in the steps), then with
  // ZeRO-2 (a reduce-scatter per microbatch under a pipeline), then with
  // ZeRO-3 (all-gathers of the parameters in every step).
  for (auto [low, high] : {std::pair{0, 1}, {2, 2}, {3, 3}})
    for (size_t policy = 0; policy < options.recompute.size(); ++policy)
      for (int z : zeros)
        if (z >= low && z <= high)
          variants.push_back({policy, z});
  for (int64_t tp : tps)
    for (bool sp : {false, true})
      for (const auto &[cp, mode] : contexts)
        for (int64_t ep : eps)
          if (g % (tp * cp * ep) == 0 &&
              (!sp || (tp > 1 && options.sequenceParallel))) {
            Chain chain;
            chain.tp = tp;
            chain.sp = sp;
            chain.cp = cp;
            chain.mode = mode;
            chain.ep = ep;
            chain.fits.assign(variants.size(), -1);
            chain.fitsBefore.assign(variants.size(), -1);
            chains.push_back(chain);
          }
  for (Chain &c : chains)
    settle(c);
  return "";
}

std::vector<Candidate> LayoutSearch::layoutsOf(Profile &profile) {
  std::vector<Candidate> pending;
  const ProfileKey &key = profile.key;
  int64_t split = key.tp * key.cp * key.ep;
  for (int64_t pp = 1; pp <= l && split * pp <= g; ++pp) {
    if (g % (split * pp))
      continue;
    Candidate c;
    c.tp = key.tp;
    c.cp = key.cp;
    c.contextParallel = key.contextParallel;
    c.ep = key.ep;
    c.pp = pp;
    c.dp = g / (split * pp);
    c.sequenceParallel = key.sequenceParallel;
    c.microbatchSize = key.microbatchSize;
    c.recompute = key.recompute;
    c.zero = key.zero;
    if (c.zero > 0 && c.replicas() < 2)
      continue;
    for (int64_t v = 1; v <= (pp > 1 ? options.maxChunks : 1); ++v) {
      c.chunks = v;
      Candidate d = c;
      d.rejected = whyNotTried(profile, options, d);
      bool divisible = d.rejected.empty();
      // What needs no schedule first (an incumbent of 0 stops there).
      if (divisible)
        evaluate(d, profile, options, cluster, 0.0);
      (divisible ? pending : out.rejected).push_back(d);
      // Without a pipeline and ZeRO: each bucket size with overlap. A
      // layout over memory by its states and one microbatch is with
      // buckets too (they add memory). Not with ep: the buckets are costed
      // as all-reduces over dp x cp, while an ep layout reduces its dense
      // gradients over dp x ep x cp and its experts' over dp x cp.
      if (!divisible || pp > 1 || c.zero > 0 || c.replicas() < 2 || c.ep > 1)
        continue;
      bool overStates = d.rejected.rfind("over memory", 0) == 0;
      for (double bucket : options.bucketMB) {
        Candidate e = d;
        e.overlap = true;
        e.bucketMB = bucket;
        if (!overStates) {
          e.rejected.clear();
          evaluate(e, profile, options, cluster, 0.0);
        }
        pending.push_back(e);
      }
    }
  }
  return pending;
}

void LayoutSearch::record(Candidate &d, Profile &profile, Outcome &o) {
  if (d.rejected.rfind("slower", 0) == 0) {
    d.rejected.clear();
    evaluate(d, profile, options, cluster, incumbent);
  }
  // Whether a recompute policy or ZeRO-1 could make it fit.
  bool mayFit =
      d.minimumBytes <= options.memoryLimit || options.memoryLimit <= 0;
  bool overMemory = d.rejected.rfind("over memory", 0) == 0;
  o.statesFit |= mayFit;
  // What a more memory-saving variant could rescue: a layout over memory
  // that may fit, no faster than this without its optimizer.
  if (mayFit && overMemory) {
    o.allFit = false;
    o.bound = std::min(o.bound, d.stepSeconds - d.otherSeconds);
  }
  // A ZeRO stage is worth a profile where it makes a layout fit that could
  // beat the best found (ZeRO-1 and -2 take only optimizer work off the
  // step, ZeRO-3 adds gathers in the steps).
  for (int z = d.zero + 1; z <= 3; ++z)
    o.zeroHelps[z] =
        o.zeroHelps[z] ||
        (overMemory && d.memoryBytes - d.zeroSaves[z] <= options.memoryLimit &&
         d.stepSeconds - d.otherSeconds < incumbent);
  if (d.rejected.empty()) {
    o.anyFits = true;
    o.best = std::min(o.best, d.stepSeconds);
    incumbent = std::min(incumbent, d.stepSeconds);
  }
  (d.rejected.empty() ? out.feasible : out.rejected).push_back(d);
}

Outcome LayoutSearch::candidatesOf(Profile &profile) {
  std::vector<Candidate> pending = layoutsOf(profile);
  // Replay the schedules of those that fit their states, the least busy
  // first, so that the best found prunes the rest early.
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Candidate &a, const Candidate &b) {
                     return a.stepSeconds < b.stepSeconds;
                   });
  Outcome o;
  for (Candidate &d : pending)
    record(d, profile, o);
  return o;
}

ProfileKey LayoutSearch::keyOf(const Chain &c) const {
  const Variant &v = variants[c.variant];
  ProfileKey key;
  key.tp = c.tp;
  key.sequenceParallel = c.sp;
  key.cp = c.cp;
  key.contextParallel = c.mode;
  key.ep = c.ep;
  key.microbatchSize = sizes[c.size];
  key.recompute = options.recompute[v.policy];
  key.zero = v.zero;
  return key;
}

/// Skips ZeRO stages a layout without data parallelism cannot take, and the
/// variants no layout fit with at the microbatch size before: a larger
/// microbatch only adds memory. (A layout at size 2b is one at size b with
/// the same dp, pp and chunks, holding the same count of microbatches in
/// flight, each twice as large, on the same states.)
void LayoutSearch::settle(Chain &c) const {
  while (c.variant < variants.size() &&
         ((variants[c.variant].zero > 0 && g / (c.tp * c.ep) < 2) ||
          c.fitsBefore[c.variant] == 0))
    ++c.variant;
  c.done |= c.variant == variants.size();
}

/// The next microbatch size, or the chain's end: microbatches grow until
/// none fits or the best step stops getting faster.
void LayoutSearch::nextSize(Chain &c) {
  if (!c.sized.anyFits || c.sized.best >= c.previous ||
      ++c.size == sizes.size()) {
    c.done = true;
    return;
  }
  c.previous = c.sized.best;
  // Larger microbatches: no bound, the best so far as a priority.
  c.bound = c.sized.best;
  c.boundValid = false;
  c.sized = Outcome();
  c.variant = 0;
  c.fitsBefore = std::move(c.fits);
  c.fits.assign(variants.size(), -1);
  settle(c);
}

void LayoutSearch::advance(Chain &c, const Profile &profile, const Outcome &o) {
  if (!profile.error.empty() || deadSplits.count({c.tp, c.cp, c.ep})) {
    c.done = true; // this layout does not compile, or cannot fit
    return;
  }
  if (!o.statesFit) {
    // Its parameters and optimizer states alone fit no layout.
    deadSplits.insert({c.tp, c.cp, c.ep});
    c.done = true;
    return;
  }
  c.fits[c.variant] = o.anyFits ? 1 : 0;
  c.sized.anyFits |= o.anyFits;
  c.sized.best = std::min(c.sized.best, o.best);
  incumbent = std::min(incumbent, o.best);
  bool sizeDone = (o.anyFits && o.allFit) || o.bound >= incumbent;
  c.bound = o.bound;
  c.boundValid = true;
  // The next variant: a higher ZeRO stage only where it would make a
  // layout fit.
  if (!sizeDone) {
    int zero = variants[c.variant].zero;
    // ZeRO-2 and -3 add communication to every step: only where no variant
    // without them made a layout of this size fit.
    do
      ++c.variant;
    while (c.variant < variants.size() &&
           ((variants[c.variant].zero > zero &&
             !o.zeroHelps[variants[c.variant].zero]) ||
            (variants[c.variant].zero >= 2 && c.sized.anyFits)));
    sizeDone = c.variant == variants.size();
  }
  if (!sizeDone)
    settle(c);
  if (sizeDone || c.done) {
    c.done = false;
    nextSize(c);
  }
}

std::vector<Chain *> LayoutSearch::liveChains() {
  std::vector<Chain *> live;
  for (Chain &c : chains) {
    if (!c.done && c.boundValid && c.bound >= incumbent)
      c.done = true;
    if (!c.done)
      live.push_back(&c);
  }
  std::stable_sort(live.begin(), live.end(),
                   [](Chain *a, Chain *b) { return a->bound < b->bound; });
  if (live.size() > threads)
    live.resize(threads);
  return live;
}

void LayoutSearch::compileRound(const std::vector<Chain *> &live) {
  auto t0 = std::chrono::steady_clock::now();
  for (Chain *c : live) {
    profiles.push_back(std::make_unique<Profile>());
    Profile *profile = profiles.back().get();
    profile->key = keyOf(*c);
    pool.async([this, profile] { compileProfile(*profile, options); });
  }
  pool.wait();
  out.profileSeconds += seconds(t0);
  out.profilesCompiled += int64_t(live.size());
}

// One chain per tensor-, context- and expert-parallel layout. For each
// microbatch size from the smallest, a chain tries the variants from the
// fastest on, until every layout fits, or the fastest of them (memory aside,
// without the optimizer) cannot beat the best found: the rest would only add
// time. Each round compiles one profile per live chain, then evaluates their
// candidates in the chains' order, so the result does not depend on which
// profile compiles first.
void LayoutSearch::run() {
  while (true) {
    std::vector<Chain *> live = liveChains();
    if (live.empty())
      break;
    size_t first = profiles.size();
    compileRound(live);
    for (size_t i = 0; i < live.size(); ++i) {
      Profile &profile = *profiles[first + i];
      Outcome o = candidatesOf(profile);
      advance(*live[i], profile, o);
    }
  }
}

} // namespace

std::string searchPlans(const PlannerOptions &options, const Cluster &cluster,
                        PlanSearch &out) {
  auto start = std::chrono::steady_clock::now();
  out = PlanSearch();
  LayoutSearch search(options, cluster, out);
  if (std::string e = search.prepare(); !e.empty())
    return e;
  search.run();
  std::stable_sort(out.feasible.begin(), out.feasible.end(),
                   [](const Candidate &a, const Candidate &b) {
                     return a.stepSeconds < b.stepSeconds;
                   });
  if (out.profilesCompiled && out.feasible.empty() && out.rejected.empty())
    return "no candidate layout";
  out.searchSeconds = seconds(start);
  return "";
}

} // namespace cleave::sim
