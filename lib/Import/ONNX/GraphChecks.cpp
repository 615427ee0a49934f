//===- GraphChecks.cpp - An ONNX graph's names: defined once, in scope ----===//
//
// The structural checks libonnx's checker makes (single assignment,
// definition before use, initializers that match their declarations),
// made by Cleave for every IR version: models of IR version 10 and newer
// skip libonnx 1.12's checker. They also guard libonnx's version converter,
// which dereferences undefined names.
//
//===----------------------------------------------------------------------===//

#include "ModelChecks.h"

#include "NodeContext.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace cleave::onnximport {

namespace {
/// The names of one graph: name -> what defines it ("graph input",
/// "initializer", "node 'n'").
using Scope = llvm::StringMap<std::string>;

class GraphChecker {
public:
  GraphChecker(StringRef path, MLIRContext *ctx) : path(path), ctx(ctx) {}

  /// Checks `graph`, whose outer graphs' names are `outers` (innermost
  /// last); `owner` names the node whose body it is ("" for the model's).
  LogicalResult check(const onnx::GraphProto &graph,
                      SmallVector<const Scope *> &outers, StringRef owner);

private:
  StringRef path;
  MLIRContext *ctx;
  /// Names defined inside a body -> the node that owns the body.
  llvm::StringMap<std::string> bodyNames;

  InFlightDiagnostic error(StringRef where) {
    return mlir::emitError(NameLoc::get(StringAttr::get(ctx, where),
                                        FileLineColLoc::get(ctx, path, 0, 0)));
  }
  /// Fails with an error unless `name` is defined in `scope` or an outer
  /// graph; `what` and `where` say who uses it ("input", "'Relu#0'").
  LogicalResult checkDefined(StringRef name, const Scope &scope,
                             ArrayRef<const Scope *> outers, StringRef what,
                             StringRef where, StringRef locName);
  LogicalResult checkInitializer(const onnx::TensorProto &init,
                                 const onnx::ValueInfoProto &input);
};
} // namespace

/// "float of shape [2, 3]" ("?" for a dimension that is not a number).
static std::string describeTensor(int32_t elemType,
                                  ArrayRef<std::string> dims) {
  std::string s = onnxElementTypeName(elemType) + " of shape [";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i];
  return s + "]";
}

LogicalResult
GraphChecker::checkInitializer(const onnx::TensorProto &init,
                               const onnx::ValueInfoProto &input) {
  if (!input.type().has_tensor_type())
    return success();
  const auto &type = input.type().tensor_type();
  bool same = type.elem_type() == onnx::TensorProto::UNDEFINED ||
              type.elem_type() == init.data_type();
  if (type.has_shape()) {
    same &= type.shape().dim_size() == init.dims_size();
    for (int i = 0; same && i < init.dims_size(); ++i)
      same &= !type.shape().dim(i).has_dim_value() ||
              type.shape().dim(i).dim_value() == init.dims(i);
  }
  if (same)
    return success();
  SmallVector<std::string> held, declared;
  for (int64_t d : init.dims())
    held.push_back(std::to_string(d));
  for (const auto &d : type.shape().dim())
    declared.push_back(d.has_dim_value()       ? std::to_string(d.dim_value())
                       : d.dim_param().empty() ? "?"
                                               : d.dim_param());
  auto diag = error(init.name())
              << "initializer '" << init.name() << "' holds "
              << describeTensor(init.data_type(), held) << ", but graph input '"
              << init.name() << "' declares ";
  if (type.has_shape())
    diag << describeTensor(type.elem_type(), declared);
  else
    diag << onnxElementTypeName(type.elem_type());
  return failure();
}

LogicalResult GraphChecker::checkDefined(StringRef name, const Scope &scope,
                                         ArrayRef<const Scope *> outers,
                                         StringRef what, StringRef where,
                                         StringRef locName) {
  if (scope.contains(name) ||
      llvm::any_of(outers, [&](const Scope *s) { return s->contains(name); }))
    return success();
  auto body = bodyNames.find(name);
  if (body != bodyNames.end()) {
    error(locName) << what << " '" << name << "' of " << where
                   << " is defined only inside the body of '"
                   << body->getValue()
                   << "'; a subgraph's values are not visible outside it";
    return failure();
  }
  error(locName) << what << " '" << name << "' of " << where
                 << " is not produced by any earlier node, initializer or "
                    "graph input";
  return failure();
}

LogicalResult GraphChecker::check(const onnx::GraphProto &graph,
                                  SmallVector<const Scope *> &outers,
                                  StringRef owner) {
  Scope scope;
  llvm::StringMap<const onnx::ValueInfoProto *> inputs;
  for (int i = 0; i < graph.input_size(); ++i) {
    const auto &in = graph.input(i);
    if (!inputs.try_emplace(in.name(), &in).second) {
      error(in.name()) << "graph input '" << in.name() << "' is declared twice";
      return failure();
    }
    scope[in.name()] = "graph input";
  }
  llvm::StringSet<> initializers;
  for (const auto &t : graph.initializer()) {
    if (!initializers.insert(t.name()).second) {
      error(t.name()) << "initializer '" << t.name() << "' is given twice";
      return failure();
    }
    auto in = inputs.find(t.name());
    if (in != inputs.end() && failed(checkInitializer(t, *in->getValue())))
      return failure();
    scope[t.name()] = "initializer";
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    std::string where = node.name().empty()
                            ? node.op_type() + "#" + std::to_string(i)
                            : node.name();
    for (const auto &in : node.input())
      if (!in.empty() && failed(checkDefined(in, scope, outers, "input",
                                             "'" + where + "'", where)))
        return failure();
    // A body sees the names defined before its node.
    outers.push_back(&scope);
    for (const auto &attr : node.attribute()) {
      bool ok = !attr.has_g() || succeeded(check(attr.g(), outers, where));
      for (const auto &g : attr.graphs())
        ok = ok && succeeded(check(g, outers, where));
      if (!ok) {
        outers.pop_back();
        return failure();
      }
    }
    outers.pop_back();
    for (const auto &out : node.output()) {
      if (out.empty())
        continue;
      auto [it, added] = scope.try_emplace(out, "node '" + where + "'");
      if (!added) {
        error(where) << "output '" << out << "' of '" << where
                     << "' is already defined (by the " << it->getValue()
                     << "); every value must be produced once";
        return failure();
      }
    }
  }
  std::string of = owner.empty() ? std::string("'graph'")
                                 : "the body of '" + owner.str() + "'";
  for (const auto &out : graph.output())
    if (failed(checkDefined(out.name(), scope, outers, "output", of,
                            owner.empty() ? StringRef("graph") : owner)))
      return failure();
  if (!owner.empty())
    for (const auto &entry : scope)
      bodyNames.try_emplace(entry.getKey(), owner.str());
  return success();
}

LogicalResult checkGraphStructure(const onnx::GraphProto &graph, StringRef path,
                                  MLIRContext *ctx) {
  SmallVector<const Scope *> outers;
  return GraphChecker(path, ctx).check(graph, outers, "");
}

void addDeclaredRanks(const onnx::GraphProto &graph,
                      llvm::StringMap<int> &ranks) {
  auto declare = [&](const onnx::ValueInfoProto &v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  };
  for (const auto &v : graph.input())
    declare(v);
  for (const auto &v : graph.value_info())
    declare(v);
  for (const auto &v : graph.output())
    declare(v);
  for (const auto &t : graph.initializer())
    ranks[t.name()] = t.dims_size();
}

} // namespace cleave::onnximport
