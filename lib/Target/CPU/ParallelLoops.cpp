//===- ParallelLoops.cpp - Kernel loops split over runtime threads --------===//
//
// `--cleave-cpu-parallel-loops`. After linalg becomes loops, each outermost
// `scf.parallel` of a kernel with enough work (at least `min-work` scalar
// iterations, counted through the nest) is outlined into a function over a
// range of its outer iterations, and the loop is replaced by a call that
// launches that function on the runtime's threads:
//
//   scf.parallel (%i, %j) = (0, 0) to (64, 128) step (1, 1) {
//     body(%i, %j, %a, %b)
//   }
//
// becomes
//
//   func.call @k$par0$launch(%a, %b, %c64) : (...) -> ()
//   ...
//   func.func private @k$par0(%a, %b, %begin: index, %end: index) {
//     scf.for %o = %begin to %end step 1 {          // outer iterations
//       scf.parallel (%j) = (0) to (128) step (1) { body(%o, %j, %a, %b) }
//     }
//   }
//   func.func private @k$par0$launch(memref<...>, memref<...>, index)
//
// The outer iterations are the loop's leading dimensions, linearized, up to
// the first prefix with at least 64 of them; the innermost dimension stays a
// loop of the outlined function (so LLVM can vectorize it) unless the body
// has loops of its own. Values the body uses from outside are passed as
// arguments (constants are cloned in): memrefs of static shape and layout
// (bare pointers), integers, indices and floats. A loop that uses anything
// else, or that yields reductions (`scf.reduce` with operands), stays as it
// is.
//
// compileCPUKernels defines each `$launch` declaration in LLVM IR (see
// emitWrappers in CPUCodegen.cpp): it packs the arguments into a frame and
// calls the runtime's parallel-for through the kernel object's
// `cleave_parallel_for` pointer, or runs every outer iteration itself when
// the runtime has not set it. The iterations of an scf.parallel are
// independent and each writes its own elements, and every reduction inside
// runs within one outer iteration, so results are bitwise the same for any
// number of threads and any split of the range.
//
//===----------------------------------------------------------------------===//

#include "LoopWork.h"
#include "cleave/Target/CPU/Passes.h"
#include "cleave/Target/Common/LoopSpace.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/RegionUtils.h"

#define DEBUG_TYPE "cleave-cpu-parallel-loops"

namespace cleave {
#define GEN_PASS_DEF_PARALLELLOOPSPASS
#include "cleave/Target/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using ::cleave::mulSat;

namespace {

/// Outer iterations a launch aims for: enough to split evenly over a
/// machine's cores without making each one tiny.
constexpr int64_t kMinOuterIterations = 64;

/// The static trip counts of `loop`'s dimensions, or nothing when a bound
/// or step is not a constant.
std::optional<SmallVector<int64_t>> staticTrips(scf::ParallelOp loop) {
  SmallVector<int64_t> lbs, trips, steps;
  if (failed(::cleave::getStaticLoopSpace(loop, lbs, trips, steps)))
    return std::nullopt;
  return trips;
}

/// Scalar iterations of the ops in `region`, counting each loop as its trip
/// count times its body (a loop with unknown bounds counts once), saturated.
int64_t workOf(Region &region) {
  int64_t work = 0;
  for (Block &block : region)
    for (Operation &op : block) {
      int64_t trips = 1;
      if (auto par = dyn_cast<scf::ParallelOp>(op)) {
        if (auto t = staticTrips(par))
          for (int64_t n : *t)
            trips = mulSat(trips, n);
      } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
        std::optional<int64_t> l = getConstantIntValue(loop.getLowerBound()),
                               u = getConstantIntValue(loop.getUpperBound()),
                               s = getConstantIntValue(loop.getStep());
        if (l && u && s && *s > 0 && *u > *l)
          trips = (*u - *l + *s - 1) / *s;
      }
      int64_t inner = 1;
      for (Region &r : op.getRegions())
        inner = std::min(::cleave::kMaxWork, inner + workOf(r));
      work = std::min(::cleave::kMaxWork, work + mulSat(trips, inner));
    }
  return work;
}

/// Whether `value` can be an argument of the outlined function: a memref
/// that lowers to a bare pointer (static shape, strides and offset), or a
/// scalar.
bool isPassable(Value value) {
  Type type = value.getType();
  if (auto memref = dyn_cast<MemRefType>(type)) {
    if (!memref.hasStaticShape())
      return false;
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(memref.getStridesAndOffset(strides, offset)))
      return false;
    return ShapedType::isStatic(offset) &&
           llvm::all_of(strides, ShapedType::isStatic);
  }
  return type.isIntOrIndexOrFloat();
}

bool hasLoops(Region &region) {
  return region
      .walk([](Operation *op) {
        return isa<scf::ParallelOp, scf::ForOp, scf::WhileOp>(op)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

struct ParallelLoopsPass
    : ::cleave::impl::ParallelLoopsPassBase<ParallelLoopsPass> {
  using ParallelLoopsPassBase::ParallelLoopsPassBase;

  void runOnOperation() override;

private:
  /// Outlines `loop` of `func` as `name`; false when it cannot be.
  bool outline(func::FuncOp func, scf::ParallelOp loop, StringRef name,
               SymbolTable &symbols);
};

void ParallelLoopsPass::runOnOperation() {
  if (minWork <= 0)
    return;
  ModuleOp module = getOperation();
  SymbolTable symbols(module);
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  for (func::FuncOp func : funcs) {
    if (func.isDeclaration())
      continue;
    SmallVector<scf::ParallelOp> loops;
    func.walk<WalkOrder::PreOrder>([&](scf::ParallelOp loop) {
      loops.push_back(loop);
      return WalkResult::skip(); // only the outermost
    });
    unsigned index = 0;
    for (scf::ParallelOp loop : loops) {
      if (loop.getNumResults() != 0)
        continue;
      std::optional<SmallVector<int64_t>> trips = staticTrips(loop);
      if (!trips)
        continue;
      int64_t work = workOf(loop.getRegion());
      for (int64_t n : *trips)
        work = mulSat(work, n);
      if (work < minWork)
        continue;
      std::string name = (func.getSymName() + "$par" + Twine(index)).str();
      if (outline(func, loop, name, symbols))
        ++index;
    }
  }
}

bool ParallelLoopsPass::outline(func::FuncOp func, scf::ParallelOp loop,
                                StringRef name, SymbolTable &symbols) {
  SmallVector<int64_t> trips = *staticTrips(loop);
  unsigned rank = trips.size();
  // The outer dimensions: the first prefix with enough iterations; the
  // innermost stays a loop when it is the body's only loop.
  unsigned outer = 0;
  int64_t outerTrips = 1;
  while (outer < rank && outerTrips < kMinOuterIterations)
    outerTrips *= trips[outer++];
  if (outer == rank && rank > 1 && !hasLoops(loop.getRegion()))
    outerTrips /= std::max<int64_t>(trips[--outer], 1);
  if (outer == 0 || outerTrips <= 1)
    return false;

  // What the body uses from outside: constants are cloned, the rest passed.
  llvm::SetVector<Value> used;
  getUsedValuesDefinedAbove(loop.getRegion(), used);
  for (Value v : loop.getLowerBound())
    used.insert(v);
  for (Value v : loop.getStep())
    used.insert(v);
  for (Value v : loop.getUpperBound())
    used.insert(v);
  SmallVector<Value> constants, captures;
  for (Value v : used) {
    Operation *def = v.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>() &&
        def->getNumOperands() == 0 && def->getNumRegions() == 0)
      constants.push_back(v);
    else if (isPassable(v))
      captures.push_back(v);
    else
      return false;
  }

  MLIRContext *ctx = func.getContext();
  Location loc = loop.getLoc();
  OpBuilder b(ctx);
  Type indexType = b.getIndexType();
  SmallVector<Type> argTypes;
  for (Value v : captures)
    argTypes.push_back(v.getType());
  SmallVector<Type> bodyTypes(argTypes);
  bodyTypes.append({indexType, indexType});
  SmallVector<Type> launchTypes(argTypes);
  launchTypes.push_back(indexType);

  // The outlined function over outer iterations [begin, end).
  b.setInsertionPointToEnd(func->getParentOfType<ModuleOp>().getBody());
  auto body =
      func::FuncOp::create(b, loc, name, b.getFunctionType(bodyTypes, {}));
  body.setPrivate();
  symbols.insert(body);
  Block *entry = body.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping map;
  for (Value c : constants)
    map.map(c, b.clone(*c.getDefiningOp())->getResult(0));
  for (auto [v, arg] : llvm::zip(captures, entry->getArguments()))
    map.map(v, arg);
  Value begin = entry->getArgument(captures.size());
  Value end = entry->getArgument(captures.size() + 1);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto outerLoop = scf::ForOp::create(b, loc, begin, end, one);
  b.setInsertionPointToStart(outerLoop.getBody());
  // Delinearize the outer index, innermost outer dimension fastest.
  Value rest = outerLoop.getInductionVar();
  SmallVector<Value> outerIvs(outer);
  for (int d = static_cast<int>(outer) - 1; d >= 0; --d) {
    Value idx = rest;
    if (d > 0) {
      Value extent = arith::ConstantIndexOp::create(b, loc, trips[d]);
      idx = arith::RemUIOp::create(b, loc, rest, extent);
      rest = arith::DivUIOp::create(b, loc, rest, extent);
    }
    Value lb = map.lookupOrDefault(loop.getLowerBound()[d]);
    Value step = map.lookupOrDefault(loop.getStep()[d]);
    Value scaled = arith::MulIOp::create(b, loc, idx, step);
    outerIvs[d] = arith::AddIOp::create(b, loc, lb, scaled);
  }
  for (unsigned d = 0; d < outer; ++d)
    map.map(loop.getInductionVars()[d], outerIvs[d]);
  auto cloneBody = [&](OpBuilder &nb, IRMapping &m) {
    for (Operation &op : loop.getBody()->without_terminator())
      nb.clone(op, m);
  };
  if (outer < rank) {
    auto mapAll = [&](OperandRange values) {
      SmallVector<Value> out;
      for (Value v : values.drop_front(outer))
        out.push_back(map.lookupOrDefault(v));
      return out;
    };
    scf::ParallelOp::create(
        b, loc, mapAll(loop.getLowerBound()), mapAll(loop.getUpperBound()),
        mapAll(loop.getStep()), [&](OpBuilder &nb, Location, ValueRange ivs) {
          for (auto [old, iv] : llvm::zip(
                   ArrayRef<Value>(loop.getInductionVars()).drop_front(outer),
                   ivs))
            map.map(old, iv);
          cloneBody(nb, map);
        });
  } else {
    cloneBody(b, map);
  }
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, loc);

  // The launch, defined in LLVM IR by compileCPUKernels.
  b.setInsertionPointAfter(body);
  auto launch = func::FuncOp::create(b, loc, (name + "$launch").str(),
                                     b.getFunctionType(launchTypes, {}));
  launch.setPrivate();
  symbols.insert(launch);

  b.setInsertionPoint(loop);
  SmallVector<Value> operands(captures);
  operands.push_back(arith::ConstantIndexOp::create(b, loc, outerTrips));
  func::CallOp::create(b, loc, launch, operands);
  loop.erase();
  return true;
}

} // namespace
