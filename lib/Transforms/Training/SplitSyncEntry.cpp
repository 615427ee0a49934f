//===- SplitSyncEntry.cpp - Local SGD's @sync into a module of its own ----===//
//
// --cleave-split-sync-entry (see Passes.td): @sync, which
// --cleave-build-local-sgd adds beside the step, becomes the nested
// `module @sync` that the plan builder compiles into the entry "sync".
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Training/LocalSGD.h"
#include "cleave/Transforms/Training/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#define DEBUG_TYPE "cleave-split-sync-entry"

namespace cleave {
#define GEN_PASS_DEF_SPLITSYNCENTRYPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace cleave {
namespace {
struct SplitSyncEntryPass : impl::SplitSyncEntryPassBase<SplitSyncEntryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto sync = module.lookupSymbol<func::FuncOp>(kSyncFunctionName);
    if (!sync)
      return;
    // The entry's module: the module's attributes and every top-level op
    // but the step, in order (the mesh, functions @sync may call).
    OpBuilder b(module.getContext());
    auto entry = ModuleOp::create(b, module.getLoc(), kSyncFunctionName);
    for (NamedAttribute attr : module->getAttrs())
      if (attr.getName() != SymbolTable::getSymbolAttrName())
        entry->setAttr(attr.getName(), attr.getValue());
    Block *body = entry.getBody();
    for (Operation &op : module.getBody()->getOperations()) {
      auto fn = dyn_cast<func::FuncOp>(op);
      if (fn && fn.getSymName() == "main")
        continue;
      body->push_back(op.clone());
    }
    sync.erase();
    module.push_back(entry);
  }
};
} // namespace
} // namespace cleave
