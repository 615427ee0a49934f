//===- MoreNNOps.cpp - ConvTranspose and further NN converters ------------===//
//
// ConvTranspose is a plain convolution of the stride-dilated input with the
// spatially reversed, I/O-swapped filter.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

/// Pads (positive amounts) and crops (negative amounts) every dimension.
Value padOrCrop(NodeContext &ctx, Value v, ArrayRef<int64_t> lo,
                ArrayRef<int64_t> hi) {
  auto s = shapeOf(v);
  size_t r = s.size();
  SmallVector<int64_t> plo(r), phi(r), shape(r);
  bool anyPad = false;
  for (size_t d = 0; d < r; ++d) {
    plo[d] = std::max<int64_t>(lo[d], 0);
    phi[d] = std::max<int64_t>(hi[d], 0);
    shape[d] = s[d] + plo[d] + phi[d];
    anyPad |= plo[d] || phi[d];
  }
  if (anyPad)
    v = PadOp::create(ctx.b, ctx.loc, RankedTensorType::get(shape, elemOf(v)),
                      v, ctx.splat(elemOf(v), {}, 0), plo, phi,
                      PadMode::constant)
            .getResult();
  SmallVector<int64_t> start(r), limit(r), strides(r, 1);
  for (size_t d = 0; d < r; ++d) {
    start[d] = std::max<int64_t>(-lo[d], 0);
    limit[d] = shape[d] - std::max<int64_t>(-hi[d], 0);
    if (limit[d] < start[d])
      limit[d] = start[d];
  }
  return ctx.slice(v, start, limit, strides);
}

//===----------------------------------------------------------------------===//
// ConvTranspose
//===----------------------------------------------------------------------===//

LogicalResult convertConvTranspose(NodeContext &ctx) {
  Value x = ctx.input(0), w = ctx.input(1);
  if (!x || !w)
    return failure();
  if (!isa<FloatType>(elemOf(x))) {
    ctx.error() << "needs a floating-point input, got " << x.getType();
    return failure();
  }
  int64_t rank = rankOf(x);
  if (rank < 3 || rankOf(w) != rank || elemOf(w) != elemOf(x)) {
    ctx.error() << "needs N x C x spatial input and a filter of equal rank "
                   "and type, got "
                << x.getType() << " and " << w.getType();
    return failure();
  }
  auto xs = shapeOf(x), ws = shapeOf(w);
  int64_t n = rank - 2;
  int64_t groups = ctx.attrInt("group", 1);
  if (groups < 1 || xs[1] % groups != 0 || ws[0] != xs[1]) {
    ctx.error() << "group " << groups << " does not fit input channels "
                << xs[1] << " and filter " << w.getType();
    return failure();
  }
  SmallVector<int64_t> kernel(ws.drop_front(2));
  if (ctx.hasAttr("kernel_shape") &&
      ArrayRef<int64_t>(ctx.attrInts("kernel_shape")) != ArrayRef(kernel)) {
    ctx.error() << "kernel_shape does not match the filter";
    return failure();
  }
  auto orDefault = [&](StringRef name, size_t size, int64_t def) {
    SmallVector<int64_t> v = ctx.attrInts(name);
    if (v.empty())
      v.assign(size, def);
    return v;
  };
  SmallVector<int64_t> strides = orDefault("strides", n, 1);
  SmallVector<int64_t> dil = orDefault("dilations", n, 1);
  SmallVector<int64_t> outPad = orDefault("output_padding", n, 0);
  SmallVector<int64_t> outShape = ctx.attrInts("output_shape");
  if ((int64_t)outShape.size() == n + 2)
    outShape.erase(outShape.begin(), outShape.begin() + 2);
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER") {
    ctx.error() << "auto_pad '" << autoPad << "' is not valid";
    return failure();
  }
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  SmallVector<int64_t> pads = ctx.attrInts("pads");
  if (pads.empty() || autoPad == "VALID")
    pads.assign(2 * n, 0);
  if ((int64_t)strides.size() != n || (int64_t)dil.size() != n ||
      (int64_t)outPad.size() != n || (int64_t)pads.size() != 2 * n ||
      (!outShape.empty() && (int64_t)outShape.size() != n)) {
    ctx.error() << "strides, dilations, output_padding, pads and output_shape "
                   "must match the "
                << n << " spatial dimensions";
    return failure();
  }
  for (int64_t i = 0; i < n; ++i)
    if (strides[i] < 1 || dil[i] < 1 || outPad[i] < 0) {
      ctx.error() << "strides and dilations must be >= 1, output_padding >= 0";
      return failure();
    }

  // Output size and the leading crop of the full transposed result.
  SmallVector<int64_t> out(n), begin(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t eff = (kernel[i] - 1) * dil[i] + 1;
    int64_t full = strides[i] * (xs[i + 2] - 1) + outPad[i] + eff;
    if (same && !ctx.hasAttr("pads")) {
      int64_t o = outShape.empty() ? xs[i + 2] * strides[i] : outShape[i];
      int64_t total = full - o;
      begin[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      out[i] = o;
    } else {
      begin[i] = pads[i];
      out[i] = outShape.empty() ? full - pads[i] - pads[i + n] : outShape[i];
    }
    if (out[i] < 1) {
      ctx.error() << "output size " << out[i] << " in spatial dim " << i
                  << " is not positive";
      return failure();
    }
  }

  // Dilate the input by the strides: [.., H, ..] -> [.., H, 1, ..] padded to
  // [.., H, s, ..] -> [.., H*s, ..], then pad/crop for the reversed-kernel
  // convolution: low = eff-1-begin, output = out.
  Value in = x;
  bool strided = llvm::any_of(strides, [](int64_t s) { return s > 1; });
  SmallVector<int64_t> dilated(xs.begin(), xs.end());
  if (strided) {
    SmallVector<int64_t> split{xs[0], xs[1]};
    for (int64_t i = 0; i < n; ++i) {
      split.push_back(xs[i + 2]);
      split.push_back(1);
    }
    in = ctx.reshape(in, split);
    SmallVector<int64_t> lo(split.size(), 0), hi(split.size(), 0);
    for (int64_t i = 0; i < n; ++i)
      hi[2 + 2 * i + 1] = strides[i] - 1;
    in = padOrCrop(ctx, in, lo, hi);
    for (int64_t i = 0; i < n; ++i)
      dilated[i + 2] = xs[i + 2] * strides[i];
    in = ctx.reshape(in, dilated);
  }
  SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t eff = (kernel[i] - 1) * dil[i] + 1;
    lo[i + 2] = eff - 1 - begin[i];
    // Padded length must be out + eff - 1.
    hi[i + 2] = out[i] + eff - 1 - lo[i + 2] - dilated[i + 2];
  }
  in = padOrCrop(ctx, in, lo, hi);

  // Filter [C, M/g, K...] -> [M, C/g, K...], reversed spatially.
  int64_t c = ws[0], mg = ws[1], cg = c / groups;
  SmallVector<int64_t> gshape{groups, cg, mg};
  gshape.append(kernel.begin(), kernel.end());
  Value f = ctx.reshape(w, gshape);
  SmallVector<int64_t> perm{0, 2, 1};
  for (int64_t i = 0; i < n; ++i)
    perm.push_back(3 + i);
  f = ctx.transpose(f, perm);
  SmallVector<int64_t> fshape{groups * mg, cg};
  fshape.append(kernel.begin(), kernel.end());
  f = ctx.reshape(f, fshape);
  SmallVector<int64_t> rdims;
  for (int64_t i = 0; i < n; ++i)
    rdims.push_back(2 + i);
  f = ReverseOp::create(ctx.b, ctx.loc, f.getType(), f, rdims).getResult();

  SmallVector<int64_t> shape{xs[0], groups * mg};
  shape.append(out.begin(), out.end());
  SmallVector<int64_t> ones(n, 1), zeros(n, 0);
  Value y = ConvOp::create(ctx.b, ctx.loc,
                           RankedTensorType::get(shape, elemOf(x)), in, f, ones,
                           zeros, zeros, dil, static_cast<uint64_t>(groups));
  if (ctx.hasInput(2)) {
    Value bias = ctx.input(2);
    if (!bias)
      return failure();
    if (shapeOf(bias) != ArrayRef<int64_t>{groups * mg} ||
        elemOf(bias) != elemOf(x)) {
      ctx.error() << "bias must be [" << groups * mg << "]";
      return failure();
    }
    y = ctx.binary(BinaryKind::add, y, channelBroadcast(ctx, bias, shape));
  }
  return ctx.finish(y);
}

//===----------------------------------------------------------------------===//
// LRN, MeanVarianceNormalization
//===----------------------------------------------------------------------===//

LogicalResult convertLRN(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  if (!isa<FloatType>(elemOf(x)) || rankOf(x) < 3) {
    ctx.error() << "needs a floating-point N x C x spatial input, got "
                << x.getType();
    return failure();
  }
  int64_t size = ctx.attrInt("size", 0);
  if (size < 1) {
    ctx.error() << "size must be >= 1";
    return failure();
  }
  double alpha = ctx.attrFloat("alpha", 1e-4),
         beta = ctx.attrFloat("beta", 0.75), bias = ctx.attrFloat("bias", 1.0);
  int64_t rank = rankOf(x);
  Type et = elemOf(x);
  // Sum of squares over a window of `size` channels.
  SmallVector<int64_t> window(rank, 1), ones(rank, 1), lo(rank, 0), hi(rank, 0);
  window[1] = size;
  lo[1] = (size - 1) / 2;
  hi[1] = size - 1 - lo[1];
  Value sq = ctx.binary(BinaryKind::mul, x, x);
  Value sum =
      ReduceWindowOp::create(ctx.b, ctx.loc, x.getType(), ReduceKind::sum, sq,
                             window, ones, lo, hi, ones)
          .getResult();
  Value d = ctx.binary(
      BinaryKind::add,
      ctx.binary(BinaryKind::mul, sum, ctx.splat(et, {}, alpha / size)),
      ctx.splat(et, {}, bias));
  d = ctx.binary(BinaryKind::pow, d, ctx.splat(et, {}, beta));
  return ctx.finish(ctx.binary(BinaryKind::div, x, d));
}

LogicalResult convertMVN(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  if (!isa<FloatType>(elemOf(x))) {
    ctx.error() << "needs a floating-point input, got " << x.getType();
    return failure();
  }
  int64_t rank = rankOf(x);
  SmallVector<int64_t> axes = ctx.hasAttr("axes")
                                  ? ctx.attrInts("axes")
                                  : SmallVector<int64_t>{0, 2, 3};
  auto na = ctx.normAxes(axes, rank);
  if (failed(na))
    return failure();
  Type et = elemOf(x);
  int64_t count = 1;
  for (int64_t a : *na)
    count *= shapeOf(x)[a];
  Value n = ctx.splat(et, {}, count);
  Value mean =
      ctx.binary(BinaryKind::div, ctx.reduce(ReduceKind::sum, x, *na, true), n);
  Value ex2 = ctx.binary(
      BinaryKind::div,
      ctx.reduce(ReduceKind::sum, ctx.binary(BinaryKind::mul, x, x), *na, true),
      n);
  Value var =
      ctx.binary(BinaryKind::sub, ex2, ctx.binary(BinaryKind::mul, mean, mean));
  Value sd = ctx.binary(BinaryKind::add, ctx.unary(UnaryKind::sqrt, var),
                        ctx.splat(et, {}, 1e-9));
  return ctx.finish(
      ctx.binary(BinaryKind::div, ctx.binary(BinaryKind::sub, x, mean), sd));
}

//===----------------------------------------------------------------------===//
// BatchNormalization in training mode
//===----------------------------------------------------------------------===//

ConverterFn inferenceBatchNorm = nullptr;

/// Marks the running statistics of a BatchNormalization node, when they are
/// initializers, so that the training step never trains them, and returns
/// their initializer names ("" for a computed value).
static std::pair<std::string, std::string> markStatistics(NodeContext &ctx) {
  std::string names[2];
  for (int i = 0; i < 2; ++i) {
    auto cst = ctx.input(3 + i).getDefiningOp<ConstantOp>();
    auto name = cst ? mlir::cleave::getInitializerName(cst) : nullptr;
    if (!name)
      continue;
    cst->setAttr(mlir::cleave::attr::kBatchNormStatistic, ctx.b.getUnitAttr());
    names[i] = name.getValue().str();
  }
  return {names[0], names[1]};
}

LogicalResult convertBatchNormTraining(NodeContext &ctx) {
  bool onnxTraining = ctx.attrInt("training_mode", 0) != 0 ||
                      ctx.hasOutput(1) || ctx.hasOutput(2);
  // An inference export trained as PyTorch's train() does (see
  // ImportOptions::batchNormTraining).
  bool torchTraining = !onnxTraining && ctx.settings.batchNormTraining;
  if (!ctx.input(3) || !ctx.input(4))
    return failure();
  auto [meanName, varName] = markStatistics(ctx);
  if (!onnxTraining && !torchTraining) {
    if (inferenceBatchNorm)
      return inferenceBatchNorm(ctx);
    ctx.error() << "no inference converter is registered";
    return failure();
  }
  Value x = ctx.input(0), scale = ctx.input(1), b = ctx.input(2),
        imean = ctx.input(3), ivar = ctx.input(4);
  if (!x || !scale || !b || !imean || !ivar)
    return failure();
  if (!isa<FloatType>(elemOf(x)) || rankOf(x) < 2) {
    ctx.error() << "needs a floating-point input of rank >= 2, got "
                << x.getType();
    return failure();
  }
  auto shape = shapeOf(x);
  int64_t c = shape[1];
  Type et = elemOf(x);
  for (Value p : {scale, b, imean, ivar})
    if (shapeOf(p) != ArrayRef<int64_t>{c} || elemOf(p) != et) {
      ctx.error() << "parameters must be [" << c << "] of the input's type";
      return failure();
    }
  double eps = ctx.attrFloat("epsilon", 1e-5);
  double momentum = ctx.attrFloat("momentum", 0.9);
  SmallVector<int64_t> dims{0};
  for (int64_t d = 2; d < (int64_t)shape.size(); ++d)
    dims.push_back(d);
  Value n = ctx.splat(et, {}, product(shape) / std::max<int64_t>(c, 1));
  Value mean = ctx.binary(BinaryKind::div,
                          ctx.reduce(ReduceKind::sum, x, dims, false), n);
  Value diff =
      ctx.binary(BinaryKind::sub, x, channelBroadcast(ctx, mean, shape));
  Value var = ctx.binary(BinaryKind::div,
                         ctx.reduce(ReduceKind::sum,
                                    ctx.binary(BinaryKind::mul, diff, diff),
                                    dims, false),
                         n);
  Value inv = ctx.unary(UnaryKind::rsqrt, ctx.binary(BinaryKind::add, var,
                                                     ctx.splat(et, {}, eps)));
  Value y = ctx.binary(
      BinaryKind::mul, diff,
      channelBroadcast(ctx, ctx.binary(BinaryKind::mul, scale, inv), shape));
  y = ctx.binary(BinaryKind::add, y, channelBroadcast(ctx, b, shape));
  ctx.setOutput(0, y);
  Value m = ctx.splat(et, {}, momentum), m1 = ctx.splat(et, {}, 1 - momentum);
  auto mix = [&](Value run, Value cur) {
    return ctx.binary(BinaryKind::add, ctx.binary(BinaryKind::mul, run, m),
                      ctx.binary(BinaryKind::mul, cur, m1));
  };
  if (torchTraining) {
    // PyTorch keeps the unbiased variance: var * n / (n - 1).
    int64_t count = product(shape) / std::max<int64_t>(c, 1);
    Value unbiased = ctx.binary(
        BinaryKind::mul, var,
        ctx.splat(et, {},
                  double(count) / double(std::max<int64_t>(count - 1, 1))));
    if (ctx.stateUpdates && !meanName.empty())
      ctx.stateUpdates->push_back({meanName, mix(imean, mean)});
    if (ctx.stateUpdates && !varName.empty())
      ctx.stateUpdates->push_back({varName, mix(ivar, unbiased)});
    return success();
  }
  if (ctx.hasOutput(1))
    ctx.setOutput(1, mix(imean, mean));
  if (ctx.hasOutput(2))
    ctx.setOutput(2, mix(ivar, var));
  return success();
}

//===----------------------------------------------------------------------===//
// ReverseSequence
//===----------------------------------------------------------------------===//

LogicalResult convertReverseSequence(NodeContext &ctx) {
  Value x = ctx.input(0), lens = ctx.input(1);
  if (!x || !lens)
    return failure();
  int64_t rank = rankOf(x);
  if (rank < 2) {
    ctx.error() << "input must have rank >= 2";
    return failure();
  }
  auto ba = ctx.normAxis(ctx.attrInt("batch_axis", 1), rank, "batch_axis");
  auto ta = ctx.normAxis(ctx.attrInt("time_axis", 0), rank, "time_axis");
  if (failed(ba) || failed(ta))
    return failure();
  if (*ba == *ta || *ba > 1 || *ta > 1) {
    ctx.error() << "batch_axis and time_axis must be 0 and 1 in some order";
    return failure();
  }
  auto xs = shapeOf(x);
  if (rankOf(lens) != 1 || shapeOf(lens)[0] != xs[*ba] ||
      !isa<IntegerType>(elemOf(lens))) {
    ctx.error() << "sequence_lens must be an integer [" << xs[*ba]
                << "] tensor, got " << lens.getType();
    return failure();
  }
  Type i64 = ctx.b.getI64Type();
  lens = ctx.convert(lens, i64);
  // idx = t < len ? len - 1 - t : t over [x's shape], gathered along time.
  auto it = RankedTensorType::get(xs, i64);
  Value t = IotaOp::create(ctx.b, ctx.loc, it, static_cast<uint64_t>(*ta));
  Value l =
      BroadcastInDimOp::create(ctx.b, ctx.loc, it, lens, ArrayRef<int64_t>{*ba})
          .getResult();
  Value rev =
      ctx.binary(BinaryKind::sub,
                 ctx.binary(BinaryKind::sub, l, ctx.splat(i64, {}, 1)), t);
  Value idx = ctx.select(ctx.compare(CompareKind::lt, t, l), rev, t);
  return ctx.finish(GatherElementsOp::create(ctx.b, ctx.loc, x.getType(), x,
                                             idx, static_cast<uint64_t>(*ta))
                        .getResult());
}

} // namespace

namespace {

/// LpNormalization: x / ||x||_p along `axis` (p 1 or 2); a zero norm gives 0.
LogicalResult convertLpNormalization(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  if (!isa<FloatType>(elemOf(x))) {
    ctx.error() << "needs a float input, got " << elemOf(x);
    return failure();
  }
  int64_t p = ctx.attrInt("p", 2);
  if (p != 1 && p != 2) {
    ctx.error() << "p must be 1 or 2, got " << p;
    return failure();
  }
  auto axis = ctx.normAxis(ctx.attrInt("axis", -1), rankOf(x));
  if (failed(axis))
    return failure();
  Value terms =
      p == 1 ? ctx.unary(UnaryKind::abs, x) : ctx.binary(BinaryKind::mul, x, x);
  Value norm = ctx.reduce(ReduceKind::sum, terms, {*axis}, /*keepDims=*/true);
  if (p == 2)
    norm = ctx.unary(UnaryKind::sqrt, norm);
  norm = ctx.broadcastTo(norm, shapeOf(x));
  Value zero = ctx.splatLike(x, 0.0);
  return ctx.finish(ctx.select(ctx.compare(CompareKind::eq, norm, zero), zero,
                               ctx.binary(BinaryKind::div, x, norm)));
}

} // namespace

void registerMoreNNConverters(llvm::StringMap<ConverterFn> &t) {
  t["LpNormalization"] = convertLpNormalization;
  t["ConvTranspose"] = convertConvTranspose;
  t["LRN"] = convertLRN;
  t["MeanVarianceNormalization"] = convertMVN;
  t["ReverseSequence"] = convertReverseSequence;
  // Training mode is handled here; inference goes to NNOps' converter.
  if (!inferenceBatchNorm) {
    auto it = t.find("BatchNormalization");
    if (it != t.end())
      inferenceBatchNorm = it->second;
  }
  t["BatchNormalization"] = convertBatchNormTraining;
}

} // namespace cleave::onnximport
