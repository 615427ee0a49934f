//===- ShardProgram.cpp - Mesh, shardings, propagation, partition ----------===//

#include "cleave/Transforms/Sharding/ShardProgram.h"
#include "cleave/Transforms/Sharding/Passes.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveSharding.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave {

std::string parseMeshSpec(
    StringRef text, std::vector<std::pair<std::string, int64_t>> &mesh) {
  mesh.clear();
  llvm::StringSet<> names;
  SmallVector<StringRef> parts;
  text.split(parts, ',');
  int64_t world = 1;
  for (StringRef part : parts) {
    auto [name, size] = part.trim().split('=');
    int64_t n = 0;
    if (name.empty() || size.getAsInteger(10, n) || n < 1)
      return "bad --mesh entry '" + part.str() +
             "' (expected name=size with size >= 1, e.g. dp=4,tp=2)";
    if (!names.insert(name).second)
      return "--mesh names axis '" + name.str() + "' twice";
    if (world > 65536 / n)
      return "--mesh has more than 65536 ranks";
    world *= n;
    mesh.push_back({name.str(), n});
  }
  return {};
}

LogicalResult shardProgram(ModuleOp module,
                           const ShardProgramOptions &options) {
  MLIRContext *ctx = module.getContext();
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError() << "--mesh needs a func.func @main";
  if (!module.getOps<MeshOp>().empty())
    return module.emitError()
           << "--mesh applies to a global program, but this one already "
              "declares a cleave.mesh";

  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  SmallVector<StringRef> axisNames;
  SmallVector<int64_t> shape;
  for (const auto &[name, size] : options.mesh) {
    axisNames.push_back(name);
    shape.push_back(size);
  }
  auto mesh = MeshOp::create(b, main.getLoc(), "mesh",
                             b.getStrArrayAttr(axisNames),
                             b.getDenseI64ArrayAttr(shape));
  auto meshRef = FlatSymbolRefAttr::get(ctx, "mesh");

  // User rules, then the dp policy for data inputs.
  std::vector<std::pair<llvm::Regex, TensorShardingAttr>> rules;
  for (const auto &[pattern, spec] : options.shardings) {
    llvm::Regex re("^(" + pattern + ")$");
    std::string error;
    if (!re.isValid(error))
      return module.emitError()
             << "--shard pattern '" << pattern << "' is not a valid regular "
             << "expression: " << error;
    Attribute attr = parseAttribute("#cleave.sharding<@mesh, " + spec + ">",
                                    ctx);
    auto sharding = dyn_cast_or_null<TensorShardingAttr>(attr);
    if (!sharding)
      return module.emitError()
             << "--shard '" << pattern << "=" << spec
             << "': expected dimension shardings such as [{}, {\"tp\"}]";
    rules.emplace_back(std::move(re), sharding);
  }
  bool hasDp = mesh.getAxisIndex("dp") >= 0;
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    auto type = dyn_cast<RankedTensorType>(main.getArgument(i).getType());
    if (!type)
      continue;
    auto name = main.getArgAttrOfType<StringAttr>(i, "cleave.name");
    auto param = main.getArgAttrOfType<StringAttr>(i, "cleave.parameter");
    StringRef key = param ? param.getValue()
                          : name ? name.getValue() : StringRef();
    std::string what = "argument '" + (name ? name.getValue().str()
                                            : std::to_string(i)) + "'";
    TensorShardingAttr chosen;
    for (auto &[re, sharding] : rules)
      if (!key.empty() && re.match(key)) {
        chosen = sharding;
        break;
      }
    auto role = main.getArgAttrOfType<StringAttr>(i, "cleave.role");
    if (!chosen && hasDp && role && role.getValue() == "data" &&
        type.getRank() > 0) {
      // The batch dimension over dp, below user rules in priority.
      SmallVector<DimShardingAttr> dims(
          type.getRank(), DimShardingAttr::get(ctx, {}, false, -1));
      dims[0] = DimShardingAttr::get(ctx, {b.getStringAttr("dp")}, false, 1);
      chosen = TensorShardingAttr::get(ctx, meshRef, dims);
    }
    if (!chosen)
      continue;
    if (failed(verifySharding(chosen, type, mesh,
                              [&] { return main.emitError(); }, what)))
      return failure();
    setSharding(main.getArgument(i), chosen);
  }

  PassManager propagate(ctx);
  propagate.addPass(createPropagateShardingPass());
  if (failed(propagate.run(module)))
    return failure();
  // A result that updates a state is laid out like the state.
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    if (auto updates = main.getResultAttrOfType<IntegerAttr>(i, "cleave.updates"))
      if (auto s = getSharding(main.getArgument(updates.getInt())))
        main.setResultAttr(i, kShardingAttrName, s);
  PassManager partition(ctx);
  partition.addPass(createPartitionPass());
  return partition.run(module);
}

} // namespace cleave
