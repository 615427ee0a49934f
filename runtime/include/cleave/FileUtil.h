//===- FileUtil.h - Whole-file reads and atomic writes ----------*- C++ -*-===//

#ifndef CLEAVE_FILEUTIL_H
#define CLEAVE_FILEUTIL_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

/// Reads the whole file at `path`. On failure returns false and sets *error
/// to "cannot open '<path>': <reason>" or similar.
bool readWholeFile(const std::string &path, std::vector<uint8_t> *out,
                   std::string *error);

/// Writes `size` bytes to `path` so that readers never see a partial file:
/// the data goes to a temporary file in the same directory, which is fsync'ed
/// and renamed over `path`. On failure the temporary file is removed.
bool writeFileAtomically(const std::string &path, const void *data, size_t size,
                         std::string *error);

/// Reads exactly `size` bytes at byte `offset` of the open file `fd` into
/// `dst` (pread, retried on EINTR and short reads). False on an error or
/// an early end of file; *error names `path`.
bool readAt(int fd, const std::string &path, uint64_t offset, void *dst,
            size_t size, std::string *error);

/// Reads one shard of a row-major tensor stored in the open file `fd`: the
/// box of shape `local` at `offsets` in a tensor of shape `global` whose
/// first element lies at byte `fileOffset`, into the row-major buffer
/// `dst`. Only the box's bytes are read, one pread per contiguous run (a
/// shard split on the first dimension only is one run). Adds the bytes read
/// to *bytesRead.
bool readShard(int fd, const std::string &path, uint64_t fileOffset,
               const std::vector<int64_t> &global,
               const std::vector<int64_t> &local,
               const std::vector<int64_t> &offsets, size_t elemSize,
               uint8_t *dst, uint64_t *bytesRead, std::string *error);

/// Creates the directory `path` and its missing parents (like `mkdir -p`).
bool makeDirectories(const std::string &path, std::string *error);

} // namespace cleave

#endif // CLEAVE_FILEUTIL_H
