//===- Checkpoint.h - Training checkpoints on disk -------------*- C++ -*-===//
//
// A checkpoint is a directory DIR/step-<N>/ holding
//   model.safetensors  every state tensor: parameters by their names,
//                      optimizer state as "<parameter>.<slot>"
//   index.json         step, optimizer, rng seed, data position, and per
//                      tensor its global name, kind, slot, dtype and shape
//   manifest.json      written last: size and SHA-256 of every other file
// It is written into DIR/.tmp-step-<N>-<pid>/ (each file fsync'ed, then the
// directory), renamed to step-<N>, DIR fsync'ed, and DIR/latest updated
// atomically. A directory without a manifest, or whose files do not match
// it, is an incomplete or damaged checkpoint and is never loaded.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CHECKPOINT_H
#define CLEAVE_CHECKPOINT_H

#include "cleave/PlanFormat.h"
#include "cleave/Safetensors.h"

#include <string>
#include <vector>

namespace cleave::checkpoint {

/// One state tensor's saved value.
struct StateRecord {
  std::string name; ///< Global name: parameter, or "<parameter>.<slot>".
  plan::StateKind kind = plan::StateKind::Parameter;
  std::string parameter, slot;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
  /// The global tensor, unless loaded without data (LoadOptions::readData
  /// false): then empty, and its bytes start at `fileOffset` of
  /// Checkpoint::tensorFile (see readShard).
  std::vector<uint8_t> data;
  uint64_t fileOffset = 0;
};

struct Checkpoint {
  int64_t step = 0;  ///< Training steps completed.
  uint64_t seed = 0; ///< The data-order seed of the run.
  std::string optimizer;
  int64_t samplesConsumed = 0; ///< Data position: dataset rows used so far.
  std::vector<StateRecord> states;
  std::string tensorFile; ///< The model.safetensors loaded from.
};

/// Writes `ckpt` atomically as dir/step-<step>/ (creating `dir` if needed)
/// and points dir/latest at it. *outPath is the final directory.
bool save(const std::string &dir, const Checkpoint &ckpt, std::string *outPath,
          std::string *error);

/// A checkpoint written by all ranks together, in save()'s format: rank 0
/// lays out the tensor file in a temporary directory (beginShardedSave),
/// every rank writes the bytes of the shards it owns into it (writeShard;
/// disjoint ranges of one file, so the directory must be shared), and once
/// all have synced, rank 0 hashes it and completes the checkpoint
/// (finishShardedSave). No rank ever holds a global tensor.
struct ShardedSave {
  std::string dir, tmp, tensorFile;
  std::vector<uint64_t> offsets; ///< Each state's data offset in the file.
  uint64_t fileBytes = 0;
};
/// The offsets and size alone (any rank): from the states' names, dtypes
/// and shapes; their data is not needed.
bool layoutShardedSave(const Checkpoint &ckpt, ShardedSave *out,
                       std::string *error);
bool beginShardedSave(const std::string &dir, const Checkpoint &ckpt,
                      ShardedSave *out, std::string *error);
/// Writes the box of shape `local` at `offsets` of state `state` (global
/// shape `global`) from the row-major `data` into the open tensor file.
bool writeShard(int fd, const ShardedSave &s, size_t state,
                const std::vector<int64_t> &global,
                const std::vector<int64_t> &local,
                const std::vector<int64_t> &offsets, size_t elemSize,
                const uint8_t *data, std::string *error);
bool finishShardedSave(const ShardedSave &s, const Checkpoint &ckpt,
                       std::string *outPath, std::string *error);

/// Checks that `stepDir` is complete: manifest.json present and well formed,
/// and every file it lists present with its size and (with `hashes`) its
/// SHA-256, which means reading every byte. The error names the file at
/// fault.
bool verify(const std::string &stepDir, std::string *error, bool hashes = true);

struct LoadOptions {
  /// Check the files' SHA-256s (else only their sizes); false when the
  /// caller has just verified the checkpoint, or another rank has.
  bool verifyHashes = true;
  /// Read every tensor's bytes into StateRecord::data; false reads only the
  /// index and the safetensors header, for readShard.
  bool readData = true;
};

/// verify(), then reads index.json and model.safetensors.
bool load(const std::string &stepDir, Checkpoint *out, std::string *error,
          const LoadOptions &options = {});

/// Reads the box of shape `local` at `offsets` of record `r` (global shape
/// r.shape) from the checkpoint's tensor file, open as `fd`, into `dst`:
/// only that shard's bytes. Adds them to *bytesRead.
bool readShard(int fd, const Checkpoint &c, const StateRecord &r,
               const std::vector<int64_t> &local,
               const std::vector<int64_t> &offsets, uint8_t *dst,
               uint64_t *bytesRead, std::string *error);

/// Resolves a --resume path: a checkpoint directory itself (refused if it is
/// incomplete), or a directory of step-<N>/ checkpoints, of which the newest
/// complete one is chosen; each newer incomplete one adds a line to *notes.
bool findResumePoint(const std::string &path, std::string *stepDir,
                     std::vector<std::string> *notes, std::string *error);

/// Whether `dir` holds a step-<N> checkpoint whose files all have the
/// sizes its manifest says (their SHA-256s are not read).
bool hasCompleteCheckpoint(const std::string &dir);

/// Writes a safetensors file atomically (for --export-safetensors).
bool writeSafetensorsFile(
    const std::string &path,
    const std::vector<safetensors::HostTensorRef> &tensors,
    const safetensors::Metadata &metadata, std::string *error);

} // namespace cleave::checkpoint

#endif // CLEAVE_CHECKPOINT_H
