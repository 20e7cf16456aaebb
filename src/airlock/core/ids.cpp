#include "airlock/core/ids.h"

#include <cstdint>
#include <cstdlib>

#include "airlock/core/encoding.h"
#include "airlock/sys/random.h"

namespace airlock {
namespace {

// Fills `out` from the kernel CSPRNG. An id built from weak randomness is
// guessable, so when the kernel cannot supply entropy at all the process
// stops rather than handing one out.
void fillRandom(unsigned char* out, std::size_t size) {
  if (!sys::fillRandom(out, size)) std::abort();
}

}  // namespace

std::string newUuidV7(Timestamp now) {
  // 48-bit big-endian Unix milliseconds (RFC 9562 section 5.7); times before
  // the epoch are not representable and are written as zero.
  const std::int64_t ms_signed = now.time_since_epoch().count();
  const std::uint64_t ms = ms_signed < 0 ? 0 : static_cast<std::uint64_t>(ms_signed);

  unsigned char bytes[16];
  for (int i = 0; i < 6; ++i) bytes[i] = static_cast<unsigned char>(ms >> (40 - 8 * i));
  fillRandom(bytes + 6, 10);
  bytes[6] = static_cast<unsigned char>(0x70 | (bytes[6] & 0x0F));  // version 7
  bytes[8] = static_cast<unsigned char>(0x80 | (bytes[8] & 0x3F));  // variant 10

  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    appendHexByte(out, bytes[i]);
  }
  return out;
}

bool isNodeName(std::string_view name) noexcept {
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

std::string newEnvironmentId(std::string_view node, Timestamp now) {
  std::string uuid = newUuidV7(now);
  if (node.empty()) return uuid;
  return std::string(node) + "." + uuid;
}

std::optional<std::string_view> environmentIdNode(std::string_view id) noexcept {
  const std::size_t dot = id.find('.');
  if (dot == std::string_view::npos)
    return isUuid(id) ? std::optional<std::string_view>(std::string_view()) : std::nullopt;
  const std::string_view node = id.substr(0, dot);
  if (!isNodeName(node) || !isUuid(id.substr(dot + 1))) return std::nullopt;
  return node;
}

bool isPlatformIdentifier(std::string_view text) noexcept {
  return !text.empty() && text.size() <= kMaxPlatformIdBytes &&
         text.find_first_not_of(
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") ==
             std::string_view::npos;
}

bool isUuid(std::string_view text) noexcept {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!isLowerHexDigit(c)) {
      return false;
    }
  }
  return true;
}

}  // namespace airlock
