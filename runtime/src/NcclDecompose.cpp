//===- NcclDecompose.cpp - Collectives as NCCL calls and copies -----------===//
//
// decomposeCollective and the axis lists of a plan file (NcclCollectives.h):
// pure functions, tested without a device in NcclCollectivesTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "NcclCollectives.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace cleave::rt::cuda {

using namespace plan;
//===----------------------------------------------------------------------===//
// Decomposition
//===----------------------------------------------------------------------===//

static std::string hex(CUdeviceptr p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", p);
  return buf;
}

static const char *typeName(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
    return "ncclInt8";
  case ncclUint8:
    return "ncclUint8";
  case ncclInt32:
    return "ncclInt32";
  case ncclUint32:
    return "ncclUint32";
  case ncclInt64:
    return "ncclInt64";
  case ncclUint64:
    return "ncclUint64";
  case ncclFloat16:
    return "ncclFloat16";
  case ncclFloat32:
    return "ncclFloat32";
  case ncclFloat64:
    return "ncclFloat64";
  case ncclBfloat16:
    return "ncclBfloat16";
  }
  return "ncclDataType?";
}

static const char *opName(ncclRedOp_t op) {
  switch (op) {
  case ncclSum:
    return "ncclSum";
  case ncclProd:
    return "ncclProd";
  case ncclMax:
    return "ncclMax";
  case ncclMin:
    return "ncclMin";
  case ncclAvg:
    return "ncclAvg";
  }
  return "ncclRedOp?";
}

std::string describeStep(const NcclStep &s) {
  using K = NcclStep::Kind;
  std::string n = std::to_string(s.count) + " x " + typeName(s.type);
  switch (s.kind) {
  case K::Copy:
    return "copy " + hex(s.dst) + " <- " + hex(s.src) + " (" +
           std::to_string(s.bytes) + " bytes)";
  case K::Zero:
    return "zero " + hex(s.dst) + " (" + std::to_string(s.bytes) + " bytes)";
  case K::AllReduce:
    return std::string("ncclAllReduce(") + hex(s.src) + " -> " + hex(s.dst) +
           ", " + n + ", " + opName(s.op) + ")";
  case K::AllGather:
    return "ncclAllGather(" + hex(s.src) + " -> " + hex(s.dst) + ", " + n + ")";
  case K::ReduceScatter:
    return std::string("ncclReduceScatter(") + hex(s.src) + " -> " +
           hex(s.dst) + ", " + n + ", " + opName(s.op) + ")";
  case K::Broadcast:
    return "ncclBroadcast(" + hex(s.src) + " -> " + hex(s.dst) + ", " + n +
           ", root " + std::to_string(s.peer) + ")";
  case K::GroupStart:
    return "ncclGroupStart()";
  case K::GroupEnd:
    return "ncclGroupEnd()";
  case K::Send:
    return "ncclSend(" + hex(s.src) + ", " + n + ", to " +
           std::to_string(s.peer) + ")";
  case K::Recv:
    return "ncclRecv(" + hex(s.dst) + ", " + n + ", from " +
           std::to_string(s.peer) + ")";
  }
  return "?";
}

namespace {
/// Builds the steps of one collective.
struct Decomposer {
  std::vector<NcclStep> *steps;
  using K = NcclStep::Kind;

  void copy(CUdeviceptr dst, CUdeviceptr src, uint64_t bytes) {
    if (bytes && dst != src)
      steps->push_back({K::Copy, src, dst, bytes});
  }
  void zero(CUdeviceptr dst, uint64_t bytes) {
    if (bytes)
      steps->push_back({K::Zero, 0, dst, bytes});
  }
  void call(K kind, CUdeviceptr src, CUdeviceptr dst, size_t count,
            ncclDataType_t type, ncclRedOp_t op = ncclSum, int peer = 0) {
    NcclStep s;
    s.kind = kind;
    s.src = src;
    s.dst = dst;
    s.count = count;
    s.type = type;
    s.op = op;
    s.peer = peer;
    steps->push_back(s);
  }
  void group(K kind) { call(kind, 0, 0, 0, ncclUint8); }
};

/// The NCCL type that moves `count` elements of `dtype` unchanged: its own,
/// or bytes for the types NCCL lacks.
void moveType(DType dtype, int64_t count, ncclDataType_t *type, size_t *n) {
  if (cleave_rt_status s = ncclDataTypeOf(dtype, type)) {
    cleave_rt_status_free(s);
    *type = ncclUint8;
    *n = static_cast<size_t>(count) * dtypeSize(dtype);
    return;
  }
  *n = static_cast<size_t>(count);
}

/// The NCCL type and reduction of a reduce-scatter or all-reduce of `c`.
/// Bools (0 or 1 in a byte) reduce as bytes: sum and max are "any", prod and
/// min "all".
cleave_rt_status reduceType(const CollectiveInfo &c, ncclDataType_t *type,
                            ncclRedOp_t *op) {
  if (c.dtype == DType::Bool) {
    *type = ncclUint8;
    *op = c.reduce == ReduceOp::Sum || c.reduce == ReduceOp::Max ? ncclMax
                                                                 : ncclMin;
    return nullptr;
  }
  if (cleave_rt_status s = ncclDataTypeOf(c.dtype, type)) {
    std::string why = cleave_rt_status_message(s);
    cleave_rt_status_free(s);
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      describe(c) + " cannot run through NCCL: " + why);
  }
  *op = ncclRedOpOf(c.reduce);
  return nullptr;
}
} // namespace

cleave_rt_status decomposeCollective(const CollectiveInfo &c, int64_t g,
                                     int64_t index, CUdeviceptr src,
                                     CUdeviceptr dst, CUdeviceptr staging,
                                     std::vector<NcclStep> *steps,
                                     uint64_t *stagingBytes) {
  using K = NcclStep::Kind;
  steps->clear();
  *stagingBytes = 0;
  Decomposer d{steps};
  const uint64_t elem = dtypeSize(c.dtype);
  const uint64_t in = static_cast<uint64_t>(c.count) * elem;
  const bool inPlace = src == dst;
  if (g <= 1) {
    // One rank: every collective is the identity on its views (a
    // permutation keeps its operand only if it maps 0 to 0).
    switch (c.op) {
    case CollectiveOp::Send:
    case CollectiveOp::Recv:
      return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                        describe(c) + " has no peer in a group of one rank");
    case CollectiveOp::Permute: {
      bool kept = false;
      for (size_t i = 0; i + 1 < c.pairs.size(); i += 2)
        kept |= c.pairs[i] == 0 && c.pairs[i + 1] == 0;
      if (kept)
        d.copy(dst, src, in);
      else
        d.zero(dst, in);
      return nullptr;
    }
    default:
      d.copy(dst, src, collectiveResultBytes(c, 1));
      return nullptr;
    }
  }

  switch (c.op) {
  case CollectiveOp::AllReduce: {
    ncclDataType_t type;
    ncclRedOp_t op;
    CLEAVE_RT_RETURN_IF_ERROR(reduceType(c, &type, &op));
    d.call(K::AllReduce, src, dst, static_cast<size_t>(c.count), type, op);
    return nullptr;
  }
  case CollectiveOp::Broadcast: {
    ncclDataType_t type;
    size_t n;
    moveType(c.dtype, c.count, &type, &n);
    d.call(K::Broadcast, src, dst, n, type, ncclSum, static_cast<int>(c.root));
    return nullptr;
  }
  case CollectiveOp::AllGather: {
    // Operand [outer, inner] -> result [outer, G, inner]; NCCL gathers
    // [G, outer * inner]. In place, the operand is the result's start,
    // which NCCL would overwrite before sending it: send a copy.
    ncclDataType_t type;
    size_t n;
    moveType(c.dtype, c.count, &type, &n);
    CUdeviceptr send = src, recvStage = staging;
    if (inPlace) {
      d.copy(staging, src, in);
      send = staging;
      recvStage = staging + in;
      *stagingBytes = in;
    }
    if (c.splitOuter == 1) {
      d.call(K::AllGather, send, dst, n, type);
      return nullptr;
    }
    d.call(K::AllGather, send, recvStage, n, type);
    *stagingBytes += in * static_cast<uint64_t>(g);
    const uint64_t run = static_cast<uint64_t>(c.splitInner) * elem;
    for (int64_t o = 0; o < c.splitOuter; ++o)
      for (int64_t k = 0; k < g; ++k)
        d.copy(dst + (o * g + k) * run, recvStage + k * in + o * run, run);
    return nullptr;
  }
  case CollectiveOp::ReduceScatter: {
    // Operand [outer, G, inner] -> result [outer, inner]; NCCL scatters
    // [G, outer * inner]. Laid out (or, in place, copied) into the staging
    // buffer first unless outer is 1.
    ncclDataType_t type;
    ncclRedOp_t op;
    CLEAVE_RT_RETURN_IF_ERROR(reduceType(c, &type, &op));
    const size_t recvCount = static_cast<size_t>(c.count / g);
    if (c.splitOuter == 1 && !inPlace) {
      d.call(K::ReduceScatter, src, dst, recvCount, type, op);
      return nullptr;
    }
    const uint64_t run = static_cast<uint64_t>(c.splitInner) * elem;
    if (c.splitOuter == 1) {
      d.copy(staging, src, in);
    } else {
      for (int64_t k = 0; k < g; ++k)
        for (int64_t o = 0; o < c.splitOuter; ++o)
          d.copy(staging + (k * c.splitOuter + o) * run,
                 src + (o * g + k) * run, run);
    }
    *stagingBytes = in;
    d.call(K::ReduceScatter, staging, dst, recvCount, type, op);
    return nullptr;
  }
  case CollectiveOp::AllSlice: {
    // Local: this rank's [:, index, :]. In place, block o moves down to o,
    // never over a block a later o reads.
    const uint64_t run = static_cast<uint64_t>(c.splitInner) * elem;
    for (int64_t o = 0; o < c.splitOuter; ++o)
      d.copy(dst + o * run, src + (o * g + index) * run, run);
    return nullptr;
  }
  case CollectiveOp::AllToAll: {
    // Member k gets this rank's [:, k, :] of the split view (a chunk of
    // count / G elements); the chunk from member k lands at [:, k, :] of
    // the concat view. Views with outer 1 are contiguous per member.
    const uint64_t chunk = in / static_cast<uint64_t>(g);
    const uint64_t sRun = static_cast<uint64_t>(c.splitInner) * elem;
    const uint64_t cRun = static_cast<uint64_t>(c.concatInner) * elem;
    ncclDataType_t type;
    size_t n;
    moveType(c.dtype, c.count / g, &type, &n);
    const bool packSend = c.splitOuter != 1 || inPlace;
    const bool unpackRecv = c.concatOuter != 1;
    const CUdeviceptr sendStage = staging,
                      recvStage = staging + (packSend ? in : 0);
    if (packSend) {
      for (int64_t k = 0; k < g; ++k)
        for (int64_t o = 0; o < c.splitOuter; ++o)
          d.copy(sendStage + k * chunk + o * sRun, src + (o * g + k) * sRun,
                 sRun);
      *stagingBytes += in;
    }
    if (unpackRecv)
      *stagingBytes += in;
    auto sendBuf = [&](int64_t k) {
      return packSend ? sendStage + k * chunk : src + k * chunk;
    };
    auto recvBuf = [&](int64_t k) {
      return unpackRecv ? recvStage + k * chunk : dst + k * chunk;
    };
    d.copy(recvBuf(index), sendBuf(index), chunk);
    d.group(K::GroupStart);
    for (int64_t k = 0; k < g; ++k) {
      if (k == index)
        continue;
      d.call(K::Send, sendBuf(k), 0, n, type, ncclSum, static_cast<int>(k));
      d.call(K::Recv, 0, recvBuf(k), n, type, ncclSum, static_cast<int>(k));
    }
    d.group(K::GroupEnd);
    if (unpackRecv)
      for (int64_t k = 0; k < g; ++k)
        for (int64_t o = 0; o < c.concatOuter; ++o)
          d.copy(dst + (o * g + k) * cRun, recvStage + k * chunk + o * cRun,
                 cRun);
    return nullptr;
  }
  case CollectiveOp::Permute: {
    // Send to the member this rank maps to, receive from the one mapped to
    // it; a member nobody maps to gets zeros (after its send left).
    int64_t to = -1, from = -1;
    for (size_t i = 0; i + 1 < c.pairs.size(); i += 2) {
      if (c.pairs[i] == index)
        to = c.pairs[i + 1];
      if (c.pairs[i + 1] == index)
        from = c.pairs[i];
    }
    ncclDataType_t type;
    size_t n;
    moveType(c.dtype, c.count, &type, &n);
    bool sends = to >= 0 && to != index, receives = from >= 0 && from != index;
    // In place with both a send and a receive, the message lands in the
    // staging buffer first.
    bool staged = inPlace && sends && receives;
    if (sends || receives) {
      d.group(K::GroupStart);
      if (sends)
        d.call(K::Send, src, 0, n, type, ncclSum, static_cast<int>(to));
      if (receives)
        d.call(K::Recv, 0, staged ? staging : dst, n, type, ncclSum,
               static_cast<int>(from));
      d.group(K::GroupEnd);
    }
    if (staged) {
      d.copy(dst, staging, in);
      *stagingBytes = in;
    }
    if (from == index)
      d.copy(dst, src, in);
    else if (from < 0)
      d.zero(dst, in);
    return nullptr;
  }
  case CollectiveOp::Send: {
    ncclDataType_t type;
    size_t n;
    moveType(c.dtype, c.count, &type, &n);
    d.call(K::Send, src, 0, n, type, ncclSum, static_cast<int>(c.peer));
    return nullptr;
  }
  case CollectiveOp::Recv: {
    ncclDataType_t type;
    size_t n;
    moveType(c.dtype, c.count, &type, &n);
    d.call(K::Recv, 0, dst, n, type, ncclSum, static_cast<int>(c.root));
    return nullptr;
  }
  }
  return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                    describe(c) + ": unknown collective operation");
}

/// The distinct axis lists (groups of more than one rank) of the
/// collectives of `file` that `pick` selects, in sorted order.
template <typename Pick>
static std::vector<std::vector<uint32_t>> axisListsOf(const Plan &file,
                                                      Pick pick) {
  std::set<std::vector<uint32_t>> lists;
  auto add = [&](const Plan &p) {
    for (const auto *list : {&p.commands, &p.initCommands})
      for (const Command &c : *list) {
        if (c.kind != CommandKind::Collective || !pick(c.collective))
          continue;
        int64_t g = 1;
        for (uint32_t a : c.collective.axes)
          g *= a < file.mesh.shape.size() ? file.mesh.shape[a] : 1;
        if (g > 1)
          lists.insert(c.collective.axes);
      }
  };
  add(file);
  for (const Plan &stage : file.stages)
    add(stage);
  for (const Plan &entry : file.entries)
    add(entry);
  return {lists.begin(), lists.end()};
}

std::vector<std::vector<uint32_t>> collectiveAxisLists(const Plan &file) {
  return axisListsOf(file, [](const CollectiveInfo &) { return true; });
}

std::vector<std::vector<uint32_t>> pointToPointAxisLists(const Plan &file) {
  return axisListsOf(file, [](const CollectiveInfo &c) {
    return c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv;
  });
}

} // namespace cleave::rt::cuda
