// SHA-256 through OpenSSL 3 EVP (the one implementation every component
// uses: files_changed, the fake workspace, the image digest, artifacts).
// Move-only owner of one EVP_MD_CTX.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "airlock/core/error.h"

namespace airlock::sys {

class Sha256 {
 public:
  Sha256();  // aborts only if OpenSSL cannot provide SHA-256 at all (a bug)
  Sha256(Sha256&&) noexcept = default;
  Sha256& operator=(Sha256&&) noexcept = default;

  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Lowercase hex of the digest; the object must not be updated afterwards.
  std::string finishHex();

 private:
  struct CtxFree {
    void operator()(void* ctx) const noexcept;
  };
  std::unique_ptr<void, CtxFree> ctx_;
};

// One-shot digest of bytes in memory, lowercase hex.
std::string sha256Hex(std::string_view data);

}  // namespace airlock::sys
