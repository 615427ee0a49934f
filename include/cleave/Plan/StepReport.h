//===- StepReport.h - What one rank holds and sends in a step ---*- C++ -*-===//
//
// The figures behind `cleave-compile --report`: one rank's memory by what
// it is for (parameters, gradients, optimizer states, activations,
// temporaries, ...), the exact peak of live bytes and where it falls, and
// the step's collectives by mesh axis with how much of their traffic is in
// flight while compute runs. The plan builder classifies its buffers and
// collectives (PlanBuildOptions::report); summarizeStep turns them into
// totals, and printStepReport into the table.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLAN_STEPREPORT_H
#define CLEAVE_PLAN_STEPREPORT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

/// What a buffer of the step holds.
enum class MemoryClass {
  /// Parameter state (this rank's shards), and under mixed precision the
  /// bf16/f16 copies the step computes with: the conversion of each
  /// master, or at ZeRO-1/2 its gathered copy kept for the step.
  Parameters,
  /// Under mixed precision, the f32 master of each parameter the step
  /// computes with in low precision (optimizer state in the ZeRO paper's
  /// accounting).
  MasterParameters,
  OptimizerStates, ///< Optimizer state (momenta, second moments, ...).
  StateBuffers,    ///< Other persistent state (running statistics).
  /// Parameter gradients: from the op autodiff built for a parameter's
  /// gradient through its reductions to the value the optimizer reads.
  Gradients,
  /// Forward values (ancestors of the loss) that a later, non-forward op
  /// reads: what the step keeps from forward for backward.
  Activations,
  Temporaries, ///< Everything else the step computes.
  Inputs,      ///< Data inputs, the learning rate and the step number.
  Constants,   ///< Constants that take arena memory.
};
inline constexpr unsigned kNumMemoryClasses = 9;
llvm::StringRef getMemoryClassName(MemoryClass cls);

/// One arena buffer: its class, bytes, and the commands (node indices)
/// between which it is live, both included.
struct ReportBuffer {
  MemoryClass cls;
  uint64_t bytes;
  int64_t firstUse, lastUse;
  /// For gradients: true for the value the optimizer reads (after every
  /// reduction), false for a partial one still to be reduced.
  bool finalGradient = false;
  /// Bytes per element (for gradients: 4 when held in f32).
  unsigned elementBytes = 0;
};

/// One collective of the step.
struct ReportCollective {
  std::string kind;       ///< "all_reduce", "reduce_scatter", ...
  std::string axes;       ///< Mesh axes of its groups, e.g. "dp" or "dp,tp".
  uint64_t bytesSent = 0; ///< Per rank (ring algorithm).
  bool async = false;
  /// Compute commands and their FLOPs between its start and its wait
  /// (zero for a blocking collective).
  int64_t computeCommandsInFlight = 0, flopsInFlight = 0;
};

/// The step summarized.
struct StepReport {
  using PerClass = std::array<uint64_t, kNumMemoryClasses>;
  /// Sum of the bytes of every buffer of the class. For gradients: the
  /// values the optimizer reads only.
  PerClass held{};
  /// The most bytes of the class live after any one command.
  PerClass peakLive{};
  /// Bytes of each class live at the overall peak.
  PerClass atPeak{};
  /// The exact peak: the most bytes live after any one command, and that
  /// command (node index and a short description).
  uint64_t peakBytes = 0;
  int64_t peakNode = -1;
  std::string peakWhere;
  /// The planned arena (every buffer's offset + size); above peakBytes by
  /// alignment and fragmentation.
  uint64_t arenaBytes = 0;
  /// Parameters: tensors, global elements (Ψ), and how many of them the
  /// report found a gradient for.
  int64_t parameterTensors = 0, parameterElements = 0;
  /// Parameters whose gradient the report traced (the train step's tags),
  /// and of those, the ones with a gradient buffer (the others are
  /// computed and applied inside the same kernels, never stored).
  int64_t gradientsTraced = 0, gradientsHeld = 0;
  /// Parameter elements one data-parallel replica holds: each parameter's
  /// global elements over the sizes of its model-parallel axes (tp, and ep
  /// where it splits experts; ZeRO's Ψ when the mesh also has such axes).
  int64_t replicaParameterElements = 0;
  /// Of those, the experts' (split over ep): ZeRO splits them over the
  /// replica axes but ep, the others over ep too.
  int64_t replicaExpertElements = 0;
  /// Of those, the elements of parameters with an f32 master (mixed
  /// precision: the step computes with their bf16/f16 copies).
  int64_t replicaLowPrecisionElements = 0;
  /// Whether gradients are rounded to bf16/f16 (--low-precision-gradients).
  bool lowPrecisionGradients = false;
  /// Bytes of the gradients the optimizer reads that are held in 4-byte
  /// elements.
  uint64_t wideGradientBytes = 0;
  /// Expert parallelism: the parameters split over the `ep` mesh axis
  /// (the experts' weights), their global elements, this rank's, and the
  /// axis' ranks (1 without one).
  int64_t expertTensors = 0, expertElements = 0, expertLocalElements = 0;
  int64_t epRanks = 1;
  std::string mesh; ///< "dp=2,tp=2", empty for one rank.
  std::vector<ReportCollective> collectives;
};

/// Fills held, peakLive, atPeak, peakBytes and peakNode from `buffers`
/// (peakWhere, arenaBytes and the rest are the caller's).
void summarizeBuffers(llvm::ArrayRef<ReportBuffer> buffers, StepReport &report);

/// The table `cleave-compile --report` prints.
void printStepReport(const StepReport &report, llvm::raw_ostream &os);

/// ZeRO's model states per rank (Rajbhandari et al.) beside the measured
/// ones, for the fp32 variant Cleave keeps: 4-byte parameters (the f32
/// master weights), 4-byte gradients and `optimizerBytes` of optimizer
/// state per parameter, Ψ = replicaParameterElements, N = `dpRanks` (the
/// ranks of the ZeRO `axes`: dp, ep and cp) for all but the experts, whose
/// Ψ_e = replicaExpertElements take N = `expertRanks` (dp and cp).
/// Stage 1 divides the optimizer states by N, 2 also the gradients, 3 also
/// the parameters.
void printZeroFormula(const StepReport &report, int stage, int64_t dpRanks,
                      int64_t expertRanks, llvm::StringRef axes,
                      unsigned optimizerBytes, llvm::raw_ostream &os);

} // namespace cleave

#endif // CLEAVE_PLAN_STEPREPORT_H
