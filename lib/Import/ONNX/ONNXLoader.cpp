//===- ONNXLoader.cpp - Parse, convert, check and shape-infer a model ----===//
//
// Built with -fexceptions: libonnx reports errors by throwing. Every call
// into libonnx is wrapped, and each exception becomes a diagnostic.
//
//===----------------------------------------------------------------------===//

#include "ONNXLoader.h"

#include "ModelChecks.h"
#include "NodeContext.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <exception>
#include <limits>

using namespace mlir;

namespace cleave::onnximport {

int64_t getDefaultOpset(const onnx::ModelProto &model) {
  for (const auto &op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx")
      return op.version();
  return 0;
}

/// Replaces the shapes of graph inputs named in `options`.
static LogicalResult pinInputShapes(onnx::ModelProto &model,
                                    const ImportOptions &options,
                                    Location loc) {
  auto *graph = model.mutable_graph();
  for (const auto &entry : options.inputShapes) {
    onnx::ValueInfoProto *input = nullptr;
    for (auto &in : *graph->mutable_input())
      if (in.name() == entry.getKey())
        input = &in;
    if (!input) {
      auto diag = mlir::emitError(loc)
                  << "--input-shape names '" << entry.getKey()
                  << "', which is not a graph input; inputs are:";
      for (const auto &in : graph->input())
        diag << " '" << in.name() << "'";
      return failure();
    }
    auto *tensorType = input->mutable_type()->mutable_tensor_type();
    const auto &pinned = entry.getValue();
    if (tensorType->has_shape() &&
        tensorType->shape().dim_size() != static_cast<int>(pinned.size())) {
      mlir::emitError(loc) << "--input-shape for '" << entry.getKey()
                           << "' gives " << pinned.size()
                           << " dimensions but the input has rank "
                           << tensorType->shape().dim_size();
      return failure();
    }
    if (tensorType->has_shape()) {
      for (int i = 0; i < tensorType->shape().dim_size(); ++i) {
        const auto &d = tensorType->shape().dim(i);
        if (d.has_dim_value() && d.dim_value() != pinned[i]) {
          mlir::emitError(loc)
              << "--input-shape for '" << entry.getKey() << "' sets dim " << i
              << " to " << pinned[i] << " but the model fixes it to "
              << d.dim_value();
          return failure();
        }
      }
    }
    auto *shape = tensorType->mutable_shape();
    shape->clear_dim();
    for (int64_t d : pinned)
      shape->add_dim()->set_dim_value(d);
  }
  return success();
}

/// Turns the graph inputs named in `options.frozenInputs` into initializers
/// holding the values read from their TensorProto files.
static LogicalResult freezeInputs(onnx::ModelProto &model,
                                  const ImportOptions &options, Location loc) {
  auto *graph = model.mutable_graph();
  for (const auto &entry : options.frozenInputs) {
    StringRef name = entry.getKey();
    const onnx::ValueInfoProto *input = nullptr;
    for (const auto &in : graph->input())
      if (in.name() == name)
        input = &in;
    if (!input) {
      mlir::emitError(loc) << "--freeze-input names '" << name
                           << "', which is not a graph input";
      return failure();
    }
    auto fileOrErr =
        llvm::MemoryBuffer::getFile(entry.getValue(),
                                    /*IsText=*/false,
                                    /*RequiresNullTerminator=*/false);
    if (!fileOrErr) {
      mlir::emitError(loc) << "--freeze-input '" << name << "': cannot open '"
                           << entry.getValue()
                           << "': " << fileOrErr.getError().message();
      return failure();
    }
    onnx::TensorProto value;
    StringRef bytes = (*fileOrErr)->getBuffer();
    bool parsed = false;
    try {
      parsed =
          bytes.size() <=
              static_cast<size_t>(std::numeric_limits<int>::max()) &&
          value.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
    } catch (...) {
      parsed = false;
    }
    if (!parsed) {
      mlir::emitError(loc) << "--freeze-input '" << name << "': '"
                           << entry.getValue()
                           << "' is not an ONNX TensorProto file";
      return failure();
    }
    const auto &type = input->type().tensor_type();
    if (type.elem_type() != value.data_type()) {
      mlir::emitError(loc) << "--freeze-input '" << name
                           << "': the file holds element type "
                           << onnxElementTypeName(value.data_type())
                           << ", the input has "
                           << onnxElementTypeName(type.elem_type());
      return failure();
    }
    if (type.has_shape()) {
      bool match = type.shape().dim_size() == value.dims_size();
      for (int i = 0; match && i < value.dims_size(); ++i)
        if (type.shape().dim(i).has_dim_value() &&
            type.shape().dim(i).dim_value() != value.dims(i))
          match = false;
      if (!match) {
        mlir::emitError(loc) << "--freeze-input '" << name
                             << "': the file's shape does not match the input";
        return failure();
      }
    }
    value.set_name(name.str());
    *graph->add_initializer() = std::move(value);
  }
  return success();
}

/// Large initializers stored as external data, taken out of the graph while
/// libonnx checks, converts and infers shapes: libonnx would look for their
/// files relative to the working directory, and reading them would copy
/// every weight into the protobuf. Each stands in as a graph input of the
/// same type meanwhile; the importer maps their bytes later
/// (convertTensorProto), and a training plan references them.
struct SetAsideInitializers {
  std::vector<onnx::TensorProto> tensors;
  std::vector<std::string> addedInputs;

  /// Puts the initializers back and drops the stand-in inputs.
  void restore(onnx::ModelProto &model) {
    onnx::GraphProto *graph = model.mutable_graph();
    llvm::StringSet<> added;
    for (const std::string &name : addedInputs)
      added.insert(name);
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
    for (onnx::ValueInfoProto &in : *graph->mutable_input())
      if (!added.contains(in.name()))
        *inputs.Add() = std::move(in);
    graph->mutable_input()->Swap(&inputs);
    for (onnx::TensorProto &t : tensors)
      *graph->add_initializer() = std::move(t);
    tensors.clear();
    addedInputs.clear();
  }
};

/// Reads every small initializer stored as external data (validating its
/// location) into raw_data, so the checker and shape inference see their
/// values (shapes, axes); sets the large ones aside (SetAsideInitializers).
static LogicalResult internalizeExternalData(onnx::ModelProto &model,
                                             StringRef path, MLIRContext *ctx,
                                             bool absentWeights,
                                             SetAsideInitializers &aside) {
  std::string dir = llvm::sys::path::parent_path(path).str();
  onnx::GraphProto *graph = model.mutable_graph();
  llvm::StringSet<> inputs;
  for (const auto &in : graph->input())
    inputs.insert(in.name());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (auto &t : *graph->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) {
      *kept.Add() = std::move(t);
      continue;
    }
    Location loc = NameLoc::get(StringAttr::get(ctx, t.name()),
                                FileLineColLoc::get(ctx, path, 0, 0));
    std::string why;
    Type et = convertElementType(ctx, t.data_type(), why);
    if (!et) {
      mlir::emitError(loc) << "tensor '" << t.name() << "': " << why;
      return failure();
    }
    int64_t n = 1;
    for (int64_t d : t.dims()) {
      if (d < 0 || (d != 0 && n > (int64_t(1) << 40) / d)) {
        mlir::emitError(loc)
            << "tensor '" << t.name() << "' has an invalid shape";
        return failure();
      }
      n *= d;
    }
    if (n > kMaxInlineElements && !et.isInteger(1) &&
        (t.data_type() == onnx::TensorProto::FLOAT ||
         t.data_type() == onnx::TensorProto::FLOAT16 ||
         t.data_type() == onnx::TensorProto::BFLOAT16 ||
         t.data_type() == onnx::TensorProto::DOUBLE)) {
      if (!inputs.contains(t.name())) {
        onnx::ValueInfoProto *in = graph->add_input();
        in->set_name(t.name());
        auto *tt = in->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(t.data_type());
        auto *shape = tt->mutable_shape();
        for (int64_t d : t.dims())
          shape->add_dim()->set_dim_value(d);
        aside.addedInputs.push_back(t.name());
      }
      aside.tensors.push_back(std::move(t));
      continue;
    }
    int64_t eb = et.isInteger(1) ? 1 : (et.getIntOrFloatBitWidth() + 7) / 8;
    // A small weight matrix of a model declared without its weights: zeros
    // that --init-parameters replaces (ImportOptions::absentWeights).
    if (absentWeights && isa<FloatType>(et) && t.dims_size() >= 2) {
      std::string file;
      for (const auto &kv : t.external_data())
        if (kv.key() == "location" && !llvm::sys::path::is_absolute(kv.value()))
          file = (dir.empty() ? std::string(".") : dir) + "/" + kv.value();
      if (!file.empty() && !llvm::sys::fs::exists(file)) {
        t.set_raw_data(std::string(n * eb, '\0'));
        t.clear_external_data();
        t.set_data_location(onnx::TensorProto::DEFAULT);
        *kept.Add() = std::move(t);
        continue;
      }
    }
    auto data = readExternalData(t, dir, n * eb, loc);
    if (failed(data))
      return failure();
    t.set_raw_data(data->data(), data->size());
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    *kept.Add() = std::move(t);
  }
  graph->mutable_initializer()->Swap(&kept);
  return success();
}

/// libonnx converts an opset-6 Gemm to opset 7 by reading the first two
/// dimensions of A and B without checking that they are known: checked
/// here, on the shapes ONNX shape inference gives them (a copy of `model`).
static LogicalResult checkGemmsToConvert(const onnx::ModelProto &model,
                                         int64_t opset, StringRef path,
                                         MLIRContext *ctx) {
  const onnx::GraphProto &graph = model.graph();
  bool anyGemm = false;
  for (const auto &node : graph.node())
    anyGemm |= node.op_type() == "Gemm" && node.domain().empty();
  if (!anyGemm)
    return success();
  onnx::ModelProto inferred = model;
  try {
    onnx::shape_inference::InferShapes(inferred);
  } catch (...) {
    // Shapes that do not infer are left unknown and rejected below.
  }
  llvm::StringMap<int64_t> ranks;
  auto note = [&](const onnx::ValueInfoProto &v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  };
  for (const auto &v : inferred.graph().input())
    note(v);
  for (const auto &v : inferred.graph().value_info())
    note(v);
  for (const auto &v : inferred.graph().output())
    note(v);
  for (const auto &t : graph.initializer())
    ranks[t.name()] = t.dims_size();
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    if (node.op_type() != "Gemm" || !node.domain().empty())
      continue;
    std::string where = node.name().empty()
                            ? node.op_type() + "#" + std::to_string(i)
                            : node.name();
    for (int k = 0; k < 2 && k < node.input_size(); ++k) {
      auto it = ranks.find(node.input(k));
      if (it != ranks.end() && it->second == 2)
        continue;
      mlir::emitError(NameLoc::get(StringAttr::get(ctx, where),
                                   FileLineColLoc::get(ctx, path, 0, 0)))
          << "Gemm input " << (k ? "B" : "A") << " '" << node.input(k)
          << "' of '" << where << "' has "
          << (it == ranks.end() ? std::string("no known shape")
                                : "rank " + std::to_string(it->second))
          << "; converting an opset " << opset << " Gemm to opset "
          << kMinConvertedOpset << " needs A and B of rank 2";
      return failure();
    }
  }
  return success();
}

/// The window attributes libonnx's shape inference divides by or sizes
/// with (Conv and pooling: strides, dilations, kernel_shape, group, pads),
/// checked before it runs: a stride of 0 would stop the process with a
/// division by zero inside libonnx. Subgraphs (If, Loop, Scan bodies) too.
static LogicalResult checkWindowAttributes(const onnx::GraphProto &graph,
                                           StringRef path, MLIRContext *ctx) {
  static const llvm::StringSet<> windowed = {
      "Conv",    "ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv",
      "MaxPool", "AveragePool",   "LpPool",      "MaxUnpool",   "Col2Im"};
  // Declared ranks: ConvTranspose's shape inference reads a kernel size
  // from W's dimensions 2.. for each spatial dimension of X, past the end
  // of a W of lower rank (a null read in libonnx).
  llvm::StringMap<int> ranks;
  addDeclaredRanks(graph, ranks);
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    std::string where = node.name().empty()
                            ? node.op_type() + "#" + std::to_string(i)
                            : node.name();
    int weight = node.op_type() == "QLinearConv" ? 3 : 1;
    if (node.domain().empty() && windowed.contains(node.op_type()) &&
        node.op_type().find("Conv") != std::string::npos &&
        node.input_size() > weight && ranks.count(node.input(0)) &&
        ranks.count(node.input(weight)) &&
        ranks[node.input(0)] != ranks[node.input(weight)]) {
      mlir::emitError(NameLoc::get(StringAttr::get(ctx, where),
                                   FileLineColLoc::get(ctx, path, 0, 0)))
          << node.op_type() << " node '" << where << "': input '"
          << node.input(0) << "' has rank " << ranks[node.input(0)]
          << " but weight '" << node.input(weight) << "' has rank "
          << ranks[node.input(weight)] << "; they must be equal";
      return failure();
    }
    // LayerNormalization's shape inference indexes the input's dimensions
    // by its axis (default -1) without checking them: a scalar input, or
    // an axis outside the rank, is a null read in libonnx.
    if (node.domain().empty() && node.op_type() == "LayerNormalization" &&
        node.input_size() > 0 && ranks.count(node.input(0))) {
      int64_t rank = ranks[node.input(0)], axis = -1;
      for (const auto &attr : node.attribute())
        if (attr.name() == "axis")
          axis = attr.i();
      if (axis < -rank || axis >= rank) {
        mlir::emitError(NameLoc::get(StringAttr::get(ctx, where),
                                     FileLineColLoc::get(ctx, path, 0, 0)))
            << "LayerNormalization node '" << where << "': axis " << axis
            << " is outside input '" << node.input(0) << "' of rank " << rank;
        return failure();
      }
    }
    for (const auto &attr : node.attribute()) {
      if (attr.has_g() && failed(checkWindowAttributes(attr.g(), path, ctx)))
        return failure();
      for (const auto &g : attr.graphs())
        if (failed(checkWindowAttributes(g, path, ctx)))
          return failure();
      if (!node.domain().empty() || !windowed.contains(node.op_type()))
        continue;
      StringRef name = attr.name();
      int64_t least = name == "strides" || name == "dilations" ||
                              name == "kernel_shape" || name == "group"
                          ? 1
                      : name == "pads" || name == "output_padding" ? 0
                                                                   : -1;
      if (least < 0)
        continue;
      SmallVector<int64_t> values(attr.ints().begin(), attr.ints().end());
      if (attr.has_i())
        values.push_back(attr.i());
      for (auto [k, v] : llvm::enumerate(values))
        if (v < least) {
          mlir::emitError(NameLoc::get(StringAttr::get(ctx, where),
                                       FileLineColLoc::get(ctx, path, 0, 0)))
              << node.op_type() << " node '" << where << "': attribute " << name
              << (attr.has_i() ? "" : "[" + std::to_string(k) + "]") << " is "
              << v << "; " << name << " must be >= " << least;
          return failure();
        }
    }
  }
  return success();
}

/// Dropout's mask has the input's type before opset 10 and is bool after;
/// the version converter changes the node but not the mask's declared type
/// (a graph output or value_info), which shape inference then refuses. A
/// Cast back to the declared type keeps the file's meaning.
static void castDropoutMasks(onnx::GraphProto &graph) {
  llvm::StringMap<int32_t> declared;
  for (const auto &vi : graph.value_info())
    if (vi.type().has_tensor_type())
      declared[vi.name()] = vi.type().tensor_type().elem_type();
  for (const auto &vi : graph.output())
    if (vi.type().has_tensor_type())
      declared[vi.name()] = vi.type().tensor_type().elem_type();
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (const onnx::NodeProto &node : graph.node()) {
    *nodes.Add() = node;
    if (node.op_type() != "Dropout" || node.output_size() < 2 ||
        node.output(1).empty())
      continue;
    auto it = declared.find(node.output(1));
    if (it == declared.end() || it->second == onnx::TensorProto::BOOL ||
        it->second == onnx::TensorProto::UNDEFINED)
      continue;
    std::string mask = node.output(1);
    nodes.rbegin()->set_output(1, mask + "__bool_mask");
    onnx::NodeProto *cast = nodes.Add();
    cast->set_op_type("Cast");
    cast->set_name(node.name() + "__mask_cast");
    cast->add_input(mask + "__bool_mask");
    cast->add_output(mask);
    onnx::AttributeProto *to = cast->add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(it->second);
  }
  graph.mutable_node()->Swap(&nodes);
}

LogicalResult loadONNXModel(StringRef path, const ImportOptions &options,
                            MLIRContext *ctx, onnx::ModelProto &model,
                            int64_t *sourceOpset) {
  Location loc = FileLineColLoc::get(ctx, path, 0, 0);
  // The model's bytes: the file's, or the ones the caller holds for it.
  std::unique_ptr<llvm::MemoryBuffer> file;
  llvm::StringRef bytes;
  if (options.modelBytes) {
    bytes = *options.modelBytes;
  } else {
    auto fileOrErr = llvm::MemoryBuffer::getFile(
        path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!fileOrErr) {
      mlir::emitError(loc) << "cannot open ONNX model '" << path
                           << "': " << fileOrErr.getError().message();
      return failure();
    }
    file = std::move(*fileOrErr);
    bytes = file->getBuffer();
  }
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    mlir::emitError(loc) << "cannot parse ONNX model '" << path
                         << "': file is larger than 2 GiB; store the weights "
                            "as external data";
    return failure();
  }
  bool parsed = false;
  try {
    parsed = model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  } catch (const std::exception &e) {
    parsed = false;
  }
  if (!parsed || !model.has_graph()) {
    mlir::emitError(loc) << "cannot parse ONNX model '" << path << "': "
                         << (parsed ? "the file holds no graph"
                                    : "not a valid ONNX protobuf (truncated "
                                      "or corrupt file?)");
    return failure();
  }
  int64_t opset = getDefaultOpset(model);
  if (sourceOpset)
    *sourceOpset = opset;
  if (opset > kMaxImplementedOpset) {
    if (!options.allowNewerOpset) {
      mlir::emitError(loc)
          << "model '" << path << "' uses opset " << opset
          << " of the default ONNX domain, newer than the newest Cleave "
             "implements (opset "
          << kMaxImplementedOpset
          << "); pass --allow-newer-opset to import it anyway, each op read "
             "as its newest version Cleave knows";
      return failure();
    }
    mlir::emitWarning(loc) << "model '" << path << "' uses opset " << opset
                           << ", newer than the newest Cleave implements "
                              "(opset "
                           << kMaxImplementedOpset
                           << "); importing each op as its newest version "
                              "Cleave knows (--allow-newer-opset)";
  }
  // Cleave's own checks, for every IR version and opset: names defined
  // once and in scope, attributes as their schemas declare them.
  if (failed(checkGraphStructure(model.graph(), path, ctx)) ||
      failed(checkNodeAttributes(model.graph(), opset, path, ctx)))
    return failure();
  SetAsideInitializers aside;
  if (options.keepLayers > 0 &&
      failed(keepFirstLayers(model, options.keepLayers, loc)))
    return failure();
  // A model without the default opset (only custom domains) goes on: the
  // importer's pre-pass then lists its ops as unsupported.
  if (failed(pinInputShapes(model, options, loc)) ||
      failed(freezeInputs(model, options, loc)) ||
      failed(internalizeExternalData(model, path, ctx, options.absentWeights,
                                     aside)))
    return failure();

  if (opset > kMaxCheckedOpset || model.ir_version() > onnx::IR_VERSION) {
    mlir::emitWarning(loc) << "model '" << path << "' uses opset " << opset
                           << " / IR version " << model.ir_version()
                           << ", newer than libonnx's checker (opset "
                           << kMaxCheckedOpset << ", IR version "
                           << static_cast<int64_t>(onnx::IR_VERSION)
                           << "); skipping the checker and ONNX shape "
                              "inference";
    // Cleave's own checks stand in: checkGraphStructure and
    // checkNodeAttributes ran above (the structure again here, on the graph
    // as cut and frozen), and the window attributes the converters divide
    // by. Each converter checks its node's inputs and shapes.
    aside.restore(model);
    if (failed(checkGraphStructure(model.graph(), path, ctx)) ||
        failed(checkWindowAttributes(model.graph(), path, ctx)))
      return failure();
    return success();
  }
  // Before the checker: its shape checks run some inference code too.
  if (failed(checkWindowAttributes(model.graph(), path, ctx)))
    return failure();
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    mlir::emitError(loc) << "ONNX checker rejected model '" << path
                         << "': " << e.what();
    return failure();
  } catch (...) {
    mlir::emitError(loc) << "ONNX checker rejected model '" << path << "'";
    return failure();
  }
  // Old opsets: convert up to 13 when libonnx can; otherwise import as is.
  // (After the checker: the converter crashes on malformed graphs.)
  if (failed(checkGraphStructure(model.graph(), path, ctx)))
    return failure();
  if (opset > 0 && opset < kMinConvertedOpset) {
    if (opset < 7 && failed(checkGemmsToConvert(model, opset, path, ctx)))
      return failure();
    try {
      onnx::ModelProto converted =
          onnx::version_conversion::ConvertVersion(model, kMinConvertedOpset);
      if (opset < 10)
        castDropoutMasks(*converted.mutable_graph());
      model = std::move(converted);
      opset = getDefaultOpset(model);
    } catch (...) {
      // Import with the original opset; the converters handle old forms.
    }
  }

  try {
    onnx::ShapeInferenceOptions siOptions(/*check_type=*/true,
                                          /*strict_mode=*/1,
                                          /*data_prop=*/true);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), siOptions);
  } catch (const std::exception &e) {
    mlir::emitError(loc) << "ONNX shape inference failed on model '" << path
                         << "': " << e.what();
    return failure();
  } catch (...) {
    mlir::emitError(loc) << "ONNX shape inference failed on model '" << path
                         << "'";
    return failure();
  }
  aside.restore(model);
  return success();
}

} // namespace cleave::onnximport
