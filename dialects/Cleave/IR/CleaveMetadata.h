//===- CleaveMetadata.h - The cleave.* metadata attributes ------*- C++ -*-===//
//
// Cleave's programs carry metadata in discardable `cleave.*` attributes: on
// ops (`cleave.initializer`, `cleave.phase`, ...), on the arguments and
// results of `@main` (`cleave.name`, `cleave.state`, `cleave.role`, ...)
// and on the module (`cleave.recompute_stats`). This header names every one
// (`attr::k...`), describes the value each holds (the table in
// CleaveMetadata.cpp, which the dialect's verifier checks) and gives typed
// accessors for the common ones. Code outside the dialect names these
// attributes only through this header.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVEMETADATA_H
#define CLEAVE_IR_CLEAVEMETADATA_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <optional>

#include "Cleave/IR/CleaveMetadataEnums.h.inc"

namespace mlir {
class FunctionOpInterface;
} // namespace mlir

namespace mlir::cleave {

/// The name of every metadata attribute. CleaveMetadata.cpp says what each
/// holds and where it may appear.
namespace attr {
// Function arguments and results.
inline constexpr llvm::StringLiteral kName = "cleave.name";
inline constexpr llvm::StringLiteral kState = "cleave.state";
inline constexpr llvm::StringLiteral kRole = "cleave.role";
inline constexpr llvm::StringLiteral kParameter = "cleave.parameter";
inline constexpr llvm::StringLiteral kSlot = "cleave.slot";
inline constexpr llvm::StringLiteral kInitialValue = "cleave.initial_value";
inline constexpr llvm::StringLiteral kValidRange = "cleave.valid_range";
inline constexpr llvm::StringLiteral kVarying = "cleave.varying";
inline constexpr llvm::StringLiteral kUpdates = "cleave.updates";
inline constexpr llvm::StringLiteral kUpdatesInitializer =
    "cleave.updates_initializer";
inline constexpr llvm::StringLiteral kUntiedFrom = "cleave.untied_from";
inline constexpr llvm::StringLiteral kUntiedNode = "cleave.untied_node";
inline constexpr llvm::StringLiteral kTransposedCopy = "cleave.transposed_copy";
inline constexpr llvm::StringLiteral kNotInSource = "cleave.not_in_source";
inline constexpr llvm::StringLiteral kExternalData = "cleave.external_data";
inline constexpr llvm::StringLiteral kSharding = "cleave.sharding";
// Ops.
inline constexpr llvm::StringLiteral kInitializer = "cleave.initializer";
inline constexpr llvm::StringLiteral kInitializerKind =
    "cleave.initializer_kind";
inline constexpr llvm::StringLiteral kBatchNormStatistic =
    "cleave.batch_norm_statistic";
inline constexpr llvm::StringLiteral kExpertBias = "cleave.expert_bias";
inline constexpr llvm::StringLiteral kLayer = "cleave.layer";
inline constexpr llvm::StringLiteral kPhase = "cleave.phase";
inline constexpr llvm::StringLiteral kStage = "cleave.stage";
inline constexpr llvm::StringLiteral kMessage = "cleave.message";
inline constexpr llvm::StringLiteral kFp32 = "cleave.fp32";
inline constexpr llvm::StringLiteral kBackward = "cleave.backward";
inline constexpr llvm::StringLiteral kGradientOf = "cleave.gradient_of";
inline constexpr llvm::StringLiteral kRecompute = "cleave.recompute";
inline constexpr llvm::StringLiteral kPipelineRank = "cleave.pipeline_rank";
inline constexpr llvm::StringLiteral kPipelineRanks = "cleave.pipeline_ranks";
inline constexpr llvm::StringLiteral kMicrobatches = "cleave.microbatches";
inline constexpr llvm::StringLiteral kSyncEvery = "cleave.sync_every";
inline constexpr llvm::StringLiteral kReshardOnce = "cleave.reshard_once";
inline constexpr llvm::StringLiteral kShardingConflicts =
    "cleave.sharding_conflicts";
inline constexpr llvm::StringLiteral kExpertsOver = "cleave.experts_over";
inline constexpr llvm::StringLiteral kRowKernel = "cleave.row_kernel";
inline constexpr llvm::StringLiteral kScratchBytes = "cleave.scratch_bytes";
inline constexpr llvm::StringLiteral kKernel = "cleave.kernel";
inline constexpr llvm::StringLiteral kKernelGroup = "cleave.kernel_group";
// The module.
inline constexpr llvm::StringLiteral kRecomputeStats = "cleave.recompute_stats";
} // namespace attr

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

/// The value a metadata attribute holds.
enum class MetadataKind {
  String,          ///< a string
  Integer,         ///< an integer
  Float,           ///< a floating-point number
  Unit,            ///< a unit attribute (a tag)
  StateKind,       ///< a #cleave.state (or unit: see cleave.state's entry)
  Role,            ///< a #cleave.role
  InitializerKind, ///< a #cleave.initializer_kind
  Elements,        ///< a dense or resource elements attribute
  I64Array,        ///< an array<i64: ...>
  StringArray,     ///< an array of strings
  Dictionary,      ///< a dictionary
  Sharding,        ///< a #cleave.sharding
  ValueSharding,   ///< a #cleave.sharding on an argument or result, an
                   ///< array of one per result on an op
};

/// Where a metadata attribute may appear (a mask of these).
enum MetadataPlace : unsigned {
  kOnOp = 1,       ///< any op (func.func and the module included)
  kOnModule = 2,   ///< the module only
  kOnArgument = 4, ///< a function argument
  kOnResult = 8,   ///< a function result
};

/// One metadata attribute: its name, value and places.
struct MetadataAttrInfo {
  llvm::StringLiteral name;
  MetadataKind kind;
  unsigned places;
  /// What it means, one line.
  llvm::StringLiteral summary;
};

/// Every metadata attribute.
llvm::ArrayRef<MetadataAttrInfo> getMetadataAttrs();
/// The entry of `name`, or null when `name` is not a metadata attribute.
const MetadataAttrInfo *lookupMetadataAttr(llvm::StringRef name);

//===----------------------------------------------------------------------===//
// Function arguments and results
//===----------------------------------------------------------------------===//

/// cleave.name: the name of an input, state or output.
StringAttr getArgName(FunctionOpInterface fn, unsigned i);
void setArgName(FunctionOpInterface fn, unsigned i, llvm::StringRef name);
StringAttr getResultName(FunctionOpInterface fn, unsigned i);
void setResultName(FunctionOpInterface fn, unsigned i, llvm::StringRef name);

/// cleave.state: what a state argument holds; nullopt when the argument is
/// not a state or its cleave.state is a unit attribute.
std::optional<StateKind> getArgState(FunctionOpInterface fn, unsigned i);
/// True when argument `i` carries cleave.state in either form (results may
/// update it in place).
bool hasArgState(FunctionOpInterface fn, unsigned i);
void setArgState(FunctionOpInterface fn, unsigned i, StateKind kind);
/// True when argument `i` is a parameter.
bool isParameterArg(FunctionOpInterface fn, unsigned i);

/// cleave.role: what an input or output means to the training loop.
std::optional<Role> getArgRole(FunctionOpInterface fn, unsigned i);
void setArgRole(FunctionOpInterface fn, unsigned i, Role role);
std::optional<Role> getResultRole(FunctionOpInterface fn, unsigned i);
void setResultRole(FunctionOpInterface fn, unsigned i, Role role);

/// cleave.parameter: the parameter a state belongs to (itself for a
/// parameter, the parameter of an optimizer slot).
StringAttr getArgParameter(FunctionOpInterface fn, unsigned i);
void setArgParameter(FunctionOpInterface fn, unsigned i, llvm::StringRef name);
/// cleave.slot: the optimizer slot of an optimizer state ("m", "v", ...).
StringAttr getArgSlot(FunctionOpInterface fn, unsigned i);
void setArgSlot(FunctionOpInterface fn, unsigned i, llvm::StringRef slot);
/// cleave.initial_value: a state's initial value.
ElementsAttr getArgInitialValue(FunctionOpInterface fn, unsigned i);
void setArgInitialValue(FunctionOpInterface fn, unsigned i, ElementsAttr value);
/// cleave.valid_range: [lo, hi) and an extra allowed value of an integer
/// input.
DenseI64ArrayAttr getArgValidRange(FunctionOpInterface fn, unsigned i);
/// cleave.varying: the mesh axes over which a state differs from rank to
/// rank although its sharding does not split it.
ArrayAttr getArgVarying(FunctionOpInterface fn, unsigned i);

/// cleave.updates: the state argument a result's value replaces.
std::optional<int64_t> getResultUpdates(FunctionOpInterface fn, unsigned i);
void setResultUpdates(FunctionOpInterface fn, unsigned i, int64_t arg);
/// cleave.updates_initializer: the initializer an imported training
/// model's output updates.
StringAttr getResultUpdatesInitializer(FunctionOpInterface fn, unsigned i);
void setResultUpdatesInitializer(FunctionOpInterface fn, unsigned i,
                                 llvm::StringRef initializer);

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

/// cleave.initializer: the ONNX initializer a constant holds.
StringAttr getInitializerName(Operation *op);
void setInitializerName(Operation *op, llvm::StringRef name);
/// cleave.initializer_kind: what the initializer becomes in training.
std::optional<InitializerKind> getInitializerKind(Operation *op);
void setInitializerKind(Operation *op, InitializerKind kind);
/// cleave.phase: why an op was built (cited in reports and errors).
StringAttr getPhase(Operation *op);
void setPhase(Operation *op, const llvm::Twine &why);
/// cleave.layer: the layer an op belongs to, when given.
StringAttr getLayer(Operation *op);
/// cleave.stage: the pipeline stage an op runs in.
std::optional<int64_t> getStage(Operation *op);
void setStage(Operation *op, int64_t stage);
/// cleave.message: the tag of a point-to-point message.
std::optional<int64_t> getMessageTag(Operation *op);
/// cleave.microbatches: the microbatches of a step (on `@main`).
std::optional<int64_t> getMicrobatches(Operation *op);
void setMicrobatches(Operation *op, int64_t microbatches);

} // namespace mlir::cleave

#endif // CLEAVE_IR_CLEAVEMETADATA_H
