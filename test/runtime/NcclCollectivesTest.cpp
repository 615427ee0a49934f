//===- NcclCollectivesTest.cpp - Collectives decomposed into NCCL calls ---===//
//
// decomposeCollective without a device: the steps of every rank of a group
// run on host buffers through a small simulator of NCCL's semantics (a
// collective needs every rank at the same call, grouped sends and receives
// match by peer), and each rank's result must equal the CPU communicators'
// reference (computeCollective). Also the axis lists that decide the NCCL
// communicators of a plan file.
//
//===----------------------------------------------------------------------===//

#include "NcclCollectives.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

using K = NcclStep::Kind;

void *host(CUdeviceptr p) { return reinterpret_cast<void *>(p); }
CUdeviceptr dev(const void *p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

/// dst[i] = op over ranks of srcs[r][i] for f32 and u8 (the types the tests
/// reduce in).
void reduce(const NcclStep &s, const std::vector<const void *> &srcs, void *dst,
            size_t count, size_t offset) {
  size_t g = srcs.size();
  for (size_t i = 0; i < count; ++i) {
    if (s.type == ncclFloat32) {
      auto at = [&](size_t r) {
        return static_cast<const float *>(srcs[r])[offset + i];
      };
      float acc = at(0);
      for (size_t r = 1; r < g; ++r) {
        float v = at(r);
        switch (s.op) {
        case ncclSum:
        case ncclAvg:
          acc += v;
          break;
        case ncclProd:
          acc *= v;
          break;
        case ncclMax:
          acc = std::max(acc, v);
          break;
        case ncclMin:
          acc = std::min(acc, v);
          break;
        }
      }
      if (s.op == ncclAvg)
        acc /= float(g);
      static_cast<float *>(dst)[i] = acc;
    } else {
      ASSERT_EQ(s.type, ncclUint8);
      uint8_t acc = static_cast<const uint8_t *>(srcs[0])[offset + i];
      for (size_t r = 1; r < g; ++r) {
        uint8_t v = static_cast<const uint8_t *>(srcs[r])[offset + i];
        ASSERT_TRUE(s.op == ncclMax || s.op == ncclMin);
        acc = s.op == ncclMax ? std::max(acc, v) : std::min(acc, v);
      }
      static_cast<uint8_t *>(dst)[i] = acc;
    }
  }
}

/// Runs every rank's steps to the end, as NCCL would.
void simulate(std::vector<std::vector<NcclStep>> &steps) {
  size_t g = steps.size();
  std::vector<size_t> pc(g, 0);
  for (int guard = 0; guard < 10000; ++guard) {
    // Local steps first.
    for (size_t r = 0; r < g; ++r)
      while (pc[r] < steps[r].size() && !steps[r][pc[r]].isNccl()) {
        const NcclStep &s = steps[r][pc[r]++];
        if (s.kind == K::Copy)
          std::memmove(host(s.dst), host(s.src), s.bytes);
        else
          std::memset(host(s.dst), 0, s.bytes);
      }
    bool done = true;
    for (size_t r = 0; r < g; ++r)
      done &= pc[r] == steps[r].size();
    if (done)
      return;
    // Point to point: every rank at a group or a lone send/recv.
    std::vector<size_t> at;
    for (size_t r = 0; r < g; ++r)
      if (pc[r] < steps[r].size())
        at.push_back(r);
    K kind = steps[at[0]][pc[at[0]]].kind;
    if (kind == K::GroupStart || kind == K::Send || kind == K::Recv) {
      struct P2P {
        size_t rank;
        NcclStep step;
      };
      std::vector<P2P> sends, recvs;
      for (size_t r : at) {
        const NcclStep &first = steps[r][pc[r]];
        ASSERT_TRUE(first.kind == K::GroupStart || first.kind == K::Send ||
                    first.kind == K::Recv)
            << "rank " << r << " is at " << describeStep(first);
        if (first.kind != K::GroupStart) {
          (first.kind == K::Send ? sends : recvs).push_back({r, first});
          ++pc[r];
          continue;
        }
        ++pc[r];
        while (steps[r][pc[r]].kind != K::GroupEnd) {
          const NcclStep &s = steps[r][pc[r]++];
          ASSERT_TRUE(s.kind == K::Send || s.kind == K::Recv);
          (s.kind == K::Send ? sends : recvs).push_back({r, s});
        }
        ++pc[r];
      }
      for (const P2P &recv : recvs) {
        bool matched = false;
        for (P2P &send : sends)
          if (send.rank == size_t(recv.step.peer) &&
              size_t(send.step.peer) == recv.rank) {
            ASSERT_EQ(send.step.count, recv.step.count);
            ASSERT_EQ(send.step.type, recv.step.type);
            std::memcpy(host(recv.step.dst), host(send.step.src),
                        send.step.count * ncclTypeSize(send.step.type));
            send.step.peer = -1; // consumed
            matched = true;
            break;
          }
        ASSERT_TRUE(matched) << "rank " << recv.rank << ": "
                             << describeStep(recv.step) << " has no send";
      }
      for (const P2P &send : sends)
        ASSERT_EQ(send.step.peer, -1)
            << "rank " << send.rank << ": " << describeStep(send.step)
            << " was never received";
      continue;
    }
    // A collective: every rank at the same call.
    ASSERT_EQ(at.size(), g) << "a rank finished before a collective";
    std::vector<NcclStep> calls;
    for (size_t r = 0; r < g; ++r) {
      calls.push_back(steps[r][pc[r]++]);
      ASSERT_EQ(calls[r].kind, kind) << "rank " << r;
      ASSERT_EQ(calls[r].count, calls[0].count) << "rank " << r;
    }
    size_t elem = ncclTypeSize(calls[0].type), n = calls[0].count;
    std::vector<std::vector<uint8_t>> out(g);
    std::vector<const void *> srcs;
    for (const NcclStep &c : calls)
      srcs.push_back(host(c.src));
    for (size_t r = 0; r < g; ++r) {
      const NcclStep &c = calls[r];
      switch (kind) {
      case K::AllReduce:
        out[r].resize(n * elem);
        reduce(c, srcs, out[r].data(), n, 0);
        break;
      case K::ReduceScatter:
        out[r].resize(n * elem);
        reduce(c, srcs, out[r].data(), n, r * n);
        break;
      case K::AllGather:
        out[r].resize(g * n * elem);
        for (size_t k = 0; k < g; ++k)
          std::memcpy(out[r].data() + k * n * elem, srcs[k], n * elem);
        break;
      case K::Broadcast:
        out[r].resize(n * elem);
        std::memcpy(out[r].data(), srcs[size_t(c.peer)], n * elem);
        break;
      default:
        FAIL() << describeStep(c);
      }
    }
    for (size_t r = 0; r < g; ++r)
      std::memcpy(host(calls[r].dst), out[r].data(), out[r].size());
  }
  FAIL() << "the simulation did not finish";
}

/// Runs `c` on a group of `g` ranks, operand of rank r element i =
/// 100 * r + i (as floats) or its low bit (bools), through the decomposition
/// and through computeCollective; the results must agree. `inPlace`: the
/// result overwrites the operand. Returns rank `show`'s steps.
std::vector<NcclStep> check(const CollectiveInfo &c, int64_t g, bool inPlace,
                            int64_t show = 0) {
  size_t elem = dtypeSize(c.dtype);
  size_t in = size_t(c.count) * elem;
  size_t out = collectiveResultBytes(c, g);
  if (c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv)
    out = in;
  std::vector<std::vector<uint8_t>> operand(g), result(g), staging(g);
  std::vector<std::vector<NcclStep>> steps(g);
  std::vector<std::vector<uint8_t>> expected(g);
  std::vector<const void *> srcs(g);
  for (int64_t r = 0; r < g; ++r) {
    operand[r].assign(std::max(in, out) + 16, 0xee);
    for (int64_t i = 0; i < c.count; ++i) {
      if (c.dtype == DType::Bool) {
        operand[r][i] = uint8_t(((r + i) % 3) == 0);
      } else {
        float v = float(100 * r + i);
        std::memcpy(operand[r].data() + i * 4, &v, 4);
      }
    }
    srcs[r] = operand[r].data();
  }
  for (int64_t r = 0; r < g; ++r) {
    expected[r].assign(out, 0);
    if (c.op != CollectiveOp::Send && c.op != CollectiveOp::Recv)
      computeCollective(c, r, g, srcs.data(), expected[r].data());
  }
  for (int64_t r = 0; r < g; ++r) {
    result[r].assign(out + 16, 0xee);
    CUdeviceptr src = dev(operand[r].data());
    CUdeviceptr dst = inPlace ? src : dev(result[r].data());
    CollectiveInfo mine = c;
    if (c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv)
      mine.op = r == c.root ? CollectiveOp::Send : CollectiveOp::Recv;
    uint64_t need = 0;
    EXPECT_EQ(decomposeCollective(mine, g, r, src, dst, 0, &steps[r], &need),
              nullptr);
    staging[r].assign(need + 1, 0xcd);
    EXPECT_EQ(decomposeCollective(mine, g, r, src, dst, dev(staging[r].data()),
                                  &steps[r], &need),
              nullptr);
    if (c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv) {
      if (r != c.root && r != c.peer)
        steps[r].clear();
      if (r == c.root) // The sender's expectation: its buffer unchanged.
        expected[r].assign(operand[r].begin(), operand[r].begin() + in);
      if (r == c.peer)
        expected[r].assign(operand[c.root].begin(),
                           operand[c.root].begin() + in);
    }
  }
  simulate(steps);
  for (int64_t r = 0; r < g; ++r) {
    if ((c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv) &&
        r != c.root && r != c.peer)
      continue;
    const uint8_t *got = inPlace || (c.op == CollectiveOp::Send && r == c.root)
                             ? operand[r].data()
                             : result[r].data();
    EXPECT_EQ(std::vector<uint8_t>(got, got + out), expected[r])
        << describe(c) << " rank " << r << " of " << g
        << (inPlace ? " (in place)" : "");
    if (!inPlace && c.op != CollectiveOp::Send)
      EXPECT_EQ(result[r][out], 0xee) << "wrote past the result, rank " << r;
  }
  return steps[show];
}

CollectiveInfo info(CollectiveOp op, int64_t count, int64_t splitOuter = 1,
                    int64_t splitInner = 0, int64_t concatOuter = 1,
                    int64_t concatInner = 0) {
  CollectiveInfo c;
  c.op = op;
  c.dtype = DType::F32;
  c.axes = {0};
  c.count = count;
  c.splitOuter = splitOuter;
  c.splitInner = splitInner;
  c.concatOuter = concatOuter;
  c.concatInner = concatInner;
  c.id = 7;
  c.source = "node /n";
  return c;
}

std::vector<std::string> describeAll(const std::vector<NcclStep> &steps) {
  std::vector<std::string> out;
  for (const NcclStep &s : steps)
    out.push_back(describeStep(s));
  return out;
}

} // namespace

TEST(NcclCollectives, AllReduceIsOneCall) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max,
                      ReduceOp::Min, ReduceOp::Prod}) {
    CollectiveInfo c = info(CollectiveOp::AllReduce, 6);
    c.reduce = op;
    for (bool inPlace : {false, true}) {
      std::vector<NcclStep> steps = check(c, 4, inPlace);
      ASSERT_EQ(steps.size(), 1u);
      EXPECT_EQ(steps[0].kind, K::AllReduce);
      EXPECT_EQ(steps[0].count, 6u);
      EXPECT_EQ(steps[0].type, ncclFloat32);
      EXPECT_EQ(steps[0].op, ncclRedOpOf(op));
    }
  }
  EXPECT_EQ(ncclRedOpOf(ReduceOp::Avg), ncclAvg);
}

TEST(NcclCollectives, BoolReductionsAreByteMaxAndMin) {
  CollectiveInfo c = info(CollectiveOp::AllReduce, 5);
  c.dtype = DType::Bool;
  c.reduce = ReduceOp::Sum;
  std::vector<NcclStep> steps = check(c, 3, false);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].type, ncclUint8);
  EXPECT_EQ(steps[0].op, ncclMax);
  c.reduce = ReduceOp::Prod;
  steps = check(c, 3, false);
  EXPECT_EQ(steps[0].op, ncclMin);
}

TEST(NcclCollectives, ReductionWithoutAnNcclTypeNamesTheCollective) {
  CollectiveInfo c = info(CollectiveOp::AllReduce, 4);
  c.dtype = DType::I16;
  std::vector<NcclStep> steps;
  uint64_t need = 0;
  cleave_rt_status s = decomposeCollective(c, 2, 0, 16, 64, 0, &steps, &need);
  ASSERT_NE(s, nullptr);
  std::string message = cleave_rt_status_message(s);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_INVALID_ARGUMENT);
  cleave_rt_status_free(s);
  EXPECT_NE(message.find("all_reduce #7 (node /n) cannot run through NCCL: "
                         "NCCL has no element type for int16"),
            std::string::npos)
      << message;
  // Moving i16 needs no arithmetic: a broadcast goes as bytes.
  c.op = CollectiveOp::Broadcast;
  ASSERT_EQ(decomposeCollective(c, 2, 0, 16, 64, 0, &steps, &need), nullptr);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].type, ncclUint8);
  EXPECT_EQ(steps[0].count, 8u);
}

TEST(NcclCollectives, AllGatherLaysOutOuterBlocksThroughStaging) {
  // Outer 1: NCCL's own layout.
  std::vector<NcclStep> steps =
      check(info(CollectiveOp::AllGather, 6, 1, 6), 4, false);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, K::AllGather);
  // [2, 3] per rank -> [2, G, 3]: gather into staging, then G * 2 copies.
  CollectiveInfo c = info(CollectiveOp::AllGather, 6, 2, 3);
  steps = check(c, 4, false);
  ASSERT_EQ(steps.size(), 1u + 8u);
  EXPECT_EQ(steps[0].kind, K::AllGather);
  for (size_t i = 1; i < steps.size(); ++i)
    EXPECT_EQ(steps[i].kind, K::Copy) << describeStep(steps[i]);
  check(c, 4, true);
  check(info(CollectiveOp::AllGather, 6, 1, 6), 3, true);
  // Exactly: rank 1 of 2, src 0x100, dst 0x200, staging 0x1000.
  std::vector<NcclStep> exact;
  uint64_t need = 0;
  ASSERT_EQ(decomposeCollective(info(CollectiveOp::AllGather, 4, 2, 2), 2, 1,
                                0x100, 0x200, 0x1000, &exact, &need),
            nullptr);
  EXPECT_EQ(need, 32u);
  EXPECT_EQ(
      describeAll(exact),
      (std::vector<std::string>{
          "ncclAllGather(0x100 -> 0x1000, 4 x ncclFloat32)",
          "copy 0x200 <- 0x1000 (8 bytes)", "copy 0x208 <- 0x1010 (8 bytes)",
          "copy 0x210 <- 0x1008 (8 bytes)", "copy 0x218 <- 0x1018 (8 bytes)"}));
}

TEST(NcclCollectives, ReduceScatterPacksRankBlocksFirst) {
  CollectiveInfo c = info(CollectiveOp::ReduceScatter, 12, 1, 3);
  std::vector<NcclStep> steps = check(c, 4, false);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, K::ReduceScatter);
  EXPECT_EQ(steps[0].count, 3u);
  check(c, 4, true);
  c = info(CollectiveOp::ReduceScatter, 24, 2, 3);
  c.reduce = ReduceOp::Avg;
  steps = check(c, 4, false);
  EXPECT_EQ(steps.back().kind, K::ReduceScatter);
  EXPECT_EQ(steps.back().count, 6u);
  check(c, 4, true);
}

TEST(NcclCollectives, AllSliceIsLocal) {
  CollectiveInfo c = info(CollectiveOp::AllSlice, 24, 2, 3);
  for (bool inPlace : {false, true})
    for (int64_t show = 0; show < 4; ++show) {
      std::vector<NcclStep> steps = check(c, 4, inPlace, show);
      for (const NcclStep &s : steps)
        EXPECT_FALSE(s.isNccl()) << describeStep(s);
    }
}

TEST(NcclCollectives, AllToAllIsGroupedSendsAndReceives) {
  // Contiguous both ways: no staging, G - 1 sends and receives.
  CollectiveInfo c = info(CollectiveOp::AllToAll, 8, 1, 2, 1, 2);
  std::vector<NcclStep> steps = check(c, 4, false, 2);
  int sends = 0, recvs = 0;
  for (const NcclStep &s : steps) {
    sends += s.kind == K::Send;
    recvs += s.kind == K::Recv;
  }
  EXPECT_EQ(sends, 3);
  EXPECT_EQ(recvs, 3);
  EXPECT_EQ(steps.front().kind, K::Copy); // This rank's own chunk.
  // Split [2, G, 3] and concat [3, G, 2] (a transpose of the sharded dim).
  c = info(CollectiveOp::AllToAll, 24, 2, 3, 3, 2);
  for (bool inPlace : {false, true})
    check(c, 4, inPlace);
  c = info(CollectiveOp::AllToAll, 24, 1, 6, 3, 2);
  check(c, 4, false);
  check(c, 4, true);
  c = info(CollectiveOp::AllToAll, 24, 2, 3, 1, 6);
  check(c, 4, false);
  check(c, 4, true);
  c = info(CollectiveOp::AllToAll, 12, 2, 3, 3, 2);
  check(c, 2, true);
}

TEST(NcclCollectives, BroadcastFromTheRoot) {
  CollectiveInfo c = info(CollectiveOp::Broadcast, 5);
  c.root = 2;
  std::vector<NcclStep> steps = check(c, 4, false);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].peer, 2);
  check(c, 4, true);
}

TEST(NcclCollectives, PermuteSendsReceivesAndZeroes) {
  CollectiveInfo c = info(CollectiveOp::Permute, 5);
  c.pairs = {0, 1, 1, 2, 2, 3, 3, 0}; // A ring.
  check(c, 4, false);
  check(c, 4, true);
  // Rank 0 keeps its value, 1 -> 2; ranks 1 and 3 get zeros.
  c.pairs = {0, 0, 1, 2};
  std::vector<NcclStep> steps = check(c, 4, false, 3);
  EXPECT_EQ(describeAll(steps).size(), 1u);
  EXPECT_EQ(steps[0].kind, K::Zero);
  check(c, 4, true);
}

TEST(NcclCollectives, SendAndReceive) {
  CollectiveInfo c = info(CollectiveOp::Send, 6);
  c.root = 1;
  c.peer = 3;
  std::vector<NcclStep> steps = check(c, 4, false, 1);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, K::Send);
  EXPECT_EQ(steps[0].peer, 3);
  steps = check(c, 4, false, 3);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, K::Recv);
  EXPECT_EQ(steps[0].peer, 1);
}

TEST(NcclCollectives, GroupsOfOneRankCopyLocally) {
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather,
                          CollectiveOp::ReduceScatter, CollectiveOp::AllToAll,
                          CollectiveOp::Broadcast, CollectiveOp::AllSlice}) {
    CollectiveInfo c = info(op, 6, 2, 3, 3, 2);
    std::vector<NcclStep> steps = check(c, 1, false);
    ASSERT_EQ(steps.size(), 1u) << collectiveOpName(op);
    EXPECT_EQ(steps[0].kind, K::Copy);
    EXPECT_TRUE(check(c, 1, true).empty()) << collectiveOpName(op);
  }
  CollectiveInfo c = info(CollectiveOp::Permute, 3);
  std::vector<NcclStep> steps = check(c, 1, false);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, K::Zero);
}

TEST(NcclCollectives, AxisListsCoverStagesAndEntriesInOrder) {
  Plan file;
  file.mesh = {{"dp", "pp", "tp"}, {2, 2, 1}};
  auto collective = [](std::vector<uint32_t> axes) {
    Command c;
    c.kind = CommandKind::Collective;
    c.collective.axes = std::move(axes);
    return c;
  };
  Plan stage0, stage1, entry;
  stage0.commands = {collective({1}), collective({0})};
  stage1.commands = {collective({1}), collective({2})}; // tp: one rank
  stage1.initCommands = {collective({0, 1})};
  entry.commands = {collective({1, 0})};
  file.stages = {stage0, stage1};
  file.entries = {entry};
  std::vector<std::vector<uint32_t>> lists = collectiveAxisLists(file);
  EXPECT_EQ(lists,
            (std::vector<std::vector<uint32_t>>{{0}, {0, 1}, {1}, {1, 0}}));
  // Every rank splits with the group's color and its index as the key.
  for (int64_t rank = 0; rank < 4; ++rank) {
    auto [color, key] = splitColorKey(file.mesh, {1}, rank);
    Group g = groupOf(file.mesh, {1}, rank);
    EXPECT_EQ(key, g.index);
    EXPECT_EQ(color, rank / 2);
  }
}
