//===- AttributeChecks.cpp - ONNX node attributes against their schemas ---===//
//
// Every attribute of a default-domain node is checked before import against
// its op's schema at the model's opset: libonnx 1.12's OpSchemaRegistry up to
// the versions it knows (opset 17), the table generated from newer onnx
// (NewerSchemas.inc) for the versions of opset 18 on. A small table adds
// what schemas do not say: integers that are flags (0 or 1), strings from a
// fixed set, and window attributes whose length follows the spatial rank.
//
//===----------------------------------------------------------------------===//

#include "ModelChecks.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/defs/schema.h>

#include <map>
#include <optional>

using namespace mlir;

namespace cleave::onnximport {

using AP = onnx::AttributeProto;

//===----------------------------------------------------------------------===//
// What an attribute holds
//===----------------------------------------------------------------------===//

std::string attributeTypeNoun(int type) {
  switch (type) {
  case AP::FLOAT:
    return "a float";
  case AP::INT:
    return "an integer";
  case AP::STRING:
    return "a string";
  case AP::TENSOR:
    return "a tensor";
  case AP::GRAPH:
    return "a graph";
  case AP::SPARSE_TENSOR:
    return "a sparse tensor";
  case AP::TYPE_PROTO:
    return "a type";
  case AP::FLOATS:
    return "a list of floats";
  case AP::INTS:
    return "a list of integers";
  case AP::STRINGS:
    return "a list of strings";
  case AP::TENSORS:
    return "a list of tensors";
  case AP::GRAPHS:
    return "a list of graphs";
  case AP::SPARSE_TENSORS:
    return "a list of sparse tensors";
  case AP::TYPE_PROTOS:
    return "a list of types";
  default:
    return "no value";
  }
}

/// The type of the field an attribute populates (UNDEFINED when none is).
static int populatedType(const AP &a) {
  if (a.has_i())
    return AP::INT;
  if (a.has_f())
    return AP::FLOAT;
  if (a.has_s())
    return AP::STRING;
  if (a.has_t())
    return AP::TENSOR;
  if (a.has_g())
    return AP::GRAPH;
  if (a.has_sparse_tensor())
    return AP::SPARSE_TENSOR;
  if (a.has_tp())
    return AP::TYPE_PROTO;
  if (a.ints_size())
    return AP::INTS;
  if (a.floats_size())
    return AP::FLOATS;
  if (a.strings_size())
    return AP::STRINGS;
  if (a.tensors_size())
    return AP::TENSORS;
  if (a.graphs_size())
    return AP::GRAPHS;
  if (a.sparse_tensors_size())
    return AP::SPARSE_TENSORS;
  if (a.type_protos_size())
    return AP::TYPE_PROTOS;
  return AP::UNDEFINED;
}

/// Whether the field of a single-valued `type` is populated (a list type is
/// always: an empty list is a list).
static bool populates(const AP &a, int type) {
  switch (type) {
  case AP::INT:
    return a.has_i();
  case AP::FLOAT:
    return a.has_f();
  case AP::STRING:
    return a.has_s();
  case AP::TENSOR:
    return a.has_t();
  case AP::GRAPH:
    return a.has_g();
  case AP::SPARSE_TENSOR:
    return a.has_sparse_tensor();
  case AP::TYPE_PROTO:
    return a.has_tp();
  default:
    return true;
  }
}

static bool isListType(int type) { return type >= AP::FLOATS; }

/// The type of the value an attribute holds: its declared type when that
/// field is populated, the populated field's when it declares none.
static int heldType(const AP &a) {
  if (a.type() == AP::UNDEFINED)
    return populatedType(a);
  return populates(a, a.type()) ? a.type() : AP::UNDEFINED;
}

bool attributeHolds(const AP &attr, int type) {
  int held = heldType(attr);
  if (held == type)
    return true;
  // An undeclared attribute with nothing populated reads as an empty list.
  return isListType(type) && attr.type() == AP::UNDEFINED &&
         held == AP::UNDEFINED;
}

std::string describeAttribute(const AP &a) {
  std::string s;
  llvm::raw_string_ostream os(s);
  int type = heldType(a);
  switch (type) {
  case AP::INT:
    os << "an integer " << a.i();
    break;
  case AP::FLOAT:
    os << "a float " << a.f();
    break;
  case AP::STRING: {
    os << "a string '";
    llvm::printEscapedString(StringRef(a.s()).take_front(64), os);
    os << (a.s().size() > 64 ? "...'" : "'");
    break;
  }
  case AP::INTS:
    os << "a list of " << a.ints_size() << " integers";
    break;
  case AP::FLOATS:
    os << "a list of " << a.floats_size() << " floats";
    break;
  case AP::STRINGS:
    os << "a list of " << a.strings_size() << " strings";
    break;
  case AP::UNDEFINED:
    os << "no value";
    if (a.type() != AP::UNDEFINED)
      os << " (it declares " << attributeTypeNoun(a.type()) << ")";
    break;
  default:
    os << attributeTypeNoun(type);
  }
  return s;
}

/// A name from the file as C escapes its bytes (a fuzzed name is binary).
static std::string escaped(StringRef name) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::printEscapedString(name, os);
  return s;
}

//===----------------------------------------------------------------------===//
// Schemas
//===----------------------------------------------------------------------===//

namespace {
/// The attributes one op version declares.
struct Schema {
  int since = 0;
  /// name -> (type, required); std::map for a stable order in errors.
  std::map<std::string, std::pair<int, bool>> attributes;
};

struct NewerRow {
  const char *op;
  int since;
  const char *attr;
  int type;
  bool required;
};
} // namespace

static const NewerRow kNewerRows[] = {
#define NEWER_SCHEMA(op, since, attr, type, required)                          \
  {op, since, attr, AP::type, required},
#include "NewerSchemas.inc"
#undef NEWER_SCHEMA
};

/// The op versions of opset 18 on, by op, oldest first.
static const llvm::StringMap<std::vector<Schema>> &newerSchemas() {
  static const llvm::StringMap<std::vector<Schema>> table = [] {
    llvm::StringMap<std::vector<Schema>> t;
    for (const NewerRow &row : kNewerRows) {
      std::vector<Schema> &versions = t[row.op];
      if (versions.empty() || versions.back().since != row.since)
        versions.push_back(Schema{row.since, {}});
      if (*row.attr)
        versions.back().attributes[row.attr] = {row.type, row.required};
    }
    return t;
  }();
  return table;
}

/// The schema of `op` at `opset`; nullopt for an op no schema knows at that
/// opset (the importer names it as unsupported) or a deprecated one.
static std::optional<Schema> findSchema(const std::string &op, int64_t opset) {
  const auto &newer = newerSchemas();
  auto it = newer.find(op);
  if (it != newer.end())
    for (const Schema &s : llvm::reverse(it->second))
      if (s.since <= opset)
        return s;
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      op, static_cast<int>(std::min<int64_t>(opset, 1 << 30)), "");
  if (!schema || schema->Deprecated())
    return std::nullopt;
  Schema s;
  s.since = schema->SinceVersion();
  for (const auto &[name, attr] : schema->attributes())
    s.attributes[name] = {attr.type, attr.required};
  return s;
}

//===----------------------------------------------------------------------===//
// What schemas do not say
//===----------------------------------------------------------------------===//

/// Whether an integer attribute is a flag, of whichever op: 0 or 1.
static bool isFlag(StringRef name) {
  static constexpr llvm::StringLiteral flags =
      "align_corners|allowzero|antialias|ceil_mode|center_point_box|"
      "count_include_pad|detect_negative|detect_positive|exclude_outside|"
      "exclusive|fmod|input_forget|interleaved|inverse|is_causal|"
      "keepdims|largest|layout|linear_before_reset|new_axis|"
      "noop_with_empty_axes|onesided|periodic|reverse|saturate|"
      "select_last_index|sorted|storage_order|training_mode|transA|"
      "transB|upper";
  SmallVector<StringRef> names;
  flags.split(names, '|');
  return llvm::is_contained(names, name);
}

namespace {
/// A string attribute of one op (or of every op: "") and its allowed
/// values, separated by '|'.
struct EnumAttr {
  llvm::StringLiteral op, attr, values;
};
} // namespace

static constexpr EnumAttr kEnums[] = {
    {"", "auto_pad", "NOTSET|SAME_UPPER|SAME_LOWER|VALID"},
    {"Resize", "mode", "nearest|linear|cubic|bilinear|trilinear"},
    {"Upsample", "mode", "nearest|linear|bilinear|trilinear"},
    {"Resize", "coordinate_transformation_mode",
     "half_pixel|half_pixel_symmetric|pytorch_half_pixel|align_corners|"
     "asymmetric|tf_crop_and_resize|tf_half_pixel_for_nn"},
    {"Resize", "nearest_mode",
     "round_prefer_floor|round_prefer_ceil|floor|ceil"},
    {"Resize", "keep_aspect_ratio_policy", "stretch|not_larger|not_smaller"},
    {"Pad", "mode", "constant|reflect|edge|wrap"},
    {"RNN", "direction", "forward|reverse|bidirectional"},
    {"GRU", "direction", "forward|reverse|bidirectional"},
    {"LSTM", "direction", "forward|reverse|bidirectional"},
    {"ScatterElements", "reduction", "none|add|mul|max|min"},
    {"ScatterND", "reduction", "none|add|mul|max|min"},
    {"NegativeLogLikelihoodLoss", "reduction", "none|sum|mean"},
    {"SoftmaxCrossEntropyLoss", "reduction", "none|sum|mean"},
    {"GridSample", "mode", "bilinear|nearest|bicubic|linear|cubic"},
    {"GridSample", "padding_mode", "zeros|border|reflection"},
    {"DepthToSpace", "mode", "DCR|CRD"},
    {"SpaceToDepth", "mode", "DCR|CRD"},
    {"Gelu", "approximate", "none|tanh"},
    {"RoiAlign", "mode", "avg|max"},
    {"RoiAlign", "coordinate_transformation_mode",
     "half_pixel|output_half_pixel"},
    {"BitShift", "direction", "LEFT|RIGHT"},
    {"TensorScatter", "mode", "linear|circular"},
};

/// For an op whose window attributes follow the spatial rank, the input
/// that holds the kernel (a convolution's weight; -1 for pooling, whose
/// kernel is kernel_shape); nullopt for any other op.
static std::optional<int> windowKernelInput(StringRef op) {
  return llvm::StringSwitch<std::optional<int>>(op)
      .Cases({"Conv", "ConvTranspose", "ConvInteger", "DeformConv"}, 1)
      .Case("QLinearConv", 3)
      .Cases({"MaxPool", "AveragePool", "LpPool"}, -1)
      .Default(std::nullopt);
}

//===----------------------------------------------------------------------===//
// The check
//===----------------------------------------------------------------------===//

namespace {
class AttributeChecker {
public:
  AttributeChecker(int64_t opset, StringRef path, MLIRContext *ctx)
      : opset(opset), path(path), ctx(ctx) {}

  LogicalResult checkGraph(const onnx::GraphProto &graph);

private:
  int64_t opset;
  StringRef path;
  MLIRContext *ctx;
  /// Declared ranks of the graph being checked (and its outer graphs').
  llvm::StringMap<int> ranks;

  InFlightDiagnostic error(const onnx::NodeProto &node, StringRef where) {
    auto diag = mlir::emitError(NameLoc::get(
        StringAttr::get(ctx, where), FileLineColLoc::get(ctx, path, 0, 0)));
    diag << node.op_type() << " node '" << where << "': ";
    return diag;
  }
  LogicalResult checkNode(const onnx::NodeProto &node, StringRef where);
  LogicalResult checkValues(const onnx::NodeProto &node, StringRef where);
  LogicalResult checkWindow(const onnx::NodeProto &node, StringRef where);
};
} // namespace

LogicalResult AttributeChecker::checkGraph(const onnx::GraphProto &graph) {
  addDeclaredRanks(graph, ranks);
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    std::string where = node.name().empty()
                            ? node.op_type() + "#" + std::to_string(i)
                            : node.name();
    if (failed(checkNode(node, where)))
      return failure();
    for (const auto &attr : node.attribute()) {
      if (attr.has_g() && failed(checkGraph(attr.g())))
        return failure();
      for (const auto &g : attr.graphs())
        if (failed(checkGraph(g)))
          return failure();
    }
  }
  return success();
}

LogicalResult AttributeChecker::checkNode(const onnx::NodeProto &node,
                                          StringRef where) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return success();
  std::optional<Schema> schema = findSchema(node.op_type(), opset);
  if (!schema)
    return success();
  llvm::StringSet<> seen;
  for (const auto &attr : node.attribute()) {
    if (!seen.insert(attr.name()).second) {
      error(node, where) << "attribute '" << escaped(attr.name())
                         << "' is given twice";
      return failure();
    }
    auto it = schema->attributes.find(attr.name());
    if (it == schema->attributes.end()) {
      auto diag = error(node, where)
                  << "unknown attribute '" << escaped(attr.name()) << "' ("
                  << node.op_type() << "-" << schema->since << " of opset "
                  << opset << " has ";
      if (schema->attributes.empty())
        diag << "none)";
      else
        diag << llvm::join(llvm::make_first_range(schema->attributes), ", ")
             << ")";
      return failure();
    }
    if (!attr.ref_attr_name().empty())
      continue;
    int want = it->second.first;
    if (!attributeHolds(attr, want)) {
      error(node, where) << "attribute '" << attr.name() << "' holds "
                         << describeAttribute(attr) << "; it must hold "
                         << attributeTypeNoun(want);
      return failure();
    }
  }
  for (const auto &[name, spec] : schema->attributes)
    if (spec.second && !seen.contains(name)) {
      error(node, where) << "missing required attribute '" << name << "' ("
                         << attributeTypeNoun(spec.first) << ")";
      return failure();
    }
  if (failed(checkValues(node, where)) || failed(checkWindow(node, where)))
    return failure();
  return success();
}

LogicalResult AttributeChecker::checkValues(const onnx::NodeProto &node,
                                            StringRef where) {
  for (const auto &attr : node.attribute()) {
    if (heldType(attr) == AP::INT && isFlag(attr.name()) && attr.i() != 0 &&
        attr.i() != 1) {
      error(node, where) << "attribute '" << attr.name() << "' holds "
                         << describeAttribute(attr) << "; it must hold 0 or 1";
      return failure();
    }
    if (heldType(attr) != AP::STRING)
      continue;
    for (const EnumAttr &e : kEnums) {
      if ((!e.op.empty() && node.op_type() != e.op) || attr.name() != e.attr)
        continue;
      SmallVector<StringRef> values;
      e.values.split(values, '|');
      if (llvm::is_contained(values, StringRef(attr.s())))
        continue;
      error(node, where) << "attribute '" << attr.name() << "' holds "
                         << describeAttribute(attr) << "; it must hold one of "
                         << llvm::join(values, ", ");
      return failure();
    }
  }
  return success();
}

LogicalResult AttributeChecker::checkWindow(const onnx::NodeProto &node,
                                            StringRef where) {
  std::optional<int> kernelInput = windowKernelInput(node.op_type());
  if (!kernelInput)
    return success();
  // The spatial rank: kernel_shape's length, else the input's or the
  // kernel's declared rank less 2 (batch and channels). Input and kernel of
  // different ranks are left to checkWindowAttributes, which names both.
  int64_t spatial = -1;
  std::string from;
  for (const auto &attr : node.attribute())
    if (attr.name() == "kernel_shape") {
      spatial = attr.ints_size();
      from = "kernel_shape has " + std::to_string(spatial);
    }
  auto declaredRank = [&](int k) {
    auto it = k >= 0 && k < node.input_size() ? ranks.find(node.input(k))
                                              : ranks.end();
    return it == ranks.end() ? -1 : it->second;
  };
  int input = declaredRank(0), kernel = declaredRank(*kernelInput);
  if (spatial < 0 && input >= 0 && kernel >= 0 && input != kernel)
    return success();
  for (int k : {0, *kernelInput}) {
    int rank = declaredRank(k);
    if (spatial >= 0 || rank < 2)
      continue;
    spatial = rank - 2;
    from = std::string(k ? "weight" : "input") + " '" + node.input(k) +
           "' has " + std::to_string(spatial);
  }
  if (spatial < 0)
    return success(); // The converter checks against the shapes it infers.
  for (const auto &attr : node.attribute()) {
    StringRef name = attr.name();
    int64_t per = name == "pads" ? 2
                  : name == "strides" || name == "dilations" ||
                          name == "kernel_shape" || name == "output_padding" ||
                          name == "output_shape"
                      ? 1
                      : 0;
    if (per == 0 || attr.ints_size() == per * spatial)
      continue;
    auto diag = error(node, where)
                << "attribute '" << name << "' holds " << attr.ints_size()
                << " integers; it must hold " << per * spatial;
    if (per == 2)
      diag << " (a begin and an end per spatial dimension";
    else
      diag << " (one per spatial dimension";
    diag << "; " << from << ")";
    return failure();
  }
  return success();
}

LogicalResult checkNodeAttributes(const onnx::GraphProto &graph, int64_t opset,
                                  StringRef path, MLIRContext *ctx) {
  if (opset <= 0)
    return success(); // No default opset: the importer names the ops.
  return AttributeChecker(opset, path, ctx).checkGraph(graph);
}

} // namespace cleave::onnximport
