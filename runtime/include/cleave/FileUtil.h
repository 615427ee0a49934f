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
bool writeFileAtomically(const std::string &path, const void *data,
                         size_t size, std::string *error);

/// Creates the directory `path` and its missing parents (like `mkdir -p`).
bool makeDirectories(const std::string &path, std::string *error);

} // namespace cleave

#endif // CLEAVE_FILEUTIL_H
