//===- ShardProgram.cpp - Mesh, shardings, propagation, partition ---------===//

#include "cleave/Transforms/Sharding/ShardProgram.h"
#include "cleave/Analysis/ExpertWeights.h"
#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Transforms/Sharding/Passes.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave {

/// Propagation priorities of the policies: user --shard rules 0, the batch
/// split of data inputs 1, ZeRO's layouts last.
static constexpr int64_t kBatchPriority = 1;
static constexpr int64_t kSequencePriority = 2;
static constexpr int64_t kZeroPriority = 100;

std::string parseMeshSpec(StringRef text,
                          std::vector<std::pair<std::string, int64_t>> &mesh) {
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

/// Parameters' layouts by name, with their types.
using BaseLayouts =
    llvm::StringMap<std::pair<TensorShardingAttr, RankedTensorType>>;

/// Seeds shardings on `module`'s @main and propagates them; unless
/// `propagateOnly`, then partitions. `baseOf`, where given, is each
/// parameter's layout without ZeRO, by parameter name (see shardProgram).
static LogicalResult seedAndPartition(ModuleOp module,
                                      const ShardProgramOptions &options,
                                      bool propagateOnly,
                                      const BaseLayouts *baseOf);

LogicalResult shardProgram(ModuleOp module,
                           const ShardProgramOptions &options) {
  // Without tensor parallelism or rules nothing splits a parameter but
  // ZeRO: there is no layout to find first.
  bool tp = llvm::any_of(options.mesh, [](const auto &axis) {
    return axis.first == "tp" && axis.second > 1;
  });
  if (options.zero == 0 || (!tp && options.shardings.empty()))
    return seedAndPartition(module, options, false, nullptr);
  // ZeRO splits over dp what the program would otherwise lay out: each
  // parameter's layout without ZeRO (tensor parallelism's seeds, and what
  // propagation carries to the biases and norms between them) is the base
  // ZeRO adds dp to, for the parameter, its optimizer states and its
  // gradient. Without it, a tensor ZeRO closes would stay whole over tp.
  OwningOpRef<ModuleOp> dry = module.clone();
  ShardProgramOptions plain = options;
  plain.zero = 0;
  plain.explain = nullptr;
  if (failed(seedAndPartition(*dry, plain, true, nullptr)))
    return failure();
  BaseLayouts baseOf;
  MLIRContext *ctx = module.getContext();
  auto dryMain = dry->lookupSymbol<func::FuncOp>("main");
  for (unsigned i = 0; i < dryMain.getNumArguments(); ++i) {
    auto param = getArgParameter(dryMain, i);
    auto sharding = getSharding(dryMain.getArgument(i));
    auto type = dyn_cast<RankedTensorType>(dryMain.getArgument(i).getType());
    if (!isParameterArg(dryMain, i) || !param || !sharding || !type)
      continue;
    // Its axes, stated as a rule states them.
    SmallVector<DimShardingAttr> dims;
    for (DimShardingAttr dim : sharding.getDims())
      dims.push_back(dim.getAxes().empty()
                         ? DimShardingAttr::get(ctx, {}, false, -1)
                         : DimShardingAttr::get(ctx, dim.getAxes(), false, 0));
    baseOf[param.getValue()] = {
        TensorShardingAttr::get(ctx, sharding.getMesh(), dims), type};
  }
  return seedAndPartition(module, options, false, &baseOf);
}

static LogicalResult seedAndPartition(ModuleOp module,
                                      const ShardProgramOptions &options,
                                      bool propagateOnly,
                                      const BaseLayouts *baseOf) {
  MLIRContext *ctx = module.getContext();
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return mlir::emitError(module.getLoc()) << "--mesh needs a func.func @main";
  if (!module.getOps<MeshOp>().empty())
    return mlir::emitError(module.getLoc())
           << "--mesh applies to a global program, but this one already "
              "declares a cleave.mesh";

  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  SmallVector<StringRef> axisNames;
  SmallVector<int64_t> shape;
  for (const auto &[name, size] : options.mesh) {
    axisNames.push_back(name);
    shape.push_back(size);
  }
  auto mesh =
      MeshOp::create(b, main.getLoc(), "mesh", b.getStrArrayAttr(axisNames),
                     b.getDenseI64ArrayAttr(shape));
  auto meshRef = FlatSymbolRefAttr::get(ctx, "mesh");

  // User rules, then the dp policy for data inputs.
  std::vector<std::pair<llvm::Regex, TensorShardingAttr>> rules;
  for (const auto &[pattern, spec, source] : options.shardings) {
    llvm::Regex re("^(" + pattern + ")$");
    std::string error;
    if (!re.isValid(error))
      return mlir::emitError(module.getLoc())
             << source << ": pattern '" << pattern
             << "' is not a valid regular expression: " << error;
    Attribute attr =
        parseAttribute("#cleave.sharding<@mesh, " + spec + ">", ctx);
    auto sharding = dyn_cast_or_null<TensorShardingAttr>(attr);
    if (!sharding)
      return mlir::emitError(module.getLoc())
             << source << " '" << pattern << "=" << spec
             << "': expected dimension shardings such as [{}, {\"tp\"}]";
    rules.emplace_back(std::move(re), sharding);
  }
  bool hasDp = mesh.getAxisIndex("dp") >= 0;
  if (options.contextParallel != "all-to-all" &&
      options.contextParallel != "ring" && options.contextParallel != "auto")
    return mlir::emitError(module.getLoc())
           << "--context-parallel='" << options.contextParallel
           << "': expected all-to-all, ring or auto";
  if (options.zero < 0 || options.zero > 3)
    return mlir::emitError(module.getLoc()) << "--zero must be 0, 1, 2 or 3";
  int64_t cpAxis = mesh.getAxisIndex("cp");
  int64_t cpSize = cpAxis >= 0 ? mesh.getShape()[cpAxis] : 1;
  bool hasCp = cpSize > 1;
  // Expert parallelism: the ranks along ep see different tokens, as along
  // dp, and hold different experts.
  int64_t epAxis = mesh.getAxisIndex("ep");
  int64_t epSize = epAxis >= 0 ? mesh.getShape()[epAxis] : 1;
  bool hasEp = epSize > 1;
  SmallVector<StringAttr> batchAxes;
  if (hasDp)
    batchAxes.push_back(b.getStringAttr("dp"));
  if (hasEp)
    batchAxes.push_back(b.getStringAttr("ep"));
  int64_t batchSize = getAxesSize(mesh, batchAxes);
  // ZeRO's axes (getZeroAxes): dp, ep, cp. A tensor already split over
  // one of them (the experts over ep) is split over the others only:
  // Megatron-Core's distributed optimizer splits the dense parameters'
  // states over dp x ep and the experts' over dp.
  SmallVector<StringAttr> zeroAxes;
  for (StringRef axis : getZeroAxes([&](StringRef a) {
         int64_t i = mesh.getAxisIndex(a);
         return i < 0 ? int64_t(0) : mesh.getShape()[i];
       }))
    zeroAxes.push_back(b.getStringAttr(axis));
  if (options.zero > 0 && zeroAxes.empty())
    return mlir::emitError(module.getLoc())
           << "--zero=" << options.zero
           << " splits over the dp axis, which --mesh does not have "
              "(nor a cp axis, which it splits over too)";
  // A tensor's layout with the ZeRO axes added: on the first dimension
  // whose local size divides by all of them, else by the first of them
  // alone; a tensor with neither stays whole over them. The experts'
  // dimension (ep) takes them last, and keeps its own priority: ZeRO's
  // lowest one would let the tokens' batch split take ep from the experts
  // wherever propagation meets the two (a recomputed expert GEMM that read
  // ZeRO's low-precision copy gathered every expert).
  auto withZeroAxes = [&](TensorShardingAttr base, RankedTensorType type) {
    SmallVector<SmallVector<StringAttr>> axes(type.getRank());
    if (base)
      for (auto [d, dim] : llvm::enumerate(base.getDims()))
        axes[d].assign(dim.getAxes().begin(), dim.getAxes().end());
    auto used = [&](StringAttr z) {
      return llvm::any_of(axes,
                          [&](auto &a) { return llvm::is_contained(a, z); });
    };
    // The zero axes this tensor is not split over already; ep alone does
    // not keep it from the others (the experts).
    SmallVector<StringAttr> free;
    bool has = false;
    for (StringAttr z : zeroAxes) {
      if (!used(z))
        free.push_back(z);
      else if (z.getValue() != "ep")
        has = true;
    }
    SmallVector<ArrayRef<StringAttr>> tries = {free};
    if (free.size() > 1)
      tries.push_back(ArrayRef<StringAttr>(free).take_front(1));
    auto isExperts = [&](int64_t d) {
      return llvm::any_of(axes[d],
                          [](StringAttr a) { return a.getValue() == "ep"; });
    };
    SmallVector<int64_t> order;
    for (bool experts : {false, true})
      for (int64_t d = 0; d < type.getRank(); ++d)
        if (isExperts(d) == experts)
          order.push_back(d);
    SmallVector<bool> zeroed(type.getRank(), false);
    for (ArrayRef<StringAttr> add : tries) {
      int64_t size = getAxesSize(mesh, add);
      for (int64_t d : order)
        if (!has &&
            (type.getDimSize(d) / getAxesSize(mesh, axes[d])) % size == 0) {
          llvm::append_range(axes[d], add);
          zeroed[d] = has = true;
        }
    }
    // The lowest priority: ZeRO lays out these tensors but must not move
    // the activations' batch split (a parameter split over dp would
    // otherwise split the hidden dimension of everything it multiplies).
    SmallVector<DimShardingAttr> dims;
    for (auto [d, a] : llvm::enumerate(axes)) {
      int64_t priority = kZeroPriority;
      if (base && !zeroed[d] && isExperts(d))
        priority = base.getDims()[d].getPriority();
      dims.push_back(DimShardingAttr::get(ctx, a, /*closed=*/true, priority));
    }
    return TensorShardingAttr::get(ctx, meshRef, dims);
  };
  // A layout with every dimension closed (whole where it has no axes):
  // what ZeRO-1 and -2 keep whole over dp must not gain dp from the
  // optimizer's split update.
  auto closedLayout = [&](TensorShardingAttr base, int64_t rank) {
    SmallVector<DimShardingAttr> dims;
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(DimShardingAttr::get(
          ctx, base ? base.getDims()[d].getAxes() : ArrayRef<StringAttr>(),
          /*closed=*/true, base ? base.getDims()[d].getPriority() : -1));
    return TensorShardingAttr::get(ctx, meshRef, dims);
  };
  // Megatron's tensor parallelism, found from the program when no rule
  // says what to split.
  llvm::DenseMap<unsigned, TensorShardingAttr> tpSeeds;
  std::string tpReport;
  int64_t tpAxis = mesh.getAxisIndex("tp");
  if (rules.empty() && tpAxis >= 0 && mesh.getShape()[tpAxis] > 1) {
    int64_t tp = mesh.getShape()[tpAxis];
    TensorParallelPolicy policy = findTensorParallelSeeds(main, tp);
    tpReport = policy.report;
    if (policy.seeds.empty()) {
      InFlightDiagnostic diag = mlir::emitError(module.getLoc())
                                << "mesh axis tp (" << tp
                                << " ranks) splits nothing: ";
      if (tpReport.empty()) {
        diag << "no parameter is the weight of a contraction or an "
                "embedding lookup (the weights of a program that is not a "
                "training step are inputs); give --shard rules or drop the "
                "axis";
        return failure();
      }
      diag << "no weight's split closes a tensor-parallel region; give "
              "--shard rules or drop the axis";
      SmallVector<StringRef> lines;
      StringRef(tpReport).split(lines, '\n', -1, /*KeepEmpty=*/false);
      for (StringRef line : lines)
        diag.attachNote() << line;
      return failure();
    }
    for (auto [arg, dim] : policy.seeds) {
      auto type = cast<RankedTensorType>(main.getArgument(arg).getType());
      SmallVector<DimShardingAttr> dims(
          type.getRank(), DimShardingAttr::get(ctx, {}, false, -1));
      dims[dim] = DimShardingAttr::get(ctx, {b.getStringAttr("tp")}, false, 0);
      tpSeeds[arg] = TensorShardingAttr::get(ctx, meshRef, dims);
    }
  }

  // The experts of every grouped matmul's weights over ep, and of every
  // parameter a contraction is batched over by its leading dimension (the
  // experts of the capacity form, or of an einsum MoE); through the
  // low-precision copy mixed precision multiplies with.
  llvm::StringMap<std::pair<TensorShardingAttr, ArrayRef<int64_t>>> epSeedOf;
  if (hasEp) {
    WalkResult walk = forEachExpertWeight(main, [&](Operation *op, Value w) {
      auto arg = dyn_cast<BlockArgument>(w);
      if (!arg || arg.getOwner() != &main.front() ||
          !isParameterArg(main, arg.getArgNumber()))
        return WalkResult::advance();
      auto type = cast<RankedTensorType>(w.getType());
      if (type.getDimSize(0) % epSize != 0) {
        auto name = getArgName(main, arg.getArgNumber());
        mlir::emitError(op->getLoc())
            << "the " << type.getDimSize(0) << " experts of parameter '"
            << (name ? name.getValue()
                     : StringRef(std::to_string(arg.getArgNumber())))
            << "' do not divide over mesh axis ep (" << epSize << " ranks)";
        return WalkResult::interrupt();
      }
      SmallVector<DimShardingAttr> dims(
          type.getRank(), DimShardingAttr::get(ctx, {}, false, -1));
      dims[0] = DimShardingAttr::get(ctx, {b.getStringAttr("ep")}, false, 0);
      auto param = getArgParameter(main, arg.getArgNumber());
      if (param)
        epSeedOf[param.getValue()] = {
            TensorShardingAttr::get(ctx, meshRef, dims), type.getShape()};
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (epSeedOf.empty())
      return mlir::emitError(module.getLoc())
             << "mesh axis ep (" << epSize
             << " ranks) splits nothing: no parameter is the expert weights "
                "of a grouped matmul (cleave.grouped_matmul, which "
                "--recognize-composites finds in mixture-of-experts "
                "exports; for CUDA plans only with --moe-capacity-factor) "
                "or a contraction batched over its leading dimension; drop "
                "the axis";
  }

  // The user's sharding of each parameter, for ZeRO's gradients.
  llvm::StringMap<std::pair<TensorShardingAttr, RankedTensorType>> paramBase;
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    auto type = dyn_cast<RankedTensorType>(main.getArgument(i).getType());
    if (!type)
      continue;
    auto name = getArgName(main, i);
    auto param = getArgParameter(main, i);
    StringRef key = param  ? param.getValue()
                    : name ? name.getValue()
                           : StringRef();
    std::string what =
        "argument '" + (name ? name.getValue().str() : std::to_string(i)) + "'";
    TensorShardingAttr chosen;
    for (auto &[re, sharding] : rules)
      if (!key.empty() && re.match(key)) {
        chosen = sharding;
        break;
      }
    if (auto it = tpSeeds.find(i); it != tpSeeds.end())
      chosen = it->second;
    // The experts' weights over ep, and their optimizer states (of the
    // weights' shape) with them.
    if (auto it = epSeedOf.find(key); it != epSeedOf.end() && !chosen &&
                                      it->second.second == type.getShape() &&
                                      getArgState(main, i))
      chosen = it->second.first;
    // Data inputs: #cleave.role<data> in a training step; in a forward
    // program, every input that is not a parameter or state.
    std::optional<Role> role = getArgRole(main, i);
    bool isData = role ? role == Role::data
                       : !hasArgState(main, i) &&
                             !main.getArgAttr(i, attr::kInitialValue);
    // With microbatches (rows k, k + m, ... of the batch), each
    // microbatch's rows must divide over dp (and ep) too, or every dp rank
    // would compute the whole microbatch.
    if (auto micro = main->getAttrOfType<IntegerAttr>(attr::kMicrobatches);
        micro && !batchAxes.empty() && isData && type.getRank() > 0 &&
        type.getDimSize(0) % micro.getInt() == 0 &&
        (type.getDimSize(0) / micro.getInt()) % batchSize != 0)
      return mlir::emitError(main.getLoc())
             << what << ": each of the " << micro.getInt()
             << " microbatches has " << type.getDimSize(0) / micro.getInt()
             << " of its " << type.getDimSize(0)
             << " rows, which do not divide over "
             << (batchAxes.size() > 1 ? "mesh axes dp, ep" : "mesh axis ")
             << (batchAxes.size() > 1 ? "" : batchAxes[0].getValue()) << " ("
             << batchSize << " ranks)";
    // Context parallelism: the sequence (dimension 1 of a data input of
    // rank 2 or more: tokens, labels, masks) over cp.
    bool cpSplits = hasCp && isData && type.getRank() >= 2;
    if (!chosen && cpSplits && type.getDimSize(1) % cpSize != 0)
      return mlir::emitError(main.getLoc())
             << what << ": its sequence dimension (dimension 1, "
             << type.getDimSize(1) << ") does not divide over mesh axis cp ("
             << cpSize << " ranks)";
    if (!chosen && (!batchAxes.empty() || cpSplits) && isData &&
        type.getRank() > 0) {
      // The batch dimension over dp and ep, the sequence over cp, below
      // user rules in priority.
      SmallVector<DimShardingAttr> dims(
          type.getRank(), DimShardingAttr::get(ctx, {}, false, -1));
      if (!batchAxes.empty())
        dims[0] = DimShardingAttr::get(ctx, batchAxes, false, kBatchPriority);
      if (cpSplits)
        dims[1] = DimShardingAttr::get(ctx, {b.getStringAttr("cp")}, false,
                                       kBatchPriority);
      chosen = TensorShardingAttr::get(ctx, meshRef, dims);
    }
    std::optional<StateKind> state = getArgState(main, i);
    bool isParam = state == StateKind::parameter;
    bool isOptState =
        state == StateKind::optimizer_state && key != "__trainer__";
    // Under ZeRO, a parameter's layout without it, where the dry run gave
    // one; an optimizer state is laid out like its parameter when it has
    // its shape.
    if (baseOf && (isParam || isOptState))
      if (auto it = baseOf->find(key);
          it != baseOf->end() &&
          it->second.second.getShape() == type.getShape())
        chosen = it->second.first;
    if (isParam)
      paramBase[key] = {chosen, type};
    // Mixed precision: the f32 master copy of a parameter is optimizer
    // state as far as ZeRO goes (12 bytes per parameter with Adam's two
    // moments); what the step computes with is its bf16/f16 conversion,
    // which propagation leaves split like the master and the partitioner
    // all-gathers where it is used, in low precision.
    SmallVector<Value> lowCopies;
    if (isParam && options.zero >= 1)
      for (Operation *user : main.getArgument(i).getUsers())
        if (auto convert = dyn_cast<ConvertOp>(user);
            convert &&
            getElementTypeOrSelf(convert.getType()).getIntOrFloatBitWidth() <
                getElementTypeOrSelf(type).getIntOrFloatBitWidth())
          lowCopies.push_back(convert.getResult());
    if ((isOptState && options.zero >= 1) || (isParam && options.zero == 3) ||
        !lowCopies.empty()) {
      // Where the copies are gathered to: the layout without dp.
      TensorShardingAttr whole =
          chosen ? chosen
                 : TensorShardingAttr::getReplicated(ctx, meshRef,
                                                     type.getRank(), true);
      chosen = withZeroAxes(chosen, type);
      // The copy is split like the master, so that it is gathered in low
      // precision rather than converted after an f32 gather.
      // ZeRO-1 and -2 gather it once per step and keep it (2 bytes per
      // parameter), ZeRO-3 at each use.
      for (Value copy : lowCopies) {
        setSharding(copy, chosen);
        if (options.zero < 3)
          copy.getDefiningOp()->setAttr(kReshardOnceAttr, whole);
      }
    } else if (isParam && options.zero > 0)
      // A parameter ZeRO-1 and -2 keep whole over dp: its layout closed,
      // so that the optimizer's dp-split update does not split it.
      chosen = closedLayout(chosen, type.getRank());
    if (!chosen)
      continue;
    if (failed(verifySharding(
            chosen, type, mesh, [&] { return mlir::emitError(main.getLoc()); },
            what)))
      return failure();
    setSharding(main.getArgument(i), chosen);
  }

  // Sequence parallelism: layer and RMS norms work on sequence slices over tp.
  if (options.sequenceParallel) {
    if (mesh.getAxisIndex("tp") < 0)
      return mlir::emitError(module.getLoc())
             << "--sequence-parallel splits over the tp axis, which --mesh "
                "does not have";
    // Under context parallelism each rank's part of the sequence is split
    // further over tp: the sequence over cp (major) and tp.
    SmallVector<StringAttr> seqAxes = {b.getStringAttr("tp")};
    if (hasCp)
      seqAxes.insert(seqAxes.begin(), b.getStringAttr("cp"));
    int64_t seqRanks = getAxesSize(mesh, seqAxes);
    std::string seqAxesText = hasCp ? "mesh axes cp, tp" : "mesh axis tp";
    int64_t seeded = 0;
    // Layer norms and RMS norms over the hidden dimension of a [batch,
    // sequence, hidden] activation.
    WalkResult walk = main.walk([&](Operation *ln) {
      std::optional<uint64_t> axis;
      if (auto layerNorm = dyn_cast<LayerNormOp>(ln))
        axis = layerNorm.getAxis();
      else if (auto rmsNorm = dyn_cast<RmsNormOp>(ln))
        axis = rmsNorm.getAxis();
      if (!axis)
        return WalkResult::advance();
      auto type = cast<RankedTensorType>(ln->getResult(0).getType());
      if (type.getRank() != 3 || *axis != 2)
        return WalkResult::advance();
      if (type.getDimSize(1) % seqRanks != 0) {
        mlir::emitError(ln->getLoc())
            << "--sequence-parallel: the sequence dimension (1) of this "
            << (isa<LayerNormOp>(ln) ? "layer" : "RMS") << " norm's " << type
            << " does not divide over " << seqAxesText << " (" << seqRanks
            << " ranks)";
        return WalkResult::interrupt();
      }
      SmallVector<DimShardingAttr> dims = {
          DimShardingAttr::get(ctx, {}, false, -1),
          DimShardingAttr::get(ctx, seqAxes, true, kSequencePriority),
          DimShardingAttr::get(ctx, {}, false, -1)};
      setSharding(ln->getResult(0),
                  TensorShardingAttr::get(ctx, meshRef, dims));
      ++seeded;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    // RMSNorm, as exports decompose it: the mean square of each row,
    // reduce(sum, x * x or x ^ 2) over the hidden dimension. Its [batch,
    // sequence] statistic gets the sequence split; propagation carries it
    // to x and the normalized rows.
    auto isSquare = [](Value v) {
      auto binary = v.getDefiningOp<BinaryOp>();
      if (!binary)
        return false;
      if (binary.getKind() == BinaryKind::mul)
        return binary.getLhs() == binary.getRhs();
      if (binary.getKind() != BinaryKind::pow)
        return false;
      Value exponent = binary.getRhs();
      while (auto bcast = exponent.getDefiningOp<BroadcastInDimOp>())
        exponent = bcast.getOperand();
      DenseElementsAttr value;
      return matchPattern(exponent, m_Constant(&value)) && value.isSplat() &&
             isa<FloatType>(value.getElementType()) &&
             value.getSplatValue<APFloat>().isExactlyValue(2.0);
    };
    walk = main.walk([&](ReduceOp reduce) {
      auto in = cast<RankedTensorType>(reduce.getOperand().getType());
      if (reduce.getKind() != ReduceKind::sum || in.getRank() != 3 ||
          reduce.getDimensions() != ArrayRef<int64_t>{2} ||
          !isSquare(reduce.getOperand()) || getSharding(reduce.getResult()))
        return WalkResult::advance();
      if (in.getDimSize(1) % seqRanks != 0) {
        mlir::emitError(reduce.getLoc())
            << "--sequence-parallel: the sequence dimension (1) of this "
               "RMS normalization's "
            << in << " does not divide over " << seqAxesText << " (" << seqRanks
            << " ranks)";
        return WalkResult::interrupt();
      }
      SmallVector<DimShardingAttr> dims = {
          DimShardingAttr::get(ctx, {}, false, -1),
          DimShardingAttr::get(ctx, seqAxes, true, kSequencePriority)};
      setSharding(reduce.getResult(),
                  TensorShardingAttr::get(ctx, meshRef, dims));
      ++seeded;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (!seeded)
      return mlir::emitError(module.getLoc())
             << "--sequence-parallel found no layer norm or RMS "
                "normalization over the last dimension of a [batch, "
                "sequence, hidden] tensor";
  }

  // ZeRO lays gradients out too: whole over dp at stage 1, split at 2 and 3.
  if (options.zero > 0)
    main.walk([&](Operation *op) {
      auto of = op->getAttrOfType<StringAttr>(attr::kGradientOf);
      if (!of || op->getNumResults() != 1)
        return;
      auto it = paramBase.find(of.getValue());
      // (A gradient rounded to bf16/f16 has its parameter's shape, not its
      // element type.)
      auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (it == paramBase.end() || !type ||
          type.getShape() != it->second.second.getShape())
        return;
      TensorShardingAttr base = it->second.first;
      setSharding(op->getResult(0), options.zero >= 2
                                        ? withZeroAxes(base, type)
                                        : closedLayout(base, type.getRank()));
    });

  // The passes run as the calling pass's dynamic pipeline on the program
  // itself, on their own pass manager on the clone of a dry run.
  auto runPasses = [&](llvm::function_ref<void(OpPassManager &)> build) {
    if (!propagateOnly && options.runPipeline) {
      OpPassManager pm(ModuleOp::getOperationName());
      build(pm);
      return options.runPipeline(pm);
    }
    PassManager pm(ctx);
    pm.enableVerifier(options.verifyPasses);
    build(pm);
    return pm.run(module);
  };
  if (failed(runPasses([](OpPassManager &pm) {
        pm.addPass(createPropagateShardingPass());
      })))
    return failure();
  // A result that updates a state is laid out like the state.
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    if (std::optional<int64_t> updates = getResultUpdates(main, i)) {
      int64_t arg = *updates;
      if (arg < 0 || arg >= (int64_t)main.getNumArguments())
        return mlir::emitError(main.getLoc())
               << "result " << i << ": cleave.updates = " << arg
               << " is not an argument of @main";
      if (auto s = getSharding(main.getArgument(arg)))
        main.setResultAttr(i, kShardingAttrName, s);
    }
  if (propagateOnly)
    return success();
  // An axis that splits no input replicates the whole program over its
  // ranks: refused, so that a mesh says what it does (pp is the pipeline's,
  // cut before this pass).
  llvm::StringSet<> used;
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    if (TensorShardingAttr sharding = getSharding(main.getArgument(i)))
      for (DimShardingAttr dim : sharding.getDims())
        for (StringAttr axis : dim.getAxes())
          used.insert(axis.getValue());
  for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape())) {
    StringRef axis = cast<StringAttr>(name).getValue();
    if (size > 1 && axis != "pp" && !used.contains(axis))
      return mlir::emitError(module.getLoc())
             << "mesh axis " << axis << " (" << size
             << " ranks) splits nothing: no input of @main is split over "
                "it (dp splits the data inputs' batch, cp their sequence, tp "
                "the weights its policy finds, --shard rules what they "
                "name); drop "
                "the axis or give --shard rules that use it";
  }

  if (failed(runPasses([&](OpPassManager &pm) {
        PartitionPassOptions partition;
        if (hasCp && options.contextParallel == "ring") {
          partition.ringAxes = {"cp"};
          partition.ringFault = options.ringFault;
        } else if (hasCp) {
          partition.exchangeAxes = {"cp"};
          partition.requireExchange = options.contextParallel == "all-to-all";
        }
        pm.addPass(createPartitionPass(partition));
        if (hasEp)
          pm.addNestedPass<func::FuncOp>(createElideExpertSumsPass());
        if (options.overlap) {
          ScheduleCollectivesPassOptions schedule;
          schedule.bucketMB = options.bucketMB;
          pm.addNestedPass<func::FuncOp>(
              createScheduleCollectivesPass(schedule));
        }
      })))
    return failure();
  if (options.dropCollective >= 0) {
    int64_t index = 0;
    AllReduceOp dropped;
    main.walk([&](AllReduceOp op) {
      if (index++ == options.dropCollective)
        dropped = op;
    });
    if (!dropped)
      return mlir::emitError(module.getLoc())
             << "--debug-drop-collective=" << options.dropCollective
             << ": the program has " << index << " all_reduces";
    dropped.getResult().replaceAllUsesWith(dropped.getOperand());
    dropped->erase();
  }
  if (options.explain)
    options.explain(tpReport + explainSharding(module));
  return success();
}

std::string explainSharding(ModuleOp module) {
  std::string out;
  llvm::raw_string_ostream os(out);
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return out;
  struct Total {
    int64_t count = 0, bytes = 0;
  };
  std::map<std::string, Total> totals;
  int64_t index = 0;
  main.walk([&](CollectiveOpInterface op) {
    std::string axes;
    for (auto [i, a] : llvm::enumerate(op.getMeshAxesAttr()))
      axes += (i ? ", " : "") + cast<StringAttr>(a).getValue().str();
    FailureOr<int64_t> n = getGroupSize(op);
    int64_t bytes =
        succeeded(n)
            ? getCollectiveCost(op, *n, CollectiveAlgorithm::Ring).bytesSent
            : 0;
    Value data = op->getNumOperands() ? op->getOperand(0) : op->getResult(0);
    os << "collective " << index++ << ": " << op->getName().getStringRef()
       << " over [" << axes << "] of " << data.getType() << ", " << bytes
       << " bytes sent per rank per step\n";
    if (StringAttr why = getPhase(op))
      os << "  because: " << why.getValue() << "\n";
    if (std::string where = describeLocation(op->getLoc()); !where.empty())
      os << "  from: " << where << "\n";
    if (auto notes = op->getAttrOfType<ArrayAttr>(kConflictsAttrName))
      for (Attribute note : notes)
        os << "  settled there: " << cast<StringAttr>(note).getValue() << "\n";
    Total &t = totals["[" + axes + "]"];
    ++t.count;
    t.bytes += bytes;
  });
  for (const auto &[axes, t] : totals)
    os << "total over " << axes << ": " << t.count << " collectives, "
       << t.bytes << " bytes sent per rank per step\n";
  return out;
}

} // namespace cleave
