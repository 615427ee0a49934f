//===- AsyncCheckpoint.cpp - Checkpoints written beside training ----------===//

#include "AsyncCheckpoint.h"

#include "cleave/FileUtil.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace cleave::training {

namespace fs = std::filesystem;

/// The marker rank `rank` leaves in the checkpoint's temporary directory
/// once its shards are synced: empty, or why it could not write them.
static std::string markerPath(const std::string &tmp, int64_t rank) {
  return tmp + "/.rank-" + std::to_string(rank) + ".done";
}

/// "136 bytes", "12.3 MB", "1.49 GB".
static std::string bytesText(uint64_t bytes) {
  char buf[32];
  if (bytes < 1000000)
    std::snprintf(buf, sizeof buf, "%llu bytes",
                  static_cast<unsigned long long>(bytes));
  else if (bytes < 1000000000)
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

AsyncCheckpointer::~AsyncCheckpointer() {
  cancel = true;
  if (worker.joinable())
    worker.join();
  release();
}

void AsyncCheckpointer::release() {
  for (Shard &s : shards)
    cleave_rt_executor_host_free(owner, s.data);
  shards.clear();
}

int AsyncCheckpointer::report() {
  if (ok)
    return -1;
  ok = true;
  return fail("cannot write the checkpoint of step " + std::to_string(step) +
              " in '" + path + "': " + error);
}

int AsyncCheckpointer::wait() {
  if (!worker.joinable())
    return -1;
  worker.join();
  return report();
}

int AsyncCheckpointer::poll() {
  if (!worker.joinable() || !done)
    return -1;
  return wait();
}

int AsyncCheckpointer::save(cleave_rt_executor e,
                            const CheckpointLayout &layout,
                            const RankContext &ctx, const std::string &dir,
                            checkpoint::Checkpoint c) {
  auto blockStart = std::chrono::steady_clock::now();
  if (int rc = wait(); rc >= 0)
    return rc;
  checkpoint::ShardedSave save;
  if (int rc = beginSave(layout, ctx, dir, c, &save); rc >= 0)
    return rc;
  // The host buffers, once: every save writes the same shards.
  if (!owner) {
    owner = e;
    for (OwnedShard &o : ownedShards(layout, ctx)) {
      const CheckpointLayout::Entry &entry = layout.entries[o.entry];
      const StateInfo &st = entry.info;
      Shard s;
      s.entry = o.entry;
      s.state = static_cast<size_t>(entry.mine);
      s.global = st.global;
      s.shape = st.shape;
      s.start = std::move(o.start);
      s.elemSize = cleave_rt_dtype_size(st.desc.tensor.dtype);
      s.bytes = st.desc.tensor.byte_size;
      TRY(cleave_rt_executor_host_alloc(e, s.bytes, &s.data));
      shards.push_back(std::move(s));
    }
  }
  // The copy: with the wait and the layout above, all that the step waits
  // for.
  copiedBytes = 0;
  for (Shard &s : shards) {
    TRY(cleave_rt_executor_read_state(e, s.state, s.data, s.bytes));
    copiedBytes += s.bytes;
  }
  blockedMs = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - blockStart)
                  .count();
  step = c.step;
  path = fs::path(save.tensorFile).parent_path().string();
  prefix = rankPrefix(); // the writer is not a rank thread
  done = false;
  double timeout = ctx.comm ? cleave_rt_communicator_timeout(ctx.comm) : 0;
  worker = std::thread(&AsyncCheckpointer::write, this, std::move(save),
                       std::move(c), ctx.rank, ctx.worldSize, timeout);
  return -1;
}

void AsyncCheckpointer::write(checkpoint::ShardedSave save,
                              checkpoint::Checkpoint c, int64_t rank,
                              int64_t world, double timeout) {
  auto writeStart = std::chrono::steady_clock::now();
  std::string err;
  int fd = ::open(save.tensorFile.c_str(), O_WRONLY | O_CLOEXEC);
  bool good = fd >= 0;
  if (!good)
    err = "cannot open '" + save.tensorFile + "': " + std::strerror(errno);
  for (size_t i = 0; good && i < shards.size(); ++i) {
    if (cancel) {
      good = false;
      err = "the run stopped before the write finished";
      break;
    }
    const Shard &s = shards[i];
    good = checkpoint::writeShard(fd, save, s.entry, s.global, s.shape, s.start,
                                  s.elemSize,
                                  static_cast<const uint8_t *>(s.data), &err);
    // --inject-fault rank=R,step=S,kind={crash,fail}-during-save: half of the
    // shards written.
    if (fault != Fault::None && c.step == faultStep &&
        i + 1 == (shards.size() + 1) / 2) {
      const char *mode =
          fault == Fault::Crash ? "crash-during-save" : "fail-during-save";
      std::fprintf(stderr, "%s: %sinjected fault at step %lld: %s\n",
                   programName().c_str(), prefix.c_str(),
                   static_cast<long long>(c.step), mode);
      std::fflush(stderr);
      if (fault == Fault::Crash)
        ::raise(SIGKILL);
      good = false;
      err = "the write failed (--inject-fault ...,kind=fail-during-save)";
    }
  }
  if (fd >= 0 && (::fsync(fd) != 0 || ::close(fd) != 0) && good) {
    good = false;
    err = "cannot fsync '" + save.tensorFile + "': " + std::strerror(errno);
  }
  std::string tmp = fs::path(save.tensorFile).parent_path().string();
  if (world > 1 && rank != 0) {
    std::string markErr;
    if (!writeFileAtomically(markerPath(tmp, rank), err.data(), err.size(),
                             &markErr) &&
        good) {
      good = false;
      err = markErr;
    }
  } else if (world > 1) {
    // Rank 0 completes the checkpoint once every rank's shards are synced;
    // it waits at most the communication timeout for one that is late.
    std::vector<bool> seen(static_cast<size_t>(world), false);
    int64_t missing = world - 1;
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration<double>(timeout > 0 ? timeout : 300);
    while (missing > 0 && !cancel &&
           std::chrono::steady_clock::now() < deadline) {
      for (int64_t k = 1; k < world; ++k) {
        std::string marker = markerPath(tmp, k);
        std::vector<uint8_t> text;
        std::string readErr;
        if (seen[k] || !fs::exists(marker) ||
            !readWholeFile(marker, &text, &readErr))
          continue;
        seen[k] = true;
        --missing;
        std::error_code ec;
        fs::remove(marker, ec);
        if (!text.empty() && good) {
          good = false;
          err = "rank " + std::to_string(k) + " could not write its shards: " +
                std::string(text.begin(), text.end());
        }
      }
      if (missing > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (missing > 0 && good) {
      good = false;
      std::string late;
      for (int64_t k = 1; k < world; ++k)
        if (!seen[k])
          late += (late.empty() ? "" : ", ") + std::to_string(k);
      err = cancel ? "the run stopped before the write finished"
                   : "rank(s) " + late +
                         " did not finish writing their "
                         "shards within the communication "
                         "timeout";
    }
  }
  if (rank == 0 && good) {
    std::string final;
    good = checkpoint::finishShardedSave(save, c, &final, &err);
    double writeS = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - writeStart)
                        .count();
    if (good)
      std::fprintf(stderr,
                   "%s: saved checkpoint '%s' (the step waited %.1f ms, "
                   "copying %s; written in %.2f s)\n",
                   programName().c_str(), final.c_str(), blockedMs,
                   bytesText(copiedBytes).c_str(), writeS);
  } else if (rank == 0) {
    std::error_code ec;
    fs::remove_all(tmp, ec); // incomplete: never loaded, not worth keeping
  }
  ok = good;
  error = err;
  done = true;
}

} // namespace cleave::training
