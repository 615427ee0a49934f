//===- ONNXImporter.cpp - Walk an ONNX graph into func.func @main --------===//
//
// Entry points of the importer: loads the model (ONNXLoader.cpp), checks
// every op is supported, turns graph inputs into arguments, initializers into
// `cleave.constant`s, and converts nodes in order through the converter
// table, folding shape computations on known constants.
//
//===----------------------------------------------------------------------===//

#include "cleave/Import/ONNXImporter.h"

#include "Cleave/IR/CleaveDialect.h"
#include "GraphImporter.h"
#include "NodeContext.h"
#include "ONNXLoader.h"
#include "TorchExport.h"
#include "TrainingOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

using namespace mlir;

namespace cleave {
namespace onnximport {

/// `If` of the default domain: imported by the graph walk itself when its
/// condition is known (GraphImporter::importIf).
bool isIfNode(const onnx::NodeProto &node) {
  return node.op_type() == "If" &&
         (node.domain().empty() || node.domain() == "ai.onnx");
}

/// `Loop` and `Scan` of the default domain: unrolled by the graph walk
/// (GraphImporter::importLoop, importScan).
bool isLoopNode(const onnx::NodeProto &node) {
  return (node.op_type() == "Loop" || node.op_type() == "Scan") &&
         (node.domain().empty() || node.domain() == "ai.onnx");
}

/// The graph attribute `name` of `node`, or null.
const onnx::GraphProto *graphAttr(const onnx::NodeProto &node, StringRef name) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name && attr.has_g())
      return &attr.g();
  return nullptr;
}

Location GraphImporter::nodeLoc(const onnx::NodeProto &node, int index) {
  std::string name = node.name().empty()
                         ? node.op_type() + "#" + std::to_string(index)
                         : node.name();
  return NameLoc::get(StringAttr::get(ctx, name), fileLoc);
}

LogicalResult GraphImporter::checkSupported() {
  const auto &registry = getConverterRegistry();
  struct Use {
    int64_t count = 0;
    std::string firstNode;
  };
  std::vector<std::pair<std::string, Use>> unsupported; // first-seen order
  llvm::StringMap<size_t> index;
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    std::string key = converterKey(node);
    if (registry.count(key) || isIfNode(node) || isLoopNode(node))
      continue;
    auto [it, inserted] = index.insert({key, unsupported.size()});
    if (inserted)
      unsupported.push_back({key, Use()});
    Use &use = unsupported[it->second].second;
    if (use.count++ == 0)
      use.firstNode = node.name().empty()
                          ? node.op_type() + "#" + std::to_string(i)
                          : node.name();
  }
  if (unsupported.empty())
    return success();
  auto diag = mlir::emitError(fileLoc) << "unsupported ONNX ops: ";
  bool first = true;
  for (auto &[op, use] : unsupported) {
    diag << (first ? "" : ", ") << op << " (x" << use.count << ", first node '"
         << use.firstNode << "')";
    first = false;
  }
  return failure();
}

FailureOr<RankedTensorType>
GraphImporter::convertValueInfo(const onnx::ValueInfoProto &vi, bool isInput) {
  Location loc = NameLoc::get(StringAttr::get(ctx, vi.name()), fileLoc);
  const char *what = isInput ? "input" : "output";
  if (!vi.type().has_tensor_type()) {
    mlir::emitError(loc) << what << " '" << vi.name()
                         << "' is not a tensor (sequences, maps and optionals "
                            "are not supported)";
    return failure();
  }
  const auto &tt = vi.type().tensor_type();
  std::string why;
  Type et = convertElementType(ctx, tt.elem_type(), why);
  if (!et) {
    mlir::emitError(loc) << what << " '" << vi.name() << "': " << why;
    return failure();
  }
  if (!tt.has_shape()) {
    mlir::emitError(loc) << what << " '" << vi.name()
                         << "' has no shape; pin it with --input-shape "
                         << vi.name() << "=...";
    return failure();
  }
  SmallVector<int64_t> shape;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &d = tt.shape().dim(i);
    if (!d.has_dim_value() || d.dim_value() < 0) {
      auto diag = mlir::emitError(loc) << what << " '" << vi.name() << "' ";
      if (d.has_dim_param() && !d.dim_param().empty())
        diag << "has symbolic dimension '" << d.dim_param() << "'";
      else
        diag << "has an unknown dimension";
      diag << " (dim " << i << "); pin it with --input-shape " << vi.name()
           << "=...";
      return failure();
    }
    shape.push_back(d.dim_value());
  }
  return RankedTensorType::get(shape, et);
}

/// Compares the importer's result type with ONNX shape inference's, when the
/// latter is fully static.
LogicalResult GraphImporter::crossCheck(NodeContext &node) {
  for (int i = 0; i < node.numOutputs(); ++i) {
    if (!node.hasOutput(i))
      continue;
    const std::string &name = node.node.output(i);
    TensorEntry *e = node.lookup(name);
    if (e && e->sequence)
      continue; // a sequence: its elements are the importer's tensors
    if (!e || (!e->value && !e->known)) {
      node.error() << "output " << i << " ('" << name
                   << "') is not supported by the importer";
      return failure();
    }
    RankedTensorType mine = e->value
                                ? cast<RankedTensorType>(e->value.getType())
                                : e->known->type();
    auto it = inferred.find(name);
    if (it == inferred.end() || !it->second->has_tensor_type())
      continue;
    const auto &tt = it->second->tensor_type();
    std::string why;
    Type et =
        tt.elem_type() ? convertElementType(ctx, tt.elem_type(), why) : Type();
    if (et && et != mine.getElementType()) {
      node.error() << "importer computed element type " << mine.getElementType()
                   << " for output '" << name
                   << "' but ONNX shape inference says " << et;
      return failure();
    }
    if (!tt.has_shape())
      continue;
    SmallVector<int64_t> theirs;
    bool complete = true;
    for (const auto &d : tt.shape().dim()) {
      complete &= d.has_dim_value();
      theirs.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    if (!complete)
      continue;
    if (ArrayRef<int64_t>(theirs) != mine.getShape()) {
      auto diag = node.error() << "importer computed shape [";
      llvm::interleaveComma(mine.getShape(), diag);
      diag << "] for output '" << name << "' but ONNX shape inference says [";
      llvm::interleaveComma(theirs, diag);
      diag << "]";
      return failure();
    }
  }
  return success();
}

FailureOr<OwningOpRef<ModuleOp>> GraphImporter::run() {
  if (failed(checkSupported()))
    return failure();

  for (const auto &vi : graph.value_info())
    inferred[vi.name()] = &vi.type();
  for (const auto &vi : graph.output())
    inferred[vi.name()] = &vi.type();

  llvm::StringSet<> initNames;
  for (const auto &t : graph.initializer())
    initNames.insert(t.name());
  if (graph.sparse_initializer_size() > 0) {
    mlir::emitError(fileLoc) << "sparse initializers are not supported";
    return failure();
  }

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const auto &in : graph.input()) {
    if (initNames.contains(in.name()))
      continue;
    auto type = convertValueInfo(in, /*isInput=*/true);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    argNames.push_back(in.name());
  }

  OpBuilder b(ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());
  auto func =
      func::FuncOp::create(b, fileLoc, "main", b.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);
  for (size_t i = 0; i < argNames.size(); ++i) {
    mlir::cleave::setArgName(func, i, argNames[i]);
    tensors[argNames[i]].value = body->getArgument(i);
  }

  // With a PyTorch export signature, each initializer is a parameter, a
  // buffer, or (absent from it) a constant the exporter made. Parameters
  // the exporter folded into copies were made again before the import
  // (recoverFoldedParameters), or the import was refused.
  llvm::StringMap<mlir::cleave::InitializerKind> stateKinds =
      readTorchSignature(graph).kinds;
  llvm::StringMap<const FoldedParameter *> foldedByName;
  for (const FoldedParameter &f : folded)
    foldedByName[f.parameter] = &f;
  for (const auto &t : graph.initializer()) {
    Location loc = NameLoc::get(StringAttr::get(ctx, t.name()), fileLoc);
    std::optional<ExternalRef> external;
    auto attr = convertTensorProto(t, modelDir, loc, ctx, &external,
                                   options.absentWeights);
    if (failed(attr))
      return failure();
    auto cst = mlir::cleave::ConstantOp::create(b, loc, *attr);
    mlir::cleave::setInitializerName(cst, t.name());
    // Where the bytes lie, so that a training plan can reference them
    // instead of holding a copy (value: the attribute they back, which a
    // transformed initial value no longer is).
    if (external)
      cst->setDiscardableAttr(
          mlir::cleave::attr::kExternalData,
          b.getDictionaryAttr({
              b.getNamedAttr("file", b.getStringAttr(external->file)),
              b.getNamedAttr("offset", b.getI64IntegerAttr(external->offset)),
              b.getNamedAttr("file_size",
                             b.getI64IntegerAttr(external->fileSize)),
              b.getNamedAttr("value", *attr),
          }));
    // Where --export-onnx writes it: the file's transposed copy, and the
    // parameter itself only if the file held it.
    if (const FoldedParameter *f = foldedByName.lookup(t.name())) {
      cst->setDiscardableAttr(mlir::cleave::attr::kTransposedCopy,
                              b.getStringAttr(f->copy));
      if (!f->inSource)
        cst->setDiscardableAttr(mlir::cleave::attr::kNotInSource,
                                b.getUnitAttr());
    }
    if (!stateKinds.empty()) {
      auto it = stateKinds.find(t.name());
      mlir::cleave::setInitializerKind(
          cst, it == stateKinds.end() ? mlir::cleave::InitializerKind::constant
                                      : it->second);
    }
    TensorEntry &e = tensors[t.name()];
    e.value = cst.getResult();
    e.known = fromAttr(*attr);
  }

  if (failed(importNodes(graph, b)))
    return failure();

  SmallVector<Value> results;
  for (const auto &out : graph.output()) {
    Location loc = NameLoc::get(StringAttr::get(ctx, out.name()), fileLoc);
    auto it = tensors.find(out.name());
    if (it == tensors.end()) {
      mlir::emitError(loc) << "graph output '" << out.name()
                           << "' is not produced by the graph";
      return failure();
    }
    TensorEntry &e = it->second;
    if (e.sequence) {
      mlir::emitError(loc) << "graph output '" << out.name()
                           << "' is a sequence; Cleave's outputs are tensors";
      return failure();
    }
    if (!e.value)
      e.value = mlir::cleave::ConstantOp::create(b, loc, toAttr(*e.known));
    results.push_back(e.value);
  }
  for (auto &[name, value] : stateUpdates)
    results.push_back(value);
  func::ReturnOp::create(b, fileLoc, results);
  func.setFunctionType(
      b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (int i = 0; i < graph.output_size(); ++i)
    mlir::cleave::setResultName(func, i, graph.output(i).name());
  for (auto [k, update] : llvm::enumerate(stateUpdates)) {
    unsigned i = graph.output_size() + k;
    mlir::cleave::setResultName(func, i, update.first);
    mlir::cleave::setResultUpdatesInitializer(func, i, update.first);
  }

  if (failed(mlir::verify(*module))) {
    mlir::emitError(fileLoc)
        << "internal error: the imported module does not verify";
    return failure();
  }
  return module;
}

LogicalResult GraphImporter::importNodes(const onnx::GraphProto &g,
                                         OpBuilder &b) {
  const auto &registry = getConverterRegistry();
  for (int i = 0; i < g.node_size(); ++i) {
    const auto &node = g.node(i);
    NodeContext nc(node, nodeLoc(node, i), opset, b, tensors, settings);
    nc.stateUpdates = &stateUpdates;
    for (int j = 0; j < nc.numInputs(); ++j) {
      if (nc.hasInput(j) && !nc.lookup(node.input(j))) {
        nc.error() << "input '" << node.input(j)
                   << "' is not produced by any earlier node, initializer or "
                      "graph input";
        return failure();
      }
    }
    // A converter that read an attribute of the wrong type has reported it
    // (NodeContext::attributeFailed) and fails the node.
    auto converted = [&](LogicalResult result) {
      return success(succeeded(result) && !nc.attributeFailed());
    };
    if (isGradientNode(node)) { // Differentiates a part of the graph.
      if (failed(converted(importGradientNode(nc, g, i, tensors))) ||
          failed(crossCheck(nc)))
        return failure();
      continue;
    }
    if (isIfNode(node)) {
      if (failed(converted(importIf(nc))))
        return failure();
      continue;
    }
    if (isLoopNode(node)) {
      if (failed(converted(node.op_type() == "Loop" ? importLoop(nc)
                                                    : importScan(nc))) ||
          failed(crossCheck(nc)))
        return failure();
      continue;
    }
    if (tryFoldNode(nc)) {
      if (failed(converted(success())) || failed(crossCheck(nc)))
        return failure();
      continue;
    }
    auto it = registry.find(converterKey(node));
    if (it == registry.end()) {
      nc.error() << "unsupported op";
      return failure();
    }
    if (failed(converted(it->second(nc))) || failed(crossCheck(nc)))
      return failure();
  }
  return success();
}
} // namespace onnximport

FailureOr<OwningOpRef<ModuleOp>> importONNXFile(StringRef path,
                                                MLIRContext &context,
                                                const ImportOptions &options) {
  context.loadDialect<mlir::cleave::CleaveDialect, func::FuncDialect>();
  onnx::ModelProto model;
  int64_t sourceOpset = 0;
  if (failed(onnximport::loadONNXModel(path, options, &context, model,
                                       &sourceOpset)))
    return failure();
  std::vector<onnximport::FoldedParameter> folded;
  if (options.keepParameters &&
      failed(onnximport::recoverFoldedParameters(
          *model.mutable_graph(), path, !options.trainableNamed,
          FileLineColLoc::get(&context, path, 0, 0), folded)))
    return failure();
  onnximport::GraphImporter importer(&context, model, path, options,
                                     sourceOpset);
  importer.setFoldedParameters(std::move(folded));
  return importer.run();
}

std::string parseInputShapeFlag(StringRef flag, ImportOptions &options) {
  size_t eq = flag.rfind('=');
  if (eq == StringRef::npos || eq == 0)
    return "invalid --input-shape '" + flag.str() +
           "': expected name=DIMxDIM... (e.g. x=2x3)";
  StringRef name = flag.take_front(eq);
  StringRef dims = flag.drop_front(eq + 1).trim();
  SmallVector<int64_t> shape;
  if (!dims.empty() && dims != "scalar") {
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef p : parts) {
      int64_t d;
      if (p.trim().getAsInteger(10, d) || d < 0)
        return "invalid dimension '" + p.str() + "' in --input-shape '" +
               flag.str() + "': dimensions are non-negative integers";
      shape.push_back(d);
    }
  }
  if (!options.inputShapes.try_emplace(name, shape).second)
    return "--input-shape gives input '" + name.str() +
           "' twice; give each input's shape once";
  return {};
}

std::string parseFreezeInputFlag(StringRef flag, ImportOptions &options) {
  size_t eq = flag.find('=');
  if (eq == StringRef::npos || eq == 0 || eq + 1 == flag.size())
    return "invalid --freeze-input '" + flag.str() +
           "': expected name=value.pb (an ONNX TensorProto file)";
  StringRef name = flag.take_front(eq);
  if (!options.frozenInputs.try_emplace(name, flag.drop_front(eq + 1).str())
           .second)
    return "--freeze-input gives input '" + name.str() + "' twice";
  return {};
}

} // namespace cleave
