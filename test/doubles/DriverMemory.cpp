//===- DriverMemory.cpp - Allocation table and happens-before checker -----===//
//
// Device memory is host memory from mmap, one mapping per cuMemAlloc, in a
// table by base address. Each allocation keeps the accesses that may still
// race with a later one: a new access that overlaps an earlier one where
// either writes must be ordered after it (the earlier agent's entry in the
// new operation's vector clock reaches the earlier stamp), else the run
// aborts naming both operations. A new write trims every record it
// overlaps (they are all ordered before it), and so does a new read for
// earlier reads of the same agent, so the history stays bounded by the
// number of distinct ranges and agents.
//
// Freed blocks are poisoned with 0xFF bytes (NaN as floats) and kept
// mapped in a quarantine of the last 64 MiB; older (or larger) freed blocks
// become PROT_NONE, so a stale host pointer faults, and their addresses are
// not handed out again until 4096 blocks later.
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"

#include <algorithm>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace cleave::cudadouble::driver {

namespace {
constexpr uint64_t kQuarantineBytes = uint64_t(64) << 20;
constexpr size_t kMaxFreedBlocks = 4096;
} // namespace

void joinInto(Clock &into, const Clock &from) {
  if (into.size() < from.size())
    into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i)
    into[i] = std::max(into[i], from[i]);
}

uint64_t tick(Clock &c, uint32_t agent) {
  if (c.size() <= agent)
    c.resize(agent + 1, 0);
  return ++c[agent];
}

/// "'what' (plan command: X) on stream #2".
static std::string describeOp(const OpInfo &op) {
  std::string text = "'" + op.what + "'";
  if (!op.command.empty())
    text += " (plan command: " + op.command + ")";
  return text + " on " + op.agentName;
}

static std::string describeRecord(const AccessRecord &r) {
  return describeOp(*r.op) + ", which " + (r.write ? "writes" : "reads") +
         " '" + r.role + "' " + rangeText(r.begin, r.end - r.begin);
}

static const FreedBlock *findFreed(const State &s, uint64_t addr) {
  for (auto it = s.freed.rbegin(); it != s.freed.rend(); ++it)
    if (addr >= it->base && addr < it->base + std::max<uint64_t>(it->bytes, 1))
      return &*it;
  return nullptr;
}

/// The live allocation holding [addr, addr + bytes), or null and why not.
static Allocation *locate(State &s, uint64_t addr, uint64_t bytes,
                          std::string *why) {
  auto it = s.allocations.upper_bound(addr);
  if (it != s.allocations.begin()) {
    Allocation &a = std::prev(it)->second;
    uint64_t end = a.base + a.bytes;
    if (addr < end) {
      if (bytes <= end - addr)
        return &a;
      *why = "runs " + std::to_string(bytes - (end - addr)) +
             " bytes past the end of allocation #" + std::to_string(a.id) +
             " " + rangeText(a.base, a.bytes);
      return nullptr;
    }
  }
  if (const FreedBlock *f = findFreed(s, addr)) {
    *why = "lies in allocation #" + std::to_string(f->id) + " " +
           rangeText(f->base, f->bytes) + ", freed by " + f->freedBy +
           " (use after free)";
    return nullptr;
  }
  *why = "is not in any live allocation";
  if (it != s.allocations.begin()) {
    const Allocation &a = std::prev(it)->second;
    *why += " (it starts " + std::to_string(addr - (a.base + a.bytes)) +
            " bytes past the end of allocation #" + std::to_string(a.id) + " " +
            rangeText(a.base, a.bytes) + ")";
  }
  return nullptr;
}

static std::string accessText(const Access &x) {
  return std::string(x.write ? "writes" : "reads") + " '" + x.role + "' " +
         rangeText(x.address, x.bytes);
}

void checkBounds(State &s, const std::vector<Access> &acc, const OpInfo &info) {
  for (const Access &x : acc) {
    if (!x.bytes)
      continue;
    std::string why;
    if (x.address + x.bytes < x.address || !locate(s, x.address, x.bytes, &why))
      fail(describeOp(info) + " " + accessText(x) + ", which " +
           (why.empty() ? "wraps around the address space" : why));
  }
}

std::vector<uint64_t>
checkAndRecord(State &s, const std::vector<Access> &acc, const Clock &clock,
               uint32_t agent, uint64_t stamp,
               const std::shared_ptr<const OpInfo> &info) {
  checkBounds(s, acc, *info);
  std::vector<uint64_t> ids;
  ids.reserve(acc.size());
  for (const Access &x : acc) {
    if (!x.bytes) {
      ids.push_back(0);
      continue;
    }
    std::string why;
    Allocation &a = *locate(s, x.address, x.bytes, &why);
    ids.push_back(a.id);
    uint64_t b = x.address, e = b + x.bytes;
    auto first =
        a.history.lower_bound(b - a.base > a.longest ? b - a.longest : a.base);
    for (auto it = first; it != a.history.end() && it->first < e; ++it) {
      const AccessRecord &r = it->second;
      if (r.end <= b || !(r.write || x.write))
        continue;
      if (entryOf(clock, r.agent) >= r.stamp)
        continue;
      fail("race on allocation #" + std::to_string(a.id) + ": " +
           describeOp(*info) + " " + accessText(x) +
           " and is not ordered after " + describeRecord(r) +
           "; order them with an event (cuEventRecord on the first "
           "stream, cuStreamWaitEvent on the second) or a synchronize");
    }
    // Trim what the new access supersedes, then record it.
    std::vector<AccessRecord> pieces;
    bool longestGone = false;
    for (auto it = first; it != a.history.end() && it->first < e;) {
      const AccessRecord &r = it->second;
      bool superseded = x.write || (r.agent == agent && !r.write);
      if (r.end <= b || !superseded) {
        ++it;
        continue;
      }
      longestGone |= r.end - r.begin >= a.longest;
      if (r.begin < b) {
        pieces.push_back(r);
        pieces.back().end = b;
      }
      if (r.end > e) {
        pieces.push_back(r);
        pieces.back().begin = e;
      }
      it = a.history.erase(it);
    }
    AccessRecord rec;
    rec.begin = b;
    rec.end = e;
    rec.write = x.write;
    rec.agent = agent;
    rec.stamp = stamp;
    rec.role = x.role;
    rec.op = info;
    pieces.push_back(std::move(rec));
    for (AccessRecord &p : pieces) {
      a.longest = std::max(a.longest, p.end - p.begin);
      uint64_t key = p.begin;
      a.history.emplace(key, std::move(p));
    }
    // Keep the scan window tight once the longest record is trimmed (the
    // arena's first memset covers it all).
    if (longestGone) {
      a.longest = 0;
      for (const auto &entry : a.history)
        a.longest = std::max(a.longest, entry.second.end - entry.second.begin);
    }
  }
  return ids;
}

void recheckLive(State &s, const Op &op) {
  for (size_t i = 0; i < op.accesses.size(); ++i) {
    uint64_t id = op.allocationIds[i];
    if (!id || s.allocationById.count(id))
      continue;
    const Access &x = op.accesses[i];
    const FreedBlock *f = findFreed(s, x.address);
    fail("use after free: " + describeOp(*op.info) + " runs after its '" +
         x.role + "' " + rangeText(x.address, x.bytes) + " (allocation #" +
         std::to_string(id) + ") was freed" +
         (f && f->id == id ? " by " + f->freedBy : std::string()));
  }
}

CUresult allocate(State &s, int device, uint64_t bytes, CUdeviceptr *out) {
  if (!bytes)
    return refuse(kInvalidValue, "cuMemAlloc: 0 bytes requested");
  uint64_t used = s.deviceUsed[static_cast<size_t>(device)];
  if (bytes > s.memoryBudget || used > s.memoryBudget - bytes)
    return refuse(kOutOfMemory,
                  "cuMemAlloc: " + std::to_string(bytes) +
                      " bytes do not fit on device " + std::to_string(device) +
                      ": " + std::to_string(used) + " of " +
                      std::to_string(s.memoryBudget) +
                      " bytes in use ($CLEAVE_CUDA_DOUBLE_MEMORY)");
  uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t mapped = (bytes + page - 1) / page * page;
  void *p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return refuse(kOutOfMemory, "cuMemAlloc: mmap of " +
                                    std::to_string(mapped) +
                                    " bytes failed: " + std::strerror(errno));
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.bytes = bytes;
  a.mapped = mapped;
  a.id = s.nextAllocationId++;
  a.device = device;
  s.deviceUsed[static_cast<size_t>(device)] += bytes;
  s.allocationById[a.id] = a.base;
  *out = a.base;
  s.allocations.emplace(a.base, std::move(a));
  return kSuccess;
}

/// Makes a freed block inaccessible (it keeps its address reserved).
static void retire(State &s, FreedBlock &f) {
  void *p = hostPointer(f.base);
  ::madvise(p, f.mapped, MADV_DONTNEED);
  ::mprotect(p, f.mapped, PROT_NONE);
  if (f.readable)
    s.quarantineBytes -= f.mapped;
  f.readable = false;
}

void release(State &s, CUdeviceptr ptr) {
  auto it = s.allocations.find(ptr);
  if (it == s.allocations.end()) {
    std::string why;
    if (const FreedBlock *f = findFreed(s, ptr))
      fail("cuMemFree: " + hex(ptr) + " was already freed (allocation #" +
           std::to_string(f->id) + " " + rangeText(f->base, f->bytes) +
           ", freed by " + f->freedBy + "): double free");
    if (locate(s, ptr, 1, &why))
      fail("cuMemFree: " + hex(ptr) +
           " is inside an allocation, not the base address cuMemAlloc "
           "returned");
    fail("cuMemFree: " + hex(ptr) + " is not an address cuMemAlloc returned");
  }
  Allocation &a = it->second;
  uint32_t host = hostAgent(s);
  const Clock &clock = s.agents[host].clock;
  for (const auto &entry : a.history) {
    const AccessRecord &r = entry.second;
    if (entryOf(clock, r.agent) < r.stamp)
      fail("cuMemFree: allocation #" + std::to_string(a.id) + " " +
           rangeText(a.base, a.bytes) + " freed on " + agentName(s, host) +
           " while " + describeRecord(r) +
           " may still use it; synchronize that stream "
           "(cuStreamSynchronize or an event) before freeing");
  }
  FreedBlock f;
  f.base = a.base;
  f.bytes = a.bytes;
  f.mapped = a.mapped;
  f.id = a.id;
  f.freedBy = "cuMemFree on " + agentName(s, host);
  if (!thread().command.empty())
    f.freedBy += " (plan command: " + thread().command + ")";
  s.deviceUsed[static_cast<size_t>(a.device)] -= a.bytes;
  s.allocationById.erase(a.id);
  s.allocations.erase(it);
  if (f.mapped <= kQuarantineBytes) {
    std::memset(hostPointer(f.base), 0xFF, f.bytes);
    s.quarantineBytes += f.mapped;
  } else {
    retire(s, f);
  }
  s.freed.push_back(std::move(f));
  for (FreedBlock &old : s.freed) {
    if (s.quarantineBytes <= kQuarantineBytes)
      break;
    if (old.readable)
      retire(s, old);
  }
  while (s.freed.size() > kMaxFreedBlocks) {
    FreedBlock &old = s.freed.front();
    if (old.readable)
      s.quarantineBytes -= old.mapped;
    ::munmap(hostPointer(old.base), old.mapped);
    s.freed.pop_front();
  }
}

} // namespace cleave::cudadouble::driver
