//===- PlanTables.cpp - A plan's tensor tables ----------------------------===//
//
// The plan's tables: its inputs (with their roles and valid ranges), its
// state tensors (parameters with their initial values, referenced in the
// model's external data or serialized; optimizer state zeroed by an init
// command), its outputs, the shardings of each, and its constants.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilderInternal.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cstring>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::plan_builder;
using ::cleave::BufferInterval;
using ::cleave::BuiltPlan;
namespace plan = ::cleave::plan;

/// The little-endian bytes of a constant, one element after another (i1 as
/// one byte per element).
FailureOr<std::vector<uint8_t>>
plan_builder::constantBytes(ElementsAttr value) {
  auto type = cast<RankedTensorType>(value.getType());
  std::vector<uint8_t> bytes(byteSize(type));
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != bytes.size())
      return failure();
    std::memcpy(bytes.data(), blob->getData().data(), bytes.size());
    return bytes;
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return failure();
  Type et = type.getElementType();
  // bool and the 4- and 2-bit types take a byte, their bits low, the rest
  // zero (plan::DType).
  unsigned width = std::max(8u, et.getIntOrFloatBitWidth());
  size_t elemBytes = width / 8, i = 0;
  auto put = [&](const APInt &v) {
    APInt ext = v.getBitWidth() < 8 ? v.zext(8) : v;
    for (size_t b = 0; b < elemBytes; ++b)
      bytes[i * elemBytes + b] =
          static_cast<uint8_t>(ext.extractBitsAsZExtValue(8, 8 * b));
    ++i;
  };
  if (isa<FloatType>(et)) {
    for (const APFloat &v : dense.getValues<APFloat>())
      put(v.bitcastToAPInt());
  } else {
    for (const APInt &v : dense.getValues<APInt>())
      put(v);
  }
  return bytes;
}

/// The table entry of tensor `v` called `name`, at its buffer's offset.
LogicalResult PlanBuilder::tensorInfo(const Assembly &a, Value v,
                                      StringRef name, plan::TensorInfo &info) {
  auto type = cast<RankedTensorType>(v.getType());
  FailureOr<plan::DType> dtype = toDType(type.getElementType());
  if (failed(dtype))
    return mlir::emitError(v.getLoc())
           << "tensor '" << name << "' has element type "
           << type.getElementType() << ", which plans cannot hold";
  info.name = name.str();
  info.dtype = *dtype;
  info.shape.assign(type.getShape().begin(), type.getShape().end());
  info.offset = offsetOf(a, v);
  return success();
}

/// `cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>` on an
/// argument or result: per dimension, the mesh axes it is split over.
LogicalResult PlanBuilder::readSharding(Attribute attr, plan::TensorInfo &info,
                                        Location loc) {
  if (!attr)
    return success();
  auto typed = dyn_cast<TensorShardingAttr>(attr);
  if (!typed)
    return mlir::emitError(loc)
           << "tensor '" << info.name << "': cleave.sharding must be a "
           << "#cleave.sharding<@mesh, [...]> attribute, not " << attr;
  if (!mesh)
    return mlir::emitError(loc) << "tensor '" << info.name
                                << "' has a cleave.sharding but the module "
                                   "has no cleave.mesh";
  if (typed.getMesh().getValue() != mesh.getSymName())
    return mlir::emitError(loc)
           << "tensor '" << info.name << "': cleave.sharding names mesh "
           << typed.getMesh() << ", but the module's mesh is @"
           << mesh.getSymName();
  if (typed.getRank() != (int64_t)info.shape.size())
    return mlir::emitError(loc)
           << "tensor '" << info.name << "': cleave.sharding lists "
           << typed.getRank() << " dimensions for rank " << info.shape.size();
  for (DimShardingAttr dim : typed.getDims()) {
    std::vector<uint32_t> indices;
    for (StringAttr name : dim.getAxes()) {
      int64_t axis = mesh.getAxisIndex(name.getValue());
      if (axis < 0)
        return mlir::emitError(loc)
               << "tensor '" << info.name << "': cleave.sharding names " << name
               << ", which is not an axis of mesh @" << mesh.getSymName();
      for (const std::vector<uint32_t> &other : info.sharding)
        if (llvm::is_contained(other, axis) ||
            llvm::is_contained(indices, axis))
          return mlir::emitError(loc)
                 << "tensor '" << info.name << "': mesh axis " << name
                 << " shards more than one dimension";
      indices.push_back(static_cast<uint32_t>(axis));
    }
    info.sharding.push_back(std::move(indices));
  }
  return success();
}

/// State arguments: a state tensor each, with the parameter's initial value
/// as a constant at the same offset, or zeroed by an init command.
LogicalResult PlanBuilder::addState(Assembly &a, plan::Plan &p, unsigned i,
                                    plan::TensorInfo info) {
  StateKind kind = *getArgState(main, i);
  auto parameter = getArgParameter(main, i);
  auto slot = getArgSlot(main, i);
  plan::StateTensor state;
  state.info = info;
  state.parameter = parameter ? parameter.getValue().str() : info.name;
  state.slot = slot ? slot.getValue().str() : "";
  // A parameter --untie made, in the `untied` metadata for --export-onnx:
  // [{"name": copy, "from": source initializer, "node": ONNX node}, ...].
  if (auto from = main.getArgAttrOfType<StringAttr>(i, attr::kUntiedFrom)) {
    auto node = main.getArgAttrOfType<StringAttr>(i, attr::kUntiedNode);
    a.untied.push_back(
        llvm::json::Object{{"name", info.name},
                           {"from", from.getValue()},
                           {"node", node ? node.getValue() : StringRef()}});
  }
  // A parameter made again from a PyTorch export's transposed copy, in the
  // `folded` metadata: --export-onnx writes the copy (and the parameter
  // only where the file held it).
  if (auto copy = main.getArgAttrOfType<StringAttr>(i, attr::kTransposedCopy))
    a.folded.push_back(llvm::json::Object{
        {"name", info.name},
        {"copy", copy.getValue()},
        {"in_source", !main.getArgAttr(i, attr::kNotInSource)}});
  // `cleave.varying = ["dp"]`: the state differs from rank to rank over
  // those axes although its sharding does not split it (local SGD's
  // replicas, a delayed reduction's local gradients).
  if (auto varying = getArgVarying(main, i)) {
    for (Attribute a : varying) {
      auto name = dyn_cast<StringAttr>(a);
      auto it = name ? llvm::find(p.mesh.axisNames, name.getValue().str())
                     : p.mesh.axisNames.end();
      if (it == p.mesh.axisNames.end())
        return main.emitError()
               << "state '" << info.name << "': cleave.varying names " << a
               << ", which is not an axis of the module's mesh";
      state.varyingAxes.push_back(
          static_cast<uint32_t>(it - p.mesh.axisNames.begin()));
    }
  }
  auto initial = getArgInitialValue(main, i);
  if (kind != StateKind::optimizer_state || initial) {
    state.kind = kind == StateKind::parameter ? plan::StateKind::Parameter
                 : kind == StateKind::buffer  ? plan::StateKind::Buffer
                                              : plan::StateKind::OptimizerState;
    auto init = initial;
    if (!init)
      return main.emitError()
             << "parameter '" << info.name << "' has no cleave.initial_value";
    // A sharded parameter's initial value is the global tensor; each
    // rank copies its shard when its executor starts.
    plan::TensorInfo global = info;
    global.shape = plan::globalShape(info, p.mesh);
    auto ref = main.getArgAttrOfType<DictionaryAttr>(i, attr::kExternalData);
    // Drawn by the runtime (initParametersRandomly): no bytes.
    if (options.drawWeightMatrices &&
        state.kind == plan::StateKind::Parameter &&
        info.dtype == plan::DType::F32 && global.shape.size() >= 2) {
      p.states.push_back(std::move(state));
      return success();
    }
    if (auto size = ref ? ref.getAs<IntegerAttr>("file_size") : nullptr;
        size && size.getInt() < 0) {
      auto file = ref.getAs<StringAttr>("file");
      return main.emitError()
             << "'" << info.name << "' has no values: its external data "
             << "file '" << (file ? file.getValue() : StringRef("?"))
             << "' is absent (a model declared without its weights), and "
             << (options.drawWeightMatrices
                     ? "--init-parameters draws only trainable f32 weight "
                       "matrices"
                     : "only --init-parameters can start a model without "
                       "its weights");
    }
    // Still the bytes of the model's external data: referenced, and each
    // rank reads only its shard of them.
    if (ref && ref.get("value") == init && options.referenceExternalData) {
      auto file = ref.getAs<StringAttr>("file");
      auto offset = ref.getAs<IntegerAttr>("offset");
      auto fileSize = ref.getAs<IntegerAttr>("file_size");
      if (file && offset && fileSize) {
        plan::Constant c;
        c.info = info;
        c.file = file.getValue().str();
        c.fileOffset = offset.getInt();
        c.fileSize = fileSize.getInt();
        p.constants.push_back(std::move(c));
        p.states.push_back(std::move(state));
        return success();
      }
    }
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(init);
    if (failed(bytes) || bytes->size() != global.byteSize())
      return main.emitError()
             << "cannot serialize the initial value of '" << info.name << "'";
    plan::Constant c;
    c.info = info;
    c.data = std::move(*bytes);
    p.constants.push_back(std::move(c));
  } else {
    state.kind = plan::StateKind::OptimizerState;
    p.initCommands.push_back(plan::makeCommand(
        plan::CommandKind::Fill, {static_cast<int64_t>(info.byteSize()), 0},
        {info.offset}));
  }
  p.states.push_back(std::move(state));
  return success();
}

/// The tables: inputs, state tensors, outputs; and the copies of new state
/// values into their state buffers.
LogicalResult PlanBuilder::addTables(Assembly &a, plan::Plan &p) {
  const int64_t end = a.end;
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  plan::TrainingInfo &training = p.training;
  training = options.training;
  std::vector<std::string> metrics;
  for (BlockArgument arg : main.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto name = getArgName(main, i);
    std::string fallback = "input" + std::to_string(i);
    plan::TensorInfo info;
    if (failed(tensorInfo(a, arg, name ? name.getValue() : StringRef(fallback),
                          info)) ||
        failed(readSharding(main.getArgAttr(i, kShardingAttrName), info,
                            arg.getLoc())))
      return failure();
    if (getArgState(main, i)) {
      if (failed(addState(a, p, i, std::move(info))))
        return failure();
      continue;
    }
    // The values an integer input may hold (cleave.valid_range: [lo, hi)
    // and an extra allowed value), for the runtime to check its data.
    if (auto range = getArgValidRange(main, i))
      p.metadata.push_back(plan::validRangeEntry(
          info.name, std::vector<int64_t>(range.asArrayRef().begin(),
                                          range.asArrayRef().end())));
    std::optional<Role> role = getArgRole(main, i);
    int64_t index = p.inputs.size();
    if (role == Role::lr)
      training.lrInput = index;
    else if (role == Role::step)
      training.stepInput = index;
    else if (role == Role::data)
      training.dataInputs.push_back(index);
    p.inputs.push_back(std::move(info));
  }
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (std::optional<int64_t> updates = getResultUpdates(main, i)) {
      int64_t target = *updates;
      if (target < 0 || target >= main.getNumArguments() ||
          !hasArgState(main, target))
        return main.emitError() << "result " << i << " updates argument "
                                << target << ", which is not a state argument";
      uint64_t src = offsetOf(a, v),
               dst = offsetOf(a, main.getArgument(target));
      if (src != dst)
        a.stateCopies.push_back(
            {a.copyTime.count(i) ? a.copyTime.lookup(i) : end,
             plan::makeCommand(plan::CommandKind::Copy,
                               {static_cast<int64_t>(byteSize(
                                   cast<RankedTensorType>(v.getType())))},
                               {src, dst})});
      continue;
    }
    auto name = getResultName(main, i);
    std::string fallback = "output" + std::to_string(i);
    plan::TensorInfo info;
    if (failed(tensorInfo(a, v, name ? name.getValue() : StringRef(fallback),
                          info)) ||
        failed(readSharding(main.getResultAttr(i, kShardingAttrName), info,
                            main.getLoc())))
      return failure();
    std::optional<Role> role = getResultRole(main, i);
    if (role == Role::loss)
      training.lossOutput = p.outputs.size();
    else if (role == Role::grad_norm)
      training.gradNormOutput = p.outputs.size();
    else if (role == Role::metric)
      metrics.push_back(info.name);
    p.outputs.push_back(std::move(info));
  }
  if (!metrics.empty())
    plan::addMetadata(p, plan::meta::kMetricOutputs, metrics);
  training.enabled = !p.states.empty();
  if (training.enabled && !training.dataInputs.empty()) {
    const plan::TensorInfo &first = p.inputs[training.dataInputs.front()];
    training.batchSize = first.shape.empty() ? 1 : first.shape[0];
    training.sequenceLength = first.shape.size() >= 2 ? first.shape[1] : 0;
  }
  return success();
}

/// The constants that own a buffer, with their bytes.
LogicalResult PlanBuilder::addConstants(const Assembly &a, plan::Plan &p) {
  for (const Assembly::Buffer &b : a.buffers) {
    auto cst = b.value.getDefiningOp<ConstantOp>();
    if (!cst)
      continue;
    auto name = getInitializerName(cst);
    if (auto ref = cst->getAttrOfType<DictionaryAttr>(attr::kExternalData))
      if (auto size = ref.getAs<IntegerAttr>("file_size");
          size && size.getInt() < 0)
        return cst.emitError()
               << "'" << (name ? name.getValue() : StringRef("constant"))
               << "' has no values: its external data file is absent (a "
                  "model declared without its weights), and the program "
                  "reads it as a constant (only trainable weight matrices "
                  "can be drawn by --init-parameters)";
    plan::Constant c;
    if (failed(tensorInfo(a, b.value, name ? name.getValue() : "constant",
                          c.info)))
      return failure();
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(cst.getValue());
    if (failed(bytes))
      return cst.emitError() << "cannot serialize constant data";
    c.data = std::move(*bytes);
    p.constants.push_back(std::move(c));
  }
  return success();
}
