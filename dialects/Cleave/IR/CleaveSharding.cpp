//===- CleaveSharding.cpp - Sharding attributes and helpers ---------------===//

#include "Cleave/IR/CleaveSharding.h"
#include "Cleave/IR/CleaveCollectives.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;

#define GET_ATTRDEF_CLASSES
#include "Cleave/IR/CleaveAttrs.cpp.inc"

void CleaveDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Cleave/IR/CleaveAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// DimShardingAttr
//===----------------------------------------------------------------------===//

FailureOr<DimShardingAttr> DimShardingAttr::parseShort(AsmParser &parser) {
  MLIRContext *ctx = parser.getContext();
  SmallVector<StringAttr> axes;
  bool open = false;
  if (parser.parseLBrace())
    return failure();
  if (failed(parser.parseOptionalRBrace())) {
    do {
      if (succeeded(parser.parseOptionalQuestion())) {
        open = true;
        break;
      }
      std::string axis;
      if (parser.parseString(&axis))
        return failure();
      axes.push_back(StringAttr::get(ctx, axis));
    } while (succeeded(parser.parseOptionalComma()));
    if (parser.parseRBrace())
      return failure();
  }
  int64_t priority = -1;
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalKeyword(&keyword))) {
    if (!keyword.consume_front("p") || keyword.getAsInteger(10, priority) ||
        priority < 0)
      return parser.emitError(loc, "expected a priority such as 'p0'"),
             failure();
  }
  return DimShardingAttr::get(ctx, axes, !open, priority);
}

void DimShardingAttr::printShort(AsmPrinter &printer) const {
  raw_ostream &os = printer.getStream();
  os << "{";
  llvm::interleaveComma(getAxes(), os,
                        [&](StringAttr a) { printer.printString(a); });
  if (!getClosed())
    os << (getAxes().empty() ? "?" : ", ?");
  os << "}";
  if (getPriority() >= 0)
    os << "p" << getPriority();
}

Attribute DimShardingAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  FailureOr<DimShardingAttr> dim = parseShort(parser);
  if (failed(dim) || parser.parseGreater())
    return {};
  return *dim;
}

void DimShardingAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printShort(printer);
  printer << ">";
}

//===----------------------------------------------------------------------===//
// TensorShardingAttr
//===----------------------------------------------------------------------===//

Attribute TensorShardingAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<DimShardingAttr> dims;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        FailureOr<DimShardingAttr> dim = DimShardingAttr::parseShort(parser);
        if (failed(dim))
          return failure();
        dims.push_back(*dim);
        return success();
      }))
    return {};
  if (parser.parseGreater())
    return {};
  return TensorShardingAttr::get(parser.getContext(), mesh, dims);
}

void TensorShardingAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printAttributeWithoutType(getMesh());
  printer << ", [";
  llvm::interleaveComma(getDims(), printer.getStream(),
                        [&](DimShardingAttr d) { d.printShort(printer); });
  printer << "]>";
}

TensorShardingAttr TensorShardingAttr::getReplicated(MLIRContext *ctx,
                                                     FlatSymbolRefAttr mesh,
                                                     int64_t rank,
                                                     bool closed) {
  SmallVector<DimShardingAttr> dims(rank,
                                    DimShardingAttr::get(ctx, {}, closed, -1));
  return TensorShardingAttr::get(ctx, mesh, dims);
}

bool TensorShardingAttr::isFullyReplicated() const {
  return llvm::all_of(getDims(),
                      [](DimShardingAttr d) { return d.getAxes().empty(); });
}

SmallVector<StringAttr> TensorShardingAttr::getAllAxes() const {
  SmallVector<StringAttr> axes;
  for (DimShardingAttr d : getDims())
    llvm::append_range(axes, d.getAxes());
  return axes;
}

//===----------------------------------------------------------------------===//
// Values and shardings
//===----------------------------------------------------------------------===//

TensorShardingAttr mlir::cleave::getSharding(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (!func || arg.getOwner() != &func.getFunctionBody().front())
      return {};
    return func.getArgAttrOfType<TensorShardingAttr>(arg.getArgNumber(),
                                                     kShardingAttrName);
  }
  Operation *op = value.getDefiningOp();
  auto all = op->getAttrOfType<ArrayAttr>(kShardingAttrName);
  unsigned index = cast<OpResult>(value).getResultNumber();
  if (!all || all.size() != op->getNumResults())
    return {};
  return dyn_cast<TensorShardingAttr>(all[index]);
}

void mlir::cleave::setSharding(Value value, TensorShardingAttr sharding) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (sharding)
      func.setArgAttr(arg.getArgNumber(), kShardingAttrName, sharding);
    else
      func.removeArgAttr(arg.getArgNumber(), kShardingAttrName);
    return;
  }
  Operation *op = value.getDefiningOp();
  MLIRContext *ctx = op->getContext();
  SmallVector<Attribute> all(op->getNumResults(), UnitAttr::get(ctx));
  if (auto old = op->getAttrOfType<ArrayAttr>(kShardingAttrName);
      old && old.size() == op->getNumResults())
    all.assign(old.begin(), old.end());
  all[cast<OpResult>(value).getResultNumber()] =
      sharding ? Attribute(sharding) : Attribute(UnitAttr::get(ctx));
  if (llvm::all_of(all, [](Attribute a) { return isa<UnitAttr>(a); }))
    op->removeAttr(kShardingAttrName);
  else
    op->setAttr(kShardingAttrName, ArrayAttr::get(ctx, all));
}

TensorShardingAttr mlir::cleave::getResultSharding(Operation *func,
                                                   unsigned index) {
  return cast<FunctionOpInterface>(func)
      .getResultAttrOfType<TensorShardingAttr>(index, kShardingAttrName);
}

MeshOp mlir::cleave::lookupMesh(Operation *from, FlatSymbolRefAttr name) {
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(from, name);
}

int64_t mlir::cleave::getAxesSize(MeshOp mesh, ArrayRef<StringAttr> axes) {
  int64_t n = 1;
  for (StringAttr a : axes) {
    int64_t i = mesh.getAxisIndex(a.getValue());
    if (i >= 0)
      n *= mesh.getShape()[i];
  }
  return n;
}

SmallVector<int64_t> mlir::cleave::getLocalShape(TensorShardingAttr sharding,
                                                 ArrayRef<int64_t> globalShape,
                                                 MeshOp mesh) {
  SmallVector<int64_t> local(globalShape);
  if (!sharding)
    return local;
  for (auto [d, dim] : llvm::enumerate(sharding.getDims()))
    if (d < local.size())
      local[d] /= getAxesSize(mesh, dim.getAxes());
  return local;
}

static std::string axesList(ArrayRef<StringAttr> axes) {
  std::string s = "[";
  for (auto [i, a] : llvm::enumerate(axes))
    s += (i ? ", " : "") + a.getValue().str();
  return s + "]";
}

LogicalResult mlir::cleave::verifySharding(
    TensorShardingAttr sharding, Type type, MeshOp mesh,
    function_ref<InFlightDiagnostic()> emitError, StringRef what) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return emitError() << what << ": a sharding needs a ranked tensor, not "
                       << type;
  if (!mesh)
    return emitError() << what << ": sharding names mesh " << sharding.getMesh()
                       << ", which is not declared";
  if (sharding.getRank() != tensor.getRank())
    return emitError() << what << ": sharding has " << sharding.getRank()
                       << " dimensions but the tensor " << tensor.getRank();
  llvm::SmallSet<StringRef, 4> seen;
  for (auto [d, dim] : llvm::enumerate(sharding.getDims())) {
    for (StringAttr axis : dim.getAxes()) {
      if (mesh.getAxisIndex(axis.getValue()) < 0)
        return emitError() << what << ": mesh @" << mesh.getSymName()
                           << " has no axis '" << axis.getValue() << "'";
      if (!seen.insert(axis.getValue()).second)
        return emitError() << what << ": mesh axis '" << axis.getValue()
                           << "' shards more than one dimension";
    }
    int64_t parts = getAxesSize(mesh, dim.getAxes());
    int64_t size = tensor.getDimSize(d);
    if (size % parts != 0)
      return emitError() << what << ": dimension " << d << " of size " << size
                         << " does not divide over mesh axes "
                         << axesList(dim.getAxes()) << " (" << parts
                         << " ranks)";
  }
  return success();
}
