#include "airlock/service/tenant_keys.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>

#include "airlock/core/encoding.h"
#include "airlock/core/ids.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::service {
namespace {

constexpr std::string_view kDigestPrefix = "sha256:";
constexpr std::size_t kDigestHexDigits = 64;

Error configError(std::string context) {
  return Error{ErrorCode::kConfigurationError, 0, std::move(context)};
}

bool isBlank(char c) {
  return c == ' ' || c == '\t';
}

bool isLowerHex(std::string_view text) {
  for (const char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The blank-separated fields of one line, a trailing CR dropped (a file
// written on another system).
std::vector<std::string_view> fieldsOf(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && isBlank(line[i])) ++i;
    std::size_t j = i;
    while (j < line.size() && !isBlank(line[j])) ++j;
    if (j > i) fields.push_back(line.substr(i, j - i));
    i = j;
  }
  return fields;
}

}  // namespace

Result<TenantKeys> TenantKeys::parse(std::string_view text, std::string_view source) {
  TenantKeys keys;
  std::map<std::string, std::size_t, std::less<>> line_of_digest;
  std::size_t number = 0;
  for (std::size_t i = 0; i <= text.size();) {
    std::size_t end = text.find('\n', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(i, end - i);
    i = end + 1;
    ++number;
    const std::string at = std::string(source) + ": line " + std::to_string(number) + ": ";
    const auto fields = fieldsOf(line);
    if (fields.empty() || fields.front().front() == '#') continue;
    if (fields.size() != 2)
      return tl::unexpected(
          configError(at + "expected two fields, <tenant_id> sha256:<hex>, but found " +
                      std::to_string(fields.size()) + (fields.size() == 1 ? " field" : " fields")));
    const std::string_view tenant = fields[0];
    const std::string_view digest = fields[1];
    // No field is quoted in a message: a key pasted in by mistake, in either
    // place, must not reach a log.
    if (!isPlatformIdentifier(tenant))
      return tl::unexpected(configError(
          at + "the first field, the tenant id, is not 1-128 characters of A-Z a-z 0-9 . _ : -"));
    if (digest.substr(0, kDigestPrefix.size()) != kDigestPrefix ||
        digest.size() != kDigestPrefix.size() + kDigestHexDigits ||
        !isLowerHex(digest.substr(kDigestPrefix.size())))
      return tl::unexpected(configError(
          at +
          "the second field is not sha256: and 64 lower-case hex digits (the file holds a "
          "key's digest, never the key: airlock tenant-key create prints the line)"));
    std::string hex(digest.substr(kDigestPrefix.size()));
    if (auto [it, fresh] = line_of_digest.emplace(hex, number); !fresh)
      return tl::unexpected(configError(at + "this digest is already on line " +
                                        std::to_string(it->second) +
                                        " (a key acts for one tenant, and is listed once)"));
    keys.entries_.push_back(Entry{std::string(tenant), std::move(hex)});
  }
  return keys;
}

Result<TenantKeys> TenantKeys::loadFile(const std::string& path) {
  const std::string source = "tenant keys file " + quoteForMessage(path);
  sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
  if (!fd.valid())
    return tl::unexpected(
        Error{ErrorCode::kConfigurationError, errno, source + " cannot be opened"});
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return tl::unexpected(Error{ErrorCode::kConfigurationError, errno, source + " cannot be read"});
  if (!S_ISREG(st.st_mode)) return tl::unexpected(configError(source + " is not a regular file"));
  if (st.st_uid != ::geteuid())
    return tl::unexpected(configError(source + " is owned by uid " + std::to_string(st.st_uid) +
                                      ", not this service's (" + std::to_string(::geteuid()) +
                                      ")"));
  if ((st.st_mode & 077) != 0) {
    std::string mode = "0000";  // the permission bits in octal, as chmod takes them
    for (int digit = 3, bits = static_cast<int>(st.st_mode & 07777); digit >= 0;
         --digit, bits >>= 3)
      mode[static_cast<std::size_t>(digit)] = static_cast<char>('0' + (bits & 7));
    return tl::unexpected(configError(source + " has mode " + mode +
                                      ": group and others must have no access (chmod 600)"));
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxTenantKeysFileBytes)
    return tl::unexpected(configError(source + " is larger than " +
                                      std::to_string(kMaxTenantKeysFileBytes) + " bytes"));
  std::string text(kMaxTenantKeysFileBytes + 1, '\0');
  const ssize_t got = sys::readFull(fd.get(), text.data(), text.size());
  if (got < 0)
    return tl::unexpected(Error{ErrorCode::kConfigurationError, errno, source + " cannot be read"});
  text.resize(static_cast<std::size_t>(got));
  if (text.size() > kMaxTenantKeysFileBytes)
    return tl::unexpected(configError(source + " is larger than " +
                                      std::to_string(kMaxTenantKeysFileBytes) + " bytes"));
  return parse(text, source);
}

std::optional<std::string> TenantKeys::tenantOf(std::string_view token) const {
  if (token.empty() || entries_.empty()) return std::nullopt;
  const std::string digest = sys::sha256Hex(token);
  const Entry* found = nullptr;
  for (const Entry& entry : entries_) {
    // Every entry is compared, whatever matched before.
    const bool same = CRYPTO_memcmp(entry.digest_hex.data(), digest.data(), kDigestHexDigits) == 0;
    found = same ? &entry : found;
  }
  if (found == nullptr) return std::nullopt;
  return found->tenant_id;
}

std::string tenantKeyLine(std::string_view tenant_id, std::string_view key) {
  return std::string(tenant_id) + " " + std::string(kDigestPrefix) + sys::sha256Hex(key);
}

}  // namespace airlock::service
