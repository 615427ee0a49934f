//===- PlanMetadata.cpp - The typed keys of a plan's metadata -------------===//
//
// The table of declared keys, the typed writers and readers, and the check
// plan::validate runs on every plan's metadata (cleave/PlanMetadata.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/PlanMetadata.h"
#include "cleave/PlanFormat.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cleave::plan {

const std::vector<MetadataKeyInfo> &metadataKeys() {
  using K = MetadataKind;
  static const std::vector<MetadataKeyInfo> keys = {
      {meta::kProducer.name, K::Text, false},
      {meta::kModel.name, K::Text, false},
      {meta::kSourceModel.name, K::Text, false},
      {meta::kFlops.name, K::Integer, false},
      {meta::kKernels.name, K::Integer, false},
      {meta::kUniqueKernels.name, K::Integer, false},
      {meta::kGemms.name, K::Integer, false},
      {meta::kConstantBytes.name, K::Integer, false},
      {meta::kUnplannedBytes.name, K::Integer, false},
      {meta::kCollectives.name, K::Integer, false},
      {meta::kCommBytesPerRank.name, K::Integer, false},
      {meta::kKernelCosts.name, K::List, false},
      {meta::kUntied.name, K::Text, false},
      {meta::kFolded.name, K::Text, false},
      {meta::kPipelineSteps.name, K::List, false},
      {meta::kMetricOutputs.name, K::List, false},
      {meta::kActivationBytes.name, K::Integer, false},
      {meta::kAccumulatorBytes.name, K::Integer, false},
      {meta::kKeptBytes.name, K::Integer, false},
      {meta::kInitParameters.name, K::Text, false},
      {meta::kKernelCode.name, K::Text, false},
      {meta::kKernelPtx.name, K::Text, false},
      {meta::kCudaScratchBytes.name, K::Integer, false},
      {meta::kCpuScratchBytes.name, K::Integer, false},
      {meta::kCudaGraph.name, K::Text, false},
      {meta::kCudaTf32.name, K::Text, false},
      {meta::kRecognizedAttention.name, K::Integer, false},
      {meta::kRecognizedRmsNorm.name, K::Integer, false},
      {meta::kRecognizedSilu.name, K::Integer, false},
      {meta::kRecognizedExperts.name, K::Integer, false},
      {meta::kRecomputePolicy.name, K::Text, false},
      {meta::kSavedActivationBytesBefore.name, K::Integer, false},
      {meta::kSavedActivationBytesAfter.name, K::Integer, false},
      {meta::kRecomputeFlops.name, K::Integer, false},
      {meta::kRecomputeExtraFlops.name, K::Integer, false},
      {meta::kPipelineRank.name, K::Integer, false},
      {meta::kPipelineExpected.name, K::Text, false},
      {meta::kValidRangePrefix, K::Range, true},
  };
  return keys;
}

MetadataEntry metadataEntry(TextKey key, std::string value) {
  return {key.name, std::move(value)};
}

MetadataEntry metadataEntry(IntegerKey key, int64_t value) {
  return {key.name, std::to_string(value)};
}

MetadataEntry metadataEntry(ListKey key,
                            const std::vector<std::string> &items) {
  std::string value;
  for (size_t i = 0; i < items.size(); ++i)
    value += (i ? "," : "") + items[i];
  return {key.name, std::move(value)};
}

MetadataEntry validRangeEntry(const std::string &input,
                              const std::vector<int64_t> &values) {
  std::string value;
  for (size_t i = 0; i < values.size(); ++i)
    value += (i ? "," : "") + std::to_string(values[i]);
  return {meta::kValidRangePrefix + input, std::move(value)};
}

void addMetadata(Plan &plan, TextKey key, std::string value) {
  plan.metadata.push_back(metadataEntry(key, std::move(value)));
}
void addMetadata(Plan &plan, IntegerKey key, int64_t value) {
  plan.metadata.push_back(metadataEntry(key, value));
}
void addMetadata(Plan &plan, ListKey key,
                 const std::vector<std::string> &items) {
  plan.metadata.push_back(metadataEntry(key, items));
}

const std::string *findMetadata(const Plan &plan, const std::string &name) {
  for (const MetadataEntry &entry : plan.metadata)
    if (entry.first == name)
      return &entry.second;
  return nullptr;
}

std::optional<int64_t> parseMetadataInteger(const std::string &text) {
  if (text.empty())
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end)
    return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<std::vector<int64_t>>
parseMetadataRange(const std::string &text) {
  std::vector<std::string> items = splitMetadataList(text);
  if (items.size() != 2 && items.size() != 3)
    return std::nullopt;
  std::vector<int64_t> values;
  for (const std::string &item : items) {
    std::optional<int64_t> v = parseMetadataInteger(item);
    if (!v)
      return std::nullopt;
    values.push_back(*v);
  }
  return values;
}

std::vector<std::string> splitMetadataList(const std::string &text) {
  std::vector<std::string> items;
  if (text.empty())
    return items;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos)
      return items;
    start = comma + 1;
  }
}

std::optional<std::string> getMetadata(const Plan &plan, TextKey key) {
  if (const std::string *v = findMetadata(plan, key.name))
    return *v;
  return std::nullopt;
}

std::optional<int64_t> getMetadata(const Plan &plan, IntegerKey key) {
  const std::string *v = findMetadata(plan, key.name);
  return v ? parseMetadataInteger(*v) : std::nullopt;
}

std::vector<std::string> getMetadata(const Plan &plan, ListKey key) {
  const std::string *v = findMetadata(plan, key.name);
  return v ? splitMetadataList(*v) : std::vector<std::string>();
}

bool checkMetadata(const std::vector<MetadataEntry> &metadata,
                   std::string *error) {
  for (const auto &[key, value] : metadata)
    for (const MetadataKeyInfo &info : metadataKeys()) {
      if (info.prefix ? key.compare(0, std::strlen(info.name), info.name) != 0
                      : key != info.name)
        continue;
      bool ok = true;
      const char *expected = "";
      switch (info.kind) {
      case MetadataKind::Text:
      case MetadataKind::List:
        break;
      case MetadataKind::Integer:
        ok = parseMetadataInteger(value).has_value();
        expected = "a decimal integer";
        break;
      case MetadataKind::Range:
        ok = parseMetadataRange(value).has_value();
        expected = "'lo,hi' or 'lo,hi,extra' (decimal integers)";
        break;
      }
      if (!ok) {
        if (error)
          *error = "metadata '" + key + "' is '" + value + "', not " + expected;
        return false;
      }
      break;
    }
  return true;
}

} // namespace cleave::plan
