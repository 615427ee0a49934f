//===- FileUtil.cpp - Whole-file reads and atomic writes ------------------===//

#include "cleave/FileUtil.h"
#include "cleave/PlanFormat.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace cleave {

static std::string errnoText() { return std::strerror(errno); }

bool readWholeFile(const std::string &path, std::vector<uint8_t> *out,
                   std::string *error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open '" + path + "': " + errnoText();
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *error = "cannot stat '" + path + "': " + errnoText();
    ::close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "'" + path + "' is not a regular file";
    ::close(fd);
    return false;
  }
  out->clear();
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      *error = "cannot read '" + path + "': " + errnoText();
      ::close(fd);
      return false;
    }
    if (n == 0)
      break; // The file shrank while reading.
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  ::close(fd);
  return true;
}

bool writeFileAtomically(const std::string &path, const void *data, size_t size,
                         std::string *error) {
  std::string dir = ".";
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos)
    dir = slash == 0 ? "/" : path.substr(0, slash);
  std::string tmp = path + ".tmp.XXXXXX";
  std::vector<char> tmpName(tmp.begin(), tmp.end());
  tmpName.push_back('\0');
  int fd = ::mkstemp(tmpName.data());
  if (fd < 0) {
    *error =
        "cannot create a temporary file next to '" + path + "': " + errnoText();
    return false;
  }
  auto fail = [&](const std::string &what) {
    *error = what + " '" + tmpName.data() + "': " + errnoText();
    ::close(fd);
    ::unlink(tmpName.data());
    return false;
  };
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail("cannot write");
    done += static_cast<size_t>(n);
  }
  // mkstemp creates 0600 files; give the result ordinary permissions.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  if (::fsync(fd) != 0)
    return fail("cannot fsync");
  if (::close(fd) != 0) {
    *error =
        "cannot close '" + std::string(tmpName.data()) + "': " + errnoText();
    ::unlink(tmpName.data());
    return false;
  }
  if (::rename(tmpName.data(), path.c_str()) != 0) {
    *error = "cannot rename '" + std::string(tmpName.data()) + "' to '" + path +
             "': " + errnoText();
    ::unlink(tmpName.data());
    return false;
  }
  // Make the rename durable; failure here does not lose the data.
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
  return true;
}

bool makeDirectories(const std::string &path, std::string *error) {
  if (path.empty())
    return true;
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    *error = "cannot create directory '" + path + "': " + ec.message();
    return false;
  }
  return true;
}

bool readAt(int fd, const std::string &path, uint64_t offset, void *dst,
            size_t size, std::string *error) {
  auto *out = static_cast<uint8_t *>(dst);
  size_t done = 0;
  while (done < size) {
    ssize_t n =
        ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      *error = "cannot read '" + path + "': " + errnoText();
      return false;
    }
    if (n == 0) {
      *error = "'" + path + "' ends at byte " + std::to_string(offset + done) +
               ", before the " + std::to_string(size) + " bytes at offset " +
               std::to_string(offset) + " could be read";
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool readShard(int fd, const std::string &path, uint64_t fileOffset,
               const std::vector<int64_t> &global,
               const std::vector<int64_t> &local,
               const std::vector<int64_t> &offsets, size_t elemSize,
               uint8_t *dst, uint64_t *bytesRead, std::string *error) {
  // Rows of the box that follow each other in the file and in `dst` merge
  // into one read.
  int64_t runG = -1, runL = 0, runN = 0;
  bool ok = true;
  auto flush = [&] {
    if (runN == 0 || !ok)
      return;
    size_t bytes = static_cast<size_t>(runN) * elemSize;
    ok = readAt(fd, path, fileOffset + static_cast<uint64_t>(runG) * elemSize,
                dst + static_cast<size_t>(runL) * elemSize, bytes, error);
    *bytesRead += ok ? bytes : 0;
    runN = 0;
  };
  plan::forEachShardRow(global, local, offsets,
                        [&](int64_t g, int64_t l, int64_t n) {
                          if (runN && g == runG + runN && l == runL + runN) {
                            runN += n;
                            return;
                          }
                          flush();
                          runG = g;
                          runL = l;
                          runN = n;
                        });
  flush();
  return ok;
}

} // namespace cleave
