//===- ExternalData.cpp - Safe reading of ONNX external tensor data ------===//
//
// A TensorProto with data_location = EXTERNAL names a file relative to the
// model's folder. The file must stay inside that folder: absolute paths,
// `..` components, symlinks that resolve outside, hard links and non-regular
// files are rejected, and offset/length must lie within the file.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;

namespace cleave::onnximport {

static std::string realPath(const std::string &p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf))
    return {};
  return buf;
}

/// Resolves and checks the location of `t`'s external data and opens it.
static FailureOr<ExternalData> openExternalData(const onnx::TensorProto &t,
                                                StringRef modelDir,
                                                int64_t expectedBytes,
                                                Location loc) {
  auto fail = [&](const Twine &why) -> FailureOr<ExternalData> {
    mlir::emitError(loc) << "external data of tensor '" << t.name()
                         << "': " << why;
    return failure();
  };
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      long long v;
      if (StringRef(kv.value()).getAsInteger(10, v) || v < 0)
        return fail("invalid " + Twine(kv.key()) + " '" + kv.value() + "'");
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty())
    return fail("no 'location' given");
  if (location.find('\0') != std::string::npos)
    return fail("location contains a NUL character");
  if (llvm::sys::path::is_absolute(location))
    return fail("location '" + location +
                "' is an absolute path; it must be relative to the model's "
                "folder");
  for (auto it = llvm::sys::path::begin(location),
            e = llvm::sys::path::end(location);
       it != e; ++it)
    if (*it == "..")
      return fail("location '" + location +
                  "' contains '..'; it must stay inside the model's folder");

  std::string dir = modelDir.empty() ? std::string(".") : modelDir.str();
  std::string realDir = realPath(dir);
  if (realDir.empty())
    return fail("cannot resolve the model's folder '" + dir + "'");
  std::string joined = dir + "/" + location;
  std::string realFile = realPath(joined);
  if (realFile.empty())
    return fail("cannot open '" + location + "': " + std::strerror(errno));
  if (!StringRef(realFile).starts_with(realDir + "/"))
    return fail("location '" + location + "' resolves to '" + realFile +
                "', outside the model's folder '" + realDir + "'");

  int fd = ::open(realFile.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return fail("cannot open '" + location + "': " + std::strerror(errno));
  ExternalData where;
  where.fd = fd; // Closed by ~ExternalData, also on the failures below.
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return fail("cannot stat '" + location + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail("'" + location + "' is not a regular file");
  if (st.st_nlink > 1)
    return fail("'" + location +
                "' has several hard links; copy it instead of linking");
  int64_t size = st.st_size;
  if (offset > size)
    return fail("offset " + Twine(offset) + " is beyond the end of '" +
                location + "' (" + Twine(size) + " bytes)");
  if (length < 0)
    length = size - offset;
  if (length > size - offset)
    return fail("offset " + Twine(offset) + " + length " + Twine(length) +
                " is beyond the end of '" + location + "' (" + Twine(size) +
                " bytes)");
  if (length != expectedBytes)
    return fail("holds " + Twine(length) +
                " bytes but its shape and type "
                "need " +
                Twine(expectedBytes));
  where.file = realFile;
  where.offset = offset;
  where.length = length;
  where.fileSize = size;
  return where;
}

ExternalData::~ExternalData() {
  if (fd >= 0)
    ::close(fd);
}

FailureOr<std::vector<char>> readExternalData(const onnx::TensorProto &t,
                                              StringRef modelDir,
                                              int64_t expectedBytes,
                                              Location loc) {
  FailureOr<ExternalData> where =
      openExternalData(t, modelDir, expectedBytes, loc);
  if (failed(where))
    return failure();
  int64_t offset = where->offset, length = where->length;
  int fd = where->fd;
  std::vector<char> data(length);
  int64_t done = 0;
  while (done < length) {
    ssize_t r = ::pread(fd, data.data() + done, length - done, offset + done);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      mlir::emitError(loc) << "external data of tensor '" << t.name()
                           << "': cannot read '" << where->file << "'";
      return failure();
    }
    done += r;
  }
  return data;
}

FailureOr<ExternalData> mapExternalData(const onnx::TensorProto &t,
                                        StringRef modelDir,
                                        int64_t expectedBytes, Location loc) {
  FailureOr<ExternalData> where =
      openExternalData(t, modelDir, expectedBytes, loc);
  if (failed(where))
    return failure();
  auto buffer = llvm::MemoryBuffer::getOpenFileSlice(
      where->fd, where->file, where->length, where->offset);
  if (!buffer) {
    mlir::emitError(loc) << "external data of tensor '" << t.name()
                         << "': cannot map '" << where->file
                         << "': " << buffer.getError().message();
    return failure();
  }
  where->buffer = std::move(*buffer);
  return where;
}

} // namespace cleave::onnximport
