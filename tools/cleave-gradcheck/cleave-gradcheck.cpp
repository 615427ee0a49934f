//===- cleave-gradcheck.cpp - Check VJP rules against finite differences --===//
//
// cleave-gradcheck file.mlir [--rtol 1e-6] [--step 1e-6] [--seed N]
//                  [--samples 32] [--vjp]
//
// For each func.func @f of the file (f64 tensors), builds
//   L(args) = sum_i sum(f(args)_i * R_i)
// with fixed pseudo-random weights R_i, compiles one plan computing L and
// its gradients (cleave::buildGradients) and one computing L alone, runs
// them on the CPU runtime with pseudo-random inputs and compares every
// gradient with central finite differences of L (step h = --step *
// max(1, |x|)) on at most --samples elements per argument:
//   ||g - fd|| / max(||g||, ||fd||, 1e-12) <= rtol.
// Prints `PASS f max rel err 3.2e-10` or `FAIL f ...` per function and exits
// 1 if any function fails. With --vjp the gradients come from f's results
// with R_i as their cotangents (the form a pipeline stage uses, which
// receives its outputs' gradients), and finite differences of L check them
// the same way.
//
// Inputs: float arguments are drawn uniformly from [-1, 1], or from the
// range given by a `gradcheck.range = [lo, hi]` attribute on the argument
// or on the function. Integer arguments (indices) are drawn from [0, n)
// where n is the size of the indexed dimension of the gather, scatter or
// gather_elements that uses them, or from their `gradcheck.range`.
//
// --hostile draws the edges where rules break instead: exact zeros, both
// signs, and magnitudes from 1e-3 up to the range's bounds (default
// [-1e4, 1e4], or `gradcheck.hostile = [lo, hi]` on the argument or the
// function, for rules with a narrower domain; `gradcheck.nonzero` leaves
// out exact zeros, for a divisor). It fails on a NaN gradient
// where the loss is finite, and compares with finite differences only where
// the function is smooth at the sample (the one-sided differences agree and
// are finite); kinks (relu at 0, max ties) are conventions, checked with
// printed values instead:
//
// A function with the `gradcheck.print` attribute is not compared with
// finite differences: its loss weights are ones, an argument may fix its
// values with `gradcheck.values = dense<...>`, and each gradient is printed
// as `GRAD f #k: v0 v1 ...` for FileCheck (e.g. PyTorch's values at kinks),
// then `PRINTED f`.
//
//===----------------------------------------------------------------------===//

#include "cleave/InitAll.h"
#include "cleave/Pipelines/Pipelines.h"
#include "cleave/PlanFormat.h"
#include "cleave/Transforms/Autodiff.h"
#include "cleave/cleave_rt.hpp"

#include "Cleave/IR/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

using namespace mlir;
using namespace mlir::cleave;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<file.mlir>"),
                                      cl::Required);
static cl::opt<double> rtol("rtol",
                            cl::desc("Largest relative error that passes"),
                            cl::init(1e-6));
static cl::opt<double>
    step("step", cl::desc("Finite-difference step, relative to max(1, |x|)"),
         cl::init(1e-6));
static cl::opt<unsigned> seedOpt("seed", cl::desc("Seed of the inputs"),
                                 cl::init(1));
static cl::opt<unsigned>
    samples("samples", cl::desc("Elements checked per argument at most"),
            cl::init(32));
static cl::opt<bool>
    vjp("vjp",
        cl::desc("Build the gradients from the function's results with the "
                 "weights R_i as their cotangents (buildGradients' "
                 "vector-Jacobian form) instead of from L"),
        cl::init(false));
static cl::opt<bool> directConvolutions(
    "direct-convolutions",
    cl::desc("Compile convolutions as loop nests instead of im2col and a "
             "library GEMM"));
static cl::opt<bool>
    hostile("hostile",
            cl::desc("Draw zeros, both signs and large magnitudes; fail on "
                     "NaN gradients; compare only where smooth"),
            cl::init(false));

//===----------------------------------------------------------------------===//
// Runtime wrappers
//===----------------------------------------------------------------------===//

namespace {
/// A loaded plan and one executor over it.
struct Runner {
  cleave_rt::Program program;
  cleave_rt::Executor executor;
};

/// A host tensor: raw bytes of an input or output with its element type.
struct HostTensor {
  Type elementType;
  std::vector<uint8_t> bytes;
  int64_t size() const {
    return bytes.size() / (elementType.getIntOrFloatBitWidth() / 8);
  }
  double get(int64_t i) const {
    if (elementType.isF64())
      return reinterpret_cast<const double *>(bytes.data())[i];
    if (elementType.isF32())
      return reinterpret_cast<const float *>(bytes.data())[i];
    if (elementType.isInteger(64))
      return reinterpret_cast<const int64_t *>(bytes.data())[i];
    return reinterpret_cast<const int32_t *>(bytes.data())[i];
  }
  void set(int64_t i, double v) {
    if (elementType.isF64())
      reinterpret_cast<double *>(bytes.data())[i] = v;
    else if (elementType.isF32())
      reinterpret_cast<float *>(bytes.data())[i] = v;
    else if (elementType.isInteger(64))
      reinterpret_cast<int64_t *>(bytes.data())[i] = v;
    else
      reinterpret_cast<int32_t *>(bytes.data())[i] = v;
  }
};
} // namespace

/// Returns the message of a failed runtime call (and frees it), or "".
static std::string check(cleave_rt_status status) {
  if (!status)
    return "";
  std::string message = cleave_rt_status_message(status);
  cleave_rt_status_free(status);
  return message.empty() ? "runtime error" : message;
}

static std::string load(const ::cleave::plan::Plan &p, Runner &runner) {
  std::vector<uint8_t> bytes = ::cleave::plan::serialize(p);
  if (std::string err = check(cleave_rt_program_load_memory(
          bytes.data(), bytes.size(), runner.program.out()));
      !err.empty())
    return err;
  return check(
      cleave_rt_executor_create(runner.program, "cpu", runner.executor.out()));
}

static std::string run(Runner &runner, ArrayRef<HostTensor> inputs,
                       SmallVectorImpl<HostTensor> *outputs,
                       ArrayRef<Type> outputTypes) {
  for (auto [i, input] : llvm::enumerate(inputs))
    if (std::string err = check(cleave_rt_executor_set_input(
            runner.executor, i, input.bytes.data(), input.bytes.size()));
        !err.empty())
      return err;
  if (std::string err = check(cleave_rt_executor_run(runner.executor));
      !err.empty())
    return err;
  outputs->clear();
  for (auto [i, type] : llvm::enumerate(outputTypes)) {
    const void *data;
    size_t bytes;
    if (std::string err =
            check(cleave_rt_executor_output(runner.executor, i, &data, &bytes));
        !err.empty())
      return err;
    HostTensor t{type, {}};
    t.bytes.assign(static_cast<const uint8_t *>(data),
                   static_cast<const uint8_t *>(data) + bytes);
    outputs->push_back(std::move(t));
  }
  return "";
}

//===----------------------------------------------------------------------===//
// The checked programs
//===----------------------------------------------------------------------===//

static bool isFloatTensorType(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// Builds `@main(args) -> (L, dL/dfloat-args...)` (or `-> L`) from `f`.
static FailureOr<OwningOpRef<ModuleOp>>
buildCheckModule(func::FuncOp f, ArrayRef<DenseElementsAttr> weights,
                 bool withGradients) {
  MLIRContext *ctx = f.getContext();
  Location loc = f.getLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module->getBody());
  auto main = func::FuncOp::create(
      b, loc, "main", FunctionType::get(ctx, f.getArgumentTypes(), {}));
  Block *body = main.addEntryBlock();
  b.setInsertionPointToEnd(body);
  IRMapping map;
  map.map(f.getArguments(), body->getArguments());
  for (Operation &op : f.getBody().front().without_terminator())
    b.clone(op, map);
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());

  Value loss;
  SmallVector<Value> outputs, cotangents;
  for (auto [r, w] : llvm::zip(ret.getOperands(), weights)) {
    Value v = map.lookupOrDefault(r);
    auto type = cast<RankedTensorType>(v.getType());
    Value weight = ConstantOp::create(b, loc, w);
    outputs.push_back(v);
    cotangents.push_back(weight);
    Value weighted = BinaryOp::create(b, loc, BinaryKind::mul, v, weight);
    if (type.getRank() > 0)
      weighted = ReduceOp::create(
          b, loc, RankedTensorType::get({}, type.getElementType()),
          ReduceKind::sum, weighted,
          llvm::to_vector(llvm::seq<int64_t>(type.getRank())));
    loss =
        loss ? Value(BinaryOp::create(b, loc, BinaryKind::add, loss, weighted))
             : weighted;
  }
  SmallVector<Value> results{loss};
  if (withGradients) {
    SmallVector<Value> wrt;
    for (BlockArgument arg : body->getArguments())
      if (isFloatTensorType(arg.getType()))
        wrt.push_back(arg);
    // --vjp: the gradients of L from the outputs and their weights as
    // cotangents (the vector-Jacobian form), not from L itself.
    FailureOr<SmallVector<Value>> grads =
        vjp ? ::cleave::buildGradients(b, outputs, cotangents, wrt)
            : ::cleave::buildGradients(b, loss, wrt);
    if (failed(grads))
      return failure();
    llvm::append_range(results, *grads);
  }
  func::ReturnOp::create(b, loc, results);
  main.setType(FunctionType::get(ctx, f.getArgumentTypes(),
                                 TypeRange(ValueRange(results))));
  if (failed(verify(*module)))
    return failure();
  return module;
}

/// Reads `[lo, hi]` from an array attribute of numbers (a range with
/// lo > hi or a non-finite bound reads as none; checkRanges reports it).
static std::optional<std::pair<double, double>> readRange(Attribute attr) {
  auto array = dyn_cast_or_null<ArrayAttr>(attr);
  if (!array || array.size() != 2)
    return std::nullopt;
  double v[2];
  for (int i = 0; i < 2; ++i) {
    if (auto f = dyn_cast<FloatAttr>(array[i]))
      v[i] = f.getValueAsDouble();
    else if (auto n = dyn_cast<IntegerAttr>(array[i]))
      v[i] = n.getInt();
    else
      return std::nullopt;
  }
  if (!(v[0] <= v[1]) || !std::isfinite(v[0]) || !std::isfinite(v[1]))
    return std::nullopt;
  return std::make_pair(v[0], v[1]);
}

/// The size of the dimension an index argument indexes, from its users.
static int64_t indexedSize(BlockArgument arg) {
  for (Operation *user : arg.getUsers()) {
    if (auto g = dyn_cast<GatherOp>(user))
      return g.getOperand().getType().getDimSize(g.getAxis());
    if (auto g = dyn_cast<GatherElementsOp>(user))
      return g.getOperand().getType().getDimSize(g.getAxis());
    if (auto s = dyn_cast<ScatterOp>(user))
      return s.getOperand().getType().getDimSize(s.getAxis());
  }
  return 2;
}

/// One value of the hostile distribution on [lo, hi]: an exact zero (when
/// in range and `zeros`) or a bound one time in eight each, otherwise a random
/// sign and a magnitude log-uniform between 1e-3 and the bound on that side.
static double hostileValue(double lo, double hi, bool zeros,
                           std::mt19937_64 &rng) {
  std::uniform_int_distribution<int> pick(0, 7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  switch (pick(rng)) {
  case 0:
    if (zeros && lo <= 0 && hi >= 0)
      return 0.0;
    [[fallthrough]];
  case 1:
    return unit(rng) < 0.5 ? lo : hi;
  default:
    break;
  }
  // A sign whose side of the range is not empty, then a magnitude
  // log-uniform over that side: [max(lo, 0), hi] or [lo, min(hi, 0)].
  bool positive = hi > 0, negative = lo < 0;
  if (!positive && !negative)
    return 0.0; // [0, 0]
  bool useNegative = negative && (!positive || unit(rng) < 0.5);
  double far = useNegative ? -lo : hi;
  double near = std::max(useNegative ? -std::min(hi, 0.0) : std::max(lo, 0.0),
                         std::min(1e-3, far));
  double magnitude =
      std::exp(std::log(near) + unit(rng) * (std::log(far) - std::log(near)));
  magnitude = std::clamp(magnitude, near, far);
  return useNegative ? -magnitude : magnitude;
}

/// Pseudo-random inputs for `f`'s arguments.
static SmallVector<HostTensor> makeInputs(func::FuncOp f,
                                          std::mt19937_64 &rng) {
  SmallVector<HostTensor> inputs;
  std::optional<std::pair<double, double>> fnRange =
      readRange(f->getAttr("gradcheck.range"));
  for (BlockArgument arg : f.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    HostTensor t{type.getElementType(), {}};
    t.bytes.resize(type.getNumElements() * (type.getElementTypeBitWidth() / 8));
    std::optional<std::pair<double, double>> range =
        readRange(f.getArgAttr(arg.getArgNumber(), "gradcheck.range"));
    if (auto fixed = f.getArgAttrOfType<DenseElementsAttr>(arg.getArgNumber(),
                                                           "gradcheck.values");
        fixed && isa<FloatType>(type.getElementType())) {
      for (auto [i, v] : llvm::enumerate(fixed.getValues<APFloat>()))
        if (static_cast<int64_t>(i) < t.size())
          t.set(i, v.convertToDouble());
    } else if (isa<FloatType>(type.getElementType()) && hostile) {
      std::optional<std::pair<double, double>> hostileRange =
          readRange(f.getArgAttr(arg.getArgNumber(), "gradcheck.hostile"));
      if (!hostileRange)
        hostileRange = readRange(f->getAttr("gradcheck.hostile"));
      auto [lo, hi] = hostileRange ? *hostileRange : std::make_pair(-1e4, 1e4);
      bool nonzero = f.getArgAttr(arg.getArgNumber(), "gradcheck.nonzero") ||
                     f->hasAttr("gradcheck.nonzero");
      for (int64_t i = 0; i < t.size(); ++i)
        t.set(i, hostileValue(lo, hi, !nonzero, rng));
    } else if (isa<FloatType>(type.getElementType())) {
      auto [lo, hi] = range     ? *range
                      : fnRange ? *fnRange
                                : std::make_pair(-1.0, 1.0);
      std::uniform_real_distribution<double> dist(lo, hi);
      for (int64_t i = 0; i < t.size(); ++i)
        t.set(i, dist(rng));
    } else {
      auto [lo, hi] =
          range ? *range : std::make_pair(0.0, double(indexedSize(arg) - 1));
      std::uniform_int_distribution<int64_t> dist(lo, hi);
      for (int64_t i = 0; i < t.size(); ++i)
        t.set(i, dist(rng));
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

//===----------------------------------------------------------------------===//
// One function
//===----------------------------------------------------------------------===//

/// Checks `f`; returns the largest relative error, or an error message.
static FailureOr<double> checkFunction(func::FuncOp f, std::string &error) {
  auto fail = [&](const Twine &message) -> FailureOr<double> {
    error = message.str();
    return failure();
  };
  if (!f.getBody().hasOneBlock() || f.getNumResults() == 0)
    return fail("expected a single-block function with results");
  // Every range attribute must read as [lo, hi] with finite lo <= hi.
  for (StringRef attrName : {"gradcheck.range", "gradcheck.hostile"}) {
    if (Attribute a = f->getAttr(attrName); a && !readRange(a))
      return fail("the function's " + attrName +
                  " is not [lo, hi] with finite lo <= hi");
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (Attribute a = f.getArgAttr(i, attrName); a && !readRange(a))
        return fail(attrName + " of argument #" + Twine(i) +
                    " is not [lo, hi] with finite lo <= hi");
  }
  for (Type t : f.getResultTypes())
    if (!isFloatTensorType(t))
      return fail("every result must be a float tensor");

  std::mt19937_64 rng(seedOpt ^ llvm::hash_value(f.getSymName()));
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  SmallVector<DenseElementsAttr> weights;
  for (Type t : f.getResultTypes()) {
    auto type = cast<RankedTensorType>(t);
    SmallVector<Attribute> values;
    bool print = f->hasAttr("gradcheck.print");
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      values.push_back(
          FloatAttr::get(type.getElementType(), print ? 1.0 : unit(rng)));
    weights.push_back(DenseElementsAttr::get(type, values));
  }

  SmallVector<unsigned> wrt;
  for (BlockArgument arg : f.getArguments())
    if (isFloatTensorType(arg.getType()))
      wrt.push_back(arg.getArgNumber());
  if (wrt.empty())
    return fail("no float argument to differentiate with respect to");

  // Compile both programs.
  Runner gradRunner, lossRunner;
  SmallVector<Type> gradOutputs, lossOutputs;
  for (bool withGradients : {true, false}) {
    FailureOr<OwningOpRef<ModuleOp>> module =
        buildCheckModule(f, weights, withGradients);
    if (failed(module))
      return fail(withGradients ? "cannot build the gradients"
                                : "cannot build the loss");
    auto main = (**module).lookupSymbol<func::FuncOp>("main");
    SmallVector<Type> &outputs = withGradients ? gradOutputs : lossOutputs;
    for (Type t : main.getResultTypes())
      outputs.push_back(cast<RankedTensorType>(t).getElementType());
    ::cleave::PhaseOptions options;
    options.plan.modelName = f.getSymName().str();
    options.convolutionsAsGemm = !directConvolutions;
    FailureOr<::cleave::plan::Plan> p =
        ::cleave::compileToPlan(**module, options);
    if (failed(p))
      return fail("compilation failed");
    if (std::string err = load(*p, withGradients ? gradRunner : lossRunner);
        !err.empty())
      return fail("cannot load the plan: " + err);
  }

  SmallVector<HostTensor> inputs = makeInputs(f, rng);
  SmallVector<HostTensor> gradResults, lossResults;
  if (std::string err = run(gradRunner, inputs, &gradResults, gradOutputs);
      !err.empty())
    return fail("running the gradient plan: " + err);
  auto evalLoss = [&](double &value) -> std::string {
    std::string err = run(lossRunner, inputs, &lossResults, lossOutputs);
    if (err.empty())
      value = lossResults[0].get(0);
    return err;
  };
  double loss;
  if (std::string err = evalLoss(loss); !err.empty())
    return fail("running the loss plan: " + err);
  double gradLoss = gradResults[0].get(0);
  if (std::abs(gradLoss - loss) > 1e-9 * std::max(1.0, std::abs(loss)))
    return fail("the two plans disagree on the loss: " +
                std::to_string(gradLoss) + " vs " + std::to_string(loss));

  if (f->hasAttr("gradcheck.print")) {
    for (auto [k, argIndex] : llvm::enumerate(wrt)) {
      const HostTensor &grad = gradResults[k + 1];
      llvm::outs() << "GRAD " << f.getSymName() << " #" << argIndex << ":";
      for (int64_t i = 0; i < grad.size(); ++i)
        llvm::outs() << " " << llvm::format("%.6g", grad.get(i));
      llvm::outs() << "\n";
    }
    return 0.0;
  }

  bool finiteLoss = std::isfinite(loss);
  double worst = 0;
  for (auto [k, argIndex] : llvm::enumerate(wrt)) {
    HostTensor &x = inputs[argIndex];
    const HostTensor &grad = gradResults[k + 1];
    if (hostile && finiteLoss)
      for (int64_t i = 0; i < grad.size(); ++i)
        if (std::isnan(grad.get(i)))
          return fail("NaN gradient of argument #" + Twine(argIndex) +
                      " at element " + Twine(i) + " (x = " +
                      std::to_string(x.get(i)) + ") where the loss is finite");
    std::vector<int64_t> order(x.size());
    for (int64_t i = 0; i < x.size(); ++i)
      order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(std::min<int64_t>(order.size(), samples));
    double diff2 = 0, g2 = 0, fd2 = 0;
    int64_t compared = 0;
    for (int64_t i : order) {
      double original = x.get(i);
      double h = step * std::max(1.0, std::abs(original));
      double plus, minus;
      x.set(i, original + h);
      std::string err = evalLoss(plus);
      x.set(i, original - h);
      if (err.empty())
        err = evalLoss(minus);
      x.set(i, original);
      if (!err.empty())
        return fail("running the loss plan: " + err);
      double fd = (plus - minus) / (2 * h), g = grad.get(i);
      if (hostile) {
        // Compare only where the function is smooth at the sample: the
        // one-sided differences agree, and so do the central differences
        // of steps h and 2h (a jump gives 1/h and 1/(2h)).
        double plus2, minus2;
        x.set(i, original + 2 * h);
        err = evalLoss(plus2);
        x.set(i, original - 2 * h);
        if (err.empty())
          err = evalLoss(minus2);
        x.set(i, original);
        if (!err.empty())
          return fail("running the loss plan: " + err);
        double right = (plus - loss) / h, left = (loss - minus) / h;
        double fdWide = (plus2 - minus2) / (4 * h);
        auto agree = [](double a, double b) {
          return std::isfinite(a) && std::isfinite(b) &&
                 std::abs(a - b) <=
                     1e-3 * std::max({std::abs(a), std::abs(b), 1e-3});
        };
        if (!std::isfinite(g) || !agree(right, left) || !agree(fd, fdWide))
          continue;
      }
      ++compared;
      diff2 += (g - fd) * (g - fd);
      g2 += g * g;
      fd2 += fd * fd;
    }
    if (compared == 0)
      return fail("no sample of argument #" + Twine(argIndex) +
                  " where the function is smooth and finite; narrow its "
                  "gradcheck.hostile range");
    double rel =
        std::sqrt(diff2) / std::max({std::sqrt(g2), std::sqrt(fd2), 1e-12});
    if (!(rel <= worst)) // NaN propagates.
      worst = rel;
  }
  return worst;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "cleave-gradcheck: checks the VJP rules of every function of a file "
      "against finite differences\n");

  DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  ::cleave::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(inputFile, sourceMgr, &context);
  if (!module)
    return 1;

  bool allPassed = true;
  SmallVector<func::FuncOp> functions(module->getOps<func::FuncOp>());
  for (func::FuncOp f : functions) {
    std::string error;
    FailureOr<double> worst = checkFunction(f, error);
    bool passed = succeeded(worst) && *worst <= rtol;
    allPassed &= passed;
    // A gradcheck.print function is printed, not compared.
    bool printed = succeeded(worst) && f->hasAttr("gradcheck.print");
    llvm::outs() << (printed  ? "PRINTED "
                     : passed ? "PASS "
                              : "FAIL ")
                 << f.getSymName();
    if (failed(worst))
      llvm::outs() << ": " << error;
    else if (!printed)
      llvm::outs() << " max rel err " << llvm::format("%.1e", *worst);
    llvm::outs() << "\n";
    llvm::outs().flush();
  }
  return allPassed ? 0 : 1;
}
