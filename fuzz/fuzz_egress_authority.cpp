// The egress authority parser and the proxy's request-head parser:
// total on any bytes; an accepted authority is canonical and re-parses to
// itself; an accepted CONNECT head carries exactly the parsed target; what
// refuseEarly refuses, the head parser refuses too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "airlock/egress/authority.h"
#include "airlock/egress/request_head.h"

namespace {

void checkCanonical(const airlock::egress::Authority& a) {
  if (a.host.empty() || a.host.size() > 253 || a.host.back() == '.' || a.port == 0) std::abort();
  for (char c : a.host) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) std::abort();
  }
  const auto last =
      a.host.substr(a.host.rfind('.') == std::string::npos ? 0 : a.host.rfind('.') + 1);
  if (airlock::egress::isNumericLabel(last)) std::abort();
  const auto again = airlock::egress::parseAuthority(a.host + ":" + std::to_string(a.port));
  if (!again || !(*again == a)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto a = airlock::egress::parseAuthority(text)) checkCanonical(*a);
  if (auto a = airlock::egress::parseAuthority(text, 80)) checkCanonical(*a);
  if (auto h = airlock::egress::parseHostName(text)) {
    if (h->empty() || h->back() == '.') std::abort();
  }
  if (auto head = airlock::egress::parseRequestHead(text)) {
    checkCanonical(head->target);
  }
  // refuseEarly is sound: bytes it refuses make the head the proxy would
  // read from them (up to the first empty line) malformed, whatever follows.
  if (auto early = airlock::egress::refuseEarly(text)) {
    if (early->reason != airlock::egress::Reason::kMalformedRequest) std::abort();
    std::string head = std::string(text) + "\r\n\r\n";
    head.resize(head.find("\r\n\r\n") + 4);
    const auto parsed = airlock::egress::parseRequestHead(head);
    if (parsed || parsed.error().reason != airlock::egress::Reason::kMalformedRequest) std::abort();
  }
  // The same bytes as a request-target inside a well-formed head (bytes
  // that end the request line would make them something else).
  if (text.find_first_of(std::string_view("\r\n ", 3)) != std::string_view::npos) return 0;
  const std::string framed = "CONNECT " + std::string(text) + " HTTP/1.1\r\n\r\n";
  if (auto head = airlock::egress::parseRequestHead(framed)) {
    const auto direct = airlock::egress::parseAuthority(text);
    if (!direct || !(*direct == head->target)) std::abort();
  }
  return 0;
}
