//===- Recognize.h - Helpers of --cleave-recognize-composites ---*- C++ -*-===//
//
// What the recognizers of attention (RecognizeAttention.cpp), RMS
// normalization (RecognizeRmsNorm.cpp) and expert GEMMs
// (RecognizeExperts.cpp) share: reading constants, scalar constants through
// their broadcasts, erasing the ops a rewrite leaves unread.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_RECOGNIZE_H
#define CLEAVE_LIB_TRANSFORMS_RECOGNIZE_H

#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

namespace cleave::recognize {

using namespace mlir;
using namespace mlir::cleave;

/// The elements of a float or i1 constant, read in row-major order as
/// doubles (i1 as 0 or 1), whether inline or a resource blob.
class ConstantElements {
public:
  static std::optional<ConstantElements> get(Value v) {
    auto op = v.getDefiningOp<ConstantOp>();
    if (!op)
      return std::nullopt;
    auto type = cast<RankedTensorType>(op.getType());
    Type et = type.getElementType();
    if (!isa<FloatType>(et) && !et.isInteger(1))
      return std::nullopt;
    ConstantElements c;
    c.type = type;
    c.value = op.getValue();
    if (auto dense = dyn_cast<DenseElementsAttr>(op.getValue())) {
      c.dense = dense;
      return c;
    }
    auto resource = dyn_cast<DenseResourceElementsAttr>(op.getValue());
    if (!resource)
      return std::nullopt;
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    int64_t bytes = et.isInteger(1) ? 1 : et.getIntOrFloatBitWidth() / 8;
    if (!blob || static_cast<int64_t>(blob->getData().size()) !=
                     bytes * type.getNumElements())
      return std::nullopt;
    c.raw = blob->getData();
    return c;
  }

  RankedTensorType getType() const { return type; }
  /// The elements as stored (DenseElementsAttr's raw data, or the blob).
  ArrayRef<char> getBytes() const { return dense ? dense.getRawData() : raw; }
  /// The constant's attribute (uniqued: equal constants, equal attributes).
  Attribute getValue() const { return value; }

  /// Calls `fn(index, value)` for every element, in order; stops at (and
  /// returns) the first false.
  bool all(llvm::function_ref<bool(int64_t, double)> fn) const {
    Type et = type.getElementType();
    int64_t n = type.getNumElements();
    if (dense && dense.isSplat()) {
      double v = et.isInteger(1) ? dense.getSplatValue<bool>()
                                 : toDouble(dense.getSplatValue<APFloat>());
      for (int64_t i = 0; i < n; ++i)
        if (!fn(i, v))
          return false;
      return true;
    }
    if (dense) {
      int64_t i = 0;
      if (et.isInteger(1)) {
        for (bool b : dense.getValues<bool>())
          if (!fn(i++, b))
            return false;
        return true;
      }
      for (const APFloat &f : dense.getValues<APFloat>())
        if (!fn(i++, toDouble(f)))
          return false;
      return true;
    }
    if (et.isInteger(1)) {
      for (int64_t i = 0; i < n; ++i)
        if (!fn(i, raw[i] != 0))
          return false;
      return true;
    }
    if (et.isF32()) {
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, raw.data() + 4 * i, 4);
        if (!fn(i, f))
          return false;
      }
      return true;
    }
    auto ft = cast<FloatType>(et);
    unsigned width = ft.getWidth();
    for (int64_t i = 0; i < n; ++i) {
      uint64_t bits = 0;
      std::memcpy(&bits, raw.data() + width / 8 * i, width / 8);
      if (!fn(i, toDouble(APFloat(ft.getFloatSemantics(), APInt(width, bits)))))
        return false;
    }
    return true;
  }

private:
  static double toDouble(APFloat f) {
    bool lost;
    f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    return f.convertToDouble();
  }

  RankedTensorType type;
  Attribute value;
  DenseElementsAttr dense;
  ArrayRef<char> raw;
};

/// Whether training may change the constant `op`: an initializer that a
/// PyTorch export signature calls a parameter, or, where the file does not
/// say, a float initializer of more than one element (what training takes
/// for one by default). Its elements are then not the program's to read.
inline bool mayBeTrained(ConstantOp op) {
  if (!op->hasAttr(attr::kInitializer))
    return false;
  if (std::optional<InitializerKind> kind = getInitializerKind(op))
    return *kind == InitializerKind::parameter;
  auto type = cast<RankedTensorType>(op.getType());
  return isa<FloatType>(type.getElementType()) && type.getNumElements() > 1;
}

inline RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// The value of a float constant whose elements are all equal (through
/// broadcasts and reshapes), as a scalar multiplier or an epsilon is.
std::optional<double> getSplat(Value v);

/// Erases the ops of a rewritten form that nothing reads any more, and
/// then what only they read (initializers stay: they name parameters).
void eraseDead(ArrayRef<Operation *> ops);

/// Says (in debug output) why `op` is not part of a recognized form;
/// returns failure.
LogicalResult miss(Operation *op, StringRef why);

/// The elements of `v`, row-major, when the program computes it from
/// constants alone (not parameters) through broadcasts, reshapes,
/// transposes, iotas, conversions, negations, comparisons, selects and
/// exact arithmetic of f32, f64, i1 or integer tensors of at most 2^23
/// elements: each element as the program computes it. nullopt for anything
/// else, and for a constant itself (read it with ConstantElements).
std::optional<std::vector<double>> evaluateConstantTensor(Value v);

/// What the attention matcher found of the constant masks it read (their
/// causal offsets), so that a mask every layer shares is read once.
struct MaskCache {
  std::map<std::tuple<const void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                      int>,
           std::optional<int64_t>>
      offsets;
  /// The masks evaluated by evaluateConstantTensor, by value (null: not
  /// computed from constants). The values are ops of the program as
  /// imported, alive while a later softmax can read them: an address is
  /// not reused for another mask within a pass.
  std::map<const void *, std::shared_ptr<const std::vector<double>>> evaluated;
};

/// Rewrites the attention whose softmax is `softmax` into cleave.attention;
/// false if it is not one the op computes the same. Sets `causal` when the
/// op takes its causal form.
bool recognizeAttention(SoftmaxOp softmax, MaskCache &masks, bool &causal);

/// Rewrites the rotary position embedding whose sum is `sum` into
/// cleave.rotary; false if it is not one the op computes the same.
bool recognizeRotary(BinaryOp sum);

/// Rewrites a contraction of gathered expert weights with their rows into
/// cleave.grouped_matmul; false if it is not one (RecognizeExperts.cpp).
bool recognizeGroupedMatmul(ContractOp op);

/// Rewrites the RMS normalization whose sum of squares is `reduce` into
/// cleave.rms_norm; false if it is not one.
bool recognizeRmsNorm(ReduceOp reduce);

} // namespace cleave::recognize

#endif // CLEAVE_LIB_TRANSFORMS_RECOGNIZE_H
