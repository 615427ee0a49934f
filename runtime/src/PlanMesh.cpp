//===- PlanMesh.cpp - Meshes, groups, shards and pipeline stages ----------===//
//
// How a plan's mesh maps ranks to coordinates, collective groups, tensor
// shards and, for a pipelined plan, stages. Shared by the compiler and the
// runtime (no dependency beyond the STL).
//
//===----------------------------------------------------------------------===//

#include "cleave/PlanFormat.h"

#include <cstring>

namespace cleave::plan {

int64_t Mesh::worldSize() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

std::vector<int64_t> Mesh::coordinates(int64_t rank) const {
  std::vector<int64_t> c(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    c[i] = rank % shape[i];
    rank /= shape[i];
  }
  return c;
}

std::string Mesh::str() const {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + axisNames[i] + "=" + std::to_string(shape[i]);
  return s;
}

int64_t pipelineAxis(const Mesh &mesh) {
  for (size_t i = 0; i < mesh.axisNames.size(); ++i)
    if (mesh.axisNames[i] == kPipelineAxis)
      return static_cast<int64_t>(i);
  return -1;
}

int64_t stageOfRank(const Plan &plan, int64_t rank) {
  int64_t axis = pipelineAxis(plan.mesh);
  if (!plan.isPipelined() || axis < 0)
    return 0;
  return plan.mesh.coordinates(rank)[axis];
}

const Plan &stagePlanFor(const Plan &plan, int64_t rank) {
  if (!plan.isPipelined())
    return plan;
  return plan.stages[stageOfRank(plan, rank)];
}

std::vector<std::string> pipelineSteps(const Plan &plan) {
  return getMetadata(plan, meta::kPipelineSteps);
}

bool withoutKernelCode(const Plan &plan) {
  return getMetadata(plan, meta::kKernelCode) == "none";
}

std::vector<int64_t> globalShape(const TensorInfo &t, const Mesh &mesh) {
  std::vector<int64_t> shape = t.shape;
  for (size_t d = 0; d < t.sharding.size() && d < shape.size(); ++d)
    for (uint32_t a : t.sharding[d])
      shape[d] *= mesh.shape[a];
  return shape;
}

std::vector<int64_t> shardOffsets(const TensorInfo &t, const Mesh &mesh,
                                  int64_t rank) {
  std::vector<int64_t> offsets(t.shape.size(), 0);
  if (t.sharding.empty())
    return offsets;
  std::vector<int64_t> coords = mesh.coordinates(rank);
  for (size_t d = 0; d < t.sharding.size() && d < offsets.size(); ++d) {
    int64_t index = 0;
    for (uint32_t a : t.sharding[d])
      index = index * mesh.shape[a] + coords[a];
    offsets[d] = index * t.shape[d];
  }
  return offsets;
}

void forEachShardRow(const std::vector<int64_t> &global,
                     const std::vector<int64_t> &local,
                     const std::vector<int64_t> &offsets,
                     const std::function<void(int64_t, int64_t, int64_t)> &fn) {
  size_t rank = local.size();
  int64_t total = 1;
  for (int64_t d : local)
    total *= d;
  if (total == 0)
    return;
  if (rank == 0) {
    fn(0, 0, 1);
    return;
  }
  // Runs along the last dimension; an odometer over the others.
  int64_t run = local[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  for (int64_t row = 0; row < total / run; ++row) {
    int64_t g = 0;
    for (size_t d = 0; d < rank; ++d)
      g = g * global[d] + offsets[d] + (d + 1 < rank ? idx[d] : 0);
    fn(g, row * run, run);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < local[d])
        break;
      idx[d] = 0;
    }
  }
}

void copyShard(const std::vector<int64_t> &global,
               const std::vector<int64_t> &local,
               const std::vector<int64_t> &offsets, size_t elem,
               uint8_t *globalData, uint8_t *localData, bool toGlobal) {
  forEachShardRow(global, local, offsets, [&](int64_t g, int64_t l, int64_t n) {
    uint8_t *gp = globalData + g * elem, *lp = localData + l * elem;
    if (toGlobal)
      std::memcpy(gp, lp, n * elem);
    else
      std::memcpy(lp, gp, n * elem);
  });
}

std::pair<int64_t, int64_t> splitColorKey(const Mesh &mesh,
                                          const std::vector<uint32_t> &axes,
                                          int64_t rank) {
  std::vector<int64_t> c = mesh.coordinates(rank);
  std::vector<bool> inGroup(mesh.shape.size(), false);
  for (uint32_t a : axes)
    inGroup[a] = true;
  int64_t color = 0;
  for (size_t d = 0; d < mesh.shape.size(); ++d)
    if (!inGroup[d])
      color = color * mesh.shape[d] + c[d];
  return {color, groupOf(mesh, axes, rank).index};
}

Group groupOf(const Mesh &mesh, const std::vector<uint32_t> &axes,
              int64_t rank) {
  Group g;
  std::vector<int64_t> coords = mesh.coordinates(rank);
  int64_t size = 1;
  for (uint32_t a : axes)
    size *= mesh.shape[a];
  g.ranks.resize(size);
  // Enumerate the group's coordinates on `axes` (last fastest) and map each
  // back to a rank, keeping rank's coordinates on the other axes.
  std::vector<int64_t> c = coords;
  for (int64_t i = 0; i < size; ++i) {
    int64_t rest = i;
    for (size_t k = axes.size(); k-- > 0;) {
      c[axes[k]] = rest % mesh.shape[axes[k]];
      rest /= mesh.shape[axes[k]];
    }
    int64_t r = 0;
    for (size_t d = 0; d < mesh.shape.size(); ++d)
      r = r * mesh.shape[d] + c[d];
    g.ranks[i] = r;
    if (r == rank)
      g.index = i;
  }
  return g;
}

} // namespace cleave::plan
