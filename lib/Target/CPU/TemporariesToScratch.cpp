//===- TemporariesToScratch.cpp - CPU kernel temporaries in the arena ---===//
//
// `--cleave-cpu-temporaries-to-scratch`. After bufferization a kernel still
// allocates the buffers that are neither its inputs nor its results (a
// reduction's result that an elementwise op reads, a transpose feeding a
// contraction, ...). Left alone they become malloc and free calls outside
// the plan's arena: the arena the compiler reports would not be the run's
// peak, and a malloc that fails would crash the run. This pass gives each
// kernel that has such temporaries one more, last argument, a byte buffer,
// and turns each of them into a view of that buffer at its own offset:
//
//   func.func @k(%x: memref<4x8xf32>, %y: memref<4xf32>) {
//     %t = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
//     ...
//     memref.dealloc %t : memref<4xf32>
//
// becomes
//
//   func.func @k(%x: memref<4x8xf32>, %y: memref<4xf32>,
//                %scratch: memref<64xi8>)
//       attributes {cleave.scratch_bytes = 64 : i64}
//     %t = memref.view %scratch[%c0][] : memref<64xi8> to memref<4xf32>
//
// The plan puts one scratch region after its planned buffers, as large as
// the largest kernel's, and passes it to each kernel that needs it (kernels
// run one after another on a rank); see placeCPUScratch in Pipelines.cpp.
// Allocations with dynamic sizes or inside loops, which the CPU pipeline
// does not produce today, stay heap allocations.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CPU/CPUCodegen.h"

#include "Cleave/IR/CleaveMetadata.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

#define DEBUG_TYPE "cleave-cpu-temporaries-to-scratch"

namespace cleave {
#define GEN_PASS_DEF_TEMPORARIESTOSCRATCHPASS
#include "cleave/Target/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using ::cleave::kCPUScratchAlignment;

namespace {

/// The largest scratch buffer a kernel may take (2^62 bytes).
constexpr uint64_t kMaxScratchBytes = uint64_t(1) << 62;

/// Bytes of one element of `type` in a kernel buffer, or 0 when the
/// element type is not one the pass places (it then stays an allocation).
static uint64_t elementBytes(Type type) {
  if (type.isIndex())
    return 8;
  if (type.isIntOrFloat())
    return (type.getIntOrFloatBitWidth() + 7) / 8;
  return 0;
}

/// Places the static top-level allocations of `func` in a new last
/// argument; returns the argument's bytes (0: nothing placed), or failure
/// when they do not fit in 2^62 bytes.
static FailureOr<uint64_t> moveTemporariesToScratch(func::FuncOp func) {
  Block &body = func.getBody().front();
  struct Placed {
    memref::AllocOp alloc;
    uint64_t offset;
  };
  SmallVector<Placed> placed;
  uint64_t bytes = 0;
  for (memref::AllocOp alloc : body.getOps<memref::AllocOp>()) {
    MemRefType type = alloc.getType();
    uint64_t element = elementBytes(type.getElementType());
    if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
        type.getMemorySpace() || element == 0)
      continue;
    uint64_t alignment = std::max<uint64_t>(kCPUScratchAlignment,
                                            alloc.getAlignment().value_or(1));
    uint64_t offset = (bytes + alignment - 1) / alignment * alignment;
    placed.push_back({alloc, offset});
    // Sizes stay below 2^62 bytes, so none of this overflows.
    uint64_t size = element;
    for (int64_t dim : type.getShape())
      if (dim != 0 && size > kMaxScratchBytes / static_cast<uint64_t>(dim))
        size = kMaxScratchBytes + 1;
      else
        size *= static_cast<uint64_t>(dim);
    if (size > kMaxScratchBytes || offset + size > kMaxScratchBytes)
      return alloc.emitOpError("kernel temporary of type ")
             << type << " needs more than " << kMaxScratchBytes << " bytes";
    bytes = offset + std::max<uint64_t>(1, size);
  }
  if (placed.empty())
    return 0;
  bytes = (bytes + kCPUScratchAlignment - 1) / kCPUScratchAlignment *
          kCPUScratchAlignment;

  MLIRContext *ctx = func.getContext();
  auto scratchType =
      MemRefType::get({static_cast<int64_t>(bytes)}, IntegerType::get(ctx, 8));
  unsigned index = func.getNumArguments();
  if (failed(func.insertArgument(index, scratchType, DictionaryAttr(),
                                 func.getLoc())))
    return func.emitOpError("cannot take a scratch argument");
  Value scratch = body.getArgument(index);
  for (Placed &p : placed) {
    OpBuilder b(p.alloc);
    Location loc = p.alloc.getLoc();
    Value offset = arith::ConstantIndexOp::create(b, loc, p.offset);
    Value view = memref::ViewOp::create(b, loc, p.alloc.getType(), scratch,
                                        offset, ValueRange{});
    for (Operation *user : llvm::make_early_inc_range(p.alloc->getUsers()))
      if (isa<memref::DeallocOp>(user))
        user->erase();
    p.alloc.replaceAllUsesWith(view);
    p.alloc.erase();
  }
  func->setAttr(mlir::cleave::attr::kScratchBytes,
                IntegerAttr::get(IntegerType::get(ctx, 64), bytes));
  return bytes;
}

struct TemporariesToScratchPass
    : ::cleave::impl::TemporariesToScratchPassBase<TemporariesToScratchPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration() ||
          func->hasAttr(mlir::cleave::attr::kScratchBytes))
        continue;
      if (failed(moveTemporariesToScratch(func)))
        return signalPassFailure();
      // A deallocation the pass cannot see through (one of a buffer that
      // may alias a temporary) would free arena memory: refuse it.
      WalkResult walk = func.walk([&](Operation *op) {
        if (!isa<memref::DeallocOp>(op) &&
            op->getName().getStringRef() != "bufferization.dealloc")
          return WalkResult::advance();
        for (Value operand : op->getOperands()) {
          Value base = operand;
          while (Operation *def = base.getDefiningOp()) {
            if (auto view = dyn_cast<ViewLikeOpInterface>(def))
              base = view.getViewSource();
            else
              break;
          }
          if (auto arg = dyn_cast<BlockArgument>(base);
              arg && func->hasAttr(mlir::cleave::attr::kScratchBytes) &&
              arg.getArgNumber() == func.getNumArguments() - 1 &&
              arg.getOwner() == &func.getBody().front()) {
            op->emitOpError("deallocates a kernel temporary placed in the "
                            "arena's scratch");
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
    }
  }
};

} // namespace
