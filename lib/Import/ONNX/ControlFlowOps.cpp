//===- ControlFlowOps.cpp - If, Loop and Scan -----------------------------===//
//
// The ONNX control flow the graph walk imports itself: an If whose
// condition is known at import time becomes the branch it takes; a Loop
// whose trip count and conditions are known, and a Scan, are unrolled,
// one copy of the body per iteration.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "NodeContext.h"

#include "Cleave/IR/CleaveDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace cleave {
namespace onnximport {

LogicalResult GraphImporter::importInitializers(NodeContext &nc,
                                                const onnx::GraphProto &g,
                                                StringRef what) {
  if (g.sparse_initializer_size() > 0) {
    nc.error() << what << ": sparse initializers are not supported";
    return failure();
  }
  for (const auto &t : g.initializer()) {
    Location loc = NameLoc::get(StringAttr::get(ctx, t.name()), nc.loc);
    auto attr = convertTensorProto(t, modelDir, loc, ctx);
    if (failed(attr))
      return failure();
    TensorEntry &e = tensors[t.name()];
    e.value = mlir::cleave::ConstantOp::create(nc.b, loc, *attr).getResult();
    e.known = fromAttr(*attr);
  }
  return success();
}

LogicalResult GraphImporter::importIf(NodeContext &nc) {
  const onnx::NodeProto &node = nc.node;
  const ConstTensor *cond = nc.hasInput(0) ? nc.constInput(0) : nullptr;
  if (!cond) {
    nc.error() << "the condition '" << (nc.hasInput(0) ? node.input(0) : "")
               << "' must be a constant computable at import time: If on a "
                  "value known only at run time (data-dependent control "
                  "flow) is not supported";
    return failure();
  }
  if (cond->numel() != 1) {
    nc.error() << "the condition '" << node.input(0)
               << "' must hold one element, not " << cond->numel();
    return failure();
  }
  bool taken = cond->isFloat() ? cond->floats[0] != 0 : cond->ints[0] != 0;
  StringRef which = taken ? "then_branch" : "else_branch";
  const onnx::GraphProto *branch = nullptr;
  for (const auto &attr : node.attribute())
    if (attr.name() == which && attr.has_g())
      branch = &attr.g();
  if (!branch) {
    nc.error() << "has no " << which << " graph attribute";
    return failure();
  }
  if (branch->output_size() != node.output_size()) {
    nc.error() << which << " has " << branch->output_size()
               << " outputs, the node " << node.output_size();
    return failure();
  }
  if (failed(importInitializers(nc, *branch, which)) ||
      failed(importNodes(*branch, nc.b)))
    return failure();
  for (int k = 0; k < node.output_size(); ++k) {
    if (node.output(k).empty())
      continue;
    const std::string &inner = branch->output(k).name();
    auto it = tensors.find(inner);
    if (it == tensors.end() || (!it->second.value && !it->second.known)) {
      nc.error() << which << " output '" << inner
                 << "' is not produced by the branch";
      return failure();
    }
    TensorEntry copy = it->second;
    tensors[node.output(k)] = std::move(copy);
  }
  return crossCheck(nc);
}

LogicalResult GraphImporter::importBody(NodeContext &nc,
                                        const onnx::GraphProto &body,
                                        ArrayRef<TensorEntry> inputs,
                                        SmallVectorImpl<TensorEntry> &outputs) {
  if (body.input_size() != static_cast<int>(inputs.size())) {
    nc.error() << "body has " << body.input_size() << " inputs, expected "
               << inputs.size();
    return failure();
  }
  // The names the body defines, with what they meant outside.
  llvm::StringMap<std::optional<TensorEntry>> saved;
  auto save = [&](const std::string &name) {
    if (name.empty() || saved.count(name))
      return;
    auto it = tensors.find(name);
    saved[name] = it == tensors.end() ? std::nullopt
                                      : std::optional<TensorEntry>(it->second);
  };
  for (const auto &in : body.input())
    save(in.name());
  for (const auto &t : body.initializer())
    save(t.name());
  for (const auto &node : body.node())
    for (const auto &out : node.output())
      save(out);
  for (auto [k, in] : llvm::enumerate(body.input()))
    tensors[in.name()] = inputs[k];
  if (failed(importInitializers(nc, body, "body")) ||
      failed(importNodes(body, nc.b)))
    return failure();
  outputs.clear();
  for (const auto &out : body.output()) {
    auto it = tensors.find(out.name());
    if (it == tensors.end() || (!it->second.value && !it->second.known)) {
      nc.error() << "body output '" << out.name()
                 << "' is not produced by the body";
      return failure();
    }
    outputs.push_back(it->second);
  }
  for (auto &[name, entry] : saved) {
    if (entry)
      tensors[name] = *entry;
    else
      tensors.erase(name);
  }
  return success();
}

/// The value of `e`, materialized as a constant if it only has a known one.
static Value valueOf(NodeContext &nc, TensorEntry &e) {
  if (!e.value && e.known)
    e.value = mlir::cleave::ConstantOp::create(nc.b, nc.loc, toAttr(*e.known))
                  .getResult();
  return e.value;
}

/// `steps` (each of one shape) stacked along a new dimension `axis`,
/// reversed first when `reverse`.
static Value stack(NodeContext &nc, SmallVector<Value> steps, int64_t axis,
                   bool reverse) {
  if (reverse)
    std::reverse(steps.begin(), steps.end());
  SmallVector<Value> parts;
  for (Value v : steps) {
    SmallVector<int64_t> shape(shapeOf(v));
    shape.insert(shape.begin() + axis, 1);
    parts.push_back(nc.reshape(v, shape));
  }
  if (parts.size() == 1)
    return parts.front();
  SmallVector<int64_t> shape(shapeOf(parts.front()));
  shape[axis] = static_cast<int64_t>(parts.size());
  return mlir::cleave::ConcatOp::create(
             nc.b, nc.loc, RankedTensorType::get(shape, elemOf(parts.front())),
             parts, static_cast<uint64_t>(axis))
      .getResult();
}

/// Appends one iteration's value of the body's scan output `index` to
/// `steps`; every iteration's must have the first one's type (they are
/// stacked).
static LogicalResult appendStep(NodeContext &nc, const onnx::GraphProto &body,
                                int index,
                                SmallVectorImpl<TensorEntry> &outputs,
                                SmallVectorImpl<Value> &steps) {
  Value v = valueOf(nc, outputs[index]);
  if (!v)
    return failure();
  if (!steps.empty() && v.getType() != steps.front().getType()) {
    nc.error() << "scan output '" << body.output(index).name()
               << "' changes type between iterations ("
               << steps.front().getType() << ", then " << v.getType() << ")";
    return failure();
  }
  steps.push_back(v);
  return success();
}

/// The most iterations an unrolled Loop may take.
static constexpr int64_t kMaxUnrolledIterations = 4096;

LogicalResult GraphImporter::importLoop(NodeContext &nc) {
  const onnx::NodeProto &node = nc.node;
  const onnx::GraphProto *body = graphAttr(node, "body");
  if (!body) {
    nc.error() << "has no body graph attribute";
    return failure();
  }
  int numCarried = nc.numInputs() - 2;
  if (numCarried < 0 || body->output_size() < 1 + numCarried) {
    nc.error() << "body has " << body->output_size()
               << " outputs, fewer than the condition and the "
               << std::max(numCarried, 0) << " loop-carried values";
    return failure();
  }
  int numScans = body->output_size() - 1 - numCarried;
  std::optional<int64_t> tripCount;
  if (nc.hasInput(0)) {
    const ConstTensor *m = nc.constInput(0);
    if (!m || m->numel() != 1) {
      nc.error() << "the trip count '" << node.input(0)
                 << "' must be a constant computable at import time (a loop "
                    "whose length is known only at run time is data-dependent "
                    "control flow, which is not supported)";
      return failure();
    }
    tripCount = m->getI(0);
  }
  bool cond = true;
  if (nc.hasInput(1)) {
    const ConstTensor *c = nc.constInput(1);
    if (!c || c->numel() != 1) {
      nc.error() << "the condition '" << node.input(1)
                 << "' must be a constant computable at import time";
      return failure();
    }
    cond = c->getI(0) != 0;
  }
  if (!tripCount && !nc.hasInput(1)) {
    nc.error() << "has neither a trip count nor a condition: it never ends";
    return failure();
  }
  SmallVector<TensorEntry> carried;
  for (int k = 0; k < numCarried; ++k) {
    TensorEntry *e = nc.lookup(node.input(2 + k));
    if (!e) {
      nc.error() << "loop-carried input " << k << " is missing";
      return failure();
    }
    carried.push_back(*e);
  }
  SmallVector<SmallVector<Value>> scans(numScans);
  int64_t i = 0;
  for (; cond && (!tripCount || i < *tripCount); ++i) {
    if (i >= kMaxUnrolledIterations) {
      nc.error() << "runs more than " << kMaxUnrolledIterations
                 << " iterations, the most Cleave unrolls";
      return failure();
    }
    auto scalar = [&](Type t, int64_t v) {
      ConstTensor c;
      c.elemType = t;
      c.ints = {v};
      return TensorEntry{Value(), c};
    };
    SmallVector<TensorEntry> inputs = {scalar(nc.b.getI64Type(), i),
                                       scalar(nc.b.getI1Type(), 1)};
    inputs.append(carried.begin(), carried.end());
    SmallVector<TensorEntry> outputs;
    if (failed(importBody(nc, *body, inputs, outputs)))
      return failure();
    if (!outputs[0].known || outputs[0].known->numel() != 1) {
      nc.error() << "the body's condition output '" << body->output(0).name()
                 << "' must be computable at import time (a loop that stops "
                    "on values known only at run time is data-dependent "
                    "control flow, which is not supported)";
      return failure();
    }
    cond = outputs[0].known->getI(0) != 0;
    for (int k = 0; k < numCarried; ++k)
      carried[k] = outputs[1 + k];
    for (int k = 0; k < numScans; ++k)
      if (failed(appendStep(nc, *body, 1 + numCarried + k, outputs, scans[k])))
        return failure();
  }
  if (i == 0 && numScans > 0) {
    nc.error() << "runs no iteration, so its scan outputs have no known shape";
    return failure();
  }
  for (int k = 0; k < numCarried; ++k)
    if (k < node.output_size() && !node.output(k).empty())
      tensors[node.output(k)] = carried[k];
  for (int k = 0; k < numScans; ++k)
    if (numCarried + k < node.output_size() &&
        !node.output(numCarried + k).empty())
      nc.setOutput(numCarried + k, stack(nc, scans[k], 0, false));
  return success();
}

LogicalResult GraphImporter::importScan(NodeContext &nc) {
  const onnx::NodeProto &node = nc.node;
  const onnx::GraphProto *body = graphAttr(node, "body");
  if (!body) {
    nc.error() << "has no body graph attribute";
    return failure();
  }
  // The version converter does not adapt Scan-8's form.
  if (settings.sourceOpset < 9) {
    nc.error() << "Scan before opset 9 (with a batch dimension and "
                  "sequence_lens) is not supported";
    return failure();
  }
  int64_t numScanInputs = nc.attrInt("num_scan_inputs", 0);
  int numStates = nc.numInputs() - static_cast<int>(numScanInputs);
  if (numScanInputs < 1 || numStates < 0 || body->output_size() < numStates) {
    nc.error() << "num_scan_inputs " << numScanInputs << " does not fit "
               << nc.numInputs() << " inputs and the body's "
               << body->output_size() << " outputs";
    return failure();
  }
  int numScanOutputs = body->output_size() - numStates;
  auto listOr = [&](StringRef name, int64_t n) {
    SmallVector<int64_t> v = nc.attrInts(name);
    if (v.empty())
      v.assign(n, 0);
    return v;
  };
  SmallVector<int64_t> inAxes = listOr("scan_input_axes", numScanInputs);
  SmallVector<int64_t> inDirs = listOr("scan_input_directions", numScanInputs);
  SmallVector<int64_t> outAxes = listOr("scan_output_axes", numScanOutputs);
  SmallVector<int64_t> outDirs =
      listOr("scan_output_directions", numScanOutputs);
  if (static_cast<int64_t>(inAxes.size()) != numScanInputs ||
      static_cast<int64_t>(inDirs.size()) != numScanInputs ||
      static_cast<int64_t>(outAxes.size()) != numScanOutputs ||
      static_cast<int64_t>(outDirs.size()) != numScanOutputs) {
    nc.error() << "scan axes and directions must list one entry per scan "
                  "input and output";
    return failure();
  }
  SmallVector<TensorEntry> states;
  for (int k = 0; k < numStates; ++k) {
    TensorEntry *e = nc.lookup(node.input(k));
    if (!e) {
      nc.error() << "state input " << k << " is missing";
      return failure();
    }
    states.push_back(*e);
  }
  SmallVector<Value> scanInputs;
  int64_t length = -1;
  for (int64_t k = 0; k < numScanInputs; ++k) {
    Value v = nc.input(numStates + static_cast<int>(k));
    if (!v)
      return failure();
    auto axis = nc.normAxis(inAxes[k], rankOf(v), "scan_input_axes");
    if (failed(axis))
      return failure();
    inAxes[k] = *axis;
    int64_t n = shapeOf(v)[*axis];
    if (length >= 0 && n != length) {
      nc.error() << "scan inputs have different lengths (" << length << " and "
                 << n << ")";
      return failure();
    }
    length = n;
    scanInputs.push_back(v);
  }
  if (length == 0) {
    nc.error() << "scans no element, so its outputs have no known shape";
    return failure();
  }
  if (length > kMaxUnrolledIterations) {
    nc.error() << "scans " << length << " steps, more than the "
               << kMaxUnrolledIterations << " Cleave unrolls";
    return failure();
  }
  SmallVector<SmallVector<Value>> scans(numScanOutputs);
  for (int64_t t = 0; t < length; ++t) {
    SmallVector<TensorEntry> inputs(states.begin(), states.end());
    for (int64_t k = 0; k < numScanInputs; ++k) {
      Value v = scanInputs[k];
      int64_t axis = inAxes[k], at = inDirs[k] ? length - 1 - t : t;
      SmallVector<int64_t> start(rankOf(v), 0), limit(shapeOf(v)),
          strides(rankOf(v), 1);
      start[axis] = at;
      limit[axis] = at + 1;
      SmallVector<int64_t> shape(shapeOf(v));
      shape.erase(shape.begin() + axis);
      inputs.push_back(TensorEntry{
          nc.reshape(nc.slice(v, start, limit, strides), shape), std::nullopt});
    }
    SmallVector<TensorEntry> outputs;
    if (failed(importBody(nc, *body, inputs, outputs)))
      return failure();
    for (int k = 0; k < numStates; ++k)
      states[k] = outputs[k];
    for (int k = 0; k < numScanOutputs; ++k)
      if (failed(appendStep(nc, *body, numStates + k, outputs, scans[k])))
        return failure();
  }
  for (int k = 0; k < numStates; ++k)
    if (k < node.output_size() && !node.output(k).empty())
      tensors[node.output(k)] = states[k];
  for (int k = 0; k < numScanOutputs; ++k) {
    int idx = numStates + k;
    if (idx >= node.output_size() || node.output(idx).empty())
      continue;
    auto axis = nc.normAxis(outAxes[k], rankOf(scans[k].front()) + 1,
                            "scan_output_axes");
    if (failed(axis))
      return failure();
    nc.setOutput(idx, stack(nc, scans[k], *axis, outDirs[k] != 0));
  }
  return success();
}

} // namespace onnximport
} // namespace cleave
