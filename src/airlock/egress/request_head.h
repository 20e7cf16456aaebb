// The proxy's request head: what a client on the sandbox side may send
// before a tunnel exists: CONNECT only, so no second path (plain-HTTP
// absolute-form, routing on Host) goes around the policy.
//
// Only `CONNECT host:port HTTP/1.x` opens a tunnel. Everything else is
// refused with a reason and never dialled:
//   origin-form ("GET /x")            origin_form_not_supported
//   https:// absolute-form            https_absolute_form
//   http:// absolute-form             the policy's refusal for host:port (80 by
//                                     default), else absolute_form_not_supported
//   any other scheme                  scheme_not_allowed
//   anything unparsable               malformed_request / malformed_authority
// A Host header never chooses the destination; if present it must name the
// request-target (port defaulting to the target's), else host_header_mismatch.
// Strict HTTP/1.1 framing: CRLF line ends, single spaces in the request line,
// no obs-fold, no whitespace before ':', at most one Host, head at most
// kMaxRequestHead bytes. refuseEarly() applies the same rules to a head
// still arriving.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "airlock/egress/authority.h"
#include "airlock/egress/decision.h"

namespace airlock::egress {

inline constexpr std::size_t kMaxRequestHead = 8192;

enum class RequestForm : std::uint8_t { kConnect, kAbsoluteHttp };

struct RequestHead {
  RequestForm form;
  Authority target;
};

struct RequestRefusal {
  Reason reason;
  std::string detail;
};

// `head` is the bytes up to and including the first "\r\n\r\n".
tl::expected<RequestHead, RequestRefusal> parseRequestHead(std::string_view head);

// The bytes a client has sent so far, before its head is complete: a
// refusal (always malformed_request, answered 400) as soon as they prove
// the connection is not an HTTP/1.x request with CRLF line ends, so that a
// SOCKS client (first byte 0x04 or 0x05), a TLS client (0x16) or one that
// ends lines with a bare LF is told at once instead of waiting out
// head_timeout. Refused: a first byte that cannot begin a method, a bare
// CR or LF, a NUL, a complete request line or header line that
// parseRequestHead refuses, and a line still arriving that no ending can
// repair (a method byte, a third space, a version that is not becoming
// HTTP/1.0 or HTTP/1.1, a folded or nameless header line, a control byte
// in a value). nullopt while the bytes can still become a head that
// parses. Bytes after a complete head's empty line are not looked at.
// Sound: whenever this refuses, parseRequestHead refuses every head that
// begins with these bytes, with malformed_request.
std::optional<RequestRefusal> refuseEarly(std::string_view received);

// The whole front half of the proxy: parse the head, then decide. CONNECT
// goes through decide(); absolute-form http through decideNameOnly() and is
// refused even when the policy would allow it. Never throws.
Decision decideRequest(const Policy& policy, std::string_view head, Resolver& resolver,
                       const AddressClassifier& classifier) noexcept;

// HTTP status for a refusal: 400 for malformed input and Host mismatch,
// 403 for policy and address refusals, 405 for non-CONNECT forms, 502 for
// DNS failures, 500 for internal errors; 200 for kAllowed.
int httpStatusFor(Reason reason) noexcept;

}  // namespace airlock::egress
