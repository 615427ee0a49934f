//===- PlanMetadata.h - The typed keys of a plan's metadata -----*- C++ -*-===//
//
// A plan carries named metadata entries (Plan::metadata: key and text
// value, in the order written). Every key Cleave writes or reads is
// declared here once, with the kind its value reads as; writers and
// readers go through the typed keys, and plan::validate checks that each
// known key's value reads as its kind, so a plan with `flops = "many"` is
// an error naming the key, not a zero in a report. Keys not declared here
// are carried along unchecked (a newer compiler's additions).
//
// Shared by the compiler and the runtime (no dependency beyond the STL).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANMETADATA_H
#define CLEAVE_PLANMETADATA_H

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cleave::plan {

struct Plan;

/// What a metadata value reads as.
enum class MetadataKind {
  Text,    ///< Any text.
  Integer, ///< A decimal integer (counts and byte sizes).
  List,    ///< Comma-separated items ("" is no items).
  Range,   ///< "lo,hi" or "lo,hi,extra", decimal integers.
};

/// A metadata key whose value reads as `K`.
template <MetadataKind K> struct MetadataKey {
  const char *name;
};
using TextKey = MetadataKey<MetadataKind::Text>;
using IntegerKey = MetadataKey<MetadataKind::Integer>;
using ListKey = MetadataKey<MetadataKind::List>;

/// One metadata entry, as stored.
using MetadataEntry = std::pair<std::string, std::string>;

namespace meta {
// Written by the plan builder for every plan.
inline constexpr TextKey kProducer{"producer"};
inline constexpr TextKey kModel{"model"};
/// The model file the plan was compiled from (cleave-run checks a
/// checkpoint's model against it).
inline constexpr TextKey kSourceModel{"source_model"};
inline constexpr IntegerKey kFlops{"flops"};
inline constexpr IntegerKey kKernels{"kernels"};
inline constexpr IntegerKey kUniqueKernels{"unique_kernels"};
inline constexpr IntegerKey kGemms{"gemms"};
inline constexpr IntegerKey kConstantBytes{"constant_bytes"};
inline constexpr IntegerKey kUnplannedBytes{"unplanned_bytes"};
inline constexpr IntegerKey kCollectives{"collectives"};
inline constexpr IntegerKey kCommBytesPerRank{"comm_bytes_per_rank"};
/// Per kernel command, "flops:bytes" (the simulator's kernel costs).
inline constexpr ListKey kKernelCosts{"kernel_costs"};
/// A JSON array of the parameters --untie made: [{"name", "from", "node"}].
inline constexpr TextKey kUntied{"untied"};
/// A JSON array of the parameters made again from a PyTorch export's
/// transposed copies, for --export-onnx: [{"name", "copy", "in_source"}].
inline constexpr TextKey kFolded{"folded"};
/// The names of the steps Marker commands index ("F0,F1,B0,..."), in a
/// stage plan or an unpipelined plan.
inline constexpr ListKey kPipelineSteps{"pipeline_steps"};
// Memory of a training step's activations (--report=memory).
inline constexpr IntegerKey kActivationBytes{"activation_bytes"};
inline constexpr IntegerKey kAccumulatorBytes{"accumulator_bytes"};
inline constexpr IntegerKey kKeptBytes{"kept_bytes"};
/// How the parameters were initialized ("normal std S seed N ...").
inline constexpr TextKey kInitParameters{"init_parameters"};
// Kernel code.
/// "none": a plan compiled without kernel code (--emit=sim), which the
/// validator accepts without a kernel object and the runtime refuses to run.
inline constexpr TextKey kKernelCode{"kernel_code"};
inline constexpr TextKey kKernelPtx{"kernel_ptx"};
inline constexpr IntegerKey kCudaScratchBytes{"cuda_scratch_bytes"};
inline constexpr IntegerKey kCpuScratchBytes{"cpu_scratch_bytes"};
/// "0" turns CUDA graph replay off for this plan.
inline constexpr TextKey kCudaGraph{"cuda_graph"};
/// "1" allows TF32 tensor cores for f32 GEMMs.
inline constexpr TextKey kCudaTf32{"cuda_tf32"};
// How many composites --cleave-recognize-composites made.
inline constexpr IntegerKey kRecognizedAttention{"recognized_attention"};
inline constexpr IntegerKey kRecognizedRmsNorm{"recognized_rms_norm"};
inline constexpr IntegerKey kRecognizedSilu{"recognized_silu"};
/// Written only where the program has some.
inline constexpr IntegerKey kRecognizedExperts{"recognized_experts"};
/// The outputs of a training step the training loop logs each step by
/// name (role metric): "moe.expert_load" (each router's rows per expert,
/// routers x experts), "moe.dropped_rows" (rows past their expert's
/// capacity).
inline constexpr ListKey kMetricOutputs{"metric_outputs"};
// What --cleave-insert-recompute did.
inline constexpr TextKey kRecomputePolicy{"recompute_policy"};
inline constexpr IntegerKey kSavedActivationBytesBefore{
    "saved_activation_bytes_before"};
inline constexpr IntegerKey kSavedActivationBytesAfter{
    "saved_activation_bytes_after"};
inline constexpr IntegerKey kRecomputeFlops{"recompute_flops"};
inline constexpr IntegerKey kRecomputeExtraFlops{"recompute_extra_flops"};
// Pipelined plans.
/// A stage plan's pipeline rank.
inline constexpr IntegerKey kPipelineRank{"pipeline_rank"};
/// The bubble the schedule is expected to have, in words.
inline constexpr TextKey kPipelineExpected{"pipeline_expected"};
/// The prefix of an integer input's valid values: key "valid_range.<input
/// name>", value "lo,hi" or "lo,hi,extra": the input's elements must lie
/// in [lo, hi) or equal `extra`. cleave-compile records it for indices
/// into a table (a token embedding's ids: [-rows, rows), as ONNX Gather
/// counts negative indices from the end) and for cross-entropy labels
/// ([0, classes) and the ignore index); the training loop checks the data
/// it feeds against it (an out-of-range id would read zeros and train on
/// nothing).
inline constexpr const char *kValidRangePrefix = "valid_range.";
} // namespace meta

/// A declared key: its name (a prefix for prefix keys), kind and meaning.
struct MetadataKeyInfo {
  const char *name;
  MetadataKind kind;
  bool prefix;
};
/// Every key of namespace meta.
const std::vector<MetadataKeyInfo> &metadataKeys();

/// An entry of `key` with `value`, in the form readers expect.
MetadataEntry metadataEntry(TextKey key, std::string value);
MetadataEntry metadataEntry(IntegerKey key, int64_t value);
MetadataEntry metadataEntry(ListKey key, const std::vector<std::string> &items);
/// The valid-range entry of input `input`.
MetadataEntry validRangeEntry(const std::string &input,
                              const std::vector<int64_t> &values);

/// Appends metadataEntry(key, value) to `plan`'s metadata.
void addMetadata(Plan &plan, TextKey key, std::string value);
void addMetadata(Plan &plan, IntegerKey key, int64_t value);
void addMetadata(Plan &plan, ListKey key,
                 const std::vector<std::string> &items);

/// The value of the first entry named `name` in `plan` (not its stages'),
/// or null.
const std::string *findMetadata(const Plan &plan, const std::string &name);
/// Typed reads; nullopt (or no items) where `plan` has no such entry or it
/// does not read as its kind.
std::optional<std::string> getMetadata(const Plan &plan, TextKey key);
std::optional<int64_t> getMetadata(const Plan &plan, IntegerKey key);
std::vector<std::string> getMetadata(const Plan &plan, ListKey key);

/// Parses an Integer value (the whole text); nullopt if it is not one.
std::optional<int64_t> parseMetadataInteger(const std::string &text);
/// Parses a Range value: "lo,hi" or "lo,hi,extra" (2 or 3 integers);
/// nullopt if it is not one.
std::optional<std::vector<int64_t>> parseMetadataRange(const std::string &text);
/// Splits a List value at commas ("" gives no items).
std::vector<std::string> splitMetadataList(const std::string &text);

/// Checks that every entry of a declared key reads as the key's kind.
/// Returns false with `*error` naming the key and value otherwise.
bool checkMetadata(const std::vector<MetadataEntry> &metadata,
                   std::string *error);

} // namespace cleave::plan

#endif // CLEAVE_PLANMETADATA_H
