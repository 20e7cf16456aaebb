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

// Splits `bytes` into CRLF-terminated lines (appended to `lines` without
// their CRLF); `rest` is what follows the last CRLF. A bare CR or LF, or a
// NUL, is refused; a CR as the very last byte may still get its LF and is
// left in `rest`.
std::optional<RequestRefusal> splitLines(std::string_view bytes,
                                         std::vector<std::string_view>& lines,
                                         std::string_view& rest) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c == '\r') {
      if (i + 1 >= bytes.size()) break;
      if (bytes[i + 1] != '\n')
        return RequestRefusal{Reason::kMalformedRequest, "bare CR in request head"};
      lines.push_back(bytes.substr(start, i - start));
      ++i;
      start = i + 1;
    } else if (c == '\n') {
      return RequestRefusal{Reason::kMalformedRequest,
                            "bare LF in request head (HTTP/1.1 needs CRLF line ends)"};
    } else if (c == '\0') {
      return RequestRefusal{Reason::kMalformedRequest, "NUL in request head"};
    }
  }
  rest = bytes.substr(start);
  return std::nullopt;
}

struct RequestLine {
  std::string_view method;
  std::string_view target;
  std::string_view version;
};

RequestRefusal requestLineShape(std::string_view line) {
  return RequestRefusal{
      Reason::kMalformedRequest,
      "request line must be METHOD SP target SP version: \"" + sanitizeForLog(line) + "\""};
}

tl::expected<RequestLine, RequestRefusal> splitRequestLine(std::string_view line) {
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos)
    return tl::unexpected(requestLineShape(line));
  const RequestLine out{line.substr(0, sp1), line.substr(sp1 + 1, sp2 - sp1 - 1),
                        line.substr(sp2 + 1)};
  if (out.method.empty() || out.target.empty())
    return refuse(Reason::kMalformedRequest, "empty method or request-target");
  for (char c : out.method)
    if (!isTokenChar(c)) return refuse(Reason::kMalformedRequest, "invalid method");
  if (out.version != "HTTP/1.1" && out.version != "HTTP/1.0")
    return refuse(Reason::kMalformedRequest, "unsupported HTTP version");
  return out;
}

struct HeaderField {
  std::string_view name;
  std::string_view value;  // without surrounding whitespace
};

std::optional<RequestRefusal> controlByteIn(std::string_view value) {
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f)
      return RequestRefusal{Reason::kMalformedRequest, "control byte in a header value"};
  }
  return std::nullopt;
}

tl::expected<HeaderField, RequestRefusal> splitHeaderLine(std::string_view line) {
  if (line.empty() || line.front() == ' ' || line.front() == '\t')
    return refuse(Reason::kMalformedRequest, "obsolete line folding");
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0)
    return refuse(Reason::kMalformedRequest, "header line without a name");
  const HeaderField out{line.substr(0, colon), trimOws(line.substr(colon + 1))};
  for (char c : out.name)
    if (!isTokenChar(c)) return refuse(Reason::kMalformedRequest, "invalid header name");
  if (auto bad = controlByteIn(out.value)) return tl::unexpected(std::move(*bad));
  return out;
}

// What a first byte that cannot begin a method most likely was.
std::string notHttp(unsigned char first) {
  const char* what = first == 0x04   ? "a SOCKS4 greeting"
                     : first == 0x05 ? "a SOCKS5 greeting"
                     : first == 0x16 ? "a TLS handshake"
                                     : "not an HTTP request";
  return std::string(what) +
         "; this proxy speaks only HTTP/1.1 CONNECT (an http:// proxy URL, CRLF line ends)";
}

}  // namespace

std::optional<RequestRefusal> refuseEarly(std::string_view received) {
  // Only the head counts: what follows its empty line is tunnel payload.
  if (const auto end = received.find("\r\n\r\n"); end != std::string_view::npos)
    received = received.substr(0, end + 2);
  if (received.empty()) return std::nullopt;
  if (!isTokenChar(received.front()))
    return RequestRefusal{Reason::kMalformedRequest,
                          notHttp(static_cast<unsigned char>(received.front()))};
  std::vector<std::string_view> lines;
  std::string_view rest;
  if (auto bad = splitLines(received, lines, rest)) return bad;
  if (!lines.empty()) {
    if (auto r = splitRequestLine(lines.front()); !r) return std::move(r.error());
    for (std::size_t i = 1; i < lines.size(); ++i)
      if (auto h = splitHeaderLine(lines[i]); !h) return std::move(h.error());
  }
  // The line still arriving: refuse what no ending can repair.
  if (!rest.empty() && rest.back() == '\r') rest.remove_suffix(1);
  if (rest.empty()) return std::nullopt;
  if (lines.empty()) {
    const auto sp1 = rest.find(' ');
    const std::string_view method = rest.substr(0, sp1);
    for (char c : method)
      if (!isTokenChar(c)) return RequestRefusal{Reason::kMalformedRequest, "invalid method"};
    if (sp1 == std::string_view::npos) return std::nullopt;
    if (sp1 == 0 || (sp1 + 1 < rest.size() && rest[sp1 + 1] == ' '))
      return RequestRefusal{Reason::kMalformedRequest, "empty method or request-target"};
    const auto sp2 = rest.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) return std::nullopt;
    const std::string_view version = rest.substr(sp2 + 1);
    if (version.find(' ') != std::string_view::npos) return requestLineShape(rest);
    if (!std::string_view("HTTP/1.1").starts_with(version) &&
        !std::string_view("HTTP/1.0").starts_with(version))
      return RequestRefusal{Reason::kMalformedRequest, "unsupported HTTP version"};
    return std::nullopt;
  }
  if (rest.front() == ' ' || rest.front() == '\t')
    return RequestRefusal{Reason::kMalformedRequest, "obsolete line folding"};
  const auto colon = rest.find(':');
  if (colon == 0) return RequestRefusal{Reason::kMalformedRequest, "header line without a name"};
  for (char c : rest.substr(0, colon))
    if (!isTokenChar(c)) return RequestRefusal{Reason::kMalformedRequest, "invalid header name"};
  if (colon != std::string_view::npos) return controlByteIn(rest.substr(colon + 1));
  return std::nullopt;
}

tl::expected<RequestHead, RequestRefusal> parseRequestHead(std::string_view head) {
  if (head.size() > kMaxRequestHead)
    return refuse(Reason::kMalformedRequest, "request head too large");
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n" ||
      head.find("\r\n\r\n") != head.size() - 4)
    return refuse(Reason::kMalformedRequest, "request head must end with one empty line");

  // CRLF-terminated lines: request line, header lines..., "" (the
  // terminating empty line). The head ends with CRLF, so nothing is left.
  std::vector<std::string_view> lines;
  std::string_view rest;
  if (auto bad = splitLines(head, lines, rest)) return tl::unexpected(std::move(*bad));
  if (lines.size() < 2 || !lines.back().empty())
    return refuse(Reason::kMalformedRequest, "missing request line");
  lines.pop_back();

  auto request_line = splitRequestLine(lines.front());
  if (!request_line) return tl::unexpected(std::move(request_line.error()));
  const std::string_view method = request_line->method;
  const std::string_view target = request_line->target;

  std::optional<std::string_view> host_header;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    auto field = splitHeaderLine(lines[i]);
    if (!field) return tl::unexpected(std::move(field.error()));
    if (equalsIgnoreCase(field->name, "host")) {
      if (host_header) return refuse(Reason::kMalformedRequest, "more than one Host header");
      host_header = field->value;
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
    if (!parsed) return deniedBeforePolicy(parsed.error().reason, std::move(parsed.error().detail));
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
