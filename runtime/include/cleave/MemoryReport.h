//===- MemoryReport.h - Every rank's measured arena use, on rank 0 -*- C++ -*-//
//
// cleave-run --measure-memory: the executor of every rank measures one run
// (cleave_rt_executor_measure_memory: the last training step, or the last
// run of a plan that is not a training plan); reportMemory gathers the
// figures to rank 0, which prints one line per rank beside the compiler's
// arena size.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_MEMORYREPORT_H
#define CLEAVE_MEMORYREPORT_H

#include "cleave/TrainingLoop.h"

#include <cstdint>
#include <string>

namespace cleave::training {

/// "memory: rank 1 (stage 1): step wrote up to 912384 of 929792 arena bytes
/// (98.1%); 850000 bytes written, 65536 held by constants, states and
/// inputs". `stage` is -1 for a plan that is not pipelined (no "(stage
/// C)"); `what` names the measured run ("step", "run").
std::string memoryLine(int64_t rank, int64_t stage,
                       const cleave_rt_memory_usage_t &usage,
                       const std::string &what);

/// Every rank calls this after a run its executor measured: the ranks'
/// figures are gathered to rank 0 over ctx.comm, which prints memoryLine()
/// for each rank on stdout. `program` is the plan as loaded. Returns an
/// exit code on failure, -1 on success.
int reportMemory(cleave_rt_program program, cleave_rt_executor e,
                 const std::string &what, const RankContext &ctx);

} // namespace cleave::training

#endif // CLEAVE_MEMORYREPORT_H
