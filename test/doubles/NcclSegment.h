//===- NcclSegment.h - Shared memory of one NCCL double communicator ------===//
//
// Every rank of a communicator maps one POSIX shared memory segment named
// after the communicator's unique id, so rank threads of one process and
// ranks in different processes meet the same way. The segment holds a
// header, one control slot per rank, one channel per ordered pair of ranks,
// and a data area per rank: a staging area the collectives move their
// chunks through, and one mailbox per destination for send/recv.
// ftruncate zero-fills it, so every counter starts at 0 without a creator.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_DOUBLES_NCCLSEGMENT_H
#define CLEAVE_TEST_DOUBLES_NCCLSEGMENT_H

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

namespace cleave::nccldouble {

/// Entries in the rings of call descriptors: a rank runs at most one call
/// ahead of the slowest peer it exchanges descriptors with, so 2 would do.
constexpr int kRing = 4;

/// Bytes of a rank's staging area (a collective's chunk).
constexpr size_t kStagingBytes = 256 << 10;

/// Bytes of one send/recv mailbox: 64 KiB, less for large communicators
/// (the segment holds n * n of them; tmpfs fills only the pages touched).
inline size_t mailboxBytes(int nranks) {
  size_t b = (size_t(1) << 20) / size_t(nranks);
  b = std::min<size_t>(std::max<size_t>(b, 4096), 64 << 10);
  return b & ~size_t(4095);
}

/// The kinds of calls, as compared by the sequence check.
enum class CallKind : int32_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Send,
  Recv
};

/// What a rank says its k-th collective, or its m-th send to (recv from) a
/// peer, is.
struct CallDesc {
  CallKind kind = CallKind::AllReduce;
  int32_t dtype = 0;
  int32_t op = 0;
  /// Broadcast: the root; send/recv: the peer; else 0.
  int32_t root = 0;
  uint64_t count = 0;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "the segment's counters must be lock-free to work across "
              "processes");

struct SegmentHeader {
  /// Ranks of the communicator: the first rank to join sets it.
  std::atomic<uint32_t> nranks;
  std::atomic<uint32_t> joinedCount;
  /// Ranks that have the segment mapped; the last to leave unlinks it.
  std::atomic<uint32_t> attachedCount;
  /// 1 + the rank that called ncclCommAbort, or 0.
  std::atomic<int32_t> abortedBy;
  /// Set by the first rank whose init timed out: the others, and ranks
  /// that come late, give up too.
  std::atomic<uint32_t> initFailed;
};

struct alignas(64) RankSlot {
  std::atomic<uint32_t> joined;
  /// Collectives this rank has described in `desc`.
  std::atomic<uint64_t> described;
  CallDesc desc[kRing];
  /// Staging steps: this rank's staging area holds step `posted`'s data;
  /// it has read every peer's data of step `consumed`.
  std::atomic<uint64_t> posted;
  std::atomic<uint64_t> consumed;
  /// ncclCommSplit calls this rank has described (color, key).
  std::atomic<uint64_t> splits;
  int32_t splitColor[kRing];
  int32_t splitKey[kRing];
};

/// Point to point from one rank to another: descriptors of the m-th send
/// and recv, and a one-chunk mailbox (`produced` chunks written by the
/// sender, `consumed` read by the receiver).
struct alignas(64) Channel {
  std::atomic<uint64_t> sendsPosted;
  std::atomic<uint64_t> recvsPosted;
  CallDesc sendDesc[kRing];
  CallDesc recvDesc[kRing];
  alignas(64) std::atomic<uint64_t> produced;
  alignas(64) std::atomic<uint64_t> consumed;
};

/// Offsets of the parts of a segment for `nranks` ranks.
struct SegmentLayout {
  size_t slots = 0, channels = 0, staging = 0, mailboxes = 0, total = 0;
  size_t mailbox = 0;

  explicit SegmentLayout(int nranks) {
    auto align = [](size_t x, size_t a) { return (x + a - 1) / a * a; };
    size_t n = size_t(nranks);
    slots = align(sizeof(SegmentHeader), 64);
    channels = align(slots + n * sizeof(RankSlot), 64);
    staging = align(channels + n * n * sizeof(Channel), 4096);
    mailboxes = staging + n * kStagingBytes;
    mailbox = mailboxBytes(nranks);
    total = mailboxes + n * n * mailbox;
  }
};

/// Polls without burning a core: a few yields, then sleeps from 50 us
/// growing to 1 ms.
class Backoff {
public:
  void pause() {
    if (spins < 16) {
      ++spins;
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::microseconds(1000));
  }
  void reset() {
    spins = 0;
    delay = std::chrono::microseconds(50);
  }

private:
  int spins = 0;
  std::chrono::microseconds delay{50};
};

} // namespace cleave::nccldouble

#endif // CLEAVE_TEST_DOUBLES_NCCLSEGMENT_H
