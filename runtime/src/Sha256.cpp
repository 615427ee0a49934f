//===- Sha256.cpp - SHA-256 over OpenSSL's EVP digest API -----------------===//

#include "cleave/Sha256.h"

#include <openssl/evp.h>

#include <cstring>

namespace cleave {

void Sha256::FreeContext::operator()(evp_md_ctx_st *ctx) const {
  EVP_MD_CTX_free(ctx);
}

Sha256::Sha256() : ctx(EVP_MD_CTX_new()) {
  ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1;
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256 &&) noexcept = default;
Sha256 &Sha256::operator=(Sha256 &&) noexcept = default;

void Sha256::update(const void *data, size_t size) {
  if (ok && size)
    ok = EVP_DigestUpdate(ctx.get(), data, size) == 1;
}

bool Sha256::finishChecked(uint8_t out[32]) {
  unsigned length = 0;
  bool done =
      ok && EVP_DigestFinal_ex(ctx.get(), out, &length) == 1 && length == 32;
  ok = false; // Finished: no more updates.
  if (!done)
    std::memset(out, 0, 32);
  return done;
}

void Sha256::finish(uint8_t out[32]) { finishChecked(out); }

static std::string hexOf(const uint8_t digest[32]) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(64, '0');
  for (int i = 0; i < 32; ++i) {
    s[2 * i] = kDigits[digest[i] >> 4];
    s[2 * i + 1] = kDigits[digest[i] & 15];
  }
  return s;
}

std::string Sha256::finishHex() {
  uint8_t digest[32];
  return finishChecked(digest) ? hexOf(digest) : std::string();
}

std::string Sha256::hex(const void *data, size_t size) {
  uint8_t digest[32];
  unsigned length = 0;
  if (EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr) != 1 ||
      length != 32)
    return "";
  return hexOf(digest);
}

} // namespace cleave
