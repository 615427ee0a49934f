//===- TrainableParameters.cpp - Initializers a step updates --------------===//
//
// ONNX does not say which initializers are parameters. PyTorch's exporter
// does (the graph's export signature, read by the importer into
// `cleave.initializer_kind`); without it, single-element initializers are
// taken for the exporter's constants (a Pow exponent, a scale). BatchNorm
// running statistics are buffers when the program updates them and
// constants otherwise, never parameters.
//
//===----------------------------------------------------------------------===//

#include "TrainableParameters.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::training {

/// True for an initializer a PyTorch export signature calls a parameter.
static bool isTorchParameter(ConstantOp cst) {
  return getInitializerKind(cst) == InitializerKind::parameter;
}

/// Gives each use of a float initializer that matches `re` a copy of its
/// own: the first use keeps `<name>`, the others get `<name>.untied<k>`.
static void untieInitializers(func::FuncOp main, llvm::Regex &re) {
  SmallVector<ConstantOp> matched;
  for (auto cst : main.getBody().front().getOps<ConstantOp>()) {
    auto name = getInitializerName(cst);
    if (name && isa<FloatType>(cst.getType().getElementType()) &&
        re.match(name.getValue()))
      matched.push_back(cst);
  }
  for (ConstantOp cst : matched) {
    StringRef name = getInitializerName(cst).getValue();
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : cst->getUses())
      uses.push_back(&use);
    // Uses are listed last-first; number the copies in program order.
    llvm::sort(uses, [](OpOperand *a, OpOperand *b) {
      return a->getOwner()->isBeforeInBlock(b->getOwner());
    });
    OpBuilder b(cst);
    for (auto [k, use] : llvm::enumerate(llvm::drop_begin(uses))) {
      Operation *copy = b.clone(*cst);
      setInitializerName(copy, (name + ".untied" + Twine(k + 1)).str());
      // Where the copy came from and which ONNX node reads it, for
      // --export-onnx to write it back as an initializer of its own.
      copy->setAttr(attr::kUntiedFrom, b.getStringAttr(name));
      if (auto node = dyn_cast<NameLoc>(use->getOwner()->getLoc()))
        copy->setAttr(attr::kUntiedNode, node.getName());
      use->set(copy->getResult(0));
    }
  }
}

/// Warns about a parameter that several ops of one kind use: exporters
/// merge initializers that hold equal values (LayerNorm weights of ones,
/// zero biases of different layers) into one, which then trains as one
/// tied parameter. (A tied embedding is used by ops of different kinds.)
static void warnMergedInitializers(ArrayRef<ConstantOp> params,
                                   llvm::Regex *untie) {
  for (ConstantOp cst : params) {
    StringRef name = getInitializerName(cst).getValue();
    if (untie && untie->match(name))
      continue;
    llvm::StringMap<llvm::SmallPtrSet<Operation *, 4>> usersByKind;
    for (Operation *user : cst->getUsers())
      usersByKind[user->getName().getStringRef()].insert(user);
    for (const auto &entry : usersByKind) {
      if (entry.second.size() < 2)
        continue;
      cst.emitWarning() << "initializer '" << name << "' is used by "
                        << entry.second.size() << " '" << entry.getKey()
                        << "' ops and trains as one tied parameter; if the "
                           "exporter merged equal initializers of different "
                           "layers, pass --untie='"
                        << name << "' to train one parameter per use";
      break;
    }
  }
}

FailureOr<TrainingState> selectTrainingState(func::FuncOp main,
                                             const ParameterOptions &options) {
  if (options.untie)
    untieInitializers(main, *options.untie);

  Block &body = main.getBody().front();
  bool hasKinds = llvm::any_of(body.getOps<ConstantOp>(), [](ConstantOp c) {
    return getInitializerKind(c).has_value();
  });
  TrainingState state;
  // Buffers: initializers whose new values @main returns.
  llvm::StringMap<ConstantOp> byName;
  for (auto cst : body.getOps<ConstantOp>())
    if (auto name = getInitializerName(cst))
      byName[name.getValue()] = cst;
  for (unsigned i = 0; i < main.getNumResults(); ++i) {
    auto name = getResultUpdatesInitializer(main, i);
    if (!name)
      continue;
    ConstantOp cst = byName.lookup(name.getValue());
    if (!cst || llvm::is_contained(state.buffers, cst)) {
      main.emitError() << "initializer '" << name.getValue()
                       << "' is updated twice by the model (a running "
                          "statistic shared by two BatchNormalization "
                          "nodes?) or is not an initializer";
      return failure();
    }
    state.buffers.push_back(cst);
    state.bufferResults.push_back(i);
  }
  // Expert biases (--cleave-expert-bias): buffers the step moves itself.
  for (auto cst : body.getOps<ConstantOp>())
    if (cst->hasAttr(attr::kExpertBias) &&
        !llvm::is_contained(state.buffers, cst)) {
      state.buffers.push_back(cst);
      state.bufferResults.push_back(TrainingState::kStepUpdated);
    }

  for (auto cst : body.getOps<ConstantOp>()) {
    auto name = getInitializerName(cst);
    if (!name || !isa<FloatType>(cst.getType().getElementType()) ||
        llvm::is_contained(state.buffers, cst))
      continue;
    bool selected;
    if (options.trainable)
      selected = options.trainable->match(name.getValue());
    else if (cst->hasAttr(attr::kBatchNormStatistic))
      selected = false;
    else if (hasKinds)
      selected = isTorchParameter(cst);
    else
      selected = cst.getType().getNumElements() > 1;
    if (selected && !(options.frozen && options.frozen->match(name.getValue())))
      state.params.push_back(cst);
  }
  if (state.params.empty()) {
    auto diag = main.emitError()
                << "no trainable parameters: no float initializer ";
    if (!options.trainable)
      diag << (hasKinds ? "is a parameter of the PyTorch export"
                        : "has more than one element");
    else
      diag << "matches --trainable='" << options.trainablePattern << "'";
    return failure();
  }
  warnMergedInitializers(state.params, options.untie);
  return state;
}

} // namespace cleave::training
