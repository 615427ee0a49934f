//===- DropAttribute.cpp - Remove a tag whose work is done ----------------===//
//
// --cleave-drop-attribute{name=...}: removes a discardable attribute from
// every op nested in the module (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Transforms/Training/Passes.h"

#define DEBUG_TYPE "cleave-drop-attribute"

namespace cleave {
#define GEN_PASS_DEF_DROPATTRIBUTEPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace cleave {
namespace {
struct DropAttributePass : impl::DropAttributePassBase<DropAttributePass> {
  using Base::Base;
  void runOnOperation() override {
    if (name.empty()) {
      getOperation().emitError("--cleave-drop-attribute needs a name");
      return signalPassFailure();
    }
    stripAttribute(getOperation(), name);
  }
};
} // namespace
} // namespace cleave
