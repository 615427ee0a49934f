//===- SequenceOps.cpp - ONNX sequence ops folded to tensors at import ----===//
//
// SplitToSequence, SequenceConstruct, SequenceAt, SequenceLength and
// ConcatFromSequence. Cleave has no sequence type: a sequence whose length
// is static and whose positions are constants is a list of tensors known
// at import (TensorEntry::sequence), so each op folds to the tensors it
// selects or makes. PyTorch's exporter writes `torch.split` and `chunk` as
// SplitToSequence followed by SequenceAt at constant positions. A split or
// position known only at run time is refused, naming the node.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

/// The most tensors a sequence folds to (a split into pieces of one of a
/// long axis is refused rather than unrolled).
constexpr int64_t kMaxSequenceLength = 1 << 16;

/// The elements of input `i`, a sequence; null after an error naming it.
const std::vector<TensorEntry> *sequenceInput(NodeContext &ctx, int i) {
  if (!ctx.hasInput(i)) {
    ctx.error() << "missing required input " << i;
    return nullptr;
  }
  TensorEntry *e = ctx.lookup(ctx.node.input(i));
  if (!e || !e->sequence) {
    ctx.error() << "input " << i << " ('" << ctx.node.input(i)
                << "') must be a sequence (from SplitToSequence or "
                   "SequenceConstruct)";
    return nullptr;
  }
  return &*e->sequence;
}

/// The type of a sequence element.
RankedTensorType entryType(const TensorEntry &e) {
  return e.value ? cast<RankedTensorType>(e.value.getType()) : e.known->type();
}

/// Makes output 0 the tensor `e` (a value, or a constant known at import).
LogicalResult setElementOutput(NodeContext &ctx, const TensorEntry &e) {
  if (e.value)
    ctx.setOutput(0, e.value);
  else
    ctx.setConstOutput(0, *e.known);
  return success();
}

/// Rows [off, off + size) of the known tensor `c` along `axis`.
ConstTensor sliceKnown(const ConstTensor &c, int64_t axis, int64_t off,
                       int64_t size) {
  ConstTensor r;
  r.elemType = c.elemType;
  r.shape = c.shape;
  r.shape[axis] = size;
  r.allocate();
  int64_t inner = 1;
  for (size_t d = axis + 1; d < c.shape.size(); ++d)
    inner *= c.shape[d];
  int64_t outer = r.numel() / std::max<int64_t>(1, size * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < size * inner; ++k) {
      int64_t from = (o * c.shape[axis] + off) * inner + k;
      r.set(o * size * inner + k, c.getF(from), c.getI(from));
    }
  return r;
}

/// SplitToSequence: `split` absent (pieces of 1, squeezed unless
/// keepdims), a scalar (pieces of that size, the last one shorter) or a
/// list of sizes that sum to the axis; it must be known at import.
LogicalResult convertSplitToSequence(NodeContext &ctx) {
  RankedTensorType type = ctx.inputType(0);
  if (!type)
    return failure();
  if (type.getRank() == 0) {
    ctx.error() << "input must have rank >= 1";
    return failure();
  }
  auto axis = ctx.normAxis(ctx.attrInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t n = type.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  // The number of pieces before they are made.
  auto tooLong = [&](int64_t pieces) {
    if (pieces <= kMaxSequenceLength)
      return false;
    ctx.error() << "splits axis " << *axis << " (size " << n << ") into "
                << pieces << " tensors, more than the " << kMaxSequenceLength
                << " a sequence folds to";
    return true;
  };
  if (ctx.hasInput(1)) {
    const ConstTensor *s = ctx.constInput(1);
    if (!s || s->isFloat()) {
      ctx.error() << "input 'split' (tensor '" << ctx.node.input(1)
                  << "') must be an integer constant computable at import "
                     "time: Cleave folds sequences to tensors, so their "
                     "lengths must be static";
      return failure();
    }
    if (s->shape.empty()) {
      int64_t chunk = s->getI(0);
      if (chunk <= 0) {
        ctx.error() << "split size " << chunk << " must be positive";
        return failure();
      }
      if (tooLong(n / chunk + (n % chunk != 0)))
        return failure();
      for (int64_t off = 0; off < n; off += chunk)
        sizes.push_back(std::min(chunk, n - off));
    } else {
      int64_t total = 0;
      for (int64_t k = 0; k < s->numel(); ++k) {
        if (s->getI(k) < 0) {
          ctx.error() << "negative split size " << s->getI(k);
          return failure();
        }
        if (s->getI(k) > n - total) {
          ctx.error() << "split sizes sum to more than the axis size " << n;
          return failure();
        }
        sizes.push_back(s->getI(k));
        total += s->getI(k);
      }
      if (total != n) {
        ctx.error() << "split sizes sum to " << total << ", not the axis size "
                    << n;
        return failure();
      }
    }
  } else {
    if (tooLong(n))
      return failure();
    sizes.assign(n, 1);
    squeeze = ctx.attrInt("keepdims", 1) == 0;
  }

  // An integer constant (a shape being computed) splits into constants;
  // anything else into slices of its value.
  const ConstTensor *known = ctx.constInput(0);
  bool fold = known && !known->isFloat();
  Value x = fold ? Value() : ctx.input(0);
  if (!fold && !x)
    return failure();
  std::vector<TensorEntry> elements;
  int64_t off = 0;
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = size;
    SmallVector<int64_t> squeezed(shape);
    if (squeeze)
      squeezed.erase(squeezed.begin() + *axis);
    TensorEntry e;
    if (fold) {
      ConstTensor c = sliceKnown(*known, *axis, off, size);
      c.shape = squeezed;
      e.known = std::move(c);
    } else {
      SmallVector<int64_t> start(type.getRank(), 0), limit(type.getShape()),
          strides(type.getRank(), 1);
      start[*axis] = off;
      limit[*axis] = off + size;
      e.value = ctx.reshape(ctx.slice(x, start, limit, strides), squeezed);
    }
    elements.push_back(std::move(e));
    off += size;
  }
  ctx.setSequenceOutput(0, std::move(elements));
  return success();
}

/// SequenceConstruct: its inputs, which must share an element type.
LogicalResult convertSequenceConstruct(NodeContext &ctx) {
  std::vector<TensorEntry> elements;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    RankedTensorType type = ctx.inputType(i);
    if (!type)
      return failure();
    TensorEntry e = *ctx.lookup(ctx.node.input(i));
    if (!elements.empty() &&
        entryType(elements.front()).getElementType() != type.getElementType()) {
      ctx.error() << "input " << i << " has element type "
                  << type.getElementType() << ", input 0 "
                  << entryType(elements.front()).getElementType()
                  << ": a sequence's tensors share one";
      return failure();
    }
    elements.push_back(std::move(e));
  }
  if (elements.empty()) {
    ctx.error() << "needs at least one input";
    return failure();
  }
  ctx.setSequenceOutput(0, std::move(elements));
  return success();
}

/// SequenceAt: the element at a constant position (negative counts from
/// the end).
LogicalResult convertSequenceAt(NodeContext &ctx) {
  const std::vector<TensorEntry> *seq = sequenceInput(ctx, 0);
  if (!seq)
    return failure();
  const ConstTensor *p = ctx.constInput(1);
  if (!p || p->isFloat() || p->numel() != 1) {
    if (ctx.hasInput(1))
      ctx.error() << "input 'position' (tensor '" << ctx.node.input(1)
                  << "') must be an integer scalar computable at import "
                     "time: Cleave folds sequences to tensors, so positions "
                     "must be constants";
    else
      ctx.error() << "missing required input 'position'";
    return failure();
  }
  int64_t n = seq->size(), pos = p->getI(0);
  if (pos < -n || pos >= n) {
    ctx.error() << "position " << pos << " is out of range for a sequence of "
                << n << " tensors";
    return failure();
  }
  return setElementOutput(ctx, (*seq)[pos < 0 ? pos + n : pos]);
}

/// SequenceLength: the number of elements, a constant int64 scalar.
LogicalResult convertSequenceLength(NodeContext &ctx) {
  const std::vector<TensorEntry> *seq = sequenceInput(ctx, 0);
  if (!seq)
    return failure();
  ConstTensor c;
  c.elemType = ctx.b.getI64Type();
  c.ints = {static_cast<int64_t>(seq->size())};
  ctx.setConstOutput(0, std::move(c));
  return success();
}

/// ConcatFromSequence: the elements concatenated along `axis`, or stacked
/// along a new one when new_axis = 1.
LogicalResult convertConcatFromSequence(NodeContext &ctx) {
  const std::vector<TensorEntry> *seq = sequenceInput(ctx, 0);
  if (!seq)
    return failure();
  if (!ctx.hasAttr("axis")) {
    ctx.error() << "missing required attribute 'axis'";
    return failure();
  }
  if (seq->empty()) {
    ctx.error() << "the sequence is empty: there is nothing to concatenate";
    return failure();
  }
  bool newAxis = ctx.attrInt("new_axis", 0) != 0;
  RankedTensorType first = entryType(seq->front());
  int64_t rank = first.getRank() + (newAxis ? 1 : 0);
  if (rank == 0) {
    ctx.error() << "cannot concatenate scalars without new_axis = 1";
    return failure();
  }
  auto axis = ctx.normAxis(ctx.attrInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  SmallVector<Value> parts;
  SmallVector<int64_t> shape(first.getShape());
  if (newAxis)
    shape.insert(shape.begin() + *axis, 0);
  else
    shape[*axis] = 0;
  for (auto [k, e] : llvm::enumerate(*seq)) {
    RankedTensorType t = entryType(e);
    SmallVector<int64_t> dims(t.getShape());
    if (newAxis)
      dims.insert(dims.begin() + *axis, 1);
    bool same = t.getElementType() == first.getElementType() &&
                static_cast<int64_t>(dims.size()) == rank;
    for (int64_t d = 0; same && d < rank; ++d)
      same = d == *axis || dims[d] == shape[d];
    if (!same) {
      ctx.error() << "sequence element " << k << " (" << t << ") does not "
                  << (newAxis ? "stack" : "concatenate") << " with element 0 ("
                  << first << ") on axis " << *axis;
      return failure();
    }
    shape[*axis] += dims[*axis];
    Value v = e.value ? e.value : ctx.constant(*e.known);
    parts.push_back(ctx.reshape(v, dims));
  }
  if (parts.size() == 1)
    return ctx.finish(parts.front());
  return ctx.finish(
      ConcatOp::create(ctx.b, ctx.loc,
                       RankedTensorType::get(shape, first.getElementType()),
                       parts, static_cast<uint64_t>(*axis))
          .getResult());
}

} // namespace

void registerSequenceConverters(llvm::StringMap<ConverterFn> &t) {
  t["SplitToSequence"] = convertSplitToSequence;
  t["SequenceConstruct"] = convertSequenceConstruct;
  t["SequenceAt"] = convertSequenceAt;
  t["SequenceLength"] = convertSequenceLength;
  t["ConcatFromSequence"] = convertConcatFromSequence;
}

} // namespace cleave::onnximport
