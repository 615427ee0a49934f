//===- CompileOptions.h - Every option of a compile, typed ------*- C++ -*-===//
//
// The one interface to Cleave's compiler: a CompileOptions value says
// everything a compile does, and cleave::compile (Compile.h) runs it. The
// option table (visitCompileOptions) names each field once, with its flag,
// help and category: cleave-compile binds llvm::cl options to it in the tool,
// the Python module sets the fields from keyword arguments, and the flag
// reference in docs/ is printed from it. No option is a global.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_COMPILEOPTIONS_H
#define CLEAVE_COMPILER_COMPILEOPTIONS_H

#include "cleave/Pipelines/Pipelines.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

/// What a compile writes (--emit).
enum class EmitKind { Plan, MLIR, Asm, Exe, Schedule, None, Sim };

/// cleave-compile's options as values. The defaults are cleave-compile's.
/// Values are checked by compile(), which names the flag of a bad one.
struct CompileOptions {
  // What to compile and what to write.
  std::string input;
  std::string output;
  std::vector<std::string> inputShapes;
  std::vector<std::string> freezeInputs;
  bool allowNewerOpset = false;
  EmitKind emit = EmitKind::Plan;
  CompilePhase phase = CompilePhase::Import;
  /// Set: print the pass pipeline of this phase (import, train-step, ...)
  /// and compile nothing.
  std::string printPipeline;
  // Code generation.
  std::string target = "cpu";
  std::string cudaArch = "sm_90a";
  std::string precision = "fp32";
  bool lowPrecisionGradients = false;
  bool lowPrecisionParameters = false;
  bool cpuRowKernels = false;
  bool cudaHostKernels = false;
  bool cpuEmulateCuda = false;
  int64_t jobs = 0;
  bool noKernelCache = false;
  int64_t kernelOptLevel = 2;
  int64_t kernelParallelMinWork = kDefaultParallelMinWork;
  bool noLibraryGemm = false;
  bool directConvolutions = false;
  bool noFusedAttention = false;
  bool noRecognizeComposites = false;
  bool noGemmEpilogue = false;
  bool embedWeights = false;
  // Training.
  bool train = false;
  std::string loss;
  std::string trainable;
  std::string noDecay;
  std::string untie;
  std::string batchNorm = "train";
  bool returnGradients = false;
  int64_t pipelineStages = 0;
  /// Unset: 1f1b (given, it needs a pipeline).
  std::optional<std::string> schedule;
  std::string stageBoundaries;
  int64_t microbatches = 1;
  int64_t dataParallel = 1;
  std::string sync = "step";
  std::string outerOptimizer;
  double outerLr = 0.7;
  double outerMomentum = 0.9;
  std::string frozen;
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double momentum = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double adamEps = 1e-8;
  double weightDecay = 0;
  double clipGradNorm = 0;
  double moeAuxLoss = 0, moeZLoss = 0, moeCapacityFactor = 0, moeBiasUpdate = 0;
  std::string lossScale;
  double lossScaleInit = 65536.0;
  int64_t lossScaleWindow = 2000;
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;
  double minLR = 0;
  int64_t lrScaleWithBatch = 0;
  std::string recompute = "none";
  std::string initParameters;
  std::string probe;
  // Partitioning.
  std::string mesh;
  int64_t zero = 0;
  bool sequenceParallel = false;
  std::string contextParallel;
  bool overlapCollectives = false;
  double bucketMB = 25.0;
  bool explainSharding = false;
  std::vector<std::string> shard;
  std::string shardingFile;
  int64_t debugDropCollective = -1;
  int64_t debugRingFault = -1;
  // Memory, reports and simulation.
  std::string maxMemory;
  bool printMemoryPlan = false;
  bool report = false;
  bool stats = false;
  bool simulate = false;
  std::string cluster = "cpu";
  std::string simSchedule;
  std::string simTrace;
  // Layout search.
  bool autoPlan = false;
  int64_t globalBatch = 0;
  bool explain = false;
  std::string candidatesFile;
  std::string autoCp;
  std::string autoEp;
  int64_t keepLayers = 0;

  /// The schedule a pipeline runs: --schedule, or 1f1b.
  std::string scheduleOrDefault() const { return schedule.value_or("1f1b"); }
};

/// One entry of the option table.
struct CompileOptionInfo {
  enum Kind { Flag, Value, List };
  std::string name; ///< The flag without its dashes: "input-shape".
  Kind kind = Value;
  std::string valueName; ///< "name=d0xd1...", or empty.
  std::string help;
  /// Training, partitioning and layout options; the others are general.
  bool training = false;
  /// Testing only: not listed by --help.
  bool hidden = false;
};

/// One named value of an enumerated option.
template <typename E> struct CompileOptionValue {
  E value;
  const char *name;
  const char *help;
};

/// Receives each option of a CompileOptions with its table entry and a
/// reference to its field (visitCompileOptions).
class CompileOptionVisitor {
public:
  virtual ~CompileOptionVisitor();
  virtual void visit(const CompileOptionInfo &info, bool &field) = 0;
  virtual void visit(const CompileOptionInfo &info, int64_t &field) = 0;
  virtual void visit(const CompileOptionInfo &info, double &field) = 0;
  virtual void visit(const CompileOptionInfo &info, std::string &field) = 0;
  virtual void visit(const CompileOptionInfo &info,
                     std::optional<std::string> &field) = 0;
  virtual void visit(const CompileOptionInfo &info,
                     std::vector<std::string> &field) = 0;
  virtual void
  visit(const CompileOptionInfo &info, EmitKind &field,
        const std::vector<CompileOptionValue<EmitKind>> &values) = 0;
  virtual void
  visit(const CompileOptionInfo &info, CompilePhase &field,
        const std::vector<CompileOptionValue<CompilePhase>> &values) = 0;
};

/// A visitor whose scalar options (bool, int64_t, double, std::string) all
/// go to `Derived::bindScalar(info, field)` and whose enumerated ones go to
/// `Derived::bindEnum(info, field, values)`: binders that treat every
/// scalar type alike (cleave-compile's llvm::cl options, the phase
/// pipelines' pass options) write the rest only.
template <typename Derived>
class ScalarCompileOptionVisitor : public CompileOptionVisitor {
public:
  void visit(const CompileOptionInfo &info, bool &field) override {
    self().bindScalar(info, field);
  }
  void visit(const CompileOptionInfo &info, int64_t &field) override {
    self().bindScalar(info, field);
  }
  void visit(const CompileOptionInfo &info, double &field) override {
    self().bindScalar(info, field);
  }
  void visit(const CompileOptionInfo &info, std::string &field) override {
    self().bindScalar(info, field);
  }
  void visit(const CompileOptionInfo &info, EmitKind &field,
             const std::vector<CompileOptionValue<EmitKind>> &values) override {
    self().bindEnum(info, field, values);
  }
  void
  visit(const CompileOptionInfo &info, CompilePhase &field,
        const std::vector<CompileOptionValue<CompilePhase>> &values) override {
    self().bindEnum(info, field, values);
  }
  using CompileOptionVisitor::visit;

private:
  Derived &self() { return static_cast<Derived &>(*this); }
};

/// Calls `visitor` once per option of `options` (not the input model), in
/// the table's order.
void visitCompileOptions(CompileOptions &options,
                         CompileOptionVisitor &visitor);

/// The option table, sorted by name.
std::vector<CompileOptionInfo> compileOptionTable();

} // namespace cleave

#endif // CLEAVE_COMPILER_COMPILEOPTIONS_H
