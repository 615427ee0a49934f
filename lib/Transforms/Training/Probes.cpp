//===- Probes.cpp - Forward activations as extra outputs ------------------===//

#include "cleave/Transforms/Training/Probes.h"
#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Transforms/Training/Passes.h"

#include "Cleave/IR/CleaveDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"

#define DEBUG_TYPE "cleave-add-activation-probes"

namespace cleave {
#define GEN_PASS_DEF_ADDACTIVATIONPROBESPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace cleave {

FailureOr<unsigned> addActivationProbes(func::FuncOp main, StringRef pattern) {
  llvm::Regex re(("^(" + pattern + ")$").str());
  std::string error;
  if (!re.isValid(error)) {
    mlir::emitError(main.getLoc())
        << "--probe '" << pattern
        << "' is not a valid regular expression: " << error;
    return failure();
  }
  // The last forward op of each matching node, in order of first sight.
  llvm::MapVector<StringRef, Value> outputs;
  for (Operation &op : main.getBody().front()) {
    if (op.hasAttr(mlir::cleave::attr::kBackward) || op.getNumResults() != 1)
      continue;
    auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
    StringRef name = mlir::cleave::getNodeName(op.getLoc());
    if (!type || !isa<FloatType>(type.getElementType()) || name.empty() ||
        !re.match(name))
      continue;
    outputs[name] = op.getResult(0);
  }
  if (outputs.empty())
    return 0u;
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  SmallVector<Value> values(ret.getOperands());
  SmallVector<Type> types(main.getResultTypes());
  SmallVector<DictionaryAttr> attrs;
  main.getAllResultAttrs(attrs);
  OpBuilder b(ret);
  for (auto [n, entry] : llvm::enumerate(outputs)) {
    values.push_back(entry.second);
    types.push_back(entry.second.getType());
    NamedAttribute named[] = {
        b.getNamedAttr(
            mlir::cleave::attr::kName,
            b.getStringAttr(
                llvm::formatv("probe.{0:D4}.{1}", n, entry.first).str())),
    };
    attrs.push_back(b.getDictionaryAttr(named));
  }
  func::ReturnOp::create(b, ret.getLoc(), values);
  ret.erase();
  main.setFunctionType(
      FunctionType::get(main.getContext(), main.getArgumentTypes(), types));
  main.setAllResultAttrs(attrs);
  for (unsigned i = types.size() - outputs.size(); i < types.size(); ++i)
    mlir::cleave::setResultRole(main, i, mlir::cleave::Role::probe);
  return static_cast<unsigned>(outputs.size());
}

namespace {
struct AddActivationProbesPass
    : impl::AddActivationProbesPassBase<AddActivationProbesPass> {
  using Base::Base;
  void runOnOperation() override {
    if (pattern.empty())
      return;
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main) {
      getOperation().emitError("--probe needs a func.func @main");
      return signalPassFailure();
    }
    if (failed(addActivationProbes(main, pattern)))
      signalPassFailure();
  }
};
} // namespace

} // namespace cleave
