//===- CleaveMetadata.cpp - The cleave.* metadata table and verifier ------===//
//
// Every `cleave.*` metadata attribute with the value it holds and where it
// may appear, the dialect hooks that verify them on ops and on function
// arguments and results, and the typed accessors of CleaveMetadata.h.
//
//===----------------------------------------------------------------------===//

#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveDialect.h"
#include "Cleave/IR/CleaveSharding.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::cleave;

#include "Cleave/IR/CleaveMetadataEnums.cpp.inc"

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

namespace {
using K = MetadataKind;
constexpr unsigned kValue = kOnArgument | kOnResult;

const MetadataAttrInfo kMetadataAttrs[] = {
    // Function arguments and results.
    {attr::kName, K::String, kValue, "the name of an input, state or output"},
    {attr::kState, K::StateKind, kOnArgument,
     "what a state argument holds; a unit attribute marks an input that "
     "results update in place without being a state"},
    {attr::kRole, K::Role, kValue,
     "what an input or output means to the training loop"},
    {attr::kParameter, K::String, kOnArgument,
     "the parameter a state belongs to"},
    {attr::kSlot, K::String, kOnArgument, "the optimizer slot of a state"},
    {attr::kInitialValue, K::Elements, kOnArgument,
     "the initial value of a state"},
    {attr::kValidRange, K::I64Array, kOnArgument,
     "[lo, hi) and an extra allowed value of an integer input"},
    {attr::kVarying, K::StringArray, kOnArgument,
     "the mesh axes over which an unsplit state differs from rank to rank"},
    {attr::kUpdates, K::Integer, kOnResult,
     "the state argument the result replaces"},
    {attr::kUpdatesInitializer, K::String, kOnResult,
     "the initializer an imported training model's output updates"},
    {attr::kUntiedFrom, K::String, kOnOp | kOnArgument,
     "the initializer an untied parameter was copied from"},
    {attr::kUntiedNode, K::String, kOnOp | kOnArgument,
     "the ONNX node that reads an untied parameter"},
    {attr::kTransposedCopy, K::String, kOnOp | kOnArgument,
     "the initializer that held a PyTorch export's folded (transposed) copy "
     "of a parameter"},
    {attr::kNotInSource, K::Unit, kOnOp | kOnArgument,
     "a parameter made again from its folded copy, absent from the ONNX "
     "file"},
    {attr::kExternalData, K::Dictionary, kOnOp | kOnArgument,
     "where an initializer's bytes lie in the model's external data"},
    {attr::kSharding, K::ValueSharding, kOnOp | kValue,
     "how a value is split over the mesh"},
    // Ops.
    {attr::kInitializer, K::String, kOnOp,
     "the ONNX initializer a constant holds"},
    {attr::kInitializerKind, K::InitializerKind, kOnOp,
     "what an imported initializer becomes in training"},
    {attr::kBatchNormStatistic, K::Unit, kOnOp,
     "a BatchNorm running statistic (a buffer in training)"},
    {attr::kExpertBias, K::Float, kOnOp,
     "a router's expert biases (a buffer the training step moves by this "
     "rate toward an even load)"},
    {attr::kLayer, K::String, kOnOp, "the layer an op belongs to"},
    {attr::kPhase, K::String, kOnOp, "why an op was built"},
    {attr::kStage, K::Integer, kOnOp, "the pipeline stage an op runs in"},
    {attr::kMessage, K::Integer, kOnOp, "the tag of a point-to-point message"},
    {attr::kFp32, K::Unit, kOnOp,
     "an op mixed precision keeps in f32 (loss, norm, optimizer)"},
    {attr::kBackward, K::Unit, kOnOp, "an op of the backward pass"},
    {attr::kGradientOf, K::String, kOnOp,
     "the parameter whose gradient an op computes"},
    {attr::kRecompute, K::Unit, kOnOp, "a recomputed forward op"},
    {attr::kPipelineRank, K::Integer, kOnOp,
     "the pipeline rank that runs an op"},
    {attr::kPipelineRanks, K::Integer, kOnOp,
     "the pipeline ranks of a pipelined @main"},
    {attr::kMicrobatches, K::Integer, kOnOp, "the microbatches of a step"},
    {attr::kSyncEvery, K::Integer, kOnOp,
     "the steps between local SGD's synchronizations"},
    {attr::kReshardOnce, K::Sharding, kOnOp,
     "the layout a result is resharded to once for all its users"},
    {attr::kShardingConflicts, K::StringArray, kOnOp,
     "the sharding conflicts propagation settled on an op"},
    {attr::kExpertsOver, K::StringArray, kOnOp,
     "the mesh axes a partitioned grouped matmul's experts are split over"},
    {attr::kRowKernel, K::Unit, kOnOp, "a loop that is one row kernel"},
    {attr::kScratchBytes, K::Integer, kOnOp,
     "the scratch bytes a kernel function needs"},
    {attr::kKernel, K::String, kOnOp,
     "the outlined kernel function that holds an op's code"},
    {attr::kKernelGroup, K::Integer, kOnOp,
     "the plan command (one per fused kernel) an op belongs to"},
    // The module.
    {attr::kRecomputeStats, K::Dictionary, kOnModule,
     "the statistics of --cleave-insert-recompute"},
};

/// What `kind` holds, for messages ("must be <this>").
StringRef describe(MetadataKind kind) {
  switch (kind) {
  case K::String:
    return "a string";
  case K::Integer:
    return "an integer";
  case K::Float:
    return "a float";
  case K::Unit:
    return "a unit attribute";
  case K::StateKind:
    return "a #cleave.state";
  case K::Role:
    return "a #cleave.role";
  case K::InitializerKind:
    return "a #cleave.initializer_kind";
  case K::Elements:
    return "an elements attribute";
  case K::I64Array:
    return "an array<i64: ...>";
  case K::StringArray:
    return "an array of strings";
  case K::Dictionary:
    return "a dictionary";
  case K::Sharding:
    return "a #cleave.sharding";
  case K::ValueSharding:
    return "a #cleave.sharding";
  }
  return "";
}

bool isStringArray(Attribute value) {
  auto array = dyn_cast<ArrayAttr>(value);
  return array && llvm::all_of(array, llvm::IsaPred<StringAttr>);
}

/// Whether `value` is what `kind` holds; `onOp` for an op's attribute.
bool holds(MetadataKind kind, Attribute value, bool onOp) {
  switch (kind) {
  case K::String:
    return isa<StringAttr>(value);
  case K::Integer:
    return isa<IntegerAttr>(value);
  case K::Float:
    return isa<FloatAttr>(value);
  case K::Unit:
    return isa<UnitAttr>(value);
  case K::StateKind:
    return isa<StateKindAttr, UnitAttr>(value);
  case K::Role:
    return isa<RoleAttr>(value);
  case K::InitializerKind:
    return isa<InitializerKindAttr>(value);
  case K::Elements:
    return isa<ElementsAttr>(value);
  case K::I64Array:
    return isa<DenseI64ArrayAttr>(value);
  case K::StringArray:
    return isStringArray(value);
  case K::Dictionary:
    return isa<DictionaryAttr>(value);
  case K::Sharding:
    return isa<TensorShardingAttr>(value);
  case K::ValueSharding:
    if (!onOp)
      return isa<TensorShardingAttr>(value);
    if (auto array = dyn_cast<ArrayAttr>(value))
      return llvm::all_of(array, llvm::IsaPred<TensorShardingAttr, UnitAttr>);
    return false;
  }
  return false;
}

/// Where `places` allows, for messages.
std::string describePlaces(unsigned places) {
  SmallVector<StringRef> names;
  if (places & kOnOp)
    names.push_back("an op");
  if ((places & kOnModule) && !(places & kOnOp))
    names.push_back("the module");
  if (places & kOnArgument)
    names.push_back("a function argument");
  if (places & kOnResult)
    names.push_back("a function result");
  std::string out;
  for (auto [i, name] : llvm::enumerate(names))
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + name.str();
  return out;
}

/// Checks `named` at `place`; `where` prefixes messages ("argument 2: ").
LogicalResult verifyMetadata(Operation *op, NamedAttribute named,
                             MetadataPlace place, const std::string &where) {
  StringRef name = named.getName().getValue();
  const MetadataAttrInfo *info = lookupMetadataAttr(name);
  if (!info)
    return op->emitOpError()
           << where << "unknown metadata attribute " << name
           << " (the cleave.* attributes are listed in CleaveMetadata.cpp)";
  bool allowed = info->places & place;
  if (place == kOnOp && isa<ModuleOp>(op))
    allowed = info->places & (kOnOp | kOnModule);
  if (!allowed)
    return op->emitOpError()
           << where << name << " belongs on " << describePlaces(info->places);
  if (!holds(info->kind, named.getValue(), place == kOnOp))
    return op->emitOpError()
           << where << name << " must be " << describe(info->kind)
           << (info->kind == K::ValueSharding && place == kOnOp
                   ? " array (one per result, unit for none)"
                   : "")
           << ", got " << named.getValue();
  return success();
}

/// "argument 2 ('x'): " for messages.
std::string describeValue(StringRef what, unsigned index,
                          DictionaryAttr attrs) {
  std::string out = (what + " " + Twine(index)).str();
  if (auto name = attrs ? attrs.getAs<StringAttr>(attr::kName) : nullptr)
    out += " ('" + name.getValue().str() + "')";
  return out + ": ";
}
} // namespace

ArrayRef<MetadataAttrInfo> mlir::cleave::getMetadataAttrs() {
  return kMetadataAttrs;
}

const MetadataAttrInfo *mlir::cleave::lookupMetadataAttr(StringRef name) {
  const MetadataAttrInfo *it =
      llvm::find_if(kMetadataAttrs,
                    [&](const MetadataAttrInfo &i) { return i.name == name; });
  return it == std::end(kMetadataAttrs) ? nullptr : it;
}

//===----------------------------------------------------------------------===//
// The dialect's verifier hooks
//===----------------------------------------------------------------------===//

LogicalResult CleaveDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute named) {
  return verifyMetadata(op, named, kOnOp, "");
}

LogicalResult CleaveDialect::verifyRegionArgAttribute(Operation *op,
                                                      unsigned region,
                                                      unsigned index,
                                                      NamedAttribute named) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  DictionaryAttr attrs = fn && region == 0 ? fn.getArgAttrDict(index) : nullptr;
  return verifyMetadata(op, named, kOnArgument,
                        describeValue("argument", index, attrs));
}

LogicalResult CleaveDialect::verifyRegionResultAttribute(Operation *op,
                                                         unsigned region,
                                                         unsigned index,
                                                         NamedAttribute named) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  DictionaryAttr attrs =
      fn && region == 0 ? fn.getResultAttrDict(index) : nullptr;
  return verifyMetadata(op, named, kOnResult,
                        describeValue("result", index, attrs));
}

//===----------------------------------------------------------------------===//
// Function arguments and results
//===----------------------------------------------------------------------===//

static StringAttr str(FunctionOpInterface fn, StringRef s) {
  return StringAttr::get(fn->getContext(), s);
}

StringAttr mlir::cleave::getArgName(FunctionOpInterface fn, unsigned i) {
  return fn.getArgAttrOfType<StringAttr>(i, attr::kName);
}
void mlir::cleave::setArgName(FunctionOpInterface fn, unsigned i,
                              StringRef name) {
  fn.setArgAttr(i, attr::kName, str(fn, name));
}
StringAttr mlir::cleave::getResultName(FunctionOpInterface fn, unsigned i) {
  return fn.getResultAttrOfType<StringAttr>(i, attr::kName);
}
void mlir::cleave::setResultName(FunctionOpInterface fn, unsigned i,
                                 StringRef name) {
  fn.setResultAttr(i, attr::kName, str(fn, name));
}

std::optional<StateKind> mlir::cleave::getArgState(FunctionOpInterface fn,
                                                   unsigned i) {
  if (auto kind = fn.getArgAttrOfType<StateKindAttr>(i, attr::kState))
    return kind.getValue();
  return std::nullopt;
}
bool mlir::cleave::hasArgState(FunctionOpInterface fn, unsigned i) {
  return static_cast<bool>(fn.getArgAttr(i, attr::kState));
}
bool mlir::cleave::isParameterArg(FunctionOpInterface fn, unsigned i) {
  return getArgState(fn, i) == StateKind::parameter;
}
void mlir::cleave::setArgState(FunctionOpInterface fn, unsigned i,
                               StateKind kind) {
  fn.setArgAttr(i, attr::kState, StateKindAttr::get(fn->getContext(), kind));
}

std::optional<Role> mlir::cleave::getArgRole(FunctionOpInterface fn,
                                             unsigned i) {
  if (auto role = fn.getArgAttrOfType<RoleAttr>(i, attr::kRole))
    return role.getValue();
  return std::nullopt;
}
void mlir::cleave::setArgRole(FunctionOpInterface fn, unsigned i, Role role) {
  fn.setArgAttr(i, attr::kRole, RoleAttr::get(fn->getContext(), role));
}
std::optional<Role> mlir::cleave::getResultRole(FunctionOpInterface fn,
                                                unsigned i) {
  if (auto role = fn.getResultAttrOfType<RoleAttr>(i, attr::kRole))
    return role.getValue();
  return std::nullopt;
}
void mlir::cleave::setResultRole(FunctionOpInterface fn, unsigned i,
                                 Role role) {
  fn.setResultAttr(i, attr::kRole, RoleAttr::get(fn->getContext(), role));
}

StringAttr mlir::cleave::getArgParameter(FunctionOpInterface fn, unsigned i) {
  return fn.getArgAttrOfType<StringAttr>(i, attr::kParameter);
}
void mlir::cleave::setArgParameter(FunctionOpInterface fn, unsigned i,
                                   StringRef name) {
  fn.setArgAttr(i, attr::kParameter, str(fn, name));
}
StringAttr mlir::cleave::getArgSlot(FunctionOpInterface fn, unsigned i) {
  return fn.getArgAttrOfType<StringAttr>(i, attr::kSlot);
}
void mlir::cleave::setArgSlot(FunctionOpInterface fn, unsigned i,
                              StringRef slot) {
  fn.setArgAttr(i, attr::kSlot, str(fn, slot));
}
ElementsAttr mlir::cleave::getArgInitialValue(FunctionOpInterface fn,
                                              unsigned i) {
  return fn.getArgAttrOfType<ElementsAttr>(i, attr::kInitialValue);
}
void mlir::cleave::setArgInitialValue(FunctionOpInterface fn, unsigned i,
                                      ElementsAttr value) {
  fn.setArgAttr(i, attr::kInitialValue, value);
}
DenseI64ArrayAttr mlir::cleave::getArgValidRange(FunctionOpInterface fn,
                                                 unsigned i) {
  return fn.getArgAttrOfType<DenseI64ArrayAttr>(i, attr::kValidRange);
}
ArrayAttr mlir::cleave::getArgVarying(FunctionOpInterface fn, unsigned i) {
  return fn.getArgAttrOfType<ArrayAttr>(i, attr::kVarying);
}

std::optional<int64_t> mlir::cleave::getResultUpdates(FunctionOpInterface fn,
                                                      unsigned i) {
  if (auto arg = fn.getResultAttrOfType<IntegerAttr>(i, attr::kUpdates))
    return arg.getInt();
  return std::nullopt;
}
void mlir::cleave::setResultUpdates(FunctionOpInterface fn, unsigned i,
                                    int64_t arg) {
  fn.setResultAttr(
      i, attr::kUpdates,
      IntegerAttr::get(IntegerType::get(fn->getContext(), 64), arg));
}
StringAttr mlir::cleave::getResultUpdatesInitializer(FunctionOpInterface fn,
                                                     unsigned i) {
  return fn.getResultAttrOfType<StringAttr>(i, attr::kUpdatesInitializer);
}
void mlir::cleave::setResultUpdatesInitializer(FunctionOpInterface fn,
                                               unsigned i,
                                               StringRef initializer) {
  fn.setResultAttr(i, attr::kUpdatesInitializer, str(fn, initializer));
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

static std::optional<int64_t> getInt(Operation *op, StringRef name) {
  if (auto value = op->getAttrOfType<IntegerAttr>(name))
    return value.getInt();
  return std::nullopt;
}

static void setInt(Operation *op, StringRef name, int64_t value) {
  op->setAttr(name,
              IntegerAttr::get(IntegerType::get(op->getContext(), 64), value));
}

StringAttr mlir::cleave::getInitializerName(Operation *op) {
  return op->getAttrOfType<StringAttr>(attr::kInitializer);
}
void mlir::cleave::setInitializerName(Operation *op, StringRef name) {
  op->setAttr(attr::kInitializer, StringAttr::get(op->getContext(), name));
}
std::optional<InitializerKind> mlir::cleave::getInitializerKind(Operation *op) {
  if (auto kind =
          op->getAttrOfType<InitializerKindAttr>(attr::kInitializerKind))
    return kind.getValue();
  return std::nullopt;
}
void mlir::cleave::setInitializerKind(Operation *op, InitializerKind kind) {
  op->setAttr(attr::kInitializerKind,
              InitializerKindAttr::get(op->getContext(), kind));
}
StringAttr mlir::cleave::getPhase(Operation *op) {
  return op->getAttrOfType<StringAttr>(attr::kPhase);
}
void mlir::cleave::setPhase(Operation *op, const Twine &why) {
  op->setAttr(attr::kPhase, StringAttr::get(op->getContext(), why));
}
StringAttr mlir::cleave::getLayer(Operation *op) {
  return op->getAttrOfType<StringAttr>(attr::kLayer);
}
std::optional<int64_t> mlir::cleave::getStage(Operation *op) {
  return getInt(op, attr::kStage);
}
void mlir::cleave::setStage(Operation *op, int64_t stage) {
  setInt(op, attr::kStage, stage);
}
std::optional<int64_t> mlir::cleave::getMessageTag(Operation *op) {
  return getInt(op, attr::kMessage);
}
std::optional<int64_t> mlir::cleave::getMicrobatches(Operation *op) {
  return getInt(op, attr::kMicrobatches);
}
void mlir::cleave::setMicrobatches(Operation *op, int64_t microbatches) {
  setInt(op, attr::kMicrobatches, microbatches);
}
