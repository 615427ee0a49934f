//===- Sha256.h - SHA-256 for checkpoint manifests --------------*- C++ -*-===//
//
// SHA-256 digests of checkpoint files, computed by OpenSSL's libcrypto (the
// EVP digest API); this header keeps OpenSSL's types out of its users.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHA256_H
#define CLEAVE_SHA256_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct evp_md_ctx_st; // OpenSSL's EVP_MD_CTX.

namespace cleave {

/// Incremental SHA-256. Should libcrypto fail (it cannot allocate its
/// context), the digest is all zero and its hex the empty string, which
/// matches no file's hash.
class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(Sha256 &&) noexcept;
  Sha256 &operator=(Sha256 &&) noexcept;

  void update(const void *data, size_t size);
  /// The 32-byte digest; the object must not be updated afterwards.
  void finish(uint8_t out[32]);
  /// Lower-case hex of the digest.
  std::string finishHex();

  /// Lower-case hex digest of `size` bytes.
  static std::string hex(const void *data, size_t size);

private:
  /// finish(), and whether libcrypto computed the digest.
  bool finishChecked(uint8_t out[32]);
  struct FreeContext {
    void operator()(evp_md_ctx_st *ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, FreeContext> ctx;
  bool ok = false;
};

} // namespace cleave

#endif // CLEAVE_SHA256_H
