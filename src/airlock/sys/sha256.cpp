#include "airlock/sys/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>
#include <span>

#include "airlock/core/encoding.h"

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
  return hexLower(std::span<const unsigned char>(digest, length));
}

std::string sha256Hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finishHex();
}

}  // namespace airlock::sys
