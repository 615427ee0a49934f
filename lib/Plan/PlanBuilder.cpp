//===- PlanBuilder.cpp - Group a cleave program into plan commands --------===//
//
// Walks @main in program order. Reshapes alias their operand's buffer; f32 and
// f64 contractions (and bf16/f16 ones with an f32 result) become library GEMM
// commands, which absorb a following bias add and tanh-form GELU as their
// epilogue (see GemmEpilogue.h); every other op joins a fused
// kernel: an op joins the group of one of its producers when the op is
// elementwise (epilogue fusion) or the group is purely elementwise (prologue
// fusion), and when none of its other operands comes from a command issued
// after that group started. outlineKernels (--cleave-outline-kernels)
// outlines the groups into a nested kernel module and tags their ops; the
// planning run (buildPlan) reads those tags instead of grouping again, and
// values crossing a command boundary get arena buffers placed by planMemory.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilderInternal.h"

#include "cleave/Analysis/FusedAttention.h"

#define DEBUG_TYPE "cleave-plan-builder"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::plan_builder;
using ::cleave::BuiltPlan;
using ::cleave::PlanBuildOptions;
namespace plan = ::cleave::plan;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

FailureOr<plan::DType> plan_builder::toDType(Type t) {
  if (t.isF32())
    return plan::DType::F32;
  if (t.isF64())
    return plan::DType::F64;
  if (t.isF16())
    return plan::DType::F16;
  if (t.isBF16())
    return plan::DType::BF16;
  if (isa<Float8E4M3FNType>(t))
    return plan::DType::F8E4M3FN;
  if (isa<Float8E4M3FNUZType>(t))
    return plan::DType::F8E4M3FNUZ;
  if (isa<Float8E5M2Type>(t))
    return plan::DType::F8E5M2;
  if (isa<Float8E5M2FNUZType>(t))
    return plan::DType::F8E5M2FNUZ;
  if (isa<Float8E8M0FNUType>(t))
    return plan::DType::F8E8M0;
  if (isa<Float4E2M1FNType>(t))
    return plan::DType::F4E2M1;
  if (auto it = dyn_cast<IntegerType>(t)) {
    bool u = it.isUnsigned();
    switch (it.getWidth()) {
    case 1:
      return plan::DType::Bool;
    case 2:
      return u ? plan::DType::U2 : plan::DType::I2;
    case 4:
      return u ? plan::DType::U4 : plan::DType::I4;
    case 8:
      return u ? plan::DType::U8 : plan::DType::I8;
    case 16:
      return u ? plan::DType::U16 : plan::DType::I16;
    case 32:
      return u ? plan::DType::U32 : plan::DType::I32;
    case 64:
      return u ? plan::DType::U64 : plan::DType::I64;
    default:
      break;
    }
  }
  return failure();
}

uint64_t plan_builder::byteSize(RankedTensorType t) {
  return static_cast<uint64_t>(mlir::cleave::detail::getSizeInBytes(t));
}

//===----------------------------------------------------------------------===//
// The builder
//===----------------------------------------------------------------------===//

LogicalResult PlanBuilder::checkProgram() {
  // A hand-written program may declare anything: the plan holds statically
  // shaped tensors of its element types only.
  auto checkType = [&](Type t, StringRef what, unsigned i) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor || !tensor.hasStaticShape() ||
        failed(toDType(tensor.getElementType())))
      return main.emitError()
             << "@main " << what << " " << i << " has type " << t
             << "; a plan's inputs and outputs are "
                "statically shaped tensors of f32, f64, f16, "
                "bf16, integers or i1";
    return success();
  };
  for (auto [i, t] : llvm::enumerate(main.getArgumentTypes()))
    if (failed(checkType(t, "argument", i)))
      return failure();
  for (auto [i, t] : llvm::enumerate(main.getResultTypes()))
    if (failed(checkType(t, "result", i)))
      return failure();
  auto module = main->getParentOfType<ModuleOp>();
  for (auto m : module.getOps<MeshOp>()) {
    if (mesh)
      return m.emitOpError() << "is a second mesh; a plan has one mesh (@"
                             << mesh.getSymName() << ")";
    mesh = m;
  }
  return success();
}

LogicalResult PlanBuilder::group(bool recorded) {
  matchEpilogues();
  markRematerializedBroadcasts();
  for (Operation &op : main.getBody().front()) {
    if (isa<func::ReturnOp, ConstantOp, ReshapeOp>(op))
      continue;
    if (auto collective = dyn_cast<CollectiveOpInterface>(op)) {
      if (collective.getAsync())
        eventOf[&op] = eventOf.size();
      addCommNode(Node::Collective, &op);
      continue;
    }
    if (isa<DoneOp>(op)) {
      addCommNode(Node::Done, &op);
      continue;
    }
    if (isa<PipelineMarkerOp>(op)) {
      addCommNode(Node::Marker, &op);
      continue;
    }
    if (op.getDialect() != op.getContext()->getLoadedDialect<CleaveDialect>())
      return op.emitOpError() << "cannot be planned: only cleave ops may "
                                 "appear in @main at this point";
    // An op that produces only empty tensors needs no command: its result
    // is a zero-byte buffer.
    if (llvm::all_of(op.getResultTypes(), [](Type t) {
          return cast<RankedTensorType>(t).getNumElements() == 0;
        }))
      continue;
    // A GEMM with an epilogue becomes its command where the epilogue's last
    // op stands, after everything its bias needs.
    if (auto it = absorbedBy.find(&op); it != absorbedBy.end()) {
      if (epilogueOf.find(it->second)->second.result.getDefiningOp() == &op)
        addGemm(it->second);
      continue;
    }
    if (deadBroadcasts.contains(&op) || rematerialized.contains(&op))
      continue;
    if (isGemm(&op)) {
      if (!epilogueOf.count(&op))
        addGemm(cast<ContractOp>(op));
      continue;
    }
    if (isa<GroupedMatmulOp, GroupedMatmulWeightGradOp>(op)) {
      // The runtime's grouped GEMM command (CPU plans).
      nodeOfOp[&op] = nodes.size();
      nodes.push_back(Node{Node::Library,
                           {&op},
                           {},
                           plan::GemmEpilogue::None,
                           {},
                           {},
                           {},
                           {},
                           {}});
      continue;
    }
    if (isa<AttentionOp, AttentionGradOp, AttentionBlockOp,
            AttentionBlockGradOp>(op)) {
      // Left whole by the prepare pipeline for the fused command (CPU and
      // CUDA).
      if (!::cleave::hasFusedAttentionKernel(&op))
        return op.emitOpError()
               << "has no fused attention kernel for these element types; "
                  "--cleave-decompose-attention should have spelled it out";
      nodeOfOp[&op] = nodes.size();
      nodes.push_back(Node{Node::Library,
                           {&op},
                           {},
                           plan::GemmEpilogue::None,
                           {},
                           {},
                           {},
                           {},
                           {}});
      continue;
    }
    if (!recorded) {
      addKernelOp(&op);
    } else if (failed(joinRecordedKernel(&op))) {
      return failure();
    }
  }
  return success();
}

LogicalResult PlanBuilder::outlineKernels() {
  auto module = main->getParentOfType<ModuleOp>();
  if (Operation *taken =
          SymbolTable::lookupSymbolIn(module, ::cleave::kKernelModuleName))
    return taken->emitOpError()
           << "already holds the symbol @" << ::cleave::kKernelModuleName
           << ": the program's kernels are outlined once, into a new module "
              "of that name";
  if (failed(checkProgram()) || failed(group(/*recorded=*/false)))
    return failure();
  auto kernels = ModuleOp::create(main.getLoc(), ::cleave::kKernelModuleName);
  module.getBody()->push_back(kernels);
  if (failed(outline(kernels, /*create=*/true)))
    return failure();
  // The plan builder makes the splat biases of GEMM epilogues again when it
  // reads the grouping; no op of @main reads them.
  for (Operation *bias : addedBiases)
    bias->erase();
  Builder b(main.getContext());
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (node.kind != Node::Kernel)
      continue;
    for (Operation *op : node.ops) {
      op->setAttr(attr::kKernel, b.getStringAttr(node.name));
      op->setAttr(attr::kKernelGroup, b.getI64IntegerAttr(index));
    }
  }
  return success();
}

FailureOr<BuiltPlan> PlanBuilder::run() {
  auto module = main->getParentOfType<ModuleOp>();
  auto kernels = module.lookupSymbol<ModuleOp>(::cleave::kKernelModuleName);
  if (!kernels)
    return module.emitError()
           << "expected the kernel module @" << ::cleave::kKernelModuleName
           << " that --cleave-outline-kernels makes";
  if (failed(checkProgram()))
    return failure();
  takeGradientTags();
  if (failed(group(/*recorded=*/true)))
    return failure();
  BuiltPlan result;
  kernels->remove();
  kernels->removeAttr(SymbolTable::getSymbolAttrName());
  result.kernels = kernels;
  if (failed(outline(*result.kernels, /*create=*/false)) ||
      failed(assemble(result)))
    return failure();
  result.plan.numEvents = eventOf.size();
  return result;
}

static func::FuncOp findMain(ModuleOp module, StringRef entry = "main") {
  auto main = module.lookupSymbol<func::FuncOp>(entry);
  if (!main || main.getBody().getBlocks().size() != 1) {
    module.emitError() << "expected a single-block func.func @" << entry;
    return nullptr;
  }
  return main;
}

LogicalResult(::cleave::outlineKernels)(ModuleOp module,
                                        const PlanBuildOptions &options,
                                        StringRef entry) {
  func::FuncOp main = findMain(module, entry);
  if (!main)
    return failure();
  return PlanBuilder(main, options).outlineKernels();
}

FailureOr<BuiltPlan>(::cleave::buildPlan)(ModuleOp module,
                                          const PlanBuildOptions &options) {
  func::FuncOp main = findMain(module);
  if (!main)
    return failure();
  if (!module.lookupSymbol(::cleave::kKernelModuleName) &&
      failed(::cleave::outlineKernels(module, options)))
    return failure();
  return PlanBuilder(main, options).run();
}
