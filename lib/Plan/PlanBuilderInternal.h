//===- PlanBuilderInternal.h - The plan builder's shared state --*- C++ -*-===//
//
// Private to lib/Plan: the PlanBuilder class, whose steps live in
// PlanBuilder.cpp (the driver), KernelGrouping.cpp (ops into commands),
// KernelOutlining.cpp (the kernel module), CollectiveLowering.cpp,
// PlanAssembly.cpp and PlanTables.cpp (buffers, tables and commands) and
// PlanReport.cpp (what each buffer holds, for the reports), and the
// helpers more than one of them uses.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_PLAN_PLANBUILDERINTERNAL_H
#define CLEAVE_LIB_PLAN_PLANBUILDERINTERNAL_H

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"
#include "GemmEpilogue.h"
#include "cleave/Plan/MemoryPlanner.h"
#include "cleave/Plan/PlanBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <utility>
#include <vector>

namespace mlir::cleave::plan_builder {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The plan element type of `t`, or failure for a type plans cannot hold.
FailureOr<::cleave::plan::DType> toDType(Type t);
/// The bytes a statically shaped tensor of type `t` takes.
uint64_t byteSize(RankedTensorType t);
/// The little-endian bytes of a constant, one element after another (i1 as
/// one byte per element).
FailureOr<std::vector<uint8_t>> constantBytes(ElementsAttr value);
/// Ops that read and write their elements one to one (and broadcasts),
/// which fuse into a producer's or a consumer's kernel.
bool isElementwise(Operation *op);
/// Where a collective came from, for messages: the ONNX node (a NameLoc),
/// or file:line.
std::string sourceOf(Operation *op);

//===----------------------------------------------------------------------===//
// The builder
//===----------------------------------------------------------------------===//

struct Node {
  /// Collective: a communication op (`comm`); Done: the wait for an async
  /// one (`comm` is the cleave.done).
  /// Marker: a pipeline step's begin or end (`comm` is the marker).
  /// Library: one op (the one in `ops`) run by a command of the runtime's
  /// own: an attention op (the fused Attention and AttentionBackward
  /// commands) or an expert GEMM (GroupedGemm).
  enum Kind { Kernel, Gemm, Collective, Done, Marker, Library } kind;
  /// Kernel members in program order; a Library node's op.
  SmallVector<Operation *> ops;
  ContractOp contract; ///< For GEMMs.
  /// For GEMMs: the epilogue, its bias (or null) and the value written into
  /// C (the contraction's result without an epilogue).
  ::cleave::plan::GemmEpilogue epilogue = ::cleave::plan::GemmEpilogue::None;
  Value bias, result;
  SmallVector<Value> inputs, outputs;
  std::string name;
  Operation *comm = nullptr;
};

/// What assemble() builds step by step: a buffer per root value that
/// crosses a command boundary, their places in the arena, and the copies
/// of new state values into their state buffers.
struct Assembly {
  struct Buffer {
    Value value;
    ::cleave::BufferInterval interval;
  };
  /// The number of nodes: a buffer live until `end` outlives every command.
  int64_t end = 0;
  std::vector<Buffer> buffers;
  DenseMap<Value, size_t> bufferOf;
  /// Updated state result index -> the command after which it is copied.
  DenseMap<unsigned, int64_t> copyTime;
  std::vector<::cleave::BufferInterval> intervals;
  ::cleave::MemoryPlan memory;
  /// The state copies, each after the command it waits for.
  std::vector<std::pair<int64_t, ::cleave::plan::Command>> stateCopies;
  /// The parameters --untie made (the `untied` metadata).
  llvm::json::Array untied;
  /// The parameters made again from transposed copies (`folded`).
  llvm::json::Array folded;
  /// The pipeline steps in the order they first appear.
  std::vector<std::string> markerNames;
  /// Each Kernel command's flops and the bytes of its arguments (what it
  /// reads and writes in the arena), for cost models (kKernelCostsKey).
  std::vector<std::string> kernelCosts;
};

class PlanBuilder {
public:
  PlanBuilder(func::FuncOp main, const ::cleave::PlanBuildOptions &options)
      : main(main), options(options) {}

  /// Plans @main, whose kernels --cleave-outline-kernels outlined into
  /// the module's `module @kernels` (taken into BuiltPlan::kernels).
  FailureOr<::cleave::BuiltPlan> run();
  /// --cleave-outline-kernels: groups @main, outlines the kernel groups into
  /// a new `module @kernels` and tags each kernel op with its kernel and
  /// group.
  LogicalResult outlineKernels();

private:
  /// The value whose buffer `v` lives in (follows reshapes, and a
  /// cleave.done to the asynchronous collective that writes its buffer).
  Value root(Value v) const {
    for (;;) {
      if (auto reshape = v.getDefiningOp<ReshapeOp>())
        v = reshape.getOperand();
      else if (auto done = v.getDefiningOp<DoneOp>())
        v = done.getOperand();
      else
        return v;
    }
  }
  /// Index of the node after which `v` is ready, or -1 for arguments and
  /// constants: the computing node, or for an asynchronous collective's
  /// result its cleave.done.
  int nodeOf(Value v) const {
    while (auto reshape = v.getDefiningOp<ReshapeOp>())
      v = reshape.getOperand();
    if (auto done = v.getDefiningOp<DoneOp>())
      return nodeOfOp.lookup(done);
    auto it = nodeOfOp.find(root(v).getDefiningOp());
    return it == nodeOfOp.end() ? -1 : it->second;
  }
  /// Splats (any size) and small dense constants are rebuilt inside the
  /// kernels that use them instead of taking arena memory.
  bool isInlinableConstant(Value v) const {
    auto cst = v.getDefiningOp<ConstantOp>();
    if (!cst)
      return false;
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    return dense && (dense.isSplat() ||
                     dense.getNumElements() <= options.inlineConstantLimit);
  }
  bool isGemm(Operation *op) const;
  void matchEpilogues();
  void markRematerializedBroadcasts();
  /// What a kernel reads for `op`'s operands: each operand, or for a
  /// rematerialized op what its reader rebuilds it from (the leaves of its
  /// operands' DAG, each once).
  SmallVector<Value, 4> kernelSources(Operation *op) const {
    SmallVector<Value, 4> sources;
    llvm::SmallPtrSet<Operation *, 8> seen;
    SmallVector<Value> stack(llvm::reverse(op->getOperands()));
    while (!stack.empty()) {
      Value v = stack.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (def && rematerialized.count(def)) {
        if (seen.insert(def).second)
          llvm::append_range(stack, llvm::reverse(def->getOperands()));
      } else if (!llvm::is_contained(sources, v)) {
        sources.push_back(v);
      }
    }
    return sources;
  }
  /// @main's types and its one mesh.
  LogicalResult checkProgram();
  /// Cuts @main into nodes; `recorded`: the kernel groups are the ones
  /// --cleave-outline-kernels tagged (joinRecordedKernel), not grouped anew
  /// (addKernelOp).
  LogicalResult group(bool recorded);
  void addGemm(ContractOp contract);
  void addKernelOp(Operation *op);
  LogicalResult joinRecordedKernel(Operation *op);
  void addCommNode(Node::Kind kind, Operation *op);
  LogicalResult lowerCollective(Node &node, ::cleave::plan::Command &cmd);
  /// Gives each node its inputs, outputs and name. `create`: outlines each
  /// kernel group into a function of `kernels` (names kernels, shares
  /// identical bodies); otherwise checks that the recorded kernel is there,
  /// with the node's signature.
  LogicalResult outline(ModuleOp kernels, bool create);
  LogicalResult assemble(::cleave::BuiltPlan &result);
  /// The steps of assemble(), in the order it takes them (PlanAssembly.cpp,
  /// PlanTables.cpp).
  size_t bufferFor(Assembly &a, Value v, int64_t first, int64_t last);
  void collectBuffers(Assembly &a);
  void addStageMemory(const Assembly &a, ::cleave::plan::Plan &p);
  void writeMemoryReport(const Assembly &a, std::string &out);
  uint64_t offsetOf(const Assembly &a, Value v) const {
    return a.memory.offsets[a.bufferOf.lookup(root(v))];
  }
  LogicalResult tensorInfo(const Assembly &a, Value v, StringRef name,
                           ::cleave::plan::TensorInfo &info);
  LogicalResult readSharding(Attribute attr, ::cleave::plan::TensorInfo &info,
                             Location loc);
  LogicalResult addState(Assembly &a, ::cleave::plan::Plan &p, unsigned i,
                         ::cleave::plan::TensorInfo info);
  LogicalResult addTables(Assembly &a, ::cleave::plan::Plan &p);
  LogicalResult addConstants(const Assembly &a, ::cleave::plan::Plan &p);
  LogicalResult addCommands(Assembly &a, ::cleave::plan::Plan &p);
  void addCostMetadata(Assembly &a, ::cleave::plan::Plan &p);
  void takeGradientTags();
  int64_t nodeFlops(Node &node);
  ::cleave::MemoryClass classify(Value root, bool &finalGradient);
  void fillReport(::cleave::BuiltPlan &result, ArrayRef<Value> bufferValues,
                  ArrayRef<::cleave::BufferInterval> intervals,
                  uint64_t arenaBytes);

  func::FuncOp main;
  const ::cleave::PlanBuildOptions &options;
  std::vector<Node> nodes;
  DenseMap<Operation *, int> nodeOfOp;
  /// GEMM epilogues: per contraction, what it absorbs; per absorbed op, its
  /// contraction. Broadcasts feeding only absorbed bias adds need no code.
  DenseMap<Operation *, ::cleave::GemmEpilogueMatch> epilogueOf;
  DenseMap<Operation *, ContractOp> absorbedBy;
  llvm::SmallPtrSet<Operation *, 8> deadBroadcasts;
  /// The splat bias constants matchEpilogues added to @main.
  SmallVector<Operation *> addedBiases;
  /// A recorded kernel group (cleave.kernel_group) -> its node.
  DenseMap<int64_t, int> nodeOfGroup;
  /// Broadcasts, widening converts and index computations that every
  /// reader's kernel rebuilds from their operands
  /// (markRematerializedBroadcasts): no command and no buffer of their own.
  llvm::SmallPtrSet<Operation *, 8> rematerialized;
  /// Printed kernel body -> the name of the kernel compiled for it.
  llvm::StringMap<std::string> kernelByBody;
  /// The module's mesh (null: one rank).
  MeshOp mesh;
  /// Async collective -> the event its cleave.done waits for.
  DenseMap<Operation *, int64_t> eventOf;
  uint32_t numCollectives = 0;
  /// For the report: each value of a parameter gradient's chain (the op
  /// tagged cleave.gradient_of, then its reductions, reshapes, converts,
  /// buckets and slices) -> the parameters it is a gradient of.
  DenseMap<Value, SmallVector<StringAttr, 1>> gradientOf;
  /// For the report: the ops the loss depends on (the forward pass).
  llvm::SmallPtrSet<Operation *, 32> forward;
  /// For the report: the values that own an arena buffer.
  DenseSet<Value> buffered;
  /// For the report: low-precision parameter copies the partitioner
  /// gathered once for the whole step (kReshardOnceAttr).
  llvm::SmallPtrSet<Operation *, 16> keptCopies;
};

} // namespace mlir::cleave::plan_builder

#endif // CLEAVE_LIB_PLAN_PLANBUILDERINTERNAL_H
