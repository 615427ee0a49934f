//===- SimulatorInternal.h - The simulator's shared costs -------*- C++ -*-===//
//
// Private to lib/Simulate: the compute cost of each command of a plan and
// the utilization of a result, which the event engine (Simulator.cpp) and
// the stage replay (StageReplay.cpp) share; SimulatorCosts.cpp holds them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_SIMULATE_SIMULATORINTERNAL_H
#define CLEAVE_LIB_SIMULATE_SIMULATORINTERNAL_H

#include "cleave/Simulate/Simulator.h"

#include <string>
#include <vector>

namespace cleave::sim::detail {

/// Per plan (a stage, or the SPMD plan): each command's compute seconds on
/// an unshared device.
struct PlanCosts {
  std::vector<double> seconds;
  double flops = 0, modelFlops = 0;
  uint64_t stateBytes = 0;
  bool kernelCostsKnown = true;
  std::vector<std::string> stepNames;
};

/// Each command's seconds of `p` on `device`, its flops and state bytes.
PlanCosts costPlan(const plan::Plan &p, const Device &device);
/// Model flops are the hardware flops without recompute's extra. The
/// plan's recompute_extra_flops is the global program's (before it was
/// partitioned and cut into stages), so it comes off the sum over all
/// ranks, and each rank keeps its share.
void subtractRecompute(SimResult &out, double extra);
/// MFU and HFU of `out` over `world` devices against the peak of the
/// element type of the plan's GEMMs (bf16 or fp16 if any GEMM uses it).
void setUtilization(SimResult &out, const plan::Plan &plan,
                    const Device &device, int64_t world);

} // namespace cleave::sim::detail

#endif // CLEAVE_LIB_SIMULATE_SIMULATORINTERNAL_H
