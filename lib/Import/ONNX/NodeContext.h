//===- NodeContext.h - Shared state of the ONNX importer's op converters -===//
//
// Internal to lib/Import/ONNX. Op converters see one node through a
// NodeContext: its inputs (as values or as known constants), attributes,
// outputs, and helpers that build cleave ops with static shapes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_ONNX_NODECONTEXT_H
#define CLEAVE_LIB_IMPORT_ONNX_NODECONTEXT_H

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cleave::onnximport {

using llvm::ArrayRef;
using llvm::SmallVector;
using llvm::StringRef;
using mlir::Location;
using mlir::LogicalResult;
using mlir::RankedTensorType;
using mlir::Type;
using mlir::Value;

/// Largest constant (in elements) the importer tracks for folding.
constexpr int64_t kMaxFoldElements = 1 << 16;

//===----------------------------------------------------------------------===//
// Known constant values
//===----------------------------------------------------------------------===//

/// A tensor whose value is known at import time (initializers, Constant
/// nodes, folded shape computations). Integers are held as int64, floats as
/// double.
struct ConstTensor {
  Type elemType;
  SmallVector<int64_t> shape;
  std::vector<int64_t> ints;  // when the element type is an integer
  std::vector<double> floats; // when the element type is a float

  bool isFloat() const { return mlir::isa<mlir::FloatType>(elemType); }
  int64_t numel() const;
  double getF(int64_t i) const { return isFloat() ? floats[i] : ints[i]; }
  /// The integer view. Folds compute both views and keep the one of the
  /// result's type, so a float's integer view must be defined for every
  /// float: it saturates, and NaN is 0 (a plain cast of inf or NaN is
  /// undefined behaviour).
  int64_t getI(int64_t i) const {
    if (!isFloat())
      return ints[i];
    double f = floats[i];
    if (std::isnan(f))
      return 0;
    if (f >= 9223372036854775808.0)
      return std::numeric_limits<int64_t>::max();
    if (f < -9223372036854775808.0)
      return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(f);
  }
  /// Resizes storage to shape's element count.
  void allocate();
  void set(int64_t i, double f, int64_t n) {
    if (isFloat())
      floats[i] = f;
    else
      ints[i] = n;
  }
  RankedTensorType type() const {
    return RankedTensorType::get(shape, elemType);
  }
};

/// Builds an attribute from a ConstTensor (wrapping integers to the width).
mlir::DenseElementsAttr toAttr(const ConstTensor &c);
/// Reads a small dense attribute back; nullopt when too large or unsupported.
std::optional<ConstTensor> fromAttr(mlir::ElementsAttr attr);
/// Normalizes an integer value to the element type (wraps, sign/zero-extends).
int64_t wrapInt(Type elemType, int64_t v);

//===----------------------------------------------------------------------===//
// ONNX types and tensors
//===----------------------------------------------------------------------===//

/// Maps an ONNX element type to MLIR; null for unsupported ones (string,
/// complex), with `why` naming the type.
Type convertElementType(mlir::MLIRContext *ctx, int32_t onnxType,
                        std::string &why);
/// The ONNX name of an element type ("float8e4m3fn", "int4"), for errors.
std::string onnxElementTypeName(int32_t onnxType);
/// Tensors of more elements than this become resource blobs (dense_resource)
/// rather than inline dense attributes; stored as external data, they are
/// mapped rather than read.
constexpr int64_t kMaxInlineElements = 1024;

/// Where an externally stored tensor's bytes lie.
struct ExternalRef {
  std::string file; ///< Resolved (real) path.
  int64_t offset = 0, length = 0;
  int64_t fileSize = 0; ///< The whole file's, when it was read.
};
/// ExternalRef::fileSize of a tensor whose file is absent.
constexpr int64_t kAbsentData = -1;

/// Converts a TensorProto (inline or external data) into an elements
/// attribute. `modelDir` resolves external data. Errors are emitted at loc.
/// A large externally stored tensor is mapped, not copied (its pages are
/// read only if something reads its values), and *external, when given,
/// says where it lies (left empty for every other tensor).
///
/// With `absentAllowed`, a large float tensor whose external data file does
/// not exist (a model declared without its weights) becomes a zero splat,
/// and *external says so (fileSize kAbsentData): its values must never be
/// read (ImportOptions::absentWeights).
mlir::FailureOr<mlir::ElementsAttr>
convertTensorProto(const onnx::TensorProto &tensor, StringRef modelDir,
                   Location loc, mlir::MLIRContext *ctx,
                   std::optional<ExternalRef> *external = nullptr,
                   bool absentAllowed = false);

/// An externally stored tensor, opened: its location checked, the file
/// open (fd) and, from mapExternalData, mapped.
struct ExternalData : ExternalRef {
  int fd = -1;
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  ExternalData() = default;
  ExternalData(ExternalData &&o)
      : ExternalRef(std::move(o)), fd(std::exchange(o.fd, -1)),
        buffer(std::move(o.buffer)) {}
  ExternalData &operator=(ExternalData &&) = delete;
  ~ExternalData();
};
/// Reads the bytes of an externally stored tensor, validating its location.
mlir::FailureOr<std::vector<char>>
readExternalData(const onnx::TensorProto &tensor, StringRef modelDir,
                 int64_t expectedBytes, Location loc);
/// Maps the bytes of an externally stored tensor, validating its location.
mlir::FailureOr<ExternalData> mapExternalData(const onnx::TensorProto &tensor,
                                              StringRef modelDir,
                                              int64_t expectedBytes,
                                              Location loc);

//===----------------------------------------------------------------------===//
// Per-tensor state of the graph walk
//===----------------------------------------------------------------------===//

struct TensorEntry {
  Value value;                      // materialized value, if any
  std::optional<ConstTensor> known; // known constant value, if any
  /// The elements of an ONNX sequence value (SplitToSequence,
  /// SequenceConstruct), which has neither `value` nor `known`: a sequence
  /// of static length folds to its tensors at import (SequenceOps.cpp).
  std::optional<std::vector<TensorEntry>> sequence;
};

/// What every converter of one import sees besides its node: the model's
/// opset before version conversion and the options that change how nodes
/// import (ImportOptions).
struct ImportSettings {
  /// The file's opset before conversion (forms the version converter does
  /// not adapt, such as PRelu-6's per-channel slope).
  int64_t sourceOpset = 0;
  /// BatchNormalization in training mode (ImportOptions::batchNormTraining).
  bool batchNormTraining = false;
  /// No folding of nodes that read parameters (ImportOptions::keepParameters).
  bool keepParameters = false;
};

class NodeContext;
using ConverterFn = LogicalResult (*)(NodeContext &);

/// The op-type -> converter table (default ONNX domain).
const llvm::StringMap<ConverterFn> &getConverterRegistry();

void registerElementwiseConverters(llvm::StringMap<ConverterFn> &table);
void registerMathConverters(llvm::StringMap<ConverterFn> &table);
void registerNNConverters(llvm::StringMap<ConverterFn> &table);
void registerTensorConverters(llvm::StringMap<ConverterFn> &table);
void registerShapeConverters(llvm::StringMap<ConverterFn> &table);
void registerReductionConverters(llvm::StringMap<ConverterFn> &table);
void registerLossConverters(llvm::StringMap<ConverterFn> &table);
void registerSequenceConverters(llvm::StringMap<ConverterFn> &table);

/// Tries to evaluate a node whose inputs are all known constants; on success
/// sets the node's outputs as constants and returns true.
bool tryFoldNode(NodeContext &ctx);

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, Location loc, int64_t opset,
              mlir::OpBuilder &builder, llvm::StringMap<TensorEntry> &tensors,
              const ImportSettings &settings)
      : node(node), loc(loc), opset(opset), b(builder), settings(settings),
        tensors(tensors) {}

  const onnx::NodeProto &node;
  Location loc;
  int64_t opset;
  mlir::OpBuilder &b;
  const ImportSettings &settings;
  /// New values of initializers that the model updates as it runs (the
  /// running statistics of BatchNormalization in training mode): initializer
  /// name and value, returned by @main as extra results. Null where nodes
  /// are imported again (a Gradient node's subgraph), whose updates the
  /// first import already recorded.
  llvm::SmallVectorImpl<std::pair<std::string, Value>> *stateUpdates = nullptr;

  StringRef opType() const { return node.op_type(); }

  /// An error about this node: "<OpType> node '<name>': ...".
  mlir::InFlightDiagnostic error() const;

  // Inputs ----------------------------------------------------------------
  int numInputs() const { return node.input_size(); }
  bool hasInput(int i) const {
    return i < node.input_size() && !node.input(i).empty();
  }
  /// The value of input i; emits an error and returns null when missing.
  Value input(int i);
  /// The known constant value of input i, or null.
  const ConstTensor *constInput(int i) const;
  /// Type of input i (null when missing).
  RankedTensorType inputType(int i);
  /// Reads input i as a constant integer list; errors name `what`.
  mlir::FailureOr<SmallVector<int64_t>> constInts(int i, StringRef what);
  /// Reads input i as a constant scalar float; errors name `what`.
  mlir::FailureOr<double> constScalar(int i, StringRef what);

  // Attributes ------------------------------------------------------------
  // Each typed read checks what the attribute holds: one of another type
  // (an integer given as a string) is an error naming it, the read gives
  // the default, and attributeFailed() says so (the importer fails the
  // node when its converter returns).
  const onnx::AttributeProto *attr(StringRef name) const;
  bool hasAttr(StringRef name) const { return attr(name) != nullptr; }
  /// Whether a typed read found an attribute of the wrong type.
  bool attributeFailed() const { return badAttribute; }
  int64_t attrInt(StringRef name, int64_t def) const;
  double attrFloat(StringRef name, double def) const;
  std::string attrString(StringRef name, StringRef def) const;
  SmallVector<int64_t> attrInts(StringRef name) const;
  SmallVector<double> attrFloats(StringRef name) const;

  // Outputs ---------------------------------------------------------------
  int numOutputs() const { return node.output_size(); }
  bool hasOutput(int i) const {
    return i < node.output_size() && !node.output(i).empty();
  }
  void setOutput(int i, Value v);
  /// Sets output `i` to `v` and succeeds; fails when `v` is null (its
  /// converter has reported why). A converter ends with
  /// `return ctx.finish(result);`.
  mlir::LogicalResult finish(Value v, int i = 0) {
    if (!v)
      return mlir::failure();
    setOutput(i, v);
    return mlir::success();
  }
  void setConstOutput(int i, ConstTensor c);
  /// Makes output `i` the sequence of `elements` (SequenceOps.cpp).
  void setSequenceOutput(int i, std::vector<TensorEntry> elements);

  // Helpers ---------------------------------------------------------------
  /// Normalizes a possibly negative axis into [0, rank); error when out of
  /// range.
  mlir::FailureOr<int64_t> normAxis(int64_t axis, int64_t rank,
                                    StringRef what = "axis");
  mlir::FailureOr<SmallVector<int64_t>>
  normAxes(ArrayRef<int64_t> axes, int64_t rank, StringRef what = "axes");
  /// The `axis` attribute (default `def`) normalized against the rank of
  /// `x`; error when `x` is 0-d or the axis is out of range. Fails without
  /// a word when `x` is null (input() has reported it).
  mlir::FailureOr<int64_t> axisAttr(Value x, int64_t def);
  /// Errors when input `i` is a known constant holding an index outside
  /// [-n, n), n the size of the axis it indexes.
  LogicalResult checkConstIndices(int i, int64_t n);

  Value unary(mlir::cleave::UnaryKind kind, Value v);
  /// Elementwise binary op; broadcasts both sides (numpy rules).
  Value binary(mlir::cleave::BinaryKind kind, Value a, Value b);
  Value compare(mlir::cleave::CompareKind kind, Value a, Value b);
  Value select(Value cond, Value a, Value b);
  Value convert(Value v, Type elemType);
  Value reshape(Value v, ArrayRef<int64_t> shape);
  Value transpose(Value v, ArrayRef<int64_t> perm);
  /// Numpy-style (right-aligned) broadcast of v to `shape`.
  Value broadcastTo(Value v, ArrayRef<int64_t> shape);
  /// Broadcasts all values to their common numpy shape (null on error).
  SmallVector<Value> broadcastAll(ArrayRef<Value> values);
  /// broadcastAll of two operands that must also share an element type.
  SmallVector<Value> broadcastPair(Value x, Value y);
  /// A splat constant of the given type filled with `value`.
  Value splat(Type elemType, ArrayRef<int64_t> shape, double value);
  /// A splat constant shaped like `like`.
  Value splatLike(Value like, double value);
  Value constant(const ConstTensor &c);
  /// Reduces over dims (sorted, unique); keepDims reshapes to keep 1s.
  Value reduce(mlir::cleave::ReduceKind kind, Value v, ArrayRef<int64_t> dims,
               bool keepDims);
  Value slice(Value v, ArrayRef<int64_t> start, ArrayRef<int64_t> limit,
              ArrayRef<int64_t> strides);

  TensorEntry *lookup(StringRef name);

private:
  llvm::StringMap<TensorEntry> &tensors;
  mutable bool badAttribute = false;
  /// attr(name) when it holds `type` (an onnx::AttributeProto type), null
  /// when absent; null after an error when it holds another.
  const onnx::AttributeProto *typedAttr(StringRef name, int type) const;
};

/// Numpy broadcast of two shapes; nullopt when incompatible.
std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b);

inline ArrayRef<int64_t> shapeOf(Value v) {
  return mlir::cast<RankedTensorType>(v.getType()).getShape();
}
inline Type elemOf(Value v) {
  return mlir::cast<RankedTensorType>(v.getType()).getElementType();
}
inline int64_t rankOf(Value v) {
  return mlir::cast<RankedTensorType>(v.getType()).getRank();
}
int64_t product(ArrayRef<int64_t> dims);

/// ONNX Reshape's target shape (0 copies the input dim unless allowZero, -1
/// is inferred); `why` explains a failure.
std::optional<SmallVector<int64_t>> computeReshape(ArrayRef<int64_t> in,
                                                   ArrayRef<int64_t> spec,
                                                   bool allowZero,
                                                   std::string &why);

/// One dimension of an ONNX Slice, as first index, step and count.
struct SliceDim {
  int64_t start = 0, step = 1, count = 0;
};
/// ONNX Slice semantics (clamping, negative indices and steps) per dim;
/// nullopt with `why` on invalid axes or steps.
std::optional<SmallVector<SliceDim>>
computeSlice(ArrayRef<int64_t> shape, ArrayRef<int64_t> starts,
             ArrayRef<int64_t> ends, ArrayRef<int64_t> axes,
             ArrayRef<int64_t> steps, std::string &why);

/// Axes of Squeeze/Unsqueeze/Reduce*: from the `axes` attribute before
/// `inputOpset`, from input 1 since. Missing -> empty list, `present` false.
mlir::FailureOr<SmallVector<int64_t>>
getAxes(NodeContext &ctx, int64_t inputOpset, int inputIndex, bool &present);

/// ONNX MatMul of two values of one element type (numpy semantics: 1-D
/// operands, broadcast batch dimensions); null after an error.
mlir::Value buildMatMul(NodeContext &ctx, mlir::Value a, mlir::Value b);

/// `x` clamped to the finite range of float type `to`, NaN kept: Cast's and
/// QuantizeLinear's `saturate` for float8 (the reference clips, then
/// converts). Computed in f32 (f64 stays f64).
mlir::Value clampToFinite(NodeContext &ctx, mlir::Value x, mlir::Type to);

/// Broadcasts a per-channel vector [C] along dim 1 of `shape` (N x C x ...).
mlir::Value channelBroadcast(NodeContext &ctx, mlir::Value v,
                             ArrayRef<int64_t> shape);

} // namespace cleave::onnximport

#endif // CLEAVE_LIB_IMPORT_ONNX_NODECONTEXT_H
