//===- Sha256.h - SHA-256 (FIPS 180-4) for checkpoint manifests -*- C++ -*-===//

#ifndef CLEAVE_SHA256_H
#define CLEAVE_SHA256_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace cleave {

/// Incremental SHA-256.
class Sha256 {
public:
  Sha256();
  void update(const void *data, size_t size);
  /// The 32-byte digest; the object must not be updated afterwards.
  void finish(uint8_t out[32]);
  /// Lower-case hex of the digest.
  std::string finishHex();

  /// Lower-case hex digest of `size` bytes.
  static std::string hex(const void *data, size_t size);

private:
  void block(const uint8_t *p);
  uint32_t h[8];
  uint8_t buffer[64];
  size_t buffered = 0;
  uint64_t totalBytes = 0;
};

} // namespace cleave

#endif // CLEAVE_SHA256_H
