//===- InitialValues.cpp - Constants' values, embedded or read per shard --===//
//
// A constant's value is embedded in the plan or referenced from a file (a
// large initial parameter in the model's external data). Either way a rank
// gets only its shard: embedded data is sliced in memory, and a file is
// read one contiguous run at a time, so a rank of a tensor-parallel mesh
// reads 1/tp of a split weight and nothing more.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"

#include "cleave/FileUtil.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace cleave::rt {

namespace {
/// The files a plan references, each opened once.
class FileSet {
public:
  ~FileSet() {
    for (auto &kv : fds)
      ::close(kv.second);
  }
  cleave_rt_status open(const plan::Constant &c, int *fd) {
    auto it = fds.find(c.file);
    if (it != fds.end()) {
      *fd = it->second;
      return nullptr;
    }
    std::string what =
        "the initial value of '" + c.info.name + "' is in '" + c.file + "'";
    int f = ::open(c.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (f < 0)
      return makeStatus(
          CLEAVE_RT_NOT_FOUND,
          what + ", which cannot be opened: " + std::strerror(errno) +
              " (cleave-run --weights-dir names the folder "
              "holding the model's external data)");
    struct stat st;
    if (::fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(f);
      return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                        what + ", which is not a regular file");
    }
    if (static_cast<uint64_t>(st.st_size) != c.fileSize) {
      ::close(f);
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                        what + ", which has " + std::to_string(st.st_size) +
                            " bytes, but the plan was compiled from a file "
                            "of " +
                            std::to_string(c.fileSize) +
                            " bytes: not the same weights");
    }
    fds.emplace(c.file, f);
    *fd = f;
    return nullptr;
  }

private:
  std::map<std::string, int> fds;
};
} // namespace

cleave_rt_status forEachConstantValue(
    const plan::Plan &plan, int64_t rank,
    const std::function<cleave_rt_status(const plan::Constant &,
                                         const uint8_t *)> &fn,
    uint64_t *bytesRead) {
  FileSet files;
  std::vector<uint8_t> shard;
  for (const plan::Constant &c : plan.constants) {
    bool sharded = !c.info.sharding.empty();
    if (c.file.empty()) {
      if (c.data.empty())
        continue;
      if (!sharded) {
        CLEAVE_RT_RETURN_IF_ERROR(fn(c, c.data.data()));
        continue;
      }
      shard.resize(c.info.byteSize());
      plan::copyShard(plan::globalShape(c.info, plan.mesh), c.info.shape,
                      plan::shardOffsets(c.info, plan.mesh, rank),
                      plan::dtypeSize(c.info.dtype),
                      const_cast<uint8_t *>(c.data.data()), shard.data(),
                      /*toGlobal=*/false);
      CLEAVE_RT_RETURN_IF_ERROR(fn(c, shard.data()));
      continue;
    }
    int fd = -1;
    CLEAVE_RT_RETURN_IF_ERROR(files.open(c, &fd));
    shard.resize(c.info.byteSize());
    std::string error;
    if (!readShard(
            fd, c.file, c.fileOffset, plan::globalShape(c.info, plan.mesh),
            c.info.shape, plan::shardOffsets(c.info, plan.mesh, rank),
            plan::dtypeSize(c.info.dtype), shard.data(), bytesRead, &error))
      return makeStatus(CLEAVE_RT_DATA_LOSS,
                        "the initial value of '" + c.info.name + "': " + error);
    CLEAVE_RT_RETURN_IF_ERROR(fn(c, shard.data()));
  }
  return nullptr;
}

} // namespace cleave::rt
