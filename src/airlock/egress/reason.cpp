#include "airlock/egress/reason.h"

namespace airlock::egress {

std::string_view reasonName(Reason reason) noexcept {
  switch (reason) {
    case Reason::kAllowed:
      return "allowed";
    case Reason::kMalformedRequest:
      return "malformed_request";
    case Reason::kMalformedAuthority:
      return "malformed_authority";
    case Reason::kNonAsciiHost:
      return "non_ascii_host";
    case Reason::kIpLiteral:
      return "ip_literal";
    case Reason::kOriginFormNotSupported:
      return "origin_form_not_supported";
    case Reason::kHttpsAbsoluteForm:
      return "https_absolute_form";
    case Reason::kAbsoluteFormNotSupported:
      return "absolute_form_not_supported";
    case Reason::kHostHeaderMismatch:
      return "host_header_mismatch";
    case Reason::kSchemeNotAllowed:
      return "scheme_not_allowed";
    case Reason::kModeDeny:
      return "mode_deny";
    case Reason::kHostNotAllowed:
      return "host_not_allowed";
    case Reason::kPortNotAllowed:
      return "port_not_allowed";
    case Reason::kDnsError:
      return "dns_error";
    case Reason::kDnsNoAnswer:
      return "dns_no_answer";
    case Reason::kResolvedDenied:
      return "resolved_denied";
    case Reason::kRedirectDenied:
      return "redirect_denied";
    case Reason::kInternalError:
      return "internal_error";
  }
  return "internal_error";
}

}  // namespace airlock::egress
