//===- NcclWork.h - Work the NCCL double queues on streams -----*- C++ -*-===//
//
// A call as issued (Op), and the piece of work one ungrouped call or one
// ncclGroupEnd queues on a stream (WorkItem): it runs on the stream's
// thread, checks the call sequence against the peers and moves the data
// through the communicator's shared segment.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_DOUBLES_NCCLWORK_H
#define CLEAVE_TEST_DOUBLES_NCCLWORK_H

#include "DeviceDouble.h"
#include "NcclComm.h"

#include <atomic>
#include <string>
#include <vector>

namespace cleave::nccldouble {

/// "ncclAllReduce", ...
const char *kindName(CallKind k);

/// Whether `k` is ncclSend or ncclRecv.
inline bool isP2p(CallKind k) {
  return k == CallKind::Send || k == CallKind::Recv;
}

/// "ncclAllReduce(count=10, float32, sum)".
std::string describe(const CallDesc &d);

/// One call, as issued.
struct Op {
  CallDesc desc;
  StatePtr comm;
  CUdeviceptr send = 0, recv = 0;
  /// The plan command being enqueued when the call was made, or "".
  std::string command;
};

/// "ncclAllReduce(...) on rank 1 of communicator 3fa2b1c4".
std::string describeOp(const Op &op);

/// Adds the byte ranges `op` reads and writes: the write range, and the
/// read range less the bytes it shares with the write range (in place).
void addAccesses(const Op &op, std::vector<cleave::cudadouble::Access> &out);

/// The calls one ncclGroupEnd (or one ungrouped call) queues on one stream.
class WorkItem {
public:
  /// The work counts as pending on each of its communicators (what
  /// ncclCommDestroy waits for) until it first runs or is dropped unrun.
  WorkItem(std::vector<Op> ops, std::string what);
  ~WorkItem();

  /// Runs on the stream's thread (again at each launch of a graph that
  /// captured it).
  void run();

private:
  std::vector<Op> ops;
  std::string what;
  std::vector<StatePtr> comms;
  std::atomic<bool> ran{false};
};

} // namespace cleave::nccldouble

#endif // CLEAVE_TEST_DOUBLES_NCCLWORK_H
