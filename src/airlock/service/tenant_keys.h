// Tenant API keys (docs/serve.md, "Tenants and keys"): the credentials a
// tenant presents instead of the operator's service token. A tenant key
// acts for its own tenant only; the service token stays the operator's key
// and may name any tenant. The routes' rules are the gateway's
// (gateway/api/routes.h, "Tenants"); this is the table of keys.
//
// The operator keeps the keys in a file (the `tenant_keys_file` setting),
// one key per line, never the key itself, only its SHA-256:
//
//   # comment lines and blank lines are skipped
//   <tenant_id> sha256:<64 lower-case hex digits>
//
// fields separated by spaces or tabs; a tenant may have several lines (two
// keys while one is rotated out), a digest may appear once. The tenant id is
// a platform identifier (core/ids.h). `airlock tenant-key create <tenant>`
// mints a key and prints it once, with its line. A key is a bearer token:
// 32 bytes of the kernel's CSPRNG, so one SHA-256 of it is enough (there is
// nothing to guess from the digest that is cheaper than the key).
//
// Looking a key up hashes the token once and compares it with every digest
// in constant time (CRYPTO_memcmp, no early exit), so the answer time does
// not depend on which entry, if any, matched.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"

namespace airlock::service {

// The most bytes a key file may hold (a file past it is refused, not read
// in part).
inline constexpr std::size_t kMaxTenantKeysFileBytes = std::size_t{1} << 20;

// The prefix of every minted key ("alk_" and 64 hex digits), so that secret
// scanners and people can tell one apart from other tokens.
inline constexpr std::string_view kTenantKeyPrefix = "alk_";

class TenantKeys {
 public:
  // No keys: every lookup is nullopt.
  TenantKeys() = default;

  // Parses a key file's text. `source` names it in messages ("tenant keys
  // file \"/etc/airlock/keys\""). Any bytes are data: an error is
  // ConfigurationError naming the source, the 1-based line and what is wrong
  // with it, e.g.
  //   tenant keys file "k": line 3: the second field is not sha256: and 64
  //   lower-case hex digits ...
  // and never quotes the line's content (a key pasted in by mistake is not
  // repeated into a log).
  static Result<TenantKeys> parse(std::string_view text, std::string_view source);

  // Reads and parses the file at `path`: it must be a regular file (a
  // symlink is not followed), owned by this process's user, and neither
  // readable nor writable by group or others (0600 or 0400), and at most
  // kMaxTenantKeysFileBytes. ConfigurationError naming the path otherwise.
  static Result<TenantKeys> loadFile(const std::string& path);

  // The tenant whose key `token` is, or nullopt. Constant time in the token's
  // digest over every entry.
  std::optional<std::string> tenantOf(std::string_view token) const;

  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }

 private:
  struct Entry {
    std::string tenant_id;
    std::string digest_hex;  // 64 lower-case hex digits
  };
  std::vector<Entry> entries_;
};

// The file line that makes `key` a key of `tenant_id`:
// "<tenant_id> sha256:<hex of SHA-256(key)>". The key is not in it.
std::string tenantKeyLine(std::string_view tenant_id, std::string_view key);

}  // namespace airlock::service
