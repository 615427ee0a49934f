//===- PlanValidateKernels.cpp - Checks of GEMM and attention commands ---===//
//
// The parts of plan::validate that check a GEMM command (dtypes, extents,
// leading dimensions, transposes, its epilogue and bias) and an attention
// command (shapes, head dimensions, masks and the buffers they read), so
// that no library call the executors make reads or writes outside the
// arena.
//
//===----------------------------------------------------------------------===//

#include "PlanValidator.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace cleave::plan::detail {

bool Validator::checkGemm(const std::string &what, const Command &c) {
  const std::vector<int64_t> &p = c.params;
  uint32_t code = static_cast<uint32_t>(p[kGemmDType]);
  auto dtypeString = [](int64_t v) {
    uint32_t c = static_cast<uint32_t>(v);
    return isKnownDType(c) && v == c
               ? std::string(dtypeName(static_cast<DType>(c)))
               : "code " + std::to_string(v);
  };
  int64_t outCode = gemmOutDTypeOf(c);
  // An outDType equal to dtype (carried by same-type GEMMs with an
  // epilogue) means the same as none.
  bool mixed = outCode != p[kGemmDType];
  auto is = [](int64_t v, DType t) { return v == static_cast<int64_t>(t); };
  bool low = is(p[kGemmDType], DType::BF16) || is(p[kGemmDType], DType::F16);
  // bf16/f16 operands with a result of their own type accumulate in f32 and
  // round once, at the end; such a result takes no epilogue.
  if (!mixed && !is(p[kGemmDType], DType::F32) &&
      !is(p[kGemmDType], DType::F64) && !low)
    return fail(what + ": unsupported dtype " + dtypeString(p[kGemmDType]) +
                " (only float32, float64, and bfloat16 or float16 with an "
                "f32 accumulator are supported)");
  if (!mixed && low && p.size() > kGemmEpilogue &&
      p[kGemmEpilogue] != static_cast<int64_t>(GemmEpilogue::None))
    return fail(what + ": a " + dtypeString(p[kGemmDType]) +
                " result takes no epilogue");
  if (mixed && !(low && is(outCode, DType::F32)))
    return fail(what + ": unsupported mixed dtypes " +
                dtypeString(p[kGemmDType]) + " -> " + dtypeString(outCode) +
                " (only bfloat16 or float16 operands with a float32 result)");
  for (size_t i : {kGemmTransA, kGemmTransB})
    if (p[i] != 0 && p[i] != 1)
      return fail(what + ": transpose flag " + std::to_string(p[i]) +
                  " is not 0 or 1");
  static const char *const names[] = {
      "dtype", "transA", "transB", "M",       "N",       "K",      "batch",
      "lda",   "ldb",    "ldc",    "strideA", "strideB", "strideC"};
  for (size_t i = kGemmM; i <= kGemmStrideC; ++i)
    if (p[i] < 0 || p[i] > INT_MAX)
      return fail(what + ": " + names[i] + " = " + std::to_string(p[i]) +
                  " is outside [0, " + std::to_string(INT_MAX) + "]");
  int64_t M = p[kGemmM], N = p[kGemmN], K = p[kGemmK];
  if (p[kGemmBatch] < 1)
    return fail(what + ": batch must be at least 1");
  bool tA = p[kGemmTransA], tB = p[kGemmTransB];
  // Row-major operands: rows x cols as stored.
  struct Operand {
    const char *name;
    int64_t rows, cols, ld, stride;
    uint64_t offset;
  } ops[3] = {
      {"A", tA ? K : M, tA ? M : K, p[kGemmLda], p[kGemmStrideA], c.buffers[0]},
      {"B", tB ? N : K, tB ? K : N, p[kGemmLdb], p[kGemmStrideB], c.buffers[1]},
      {"C", M, N, p[kGemmLdc], p[kGemmStrideC], c.buffers[2]}};
  for (const Operand &op : ops) {
    size_t elem = dtypeSize(static_cast<DType>(
        op.name[0] == 'C' ? static_cast<uint32_t>(outCode) : code));
    std::string opName = what + " operand " + op.name;
    if (op.ld < std::max<int64_t>(1, op.cols))
      return fail(opName + ": leading dimension " + std::to_string(op.ld) +
                  " is smaller than its " + std::to_string(op.cols) +
                  " columns");
    if (op.offset % elem != 0)
      return fail(opName + ": offset " + std::to_string(op.offset) +
                  " is not a multiple of the element size");
    if (op.rows == 0 || op.cols == 0)
      continue;
    // Last element touched, computed in 128 bits so nothing overflows.
    unsigned __int128 lastElem =
        static_cast<unsigned __int128>(p[kGemmBatch] - 1) * op.stride +
        static_cast<unsigned __int128>(op.rows - 1) * op.ld + op.cols;
    unsigned __int128 end = op.offset + lastElem * elem;
    if (end > plan.arenaBytes)
      return fail(opName + ": buffer offset " + std::to_string(op.offset) +
                  " with extent up to byte " +
                  (end > UINT64_MAX
                       ? std::string("2^64+")
                       : std::to_string(static_cast<uint64_t>(end))) +
                  " lies outside the arena of " +
                  std::to_string(plan.arenaBytes) + " bytes");
  }
  return checkGemmEpilogue(what, c);
}

static DType dtypeCode(int64_t v) {
  return static_cast<DType>(static_cast<uint32_t>(v));
}

bool Validator::checkOperands(const std::string &what, const Command &c,
                              const std::vector<KernelOperand> &operands) {
  for (size_t i = 0; i < operands.size(); ++i) {
    size_t elem = dtypeSize(operands[i].dtype);
    unsigned __int128 bytes = operands[i].elements * elem;
    if (bytes > plan.arenaBytes)
      return fail(what + " " + operands[i].name + ": " +
                  "larger than the arena of " +
                  std::to_string(plan.arenaBytes) + " bytes");
    if (!checkAlignedRange(what + " " + operands[i].name, c.buffers[i],
                           static_cast<uint64_t>(bytes), elem))
      return false;
  }
  return true;
}

bool Validator::checkAttention(const std::string &what, const Command &c) {
  const std::vector<int64_t> &p = c.params;
  // Plans written before the block flag have one parameter less.
  if (p.size() != kAttnNumParams && p.size() != kAttnNumParams - 1)
    return fail(what + ": has " + std::to_string(p.size()) +
                " parameters, expected " + std::to_string(kAttnNumParams) +
                " (" + std::to_string(kAttnNumParams - 1) +
                " without the block flag)");
  if (p.size() > kAttnBlock && p[kAttnBlock] != 0 && p[kAttnBlock] != 1)
    return fail(what + ": block flag " + std::to_string(p[kAttnBlock]) +
                " is not 0 (attention) or 1 (block attention)");
  bool block = attentionIsBlock(c);
  bool backward = c.kind == CommandKind::AttentionBackward;
  bool hasBias = p[kAttnBiasDType] != 0;
  // The block form adds the positions of the queries and keys, and lse.
  size_t buffers = (backward ? 8 : 4) + (hasBias ? 1 : 0) + (block ? 3 : 0);
  if (c.buffers.size() != buffers) {
    const char *names =
        backward ? (block ? " (q, k, v, [bias], qpos, kpos, lse, out, dout, "
                            "dq, dk, dv)"
                          : " (q, k, v, [bias], out, dout, dq, dk, dv)")
                 : (block ? " (q, k, v, [bias], qpos, kpos, out, lse)"
                          : " (q, k, v, [bias], out)");
    return fail(what + ": has " + std::to_string(c.buffers.size()) +
                " buffers, expected " + std::to_string(buffers) +
                (block ? " for block attention" : "") + names);
  }
  auto isFloat = [](int64_t v) {
    return v == static_cast<int64_t>(DType::F32) ||
           v == static_cast<int64_t>(DType::BF16) ||
           v == static_cast<int64_t>(DType::F16);
  };
  static const char *const dtypeNames[] = {"dtype", "dout dtype",
                                           "gradient dtype"};
  for (size_t i : {kAttnDType, kAttnDoutDType, kAttnGradDType})
    if (!isFloat(p[i]))
      return fail(what + ": " + dtypeNames[i] + " code " +
                  std::to_string(p[i]) +
                  " is not float32, bfloat16 or float16");
  if (!backward && (p[kAttnDoutDType] != p[kAttnDType] ||
                    p[kAttnGradDType] != p[kAttnDType]))
    return fail(what + ": a forward attention's dout and gradient dtypes "
                       "must equal its dtype");
  if (backward && p[kAttnGradDType] != p[kAttnDType] &&
      p[kAttnGradDType] != static_cast<int64_t>(DType::F32))
    return fail(what + ": gradient dtype must be the operands' or float32");
  if (hasBias && !isFloat(p[kAttnBiasDType]))
    return fail(what + ": bias dtype code " +
                std::to_string(p[kAttnBiasDType]) +
                " is not float32, bfloat16 or float16");
  static const char *const dimNames[] = {
      "batch",      "query heads", "key/value heads", "query length",
      "key length", "head size",   "value head size"};
  for (size_t i = kAttnBatch; i <= kAttnValueDim; ++i)
    if (p[i] < 0 || p[i] > INT32_MAX)
      return fail(what + ": " + dimNames[i - kAttnBatch] + " " +
                  std::to_string(p[i]) + " is outside [0, 2^31)");
  int64_t B = p[kAttnBatch], Hq = p[kAttnQHeads], Hkv = p[kAttnKVHeads],
          Sq = p[kAttnQLen], Skv = p[kAttnKVLen], D = p[kAttnHeadDim],
          Dv = p[kAttnValueDim];
  if (Hkv < 1 || Hq % Hkv != 0)
    return fail(what + ": " + std::to_string(Hq) +
                " query heads are not a multiple of " + std::to_string(Hkv) +
                " key/value heads");
  if (p[kAttnCausal] != 0 && p[kAttnCausal] != 1)
    return fail(what + ": causal flag " + std::to_string(p[kAttnCausal]) +
                " is not 0 or 1");
  double scale = bitsToDouble(p[kAttnScaleBits]);
  double softcap = bitsToDouble(p[kAttnSoftcapBits]);
  if (!(scale > 0) || !std::isfinite(scale) || !(softcap >= 0) ||
      !std::isfinite(softcap))
    return fail(what + ": scale must be positive and softcap non-negative, "
                       "both finite");
  struct Extent {
    int64_t b, h, s;
  };
  Extent biasDims = {p[kAttnBiasBatch], p[kAttnBiasHeads], p[kAttnBiasQLen]};
  if (hasBias && ((biasDims.b != 1 && biasDims.b != B) ||
                  (biasDims.h != 1 && biasDims.h != Hq) ||
                  (biasDims.s != 1 && biasDims.s != Sq)))
    return fail(what + ": bias dimensions " + std::to_string(biasDims.b) +
                " x " + std::to_string(biasDims.h) + " x " +
                std::to_string(biasDims.s) +
                " are neither 1 nor the batch, query heads and query length");
  // Element counts in 128 bits: four dims below 2^31 cannot overflow.
  auto count = [](int64_t a, int64_t b, int64_t c, int64_t d) {
    return static_cast<unsigned __int128>(a) * b * c * d;
  };
  auto code = dtypeCode;
  std::vector<KernelOperand> operands = {
      {"q", count(B, Hq, Sq, D), code(p[kAttnDType])},
      {"k", count(B, Hkv, Skv, D), code(p[kAttnDType])},
      {"v", count(B, Hkv, Skv, Dv), code(p[kAttnDType])}};
  if (hasBias)
    operands.push_back({"bias", count(biasDims.b, biasDims.h, biasDims.s, Skv),
                        code(p[kAttnBiasDType])});
  if (block) {
    operands.push_back({"qpos", count(1, 1, 1, Sq), DType::I64});
    operands.push_back({"kpos", count(1, 1, 1, Skv), DType::I64});
  }
  KernelOperand lse = {"lse", count(1, B, Hq, Sq), DType::F32};
  if (block && backward)
    operands.push_back(lse);
  operands.push_back({"out", count(B, Hq, Sq, Dv), code(p[kAttnDType])});
  if (block && !backward)
    operands.push_back(lse);
  if (backward) {
    operands.push_back({"dout", count(B, Hq, Sq, Dv), code(p[kAttnDoutDType])});
    operands.push_back({"dq", count(B, Hq, Sq, D), code(p[kAttnGradDType])});
    operands.push_back({"dk", count(B, Hkv, Skv, D), code(p[kAttnGradDType])});
    operands.push_back({"dv", count(B, Hkv, Skv, Dv), code(p[kAttnGradDType])});
  }
  return checkOperands(what, c, operands);
}

bool Validator::checkGroupedGemm(const std::string &what, const Command &c) {
  const std::vector<int64_t> &p = c.params;
  if (p.size() != kGroupedNumParams)
    return fail(what + ": has " + std::to_string(p.size()) +
                " parameters, expected " + std::to_string(kGroupedNumParams));
  bool weightGrad = p[kGroupedWeightGrad] == 1;
  if (c.buffers.size() != 4)
    return fail(what + ": has " + std::to_string(c.buffers.size()) +
                " buffers, expected 4" +
                (weightGrad ? " (x, dy, ids, dw)" : " (x, w, ids, out)"));
  int64_t dtype = p[kGroupedDType];
  if (dtype != static_cast<int64_t>(DType::F32) &&
      dtype != static_cast<int64_t>(DType::BF16) &&
      dtype != static_cast<int64_t>(DType::F16))
    return fail(what + ": dtype code " + std::to_string(dtype) +
                " is not float32, bfloat16 or float16");
  int64_t idType = p[kGroupedIdDType];
  if (idType != static_cast<int64_t>(DType::I64) &&
      idType != static_cast<int64_t>(DType::I32))
    return fail(what + ": id dtype code " + std::to_string(idType) +
                " is not int64 or int32");
  for (size_t i : {kGroupedTransposeW, kGroupedWeightGrad})
    if (p[i] != 0 && p[i] != 1)
      return fail(what + ": " +
                  (i == kGroupedTransposeW ? "transpose" : "weight-gradient") +
                  " flag " + std::to_string(p[i]) + " is not 0 or 1");
  static const char *const dimNames[] = {"rows", "K", "N", "experts"};
  for (size_t i = kGroupedRows; i <= kGroupedExperts; ++i)
    if (p[i] < 0 || p[i] > INT32_MAX)
      return fail(what + ": " + dimNames[i - kGroupedRows] + " " +
                  std::to_string(p[i]) + " is outside [0, 2^31)");
  if (p[kGroupedExperts] < 1)
    return fail(what + ": needs at least one expert");
  int64_t M = p[kGroupedRows], K = p[kGroupedK], N = p[kGroupedN],
          E = p[kGroupedExperts];
  auto code = dtypeCode;
  unsigned __int128 weights = static_cast<unsigned __int128>(E) * K * N;
  std::vector<KernelOperand> operands = {
      {"x", static_cast<unsigned __int128>(M) * K, code(dtype)},
      {weightGrad ? "dy" : "w",
       weightGrad ? static_cast<unsigned __int128>(M) * N : weights,
       code(dtype)},
      {"ids", static_cast<unsigned __int128>(M), code(idType)},
      {weightGrad ? "dw" : "out",
       weightGrad ? weights : static_cast<unsigned __int128>(M) * N,
       code(dtype)}};
  return checkOperands(what, c, operands);
}

bool Validator::checkGemmEpilogue(const std::string &what, const Command &c) {
  const std::vector<int64_t> &p = c.params;
  if (p.size() <= kGemmEpilogue)
    return true;
  // checkCommand has checked the kind and the buffer count.
  auto epilogue = static_cast<GemmEpilogue>(p[kGemmEpilogue]);
  int64_t biasCode = p[kGemmBiasDType];
  if (!gemmEpilogueHasBias(epilogue)) {
    if (biasCode != 0)
      return fail(what + ": epilogue " + gemmEpilogueName(epilogue) +
                  " reads no bias but names bias dtype " +
                  std::to_string(biasCode) + " (expected 0)");
    return true;
  }
  int64_t outCode = p[kGemmOutDType];
  if (biasCode != outCode)
    return fail(what + ": epilogue " + gemmEpilogueName(epilogue) +
                ": bias dtype code " + std::to_string(biasCode) +
                " differs from the result's " +
                dtypeName(static_cast<DType>(static_cast<uint32_t>(outCode))) +
                " (the bias has C's element type)");
  size_t elem = dtypeSize(static_cast<DType>(static_cast<uint32_t>(biasCode)));
  uint64_t offset = c.buffers[3];
  if (offset % elem != 0)
    return fail(what + " bias: offset " + std::to_string(offset) +
                " is not a multiple of the element size");
  // N <= INT_MAX (checked above), so N * elem cannot overflow.
  return checkRange(what + " bias of " + std::to_string(p[kGemmN]) +
                        " elements",
                    offset, static_cast<uint64_t>(p[kGemmN]) * elem);
}

} // namespace cleave::plan::detail
