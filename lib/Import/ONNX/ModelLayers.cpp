//===- ModelLayers.cpp - The repeated layers of an ONNX graph ------------===//
//
// A layer is the run of nodes whose names share a layer prefix
// (cleave/Analysis/LayerNames.h). A model whose layers repeat the first one
// (the same ops, attributes, initializer shapes and wiring inside the
// layer) can be cut down to its first K layers: what the planner compiles
// to cost one layer (cleave-compile --auto).
//
//===----------------------------------------------------------------------===//

#include "ONNXLoader.h"

#include "cleave/Analysis/LayerNames.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <limits>

using namespace mlir;

namespace cleave::onnximport {
namespace {

struct Layers {
  std::vector<std::string> names;
  /// Node indices of each layer, in graph order.
  std::vector<std::vector<int>> nodes;
  /// Why the layers do not repeat the first one, or "".
  std::string mismatch;
};

/// A node's attributes as bytes that compare equal where the attributes
/// do, but for a tensor's name: a Constant node's value is often named
/// after its node, and so after its layer.
std::string attributesKey(const onnx::NodeProto &node) {
  std::string key;
  for (const onnx::AttributeProto &a : node.attribute()) {
    if (a.has_t() && !a.t().name().empty()) {
      onnx::AttributeProto unnamed = a;
      unnamed.mutable_t()->clear_name();
      key += unnamed.SerializeAsString() + '\0';
    } else {
      key += a.SerializeAsString() + '\0';
    }
  }
  return key;
}

Layers findLayers(const onnx::GraphProto &graph) {
  Layers out;
  llvm::StringMap<size_t> index;
  for (int i = 0; i < graph.node_size(); ++i) {
    llvm::StringRef prefix = layerPrefix(graph.node(i).name());
    if (prefix.empty())
      continue;
    auto [it, inserted] = index.try_emplace(prefix, out.names.size());
    if (inserted) {
      out.names.push_back(prefix.str());
      out.nodes.emplace_back();
    }
    out.nodes[it->second].push_back(i);
  }
  if (out.names.size() < 2)
    return out;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &t : graph.initializer())
    initializers[t.name()] = &t;
  // Where each tensor is made: (layer, position in it).
  llvm::StringMap<std::pair<size_t, size_t>> madeAt;
  for (size_t l = 0; l < out.nodes.size(); ++l)
    for (size_t j = 0; j < out.nodes[l].size(); ++j)
      for (const std::string &o : graph.node(out.nodes[l][j]).output())
        madeAt[o] = {l, j};
  const std::vector<int> &first = out.nodes[0];
  for (size_t l = 1; l < out.nodes.size(); ++l) {
    const std::vector<int> &layer = out.nodes[l];
    auto differ = [&](const std::string &why) {
      out.mismatch = "layer '" + out.names[l] + "' differs from '" +
                     out.names[0] + "': " + why;
    };
    if (layer.size() != first.size()) {
      differ(std::to_string(layer.size()) + " nodes, not " +
             std::to_string(first.size()));
      return out;
    }
    for (size_t j = 0; j < layer.size(); ++j) {
      const onnx::NodeProto &a = graph.node(first[j]),
                            &b = graph.node(layer[j]);
      if (a.op_type() != b.op_type() || a.domain() != b.domain() ||
          a.input_size() != b.input_size() ||
          a.output_size() != b.output_size() ||
          attributesKey(a) != attributesKey(b)) {
        differ("node '" + b.name() + "' (" + b.op_type() +
               ") does not match '" + a.name() + "' (" + a.op_type() + ")");
        return out;
      }
      for (int i = 0; i < a.input_size(); ++i) {
        auto ia = initializers.find(a.input(i));
        auto ib = initializers.find(b.input(i));
        bool aInit = ia != initializers.end(), bInit = ib != initializers.end();
        auto ma = madeAt.find(a.input(i)), mb = madeAt.find(b.input(i));
        bool aInside = ma != madeAt.end() && ma->second.first == 0;
        bool bInside = mb != madeAt.end() && mb->second.first == l;
        bool same = aInit == bInit && aInside == bInside;
        if (same && aInit)
          same = ia->second->data_type() == ib->second->data_type() &&
                 llvm::equal(ia->second->dims(), ib->second->dims());
        if (same && aInside)
          same = ma->second.second == mb->second.second;
        if (!same) {
          differ("input " + std::to_string(i) + " of node '" + b.name() +
                 "' ('" + b.input(i) + "') is not wired as '" + a.input(i) +
                 "' is in '" + a.name() + "'");
          return out;
        }
      }
    }
  }
  return out;
}

} // namespace

LogicalResult keepFirstLayers(onnx::ModelProto &model, int64_t keep,
                              Location loc) {
  onnx::GraphProto &graph = *model.mutable_graph();
  Layers layers = findLayers(graph);
  int64_t count = static_cast<int64_t>(layers.names.size());
  if (count < 2 || !layers.mismatch.empty()) {
    mlir::emitError(loc)
        << "cannot keep the first " << keep << " layers: "
        << (count < 2 ? "the model has " + std::to_string(count) +
                            " layers named by its nodes (e.g. 'h0.fc', "
                            "'/model/layers.0/mlp')"
                      : layers.mismatch);
    return failure();
  }
  if (keep >= count)
    return success();
  // The last layer's tensors, read after the layers, become the kept last
  // layer's (the same position in the same layer).
  llvm::StringMap<std::string> replacement;
  const std::vector<int> &last = layers.nodes.back(),
                         &kept = layers.nodes[keep - 1];
  for (size_t j = 0; j < last.size(); ++j)
    for (int o = 0; o < graph.node(last[j]).output_size(); ++o)
      replacement[graph.node(last[j]).output(o)] =
          graph.node(kept[j]).output(o);
  std::vector<bool> removed(graph.node_size(), false);
  llvm::StringSet<> removedTensors;
  for (int64_t l = keep; l < count; ++l)
    for (int i : layers.nodes[l]) {
      removed[i] = true;
      for (const std::string &o : graph.node(i).output())
        removedTensors.insert(o);
    }
  auto rewire = [&](std::string *name, const std::string &reader) {
    if (!removedTensors.contains(*name))
      return success();
    auto it = replacement.find(*name);
    if (it == replacement.end()) {
      mlir::emitError(loc) << "cannot keep the first " << keep
                           << " layers: " << reader << " reads '" << *name
                           << "', made inside a layer before the last";
      return failure();
    }
    *name = it->second;
    return success();
  };
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (removed[i])
      continue;
    onnx::NodeProto *node = graph.mutable_node(i);
    for (int k = 0; k < node->input_size(); ++k)
      if (failed(rewire(node->mutable_input(k), "node '" + node->name() + "'")))
        return failure();
    nodes.Add()->Swap(node);
  }
  graph.mutable_node()->Swap(&nodes);
  for (onnx::ValueInfoProto &output : *graph.mutable_output())
    if (failed(rewire(output.mutable_name(),
                      "graph output '" + output.name() + "'")))
      return failure();
  // Initializers (and the graph inputs that declare them) and value infos
  // only the removed layers used.
  llvm::StringSet<> used;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &in : node.input())
      used.insert(in);
  for (const onnx::ValueInfoProto &output : graph.output())
    used.insert(output.name());
  llvm::StringSet<> dropped;
  google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
  for (onnx::TensorProto &t : *graph.mutable_initializer()) {
    if (used.contains(t.name()))
      inits.Add()->Swap(&t);
    else
      dropped.insert(t.name());
  }
  graph.mutable_initializer()->Swap(&inits);
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs, infos;
  for (onnx::ValueInfoProto &in : *graph.mutable_input())
    if (!dropped.contains(in.name()))
      inputs.Add()->Swap(&in);
  graph.mutable_input()->Swap(&inputs);
  for (onnx::ValueInfoProto &info : *graph.mutable_value_info())
    if (!removedTensors.contains(info.name()))
      infos.Add()->Swap(&info);
  graph.mutable_value_info()->Swap(&infos);
  return success();
}

} // namespace cleave::onnximport

namespace cleave {

namespace {
/// Parses `path` without checks; reports a file it cannot read or parse.
LogicalResult parseModel(llvm::StringRef path, Location loc,
                         onnx::ModelProto &model) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file ||
      (*file)->getBufferSize() >
          static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray((*file)->getBufferStart(),
                            static_cast<int>((*file)->getBufferSize()))) {
    mlir::emitError(loc) << "cannot read ONNX model '" << path << "'";
    return failure();
  }
  return success();
}
} // namespace

FailureOr<std::string> cutONNXModel(llvm::StringRef path, int64_t keep,
                                    MLIRContext &context) {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  onnx::ModelProto model;
  if (failed(parseModel(path, loc, model)) ||
      failed(onnximport::keepFirstLayers(model, keep, loc)))
    return failure();
  return model.SerializeAsString();
}

FailureOr<ModelOutline> outlineONNXModel(llvm::StringRef path,
                                         MLIRContext &context) {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  onnx::ModelProto model;
  if (failed(parseModel(path, loc, model)))
    return failure();
  const onnx::GraphProto &graph = model.graph();
  onnximport::Layers layers = onnximport::findLayers(graph);
  ModelOutline out;
  out.layers = layers.names;
  out.mismatch = layers.mismatch;
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &t : graph.initializer())
    initializers.insert(t.name());
  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (initializers.contains(in.name()))
      continue;
    ModelOutline::Input input;
    input.name = in.name();
    if (in.type().has_tensor_type() && in.type().tensor_type().has_shape())
      for (const onnx::TensorShapeProto_Dimension &d :
           in.type().tensor_type().shape().dim())
        input.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    out.inputs.push_back(std::move(input));
  }
  return out;
}

} // namespace cleave
