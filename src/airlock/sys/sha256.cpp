#include "airlock/sys/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace airlock::sys {

void Sha256::CtxFree::operator()(void* ctx) const noexcept {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx));
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_.get()), EVP_sha256(), nullptr) != 1)
    std::abort();
}

void Sha256::update(const void* data, std::size_t size) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_.get()), data, size) != 1) std::abort();
}

std::string Sha256::finishHex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_.get()), digest, &length) != 1) std::abort();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string sha256Hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finishHex();
}

}  // namespace airlock::sys
