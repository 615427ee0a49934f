//===- Checkpoint.cpp - Training checkpoints on disk ----------------------===//

#include "cleave/Checkpoint.h"
#include "cleave/FileUtil.h"
#include "cleave/Json.h"
#include "cleave/Sha256.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace cleave::checkpoint {

using namespace plan;

static const char kModelFile[] = "model.safetensors";
static const char kIndexFile[] = "index.json";
static const char kManifestFile[] = "manifest.json";

static std::string errnoText() { return std::strerror(errno); }

//===----------------------------------------------------------------------===//
// File system helpers
//===----------------------------------------------------------------------===//

namespace fs = std::filesystem;

static bool isDirectory(const std::string &path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

/// Whether `path` exists (a dangling symlink does).
static bool exists(const std::string &path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

static bool fsyncPath(const std::string &path, std::string *error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    *error = "cannot fsync directory '" + path + "': " + errnoText();
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

/// Removes a directory and what it holds, as far as it can (a failure
/// leaves a temporary directory that the next save removes).
static void removeDir(const std::string &path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

/// Writes chunks to a new file, fsyncs it and returns its size and SHA-256.
struct Chunk {
  const void *data;
  size_t size;
};
static bool writeSynced(const std::string &path,
                        const std::vector<Chunk> &chunks, uint64_t *outBytes,
                        std::string *outHash, std::string *error) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    *error = "cannot create '" + path + "': " + errnoText();
    return false;
  }
  Sha256 hash;
  uint64_t total = 0;
  for (const Chunk &c : chunks) {
    const uint8_t *p = static_cast<const uint8_t *>(c.data);
    size_t done = 0;
    while (done < c.size) {
      ssize_t n = ::write(fd, p + done, c.size - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        *error = "cannot write '" + path + "': " + errnoText();
        ::close(fd);
        return false;
      }
      done += static_cast<size_t>(n);
    }
    hash.update(p, c.size);
    total += c.size;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    *error = "cannot fsync '" + path + "': " + errnoText();
    return false;
  }
  *outBytes = total;
  *outHash = hash.finishHex();
  return true;
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

static std::string indexJson(const Checkpoint &c) {
  json::Value tensors = json::Value::array();
  for (const StateRecord &r : c.states)
    tensors.push_back({{"name", r.name},
                       {"kind", stateKindName(r.kind)},
                       {"parameter", r.parameter},
                       {"slot", r.slot},
                       {"dtype", dtypeName(r.dtype)},
                       {"shape", r.shape},
                       {"file", kModelFile}});
  json::Value index = {
      {"format", "cleave-checkpoint"},
      {"version", 1},
      {"step", c.step},
      {"training_step", c.step},
      {"optimizer", c.optimizer},
      {"rng_seed", c.seed},
      {"data_position",
       {{"step", c.step}, {"samples_consumed", c.samplesConsumed}}},
      {"files", {kModelFile}},
      {"tensors", std::move(tensors)}};
  return json::dump(index, 2) + "\n";
}

/// The safetensors header of `ckpt`'s states (their data offsets assigned
/// in order) and its entries.
static bool layoutTensors(const Checkpoint &ckpt,
                          std::vector<safetensors::TensorEntry> *entries,
                          std::vector<uint8_t> *header, std::string *error) {
  entries->clear();
  for (const StateRecord &r : ckpt.states) {
    safetensors::TensorEntry e;
    e.name = r.name;
    e.dtype = r.dtype;
    e.shape = r.shape;
    entries->push_back(e);
  }
  safetensors::Metadata meta = {{"format", "pt"},
                                {"producer", "cleave-run"},
                                {"step", std::to_string(ckpt.step)}};
  std::string err;
  if (!safetensors::encodeHeader(entries, meta, header, &err)) {
    *error = "checkpoint: " + err;
    return false;
  }
  return true;
}

/// A new checkpoint directory's temporary name: DIR/.tmp-step-<N>-<pid>.
static std::string tmpDirOf(const std::string &dir, int64_t step) {
  return dir + "/.tmp-step-" + std::to_string(step) + "-" +
         std::to_string(::getpid());
}

/// Creates `dir` and the empty temporary directory `tmp`.
static bool makeTmpDir(const std::string &dir, const std::string &tmp,
                       std::string *error) {
  if (!makeDirectories(dir, error))
    return false;
  if (exists(tmp))
    removeDir(tmp);
  std::error_code ec;
  if (!fs::create_directory(tmp, ec)) {
    *error = "cannot create directory '" + tmp +
             "': " + (ec ? ec.message() : "it exists");
    return false;
  }
  return true;
}

struct Written {
  std::string name, hash;
  uint64_t bytes;
};

/// Writes index.json and the manifest into `tmp` (which holds the tensor
/// file `model`), renames it to dir/step-<N> and points dir/latest at it.
static bool completeSave(const std::string &dir, const std::string &tmp,
                         const Checkpoint &ckpt, Written model,
                         std::string *outPath, std::string *error) {
  std::string name = "step-" + std::to_string(ckpt.step);
  std::string final = dir + "/" + name;
  auto fail = [&](const std::string &msg) {
    *error = msg;
    removeDir(tmp);
    return false;
  };
  std::vector<Written> files = {model};
  std::string err;
  std::string index = indexJson(ckpt);
  Written w{kIndexFile, "", 0};
  if (!writeSynced(tmp + "/" + kIndexFile, {{index.data(), index.size()}},
                   &w.bytes, &w.hash, &err))
    return fail(err);
  files.push_back(w);

  // The manifest last: its presence marks the checkpoint complete.
  json::Value list = json::Value::array();
  for (const Written &f : files)
    list.push_back({{"name", f.name}, {"bytes", f.bytes}, {"sha256", f.hash}});
  std::string manifest = json::dump({{"format", "cleave-checkpoint-manifest"},
                                     {"version", 1},
                                     {"step", ckpt.step},
                                     {"files", std::move(list)}},
                                    2) +
                         "\n";
  uint64_t bytes;
  std::string hash;
  if (!writeSynced(tmp + "/" + kManifestFile,
                   {{manifest.data(), manifest.size()}}, &bytes, &hash, &err))
    return fail(err);
  if (!fsyncPath(tmp, &err))
    return fail(err);

  // Replace an older checkpoint of the same step (a rerun) only once the new
  // one is complete.
  std::string old;
  if (exists(final)) {
    old = dir + "/.old-" + name + "-" + std::to_string(::getpid());
    if (::rename(final.c_str(), old.c_str()) != 0)
      return fail("cannot move the existing '" + final +
                  "' aside: " + errnoText());
  }
  if (::rename(tmp.c_str(), final.c_str()) != 0)
    return fail("cannot rename '" + tmp + "' to '" + final +
                "': " + errnoText());
  if (!old.empty())
    removeDir(old);
  if (!fsyncPath(dir, error))
    return false;
  std::string latest = name + "\n";
  if (!writeFileAtomically(dir + "/latest", latest.data(), latest.size(),
                           error))
    return false;
  *outPath = final;
  return true;
}

bool save(const std::string &dir, const Checkpoint &ckpt, std::string *outPath,
          std::string *error) {
  std::string tmp = tmpDirOf(dir, ckpt.step);
  if (!makeTmpDir(dir, tmp, error))
    return false;
  auto fail = [&](const std::string &msg) {
    *error = msg;
    removeDir(tmp);
    return false;
  };
  // model.safetensors, streamed from the records.
  std::vector<safetensors::TensorEntry> entries;
  std::vector<uint8_t> header;
  std::string err;
  if (!layoutTensors(ckpt, &entries, &header, &err))
    return fail(err);
  std::vector<Chunk> chunks = {{header.data(), header.size()}};
  for (size_t i = 0; i < ckpt.states.size(); ++i) {
    if (ckpt.states[i].data.size() != entries[i].end - entries[i].begin)
      return fail("checkpoint: state '" + ckpt.states[i].name + "' has " +
                  std::to_string(ckpt.states[i].data.size()) +
                  " bytes, its shape needs " +
                  std::to_string(entries[i].end - entries[i].begin));
    chunks.push_back({ckpt.states[i].data.data(), ckpt.states[i].data.size()});
  }
  Written w{kModelFile, "", 0};
  if (!writeSynced(tmp + "/" + kModelFile, chunks, &w.bytes, &w.hash, &err))
    return fail(err);
  return completeSave(dir, tmp, ckpt, w, outPath, error);
}

bool layoutShardedSave(const Checkpoint &ckpt, ShardedSave *out,
                       std::string *error) {
  std::vector<safetensors::TensorEntry> entries;
  std::vector<uint8_t> header;
  if (!layoutTensors(ckpt, &entries, &header, error))
    return false;
  out->offsets.clear();
  for (const safetensors::TensorEntry &e : entries)
    out->offsets.push_back(header.size() + e.begin);
  out->fileBytes = header.size() + (entries.empty() ? 0 : entries.back().end);
  return true;
}

bool beginShardedSave(const std::string &dir, const Checkpoint &ckpt,
                      ShardedSave *out, std::string *error) {
  std::vector<safetensors::TensorEntry> entries;
  std::vector<uint8_t> header;
  if (!layoutShardedSave(ckpt, out, error) ||
      !layoutTensors(ckpt, &entries, &header, error))
    return false;
  out->dir = dir;
  out->tmp = tmpDirOf(dir, ckpt.step);
  out->tensorFile = out->tmp + "/" + kModelFile;
  if (!makeTmpDir(dir, out->tmp, error))
    return false;
  // The header now, the data as the ranks write it: a file of its final
  // size whose data bytes each rank fills with its shards.
  int fd = ::open(out->tensorFile.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  bool ok = fd >= 0 &&
            ::ftruncate(fd, static_cast<off_t>(out->fileBytes)) == 0 &&
            ::pwrite(fd, header.data(), header.size(), 0) ==
                static_cast<ssize_t>(header.size());
  if (fd >= 0)
    ok = ::close(fd) == 0 && ok;
  if (!ok) {
    *error = "cannot create '" + out->tensorFile + "': " + errnoText();
    removeDir(out->tmp);
    return false;
  }
  return true;
}

bool finishShardedSave(const ShardedSave &s, const Checkpoint &ckpt,
                       std::string *outPath, std::string *error) {
  // Every rank has written and synced its shards; hash the file in pieces.
  int fd = ::open(s.tensorFile.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open '" + s.tensorFile + "': " + errnoText();
    removeDir(s.tmp);
    return false;
  }
  Sha256 hash;
  std::vector<uint8_t> piece(size_t(16) << 20);
  uint64_t done = 0;
  std::string err;
  while (done < s.fileBytes) {
    size_t n = static_cast<size_t>(
        std::min<uint64_t>(piece.size(), s.fileBytes - done));
    if (!readAt(fd, s.tensorFile, done, piece.data(), n, &err)) {
      ::close(fd);
      *error = err;
      removeDir(s.tmp);
      return false;
    }
    hash.update(piece.data(), n);
    done += n;
  }
  ::close(fd);
  return completeSave(s.dir, s.tmp, ckpt,
                      Written{kModelFile, hash.finishHex(), s.fileBytes},
                      outPath, error);
}

bool writeShard(int fd, const ShardedSave &s, size_t state,
                const std::vector<int64_t> &global,
                const std::vector<int64_t> &local,
                const std::vector<int64_t> &offsets, size_t elemSize,
                const uint8_t *data, std::string *error) {
  bool ok = true;
  plan::forEachShardRow(
      global, local, offsets, [&](int64_t g, int64_t l, int64_t n) {
        if (!ok)
          return;
        size_t bytes = static_cast<size_t>(n) * elemSize;
        off_t at =
            static_cast<off_t>(s.offsets[state] + uint64_t(g) * elemSize);
        const uint8_t *p = data + size_t(l) * elemSize;
        size_t put = 0;
        while (ok && put < bytes) {
          ssize_t w =
              ::pwrite(fd, p + put, bytes - put, at + static_cast<off_t>(put));
          if (w < 0 && errno == EINTR)
            continue;
          if (w <= 0) {
            *error = "cannot write '" + s.tensorFile + "': " + errnoText();
            ok = false;
          } else {
            put += static_cast<size_t>(w);
          }
        }
      });
  return ok;
}

//===----------------------------------------------------------------------===//
// Verifying and loading
//===----------------------------------------------------------------------===//

bool verify(const std::string &stepDir, std::string *error, bool hashes) {
  std::string manifestPath = stepDir + "/" + kManifestFile;
  if (!exists(manifestPath)) {
    *error = "checkpoint '" + stepDir + "' is incomplete: '" + manifestPath +
             "' is missing (the save did not finish)";
    return false;
  }
  std::vector<uint8_t> bytes;
  std::string err;
  if (!readWholeFile(manifestPath, &bytes, &err)) {
    *error = "checkpoint '" + stepDir + "': " + err;
    return false;
  }
  json::Value manifest;
  const json::Value *files = nullptr;
  if (!json::parse(std::string(bytes.begin(), bytes.end()), &manifest, &err) ||
      !(files = json::get(manifest, "files")) || !files->is_array()) {
    *error = "checkpoint '" + stepDir + "': '" + manifestPath +
             "' is corrupted (" + (err.empty() ? "no file list" : err) + ")";
    return false;
  }
  bool sawModel = false, sawIndex = false;
  for (const json::Value &f : *files) {
    const json::Value *size = json::get(f, "bytes");
    const std::string *name = json::asString(json::get(f, "name")),
                      *sha = json::asString(json::get(f, "sha256"));
    int64_t expectBytes;
    if (!name || name->empty() || name->find('/') != std::string::npos ||
        (*name)[0] == '.' || !size || !json::asInt64(*size, &expectBytes) ||
        !sha) {
      *error = "checkpoint '" + stepDir + "': '" + manifestPath +
               "' has a malformed file entry";
      return false;
    }
    sawModel |= *name == kModelFile;
    sawIndex |= *name == kIndexFile;
    std::string path = stepDir + "/" + *name;
    int64_t actual = -1;
    struct stat st;
    if (hashes) {
      if (!readWholeFile(path, &bytes, &err)) {
        *error = "checkpoint '" + stepDir + "': '" + path +
                 "' listed in the manifest is missing or unreadable (" + err +
                 ")";
        return false;
      }
      actual = static_cast<int64_t>(bytes.size());
    } else if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      *error = "checkpoint '" + stepDir + "': '" + path +
               "' listed in the manifest is missing or not a file";
      return false;
    } else {
      actual = st.st_size;
    }
    if (actual != expectBytes) {
      *error = "checkpoint '" + stepDir + "': '" + path + "' is " +
               (actual < expectBytes ? "truncated" : "corrupted") + ": " +
               std::to_string(actual) + " bytes, the manifest says " +
               std::to_string(expectBytes);
      return false;
    }
    if (hashes && Sha256::hex(bytes.data(), bytes.size()) != *sha) {
      *error = "checkpoint '" + stepDir + "': '" + path +
               "' is corrupted: its SHA-256 does not match the manifest";
      return false;
    }
  }
  if (!sawModel || !sawIndex) {
    *error = "checkpoint '" + stepDir + "': '" + manifestPath +
             "' does not list " + (sawModel ? kIndexFile : kModelFile);
    return false;
  }
  return true;
}

/// Reads the safetensors header of the open file `fd` (`size` bytes).
static bool readHeader(int fd, const std::string &path, uint64_t size,
                       safetensors::Header *header, std::string *error) {
  uint8_t prefix[8];
  if (size < 8) {
    *error = "'" + path + "' is too short for a safetensors file";
    return false;
  }
  if (!readAt(fd, path, 0, prefix, 8, error))
    return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = n << 8 | prefix[i];
  // A header longer than the file is decodeHeader's to report (it reads
  // what there is); one of more than 100 MB (safetensors' own limit) is
  // refused before any of it is read.
  if (n > (uint64_t(100) << 20)) {
    *error = "'" + path + "' announces a safetensors header of " +
             std::to_string(n) + " bytes, more than the format's 100 MB";
    return false;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(std::min(size, 8 + n)));
  if (!readAt(fd, path, 0, bytes.data(), bytes.size(), error))
    return false;
  return safetensors::decodeHeader(bytes.data(), bytes.size(), size, header,
                                   error);
}

bool readShard(int fd, const Checkpoint &c, const StateRecord &r,
               const std::vector<int64_t> &local,
               const std::vector<int64_t> &offsets, uint8_t *dst,
               uint64_t *bytesRead, std::string *error) {
  if (!cleave::readShard(fd, c.tensorFile, r.fileOffset, r.shape, local,
                         offsets, dtypeSize(r.dtype), dst, bytesRead, error)) {
    *error = "checkpoint tensor '" + r.name + "': " + *error;
    return false;
  }
  return true;
}

bool load(const std::string &stepDir, Checkpoint *out, std::string *error,
          const LoadOptions &options) {
  if (!verify(stepDir, error, options.verifyHashes))
    return false;
  std::string indexPath = stepDir + "/" + kIndexFile;
  std::string modelPath = stepDir + "/" + kModelFile;
  std::vector<uint8_t> bytes;
  std::string err;
  json::Value index;
  if (!readWholeFile(indexPath, &bytes, &err) ||
      !json::parse(std::string(bytes.begin(), bytes.end()), &index, &err)) {
    *error = "checkpoint '" + indexPath + "': " + err;
    return false;
  }
  Checkpoint c;
  const json::Value *v = json::get(index, "step");
  const json::Value *tensors = json::get(index, "tensors");
  if (!v || !json::asInt64(*v, &c.step) || c.step < 0 ||
      !(v = json::get(index, "rng_seed")) || !v->is_number_integer() ||
      !tensors || !tensors->is_array()) {
    *error = "checkpoint '" + indexPath +
             "': missing or bad step, rng_seed or tensors";
    return false;
  }
  // The seed is a u64 (a negative one wraps, as strtoull does).
  c.seed = v->is_number_unsigned() ? v->get<uint64_t>()
                                   : static_cast<uint64_t>(v->get<int64_t>());
  if (const std::string *o = json::asString(json::get(index, "optimizer")))
    c.optimizer = *o;
  if ((v = json::get(index, "data_position")) &&
      (v = json::get(*v, "samples_consumed")))
    json::asInt64(*v, &c.samplesConsumed);

  safetensors::Header header;
  if (options.readData) {
    if (!readWholeFile(modelPath, &bytes, &err)) {
      *error = "checkpoint: " + err;
      return false;
    }
    if (!safetensors::decodeHeader(bytes.data(), bytes.size(), bytes.size(),
                                   &header, &err)) {
      *error = "checkpoint '" + modelPath + "': " + err;
      return false;
    }
  } else {
    int fd = ::open(modelPath.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    bool ok = fd >= 0 && ::fstat(fd, &st) == 0 &&
              readHeader(fd, modelPath, st.st_size, &header, &err);
    if (fd < 0)
      err = "cannot open '" + modelPath + "': " + errnoText();
    if (fd >= 0)
      ::close(fd);
    if (!ok) {
      *error = "checkpoint '" + modelPath + "': " + err;
      return false;
    }
  }
  c.tensorFile = modelPath;
  for (const json::Value &t : *tensors) {
    StateRecord r;
    const std::string *name = json::asString(json::get(t, "name")),
                      *kind = json::asString(json::get(t, "kind")),
                      *param = json::asString(json::get(t, "parameter")),
                      *slot = json::asString(json::get(t, "slot"));
    if (!name) {
      *error = "checkpoint '" + indexPath + "': a tensor entry has no name";
      return false;
    }
    r.name = *name;
    r.kind = kind && *kind == "optimizer_state" ? StateKind::OptimizerState
             : kind && *kind == "buffer"        ? StateKind::Buffer
                                                : StateKind::Parameter;
    r.parameter = param ? *param : r.name;
    r.slot = slot ? *slot : "";
    auto it = std::find_if(
        header.tensors.begin(), header.tensors.end(),
        [&](const safetensors::TensorEntry &e) { return e.name == r.name; });
    if (it == header.tensors.end()) {
      *error = "checkpoint '" + modelPath + "' has no tensor '" + r.name +
               "' listed in its index";
      return false;
    }
    r.dtype = it->dtype;
    r.shape = it->shape;
    r.fileOffset = header.dataStart + it->begin;
    if (options.readData) {
      const uint8_t *p = bytes.data() + header.dataStart;
      r.data.assign(p + it->begin, p + it->end);
    }
    c.states.push_back(std::move(r));
  }
  *out = std::move(c);
  return true;
}

/// N of a name "step-N", or -1.
static int64_t stepOf(const std::string &name) {
  if (name.compare(0, 5, "step-") != 0 || name.size() == 5 || name.size() > 23)
    return -1;
  int64_t n = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i])))
      return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

bool findResumePoint(const std::string &path, std::string *stepDir,
                     std::vector<std::string> *notes, std::string *error) {
  if (!isDirectory(path)) {
    *error = "cannot resume from '" + path + "': not a directory";
    return false;
  }
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (stepOf(base) >= 0 || exists(path + "/" + kManifestFile) ||
      exists(path + "/" + kIndexFile) || exists(path + "/" + kModelFile)) {
    if (!verify(path, error))
      return false;
    *stepDir = path;
    return true;
  }
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    int64_t n = stepOf(name);
    if (n >= 0 && isDirectory(path + "/" + name))
      found.emplace_back(n, path + "/" + name);
  }
  std::sort(found.rbegin(), found.rend());
  std::string reasons;
  for (const auto &f : found) {
    std::string err;
    if (verify(f.second, &err)) {
      *stepDir = f.second;
      return true;
    }
    notes->push_back("skipping " + err);
    reasons += "\n  " + err;
  }
  *error = "cannot resume from '" + path +
           "': it holds no complete "
           "checkpoint (no step-<N> directory with a valid manifest)" +
           reasons;
  return false;
}

bool hasCompleteCheckpoint(const std::string &dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string(), err;
    if (stepOf(name) >= 0 && verify(dir + "/" + name, &err, /*hashes=*/false))
      return true;
  }
  return false;
}

bool writeSafetensorsFile(
    const std::string &path,
    const std::vector<safetensors::HostTensorRef> &tensors,
    const safetensors::Metadata &metadata, std::string *error) {
  std::vector<uint8_t> image;
  if (!safetensors::encode(tensors, metadata, &image, error))
    return false;
  return writeFileAtomically(path, image.data(), image.size(), error);
}

} // namespace cleave::checkpoint
