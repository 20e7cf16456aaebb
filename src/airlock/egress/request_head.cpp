#include "airlock/egress/request_head.h"

#include <optional>
#include <vector>

namespace airlock::egress {
namespace {

tl::unexpected<RequestRefusal> refuse(Reason r, std::string detail) {
  return tl::unexpected(RequestRefusal{r, std::move(detail)});
}

bool isTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trimOws(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

}  // namespace

tl::expected<RequestHead, RequestRefusal> parseRequestHead(std::string_view head) {
  if (head.size() > kMaxRequestHead)
    return refuse(Reason::kMalformedRequest, "request head too large");
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n" ||
      head.find("\r\n\r\n") != head.size() - 4)
    return refuse(Reason::kMalformedRequest, "request head must end with one empty line");

  // Split into CRLF-terminated lines; a bare CR or LF anywhere is refused.
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    if (c == '\r') {
      if (i + 1 >= head.size() || head[i + 1] != '\n')
        return refuse(Reason::kMalformedRequest, "bare CR in request head");
      lines.push_back(head.substr(start, i - start));
      ++i;
      start = i + 1;
    } else if (c == '\n') {
      return refuse(Reason::kMalformedRequest, "bare LF in request head");
    } else if (c == '\0') {
      return refuse(Reason::kMalformedRequest, "NUL in request head");
    }
  }
  // lines: request line, header lines..., "" (the terminating empty line).
  if (lines.size() < 2 || !lines.back().empty())
    return refuse(Reason::kMalformedRequest, "missing request line");
  lines.pop_back();

  const std::string_view request_line = lines.front();
  const auto sp1 = request_line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      request_line.find(' ', sp2 + 1) != std::string_view::npos)
    return refuse(Reason::kMalformedRequest,
                  "request line must be METHOD SP target SP version: \"" +
                      sanitizeForLog(request_line) + "\"");
  const std::string_view method = request_line.substr(0, sp1);
  const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (method.empty() || target.empty())
    return refuse(Reason::kMalformedRequest, "empty method or request-target");
  for (char c : method)
    if (!isTokenChar(c)) return refuse(Reason::kMalformedRequest, "invalid method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return refuse(Reason::kMalformedRequest, "unsupported HTTP version");

  std::optional<std::string_view> host_header;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.empty() || line.front() == ' ' || line.front() == '\t')
      return refuse(Reason::kMalformedRequest, "obsolete line folding");
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return refuse(Reason::kMalformedRequest, "header line without a name");
    const std::string_view name = line.substr(0, colon);
    for (char c : name)
      if (!isTokenChar(c)) return refuse(Reason::kMalformedRequest, "invalid header name");
    const std::string_view value = trimOws(line.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f)
        return refuse(Reason::kMalformedRequest, "control byte in a header value");
    }
    if (equalsIgnoreCase(name, "host")) {
      if (host_header) return refuse(Reason::kMalformedRequest, "more than one Host header");
      host_header = value;
    }
  }

  RequestHead out{};
  if (method == "CONNECT") {
    auto authority = parseAuthority(target);
    if (!authority) return refuse(authority.error().reason, authority.error().detail);
    out.form = RequestForm::kConnect;
    out.target = std::move(*authority);
  } else if (target.front() == '/') {
    return refuse(Reason::kOriginFormNotSupported,
                  "origin-form request; this proxy only accepts CONNECT host:port");
  } else {
    const auto scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos)
      return refuse(Reason::kMalformedRequest,
                    "request-target is neither authority-form with CONNECT nor absolute-form");
    const std::string_view scheme = target.substr(0, scheme_end);
    if (equalsIgnoreCase(scheme, "https"))
      return refuse(Reason::kHttpsAbsoluteForm,
                    "https:// absolute-form request; use CONNECT host:443");
    if (!equalsIgnoreCase(scheme, "http"))
      return refuse(Reason::kSchemeNotAllowed,
                    "scheme \"" + sanitizeForLog(scheme) + "\" is not allowed");
    std::string_view rest = target.substr(scheme_end + 3);
    const auto end = rest.find_first_of("/?#");
    const std::string_view authority_text =
        end == std::string_view::npos ? rest : rest.substr(0, end);
    auto authority = parseAuthority(authority_text, 80);
    if (!authority) return refuse(authority.error().reason, authority.error().detail);
    out.form = RequestForm::kAbsoluteHttp;
    out.target = std::move(*authority);
  }

  if (host_header) {
    auto host = parseAuthority(*host_header, out.target.port);
    if (!host || *host != out.target)
      return refuse(Reason::kHostHeaderMismatch, "Host header \"" + sanitizeForLog(*host_header) +
                                                     "\" does not name the request-target");
  }
  return out;
}

Decision decideRequest(const Policy& policy, std::string_view head, Resolver& resolver,
                       const AddressClassifier& classifier) noexcept {
  try {
    auto parsed = parseRequestHead(head);
    if (!parsed) {
      Decision d;
      d.reason = parsed.error().reason;
      d.detail = std::move(parsed.error().detail);
      return d;
    }
    if (parsed->form == RequestForm::kConnect)
      return decide(policy, parsed->target, resolver, classifier);
    Decision d = decideNameOnly(policy, parsed->target);
    if (d.allowed()) {
      d.verdict = Verdict::kDeny;
      d.reason = Reason::kAbsoluteFormNotSupported;
      d.detail = "plain HTTP forwarding is not supported; use CONNECT";
    }
    return d;
  } catch (...) {
    return Decision{};
  }
}

int httpStatusFor(Reason reason) noexcept {
  switch (reason) {
    case Reason::kAllowed:
      return 200;
    case Reason::kMalformedRequest:
    case Reason::kMalformedAuthority:
    case Reason::kNonAsciiHost:
    case Reason::kHostHeaderMismatch:
      return 400;
    case Reason::kOriginFormNotSupported:
    case Reason::kHttpsAbsoluteForm:
    case Reason::kAbsoluteFormNotSupported:
    case Reason::kSchemeNotAllowed:
      return 405;
    case Reason::kIpLiteral:
    case Reason::kModeDeny:
    case Reason::kHostNotAllowed:
    case Reason::kPortNotAllowed:
    case Reason::kResolvedDenied:
    case Reason::kRedirectDenied:
      return 403;
    case Reason::kDnsError:
    case Reason::kDnsNoAnswer:
      return 502;
    case Reason::kInternalError:
      return 500;
  }
  return 500;
}

}  // namespace airlock::egress
