//===- LaunchUtils.cpp - Helpers of the CUDA launch mapping ---------------===//
//
// Iteration spaces of scf.parallel loops, delinearized thread indices, the
// 16-byte vector accesses of elementwise launches, and the views and
// constants cloned into launches; shared by `--cleave-cuda-rows-to-launch`,
// `--cleave-cuda-parallel-to-launch` and `--cleave-cuda-sink-into-launches`.
//
//===----------------------------------------------------------------------===//

#include "LaunchUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;

//===----------------------------------------------------------------------===//
// Iteration spaces
//===----------------------------------------------------------------------===//

SmallVector<Value> cleave::delinearizeIndex(OpBuilder &b, Location loc,
                                            Value linear, ArrayRef<int64_t> lbs,
                                            ArrayRef<int64_t> extents,
                                            ArrayRef<int64_t> steps) {
  SmallVector<Value> ivs(extents.size());
  Value rem = linear;
  for (int64_t d = extents.size() - 1; d >= 0; --d) {
    Value idx = rem;
    if (d > 0) {
      Value ext = arith::ConstantIndexOp::create(b, loc, extents[d]);
      idx = arith::RemUIOp::create(b, loc, rem, ext);
      rem = arith::DivUIOp::create(b, loc, rem, ext);
    }
    if (steps[d] != 1)
      idx = arith::MulIOp::create(
          b, loc, idx, arith::ConstantIndexOp::create(b, loc, steps[d]));
    if (lbs[d] != 0)
      idx = arith::AddIOp::create(
          b, loc, idx, arith::ConstantIndexOp::create(b, loc, lbs[d]));
    ivs[d] = idx;
  }
  return ivs;
}

//===----------------------------------------------------------------------===//
// Views and constants in launches
//===----------------------------------------------------------------------===//

bool cleave::isViewOp(Operation *op) {
  return op &&
         isa<ViewLikeOpInterface, memref::CollapseShapeOp,
             memref::ExpandShapeOp, memref::CastOp>(op) &&
         !isa<memref::AllocOp>(op);
}

/// Clones into the start of `launch` the view ops (subview, reshape, cast)
/// defined outside it whose results it uses, so that kernels take whole
/// buffers (one device pointer each) and compute views themselves.
void cleave::sinkViewsIntoLaunch(gpu::LaunchOp launch) {
  Region &body = launch.getBody();
  bool changed = true;
  while (changed) {
    changed = false;
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(body, above);
    for (Value v : above) {
      Operation *def = v.getDefiningOp();
      if (!isViewOp(def) && !(def && def->hasTrait<OpTrait::ConstantLike>()))
        continue;
      OpBuilder b(&body.front(), body.front().begin());
      Operation *clone = b.clone(*def);
      for (auto [from, to] : llvm::zip(def->getResults(), clone->getResults()))
        replaceAllUsesInRegionWith(from, to, body);
      changed = true;
    }
  }
}

//===----------------------------------------------------------------------===//
// Vector accesses
//===----------------------------------------------------------------------===//

namespace {

/// Bytes a thread of a vectorized launch moves per operand and access.
constexpr int64_t kVectorBytes = 16;

/// The size in bytes of `type`'s elements when they are 1, 2, 4 or 8-byte
/// integers or floats.
std::optional<int64_t> getElementBytes(MemRefType type) {
  Type element = type.getElementType();
  if (!element.isIntOrFloat())
    return std::nullopt;
  unsigned bits = element.getIntOrFloatBitWidth();
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    return std::nullopt;
  return bits / 8;
}

/// Whether `memref` starts at a kernel argument or temporary (func argument
/// or memref.alloc) through views that keep its base pointer and spell the
/// offset in the type (subview, reshapes, cast, reinterpret_cast). Kernel
/// arguments and temporaries are kVectorBytes-aligned (see CUDALaunch).
bool hasAlignedBase(Value memref) {
  while (Operation *def = memref.getDefiningOp()) {
    if (isa<memref::AllocOp>(def))
      return true;
    if (!isa<memref::SubViewOp, memref::CollapseShapeOp, memref::ExpandShapeOp,
             memref::CastOp, memref::ReinterpretCastOp>(def))
      return false;
    memref = def->getOperand(0);
  }
  return isa<func::FuncOp>(memref.getParentBlock()->getParentOp());
}

/// The element size in bytes of the memref that `access` (a memref.load or
/// memref.store) reads or writes, when any V consecutive elements along its
/// last dimension that start at an index multiple of V are contiguous and
/// V * elementBytes-aligned, for every V dividing kVectorBytes /
/// elementBytes. That holds when the base is kVectorBytes-aligned
/// (hasAlignedBase), the last stride is 1, and the offset and the other
/// strides are static multiples of kVectorBytes in bytes: the address is
/// then base + elementBytes * (offset + sum(index * stride) + last index),
/// a multiple of V * elementBytes.
std::optional<int64_t> getVectorAccessBytes(Operation *access) {
  Value memref = isa<memref::LoadOp>(access)
                     ? cast<memref::LoadOp>(access).getMemRef()
                     : cast<memref::StoreOp>(access).getMemRef();
  auto type = cast<MemRefType>(memref.getType());
  std::optional<int64_t> bytes = getElementBytes(type);
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!bytes || !hasAlignedBase(memref) ||
      failed(type.getStridesAndOffset(strides, offset)) || strides.empty() ||
      strides.back() != 1 || ShapedType::isDynamic(offset) ||
      offset * *bytes % kVectorBytes != 0)
    return std::nullopt;
  for (int64_t stride : ArrayRef(strides).drop_back())
    if (ShapedType::isDynamic(stride) || stride * *bytes % kVectorBytes != 0)
      return std::nullopt;
  return bytes;
}

/// Whether `op` is a memref.load or memref.store whose last index is `iv`.
/// (Both ops list their indices last among their operands.)
bool isIndexedLastBy(Operation *op, Value iv) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return !load.getIndices().empty() && load.getIndices().back() == iv;
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return !store.getIndices().empty() && store.getIndices().back() == iv;
  return false;
}

/// Emits the copies of `access`, a memref.load or memref.store whose last
/// index is the innermost induction variable, for the iterations `maps`
/// describe (copy k: last index + k), as one vector.load or vector.store of
/// `maps.size()` elements at copy 0's indices, aligned to its size (which
/// getVectorWidth checked). A load maps copy k's result to element k.
void createVectorAccess(OpBuilder &b, Operation *access,
                        MutableArrayRef<IRMapping> maps) {
  int64_t width = maps.size();
  Location loc = access->getLoc();
  auto lookup = [&](int64_t k, Value v) { return maps[k].lookupOrDefault(v); };
  auto firstIndices = [&](ValueRange indices) {
    return llvm::map_to_vector(indices, [&](Value v) { return lookup(0, v); });
  };
  llvm::Align align(width * *getVectorAccessBytes(access));
  if (auto load = dyn_cast<memref::LoadOp>(access)) {
    auto type = VectorType::get({width}, load.getType());
    Value vector = vector::LoadOp::create(
        b, loc, type, lookup(0, load.getMemRef()),
        firstIndices(load.getIndices()), /*nontemporal=*/false, align);
    for (int64_t k = 0; k < width; ++k)
      maps[k].map(load.getResult(),
                  vector::ExtractOp::create(b, loc, vector, k).getResult());
    return;
  }
  auto store = cast<memref::StoreOp>(access);
  SmallVector<Value> elements;
  for (int64_t k = 0; k < width; ++k)
    elements.push_back(lookup(k, store.getValueToStore()));
  auto type = VectorType::get({width}, store.getValueToStore().getType());
  Value vector = vector::FromElementsOp::create(b, loc, type, elements);
  vector::StoreOp::create(b, loc, vector, lookup(0, store.getMemRef()),
                          firstIndices(store.getIndices()),
                          /*nontemporal=*/false, align);
}

} // namespace

/// How many consecutive iterations of the innermost dimension one thread
/// runs, V, or 1 when the loop does not qualify. V = kVectorBytes / the
/// widest element accessed through the innermost induction variable, so that
/// every such access moves at most kVectorBytes (the widest exactly that). A
/// loop qualifies when:
///  - its innermost dimension starts at 0 with step 1 and V divides its
///    extent, and V >= 2;
///  - its body is straight-line: memref.load, memref.store and ops without
///    memory effects or regions;
///  - every use of the innermost induction variable is the last index of a
///    load or store whose memref satisfies getVectorAccessBytes (so the V
///    elements are contiguous and their first one is V * elementBytes
///    aligned), and whose memref and other indices do not depend on it (so
///    the V iterations access one vector); every store is such a store (each
///    iteration writes its own elements). Loads indexed by the other
///    variables only (broadcast operands) may stay.
int64_t cleave::getVectorWidth(scf::ParallelOp loop, int64_t innerLb,
                               int64_t innerExtent, int64_t innerStep) {
  if (innerLb != 0 || innerStep != 1)
    return 1;
  Value iv = loop.getInductionVars().back();
  // Values computed from the innermost variable (through loaded values too).
  llvm::SmallPtrSet<Value, 16> varying;
  int64_t widest = 0;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (op.getNumRegions() != 0)
      return 1;
    bool isAccess = isa<memref::LoadOp, memref::StoreOp>(op);
    if (!isAccess && !isMemoryEffectFree(&op))
      return 1;
    if (isAccess && isIndexedLastBy(&op, iv)) {
      std::optional<int64_t> bytes = getVectorAccessBytes(&op);
      if (!bytes)
        return 1;
      // The memref and the other indices: all operands but the stored value
      // and the last index.
      unsigned first = isa<memref::StoreOp>(op) ? 1 : 0;
      for (Value v : op.getOperands().drop_front(first).drop_back())
        if (varying.contains(v))
          return 1;
      widest = std::max(widest, *bytes);
    } else if (isa<memref::StoreOp>(op)) {
      return 1;
    }
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return v == iv || varying.contains(v); }))
      varying.insert(op.result_begin(), op.result_end());
  }
  // Every use is the last index, i.e. the last operand, of an access.
  for (OpOperand &use : iv.getUses()) {
    Operation *user = use.getOwner();
    if (user->getBlock() != loop.getBody() || !isIndexedLastBy(user, iv) ||
        use.getOperandNumber() != user->getNumOperands() - 1)
      return 1;
  }
  if (widest == 0)
    return 1;
  int64_t width = kVectorBytes / widest;
  if (width < 2 || innerExtent % width != 0)
    return 1;
  return width;
}

SmallVector<IRMapping> cleave::cloneVectorizedBody(OpBuilder &b, Location loc,
                                                   scf::ParallelOp loop,
                                                   ArrayRef<Value> ivs,
                                                   int64_t width,
                                                   const IRMapping &base) {
  // Copy k runs iteration ivs.back() + k. The copies are interleaved op by
  // op, which the independence of scf.parallel iterations allows, and the
  // `width` copies of a load or store indexed by the innermost variable are
  // one vector access (createVectorAccess).
  Value iv = loop.getInductionVars().back();
  SmallVector<IRMapping> maps(width, base);
  for (int64_t k = 0; k < width; ++k) {
    maps[k].map(loop.getInductionVars(), ivs);
    if (k > 0)
      maps[k].map(
          iv, arith::AddIOp::create(b, loc, ivs.back(),
                                    arith::ConstantIndexOp::create(b, loc, k)));
  }
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (width > 1 && isIndexedLastBy(&op, iv)) {
      createVectorAccess(b, &op, maps);
      continue;
    }
    for (int64_t k = 0; k < width; ++k)
      b.clone(op, maps[k]);
  }
  return maps;
}
