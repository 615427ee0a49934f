//===- TorchExport.cpp - What a PyTorch export says about its state -------===//
//
// The export signature and the per-node aten records of PyTorch's dynamo
// exporter, and the recovery of parameters its optimizer folded into
// transposed copies. What decides a parameter:
//
//   - a parameter of the signature that the file holds trains;
//   - a Linear weight the file holds only as the operand of a MatMul (or
//     Gemm) whose fx_node is aten.linear of that weight is that weight,
//     transposed: it is made again (the parameter under its PyTorch name,
//     and a Transpose node giving the copy's value), so it trains as in
//     PyTorch and ties stay tied (GPT-2's LM head is the embedding's
//     transposed copy, checked element by element);
//   - every other initializer is a constant and never trains.
//
// A parameter of the signature still missing after that is either the
// alias of a tie (torch.export names a tied tensor by one of its names) or
// folded into a constant the file cannot attribute. The two are told apart
// only where no constant may hold a fold: a constant named after a table
// lookup (`embedding_1`, the positions' rows of a position table) or an
// exporter temporary (`val_N`) may, a mask (`where`) or a rotary table
// (`unsqueeze_14`) computed from buffers and shapes may not. A parameter
// that a surviving node's fx_node still reads, but the file lacks, was
// merged into another or dropped (a zero Gemm bias): also refused.
//
//===----------------------------------------------------------------------===//

#include "TorchExport.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <cstring>

using namespace mlir;

namespace cleave::onnximport {

namespace {

/// GraphProto.metadata_props (field 16, ONNX IR version 10) is newer than
/// libonnx's schema, so it arrives as unknown fields of
/// StringStringEntryProto messages.
constexpr int kGraphMetadataProps = 16;
constexpr llvm::StringLiteral kSignatureKey =
    "pkg.torch.export.ExportedProgram.graph_signature";
constexpr llvm::StringLiteral kFxNodeKey = "pkg.torch.onnx.fx_node";
constexpr llvm::StringLiteral kLinear = "torch.ops.aten.linear.default";

/// One node's aten call: `%out : [...] = call_function[target=T](args =
/// (%a, %p_w, 0), kwargs = {...})`.
struct FxCall {
  StringRef target;
  SmallVector<StringRef> args;
};

/// NodeProto.metadata_props (field 9, ONNX IR version 10): unknown fields
/// to libonnx's schema too.
constexpr int kNodeMetadataProps = 9;

/// The `key` entries of a message's metadata_props, read from its unknown
/// fields numbered `field`.
SmallVector<std::string> unknownMetadata(const google::protobuf::Message &msg,
                                         int field, StringRef key) {
  SmallVector<std::string> values;
  const auto &unknown = msg.GetReflection()->GetUnknownFields(msg);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto &f = unknown.field(i);
    if (f.number() != field ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()) && entry.key() == key)
      values.push_back(entry.value());
  }
  return values;
}

std::optional<FxCall> parseFxNode(const onnx::NodeProto &node,
                                  std::string &storage) {
  for (std::string &value :
       unknownMetadata(node, kNodeMetadataProps, kFxNodeKey)) {
    storage = std::move(value);
    StringRef text = storage;
    size_t t = text.find("[target=");
    size_t a = text.find("](args = (");
    size_t k = text.rfind("), kwargs");
    if (t == StringRef::npos || a == StringRef::npos || k == StringRef::npos ||
        a < t || k < a)
      return std::nullopt;
    FxCall call;
    call.target = text.slice(t + 8, a);
    StringRef args = text.slice(a + 10, k);
    // Split at top-level commas (arguments may be lists).
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= args.size(); ++i) {
      char c = i < args.size() ? args[i] : ',';
      if (c == '[' || c == '(')
        ++depth;
      else if (c == ']' || c == ')')
        --depth;
      else if (c == ',' && depth == 0) {
        call.args.push_back(args.slice(start, i).trim());
        start = i + 1;
      }
    }
    return call;
  }
  return std::nullopt;
}

/// The placeholder an fx argument names ("%p_w" -> "p_w"), or "".
StringRef placeholderOf(StringRef arg) {
  return arg.starts_with("%") ? arg.drop_front() : StringRef();
}

size_t elementBytes(int32_t type) {
  switch (type) {
  case onnx::TensorProto::FLOAT:
    return 4;
  case onnx::TensorProto::DOUBLE:
    return 8;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return 2;
  default:
    return 0;
  }
}

bool isFloat(const onnx::TensorProto &t) { return elementBytes(t.data_type()); }

int64_t numElements(const onnx::TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  return n;
}

/// The little-endian element bytes of a float initializer stored in the
/// file (raw_data or the typed fields); false for external data.
bool readBytes(const onnx::TensorProto &t, std::string &out) {
  size_t size = elementBytes(t.data_type());
  int64_t n = numElements(t);
  if (!size || t.data_location() == onnx::TensorProto::EXTERNAL ||
      llvm::any_of(t.dims(), [](int64_t d) { return d < 0; }))
    return false;
  if (t.has_raw_data()) {
    out = t.raw_data();
    return out.size() == size * n;
  }
  out.assign(size * n, '\0');
  if (t.data_type() == onnx::TensorProto::FLOAT && t.float_data_size() == n) {
    std::memcpy(out.data(), t.float_data().data(), out.size());
    return true;
  }
  if (t.data_type() == onnx::TensorProto::DOUBLE && t.double_data_size() == n) {
    std::memcpy(out.data(), t.double_data().data(), out.size());
    return true;
  }
  if (size == 2 && t.int32_data_size() == n) {
    for (int64_t i = 0; i < n; ++i) {
      auto v = static_cast<uint16_t>(t.int32_data(i));
      std::memcpy(out.data() + 2 * i, &v, 2);
    }
    return true;
  }
  return false;
}

/// The bytes of a rows x cols matrix, transposed.
std::string transposeBytes(const std::string &in, int64_t rows, int64_t cols,
                           size_t size) {
  std::string out(in.size(), '\0');
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(out.data() + (c * rows + r) * size,
                  in.data() + (r * cols + c) * size, size);
  return out;
}

std::string shapeText(const onnx::TensorProto &t) {
  std::string s = "[";
  for (int i = 0; i < t.dims_size(); ++i)
    s += (i ? "," : "") + std::to_string(t.dims(i));
  return s + "]";
}

/// Names of constants that may hold a folded parameter: the value of a
/// table lookup, or an exporter temporary.
bool mayHoldFold(StringRef name) {
  static const llvm::Regex re("^(embedding|index|index_select|select|slice|"
                              "gather|take|val)(_[0-9]+)?$");
  return re.match(name);
}

/// Moves the last node of `graph` to the front.
void moveLastNodeFirst(onnx::GraphProto &graph) {
  auto *nodes = graph.mutable_node();
  for (int i = nodes->size() - 1; i > 0; --i)
    nodes->SwapElements(i, i - 1);
}

} // namespace

TorchSignature readTorchSignature(const onnx::GraphProto &graph) {
  TorchSignature sig;
  for (const std::string &value :
       unknownMetadata(graph, kGraphMetadataProps, kSignatureKey)) {
    // Lines such as "p_l_weight: PARAMETER target='l.weight'".
    SmallVector<StringRef> lines;
    StringRef(value).split(lines, '\n');
    for (StringRef line : lines) {
      std::optional<mlir::cleave::InitializerKind> kind;
      if (line.contains(": PARAMETER "))
        kind = mlir::cleave::InitializerKind::parameter;
      else if (line.contains(": BUFFER "))
        kind = mlir::cleave::InitializerKind::buffer;
      size_t at = line.find("target='");
      if (!kind || at == StringRef::npos)
        continue;
      StringRef target = line.substr(at + 8);
      target = target.take_until([](char c) { return c == '\''; });
      sig.kinds[target] = *kind;
      sig.targets[line.take_until([](char c) { return c == ':'; }).trim()] =
          target.str();
    }
  }
  return sig;
}

LogicalResult recoverFoldedParameters(onnx::GraphProto &graph, StringRef path,
                                      bool refuse, Location loc,
                                      std::vector<FoldedParameter> &out) {
  TorchSignature sig = readTorchSignature(graph);
  if (sig.empty())
    return success();
  auto isParameter = [&](StringRef name) {
    auto it = sig.kinds.find(name);
    return it != sig.kinds.end() &&
           it->second == mlir::cleave::InitializerKind::parameter;
  };
  llvm::StringMap<int> initIndex;
  for (int i = 0; i < graph.initializer_size(); ++i)
    initIndex[graph.initializer(i).name()] = i;

  // Linear weights folded into transposed copies: copy -> parameter, in
  // graph order.
  SmallVector<std::pair<std::string, std::string>> copyOf;
  llvm::StringSet<> copies;
  // Parameters read by a surviving node: parameter -> that node.
  llvm::StringMap<std::string> readBy;
  for (const onnx::NodeProto &node : graph.node()) {
    std::string record;
    std::optional<FxCall> call = parseFxNode(node, record);
    if (!call)
      continue;
    for (StringRef arg : call->args) {
      auto it = sig.targets.find(placeholderOf(arg));
      if (it != sig.targets.end())
        readBy.try_emplace(it->second, node.name());
    }
    bool matmul = node.op_type() == "MatMul" ||
                  (node.op_type() == "Gemm" &&
                   llvm::none_of(node.attribute(), [](const auto &a) {
                     return a.name() == "transB" && a.i() != 0;
                   }));
    if (call->target != kLinear || call->args.size() < 2 || !matmul ||
        node.input_size() < 2)
      continue;
    auto weight = sig.targets.find(placeholderOf(call->args[1]));
    StringRef operand = node.input(1);
    auto init = initIndex.find(operand);
    if (weight == sig.targets.end() || init == initIndex.end() ||
        sig.kinds.contains(operand) || !isParameter(weight->second))
      continue;
    const onnx::TensorProto &c = graph.initializer(init->second);
    if (c.dims_size() == 2 && isFloat(c))
      if (copies.insert(operand).second)
        copyOf.push_back({operand.str(), weight->second});
  }

  // Make each parameter again, or check the copy against the parameter.
  llvm::StringSet<> recovered, inDoubtCopies;
  for (const auto &[copyName, parameter] : copyOf) {
    const onnx::TensorProto &c = graph.initializer(initIndex[copyName]);
    std::string bytes;
    if (!readBytes(c, bytes)) {
      inDoubtCopies.insert(copyName);
      continue;
    }
    size_t size = elementBytes(c.data_type());
    std::string transposed = transposeBytes(bytes, c.dims(0), c.dims(1), size);
    auto p = initIndex.find(parameter);
    bool inSource = p != initIndex.end() && !recovered.contains(parameter);
    if (p != initIndex.end()) {
      const onnx::TensorProto &held = graph.initializer(p->second);
      std::string heldBytes;
      if (held.data_type() != c.data_type() || held.dims_size() != 2 ||
          held.dims(0) != c.dims(1) || held.dims(1) != c.dims(0) ||
          !readBytes(held, heldBytes) || heldBytes != transposed) {
        inDoubtCopies.insert(copyName);
        continue;
      }
    } else {
      // The parameter takes the copy's place among the initializers.
      int index = initIndex[copyName];
      onnx::TensorProto made;
      made.set_name(parameter);
      made.set_data_type(c.data_type());
      made.add_dims(c.dims(1));
      made.add_dims(c.dims(0));
      made.set_raw_data(std::move(transposed));
      *graph.mutable_initializer(index) = std::move(made);
      initIndex.erase(copyName);
      initIndex[parameter] = index;
      recovered.insert(parameter);
      out.push_back({parameter, copyName, /*inSource=*/false});
      continue;
    }
    out.push_back({parameter, copyName, inSource});
  }
  // The copies become Transpose nodes of their parameters.
  if (!out.empty()) {
    llvm::StringSet<> made;
    for (const FoldedParameter &f : out)
      made.insert(f.copy);
    auto *inits = graph.mutable_initializer();
    for (int i = inits->size() - 1; i >= 0; --i)
      if (made.contains(inits->Get(i).name()))
        inits->DeleteSubrange(i, 1);
    auto *inputs = graph.mutable_input();
    for (int i = inputs->size() - 1; i >= 0; --i)
      if (made.contains(inputs->Get(i).name()))
        inputs->DeleteSubrange(i, 1);
    for (const FoldedParameter &f : out) {
      onnx::NodeProto *node = graph.add_node();
      node->set_op_type("Transpose");
      node->set_name(f.copy + ".unfolded");
      node->add_input(f.parameter);
      node->add_output(f.copy);
      onnx::AttributeProto *perm = node->add_attribute();
      perm->set_name("perm");
      perm->set_type(onnx::AttributeProto::INTS);
      perm->add_ints(1);
      perm->add_ints(0);
      moveLastNodeFirst(graph);
    }
  }
  if (!refuse)
    return success();

  // What is still missing, and the constants that may hold it.
  llvm::StringSet<> held;
  for (const auto &t : graph.initializer())
    held.insert(t.name());
  SmallVector<std::string> mergedOrDropped, unread;
  for (const auto &[name, kind] : sig.kinds) {
    if (kind != mlir::cleave::InitializerKind::parameter || held.contains(name))
      continue;
    auto reader = readBy.find(name);
    if (reader != readBy.end())
      mergedOrDropped.push_back("'" + name.str() + "' (read by node '" +
                                reader->second + "')");
    else
      unread.push_back("'" + name.str() + "'");
  }
  SmallVector<std::string> doubtful;
  for (const auto &t : graph.initializer())
    if (!sig.kinds.contains(t.name()) && isFloat(t) && numElements(t) > 1 &&
        (inDoubtCopies.contains(t.name()) || mayHoldFold(t.name())))
      doubtful.push_back("'" + t.name() + "' " + shapeText(t));
  SmallVector<std::string> contradicting;
  for (const auto &[copyName, parameter] : copyOf)
    if (inDoubtCopies.contains(copyName))
      contradicting.push_back("'" + copyName + "' (read as '" + parameter +
                              "')");
  llvm::sort(mergedOrDropped);
  llvm::sort(unread);
  llvm::sort(doubtful);
  llvm::sort(contradicting);
  bool folded = !unread.empty() && !doubtful.empty();
  if (mergedOrDropped.empty() && contradicting.empty() && !folded)
    return success();

  auto list = [](ArrayRef<std::string> items) {
    std::string s;
    size_t shown = std::min<size_t>(items.size(), 4);
    for (size_t i = 0; i < shown; ++i)
      s += (i ? ", " : "") + items[i];
    if (items.size() > shown)
      s += " and " + std::to_string(items.size() - shown) + " more";
    return s;
  };
  auto diag = mlir::emitError(loc)
              << "model '" << path
              << "': the PyTorch export's optimizer folded parameters into "
                 "constants, so the file does not say what PyTorch trains: ";
  StringRef sep = "";
  if (!mergedOrDropped.empty()) {
    diag << "parameters " << list(mergedOrDropped)
         << " are read by the graph but are not in the file (merged into an "
            "equal initializer or dropped as zero)";
    sep = "; ";
  }
  if (!contradicting.empty()) {
    diag << sep << "the Linear weight operands " << list(contradicting)
         << " are not the transposes of those parameters";
    sep = "; ";
  }
  if (folded)
    diag << sep << "parameters " << list(unread)
         << " are not in the file, and the constants " << list(doubtful)
         << " may hold them";
  diag << ". Export with torch.onnx.export(..., optimize=False), compile the "
          "module with cleave.compile_torch, or name the parameters to train "
          "with --trainable=REGEX";
  return failure();
}

} // namespace cleave::onnximport
