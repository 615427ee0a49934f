//===- EntryValidate.cpp - Structural checks of a plan's named entries ----===//
//
// A plan may hold named entries besides its step: programs a driver runs
// now and then (local SGD's parameter averaging every H steps). An entry
// borrows states from the top level, which the driver copies into the
// entry's arena before running it and back after; what makes that copy
// sound is checked here, once, at load time: each entry state is a top
// level state of the same name, kind, dtype, shape, sharding and varying
// axes. Each entry is also checked as a plan of its own (validate()).
//
//===----------------------------------------------------------------------===//

#include "cleave/PlanFormat.h"

#include <map>
#include <set>

namespace cleave::plan {

namespace {
std::string axesString(const std::vector<uint32_t> &axes, const Mesh &mesh) {
  std::string s = "{";
  for (size_t i = 0; i < axes.size(); ++i)
    s += (i ? ", " : "") + (axes[i] < mesh.axisNames.size()
                                ? "'" + mesh.axisNames[axes[i]] + "'"
                                : std::to_string(axes[i]));
  return s + "}";
}

/// Why the varying axes of state `i` of `plan` are wrong, or "".
std::string varyingDifference(const Plan &plan, size_t i) {
  const StateTensor &st = plan.states[i];
  std::set<uint32_t> seen;
  for (uint32_t a : st.varyingAxes) {
    std::string what = "state " + std::to_string(i) + " '" + st.globalName() +
                       "' varies over mesh axis " + std::to_string(a);
    if (a >= plan.mesh.shape.size())
      return what + ", but the mesh (" +
             (plan.mesh.empty() ? std::string("none") : plan.mesh.str()) +
             ") has " + std::to_string(plan.mesh.shape.size()) + " axes";
    if (!seen.insert(a).second)
      return what + " twice";
    for (const std::vector<uint32_t> &dim : st.info.sharding)
      for (uint32_t s : dim)
        if (s == a)
          return what + " ('" + plan.mesh.axisNames[a] +
                 "'), which also splits it: a state varies only over axes "
                 "that do not shard it";
  }
  return "";
}
} // namespace

bool validateEntries(const Plan &plan, std::string *error) {
  auto fail = [&](const std::string &msg) {
    *error = msg;
    return false;
  };
  for (size_t i = 0; i < plan.states.size(); ++i)
    if (std::string d = varyingDifference(plan, i); !d.empty())
      return fail(d);
  if (plan.training.syncEvery < 0)
    return fail("training field 'sync_every' is " +
                std::to_string(plan.training.syncEvery) +
                " (expected 0, or the steps between runs of entry '" +
                kSyncEntry + "')");
  if (plan.training.syncEvery > 0 && !plan.entry(kSyncEntry))
    return fail("training field 'sync_every' is " +
                std::to_string(plan.training.syncEvery) +
                " but the plan has no entry '" + kSyncEntry + "' to run");
  if (plan.entries.empty())
    return true;
  if (plan.isPipelined())
    return fail("a pipelined plan cannot hold entries (it has " +
                std::to_string(plan.entries.size()) +
                "): each stage would need its own");
  std::map<std::string, size_t> topStates;
  for (size_t i = 0; i < plan.states.size(); ++i)
    topStates.emplace(plan.states[i].globalName(), i);
  std::set<std::string> names;
  for (const Plan &entry : plan.entries) {
    std::string prefix = "entry '" + entry.entryName + "': ";
    if (entry.entryName.empty())
      return fail("an entry has an empty name");
    if (!names.insert(entry.entryName).second)
      return fail(prefix + "the name is given to two entries");
    if (entry.isPipelined() || !entry.entries.empty())
      return fail(prefix + "holds stages or entries of its own (entries do "
                           "not nest)");
    if (entry.mesh.axisNames != plan.mesh.axisNames ||
        entry.mesh.shape != plan.mesh.shape)
      return fail(prefix + "its mesh '" + entry.mesh.str() +
                  "' differs from the plan's '" + plan.mesh.str() + "'");
    if (entry.target != plan.target)
      return fail(prefix + "targets '" + entry.target +
                  "' but the plan targets '" + plan.target + "'");
    if (!entry.inputs.empty())
      return fail(prefix + "has " + std::to_string(entry.inputs.size()) +
                  " inputs (an entry runs on states alone)");
    if (entry.training.syncEvery != 0)
      return fail(prefix + "has a sync interval of its own");
    std::string err;
    if (!validate(entry, &err))
      return fail(prefix + err);
    for (size_t i = 0; i < entry.states.size(); ++i) {
      const StateTensor &st = entry.states[i];
      std::string what =
          "state " + std::to_string(i) + " '" + st.globalName() + "'";
      auto it = topStates.find(st.globalName());
      if (it == topStates.end())
        return fail(prefix + what +
                    " is not a state of the plan (an entry borrows the "
                    "plan's states)");
      const StateTensor &top = plan.states[it->second];
      if (st.kind != top.kind || st.info.dtype != top.info.dtype ||
          st.info.shape != top.info.shape ||
          st.info.sharding != top.info.sharding ||
          st.varyingAxes != top.varyingAxes)
        return fail(prefix + what + " is a " + stateKindName(st.kind) + " " +
                    dtypeName(st.info.dtype) + " of local shape " +
                    std::to_string(st.info.shape.size()) + "-d varying over " +
                    axesString(st.varyingAxes, plan.mesh) +
                    " that differs from the plan's state of that name (kind, "
                    "dtype, shape, sharding and varying axes must agree)");
      for (const Constant &c : entry.constants)
        if (c.info.offset == st.info.offset)
          return fail(prefix + what +
                      " has an initial value (an entry's states are copied "
                      "in from the plan's)");
    }
  }
  return true;
}

} // namespace cleave::plan
