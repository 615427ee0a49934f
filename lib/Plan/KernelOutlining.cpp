//===- KernelOutlining.cpp - Kernel groups into functions -----------------===//
//
// Gives each plan node its inputs, outputs and name, and outlines each
// fused kernel group into a func.func of the kernel module; identical
// kernel bodies (repeated layers) are compiled once.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilderInternal.h"

#include "mlir/IR/IRMapping.h"

#include <functional>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::plan_builder;
namespace plan = ::cleave::plan;

static std::string kernelName(size_t index, Operation *op) {
  std::string name =
      "k" + std::to_string(index) + "_" + op->getName().stripDialect().str();
  for (char &c : name)
    if (!isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return name;
}

/// The Attention or AttentionBackward command of a cleave.attention or

/// A clone in a kernel keeps none of the report's tags (takeGradientTags
/// reads them off @main): they would only split identical kernels.
static Operation *cloneIntoKernel(OpBuilder &b, Operation &op,
                                  IRMapping &mapping) {
  Operation *clone = b.clone(op, mapping);
  clone->removeAttr(attr::kGradientOf);
  clone->removeAttr(attr::kReshardOnce);
  return clone;
}

LogicalResult PlanBuilder::outline(ModuleOp kernels, bool create) {
  OpBuilder moduleBuilder = OpBuilder::atBlockEnd(kernels.getBody());
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (node.kind == Node::Marker) {
      node.name = "marker" + std::to_string(index);
      continue;
    }
    if (node.kind == Node::Collective || node.kind == Node::Done) {
      node.inputs.assign(node.comm->operand_begin(), node.comm->operand_end());
      if (node.kind == Node::Collective)
        node.outputs.assign(node.comm->result_begin(), node.comm->result_end());
      node.name = (node.kind == Node::Done ? "done" : "collective") +
                  std::to_string(index);
      continue;
    }
    if (node.kind == Node::Library) {
      // In the command's buffer order: attention's q, k, v, [bias], then
      // out and dout (the gradient), then the results.
      Operation *op = node.ops.front();
      if (isa<AttentionBlockOp, AttentionBlockGradOp, GroupedMatmulOp,
              GroupedMatmulWeightGradOp>(op)) {
        // The block forms' and the expert GEMMs' operands are in the
        // command's order.
        node.inputs.assign(op->operand_begin(), op->operand_end());
      } else if (auto a = dyn_cast<AttentionOp>(op)) {
        node.inputs = {a.getQ(), a.getK(), a.getV()};
        if (a.getBias())
          node.inputs.push_back(a.getBias());
      } else {
        auto g = cast<AttentionGradOp>(op);
        node.inputs = {g.getQ(), g.getK(), g.getV()};
        if (g.getBias())
          node.inputs.push_back(g.getBias());
        node.inputs.append({g.getOut(), g.getDout()});
      }
      node.outputs.assign(op->result_begin(), op->result_end());
      node.name =
          (isa<GroupedMatmulOp, GroupedMatmulWeightGradOp>(op) ? "grouped_gemm"
                                                               : "attention") +
          std::to_string(index);
      continue;
    }
    if (node.kind == Node::Gemm) {
      node.inputs = {node.contract.getLhs(), node.contract.getRhs()};
      if (node.bias)
        node.inputs.push_back(node.bias);
      node.outputs = {node.result};
      node.name = "gemm" + std::to_string(index);
      continue;
    }
    llvm::SmallPtrSet<Operation *, 16> members(node.ops.begin(),
                                               node.ops.end());
    // Whether an op outside the kernel reads `v`, directly or through ops
    // its readers rebuild (a widened copy only this kernel's softmax reads
    // is not an output).
    DenseMap<Value, bool> outside;
    std::function<bool(Value)> readOutside = [&](Value v) {
      if (auto it = outside.find(v); it != outside.end())
        return it->second;
      bool read = llvm::any_of(v.getUsers(), [&](Operation *user) {
        if (rematerialized.contains(user))
          return llvm::any_of(user->getResults(), readOutside);
        return !members.contains(user);
      });
      outside[v] = read;
      return read;
    };
    SmallVector<Value> inlined;
    for (Operation *op : node.ops) {
      for (Value v : kernelSources(op)) {
        Operation *def = v.getDefiningOp();
        if (def && members.contains(def))
          continue;
        if (isInlinableConstant(v)) {
          if (!llvm::is_contained(inlined, v))
            inlined.push_back(v);
        } else if (!llvm::is_contained(node.inputs, v)) {
          node.inputs.push_back(v);
        }
      }
      for (Value r : op->getResults())
        if (readOutside(r))
          node.outputs.push_back(r);
    }
    SmallVector<Type> inTypes, outTypes;
    for (Value v : node.inputs)
      inTypes.push_back(v.getType());
    for (Value v : node.outputs)
      outTypes.push_back(v.getType());
    if (!create) {
      auto fn = kernels.lookupSymbol<func::FuncOp>(node.name);
      FunctionType type = moduleBuilder.getFunctionType(inTypes, outTypes);
      if (!fn)
        return node.ops.front()->emitOpError()
               << "names the kernel '" << node.name
               << "', which the kernel module does not hold";
      if (fn.getFunctionType() != type)
        return fn.emitOpError()
               << "has type " << fn.getFunctionType() << " but its group in "
               << "@main reads and writes " << type
               << ": outline the kernels with the plan's options";
      continue;
    }
    node.name = kernelName(index, node.ops.front());
    auto fn = func::FuncOp::create(
        moduleBuilder, node.ops.front()->getLoc(), node.name,
        moduleBuilder.getFunctionType(inTypes, outTypes));
    Block *body = fn.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(body);
    IRMapping mapping;
    for (auto [v, arg] : llvm::zip(node.inputs, body->getArguments()))
      mapping.map(v, arg);
    for (Value v : inlined)
      cloneIntoKernel(b, *v.getDefiningOp(), mapping);
    // A rematerialized op is rebuilt before its first reader, once its
    // operands (inputs, members cloned above, or rebuilt in turn) are.
    std::function<void(Value)> rebuild = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (mapping.contains(v) || !def || !rematerialized.count(def))
        return;
      for (Value operand : def->getOperands())
        rebuild(operand);
      cloneIntoKernel(b, *def, mapping);
    };
    for (Operation *op : node.ops) {
      for (Value v : op->getOperands())
        rebuild(v);
      cloneIntoKernel(b, *op, mapping);
    }
    SmallVector<Value> results;
    for (Value v : node.outputs)
      results.push_back(mapping.lookup(v));
    func::ReturnOp::create(b, fn.getLoc(), results);

    // Repeated layers produce identical kernels: compile each body once.
    std::string key;
    {
      llvm::raw_string_ostream os(key);
      fn.setSymName("kernel");
      // Verified as the module was; printed without its enclosing scope (a
      // full AsmState verifies and numbers the whole module per kernel).
      fn.print(os, OpPrintingFlags()
                       .skipRegions(false)
                       .elideLargeElementsAttrs(0)
                       .assumeVerified()
                       .useLocalScope());
      fn.setSymName(node.name);
    }
    auto [it, inserted] = kernelByBody.try_emplace(key, node.name);
    if (!inserted) {
      fn.erase();
      node.name = it->second;
    }
  }
  return success();
}
