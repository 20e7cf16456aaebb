#include "airlock/images/image_reference.h"

#include <arpa/inet.h>

#include <cstdint>

#include "airlock/core/encoding.h"

namespace airlock::images {
namespace {

bool isLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool isAlnum(char c) {
  return isLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}
bool isWordChar(char c) {
  return isAlnum(c) || c == '_';
}

// 'text' with untrusted bytes escaped, for messages.
std::string inQuotes(std::string_view text) {
  std::string q = quoteForMessage(text, 140);
  // quoteForMessage wraps in double quotes; the messages here use single.
  if (q.size() >= 2) q = q.substr(1, q.size() - 2);
  return "'" + q + "'";
}

tl::unexpected<Error> refuse(std::string_view text, const std::string& problem) {
  return fail(ErrorCode::kExecutionRejected, "image reference " + inQuotes(text) + ": " + problem);
}

// One repository component: [a-z0-9]+ ((.|_|__|-+)[a-z0-9]+)*. Returns the
// problem, or "" when it matches.
std::string componentProblem(std::string_view c) {
  if (c.empty()) return "has an empty path component";
  for (char ch : c)
    if (ch >= 'A' && ch <= 'Z') return "has an upper-case letter (repositories are lowercase)";
  if (!isLowerAlnum(c.front()) || !isLowerAlnum(c.back()))
    return "has a path component that does not start and end with a lowercase letter or digit";
  for (std::size_t i = 0; i < c.size();) {
    if (isLowerAlnum(c[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    if (c[i] == '-') {
      while (j < c.size() && c[j] == '-') ++j;
    } else if (c[i] == '_') {
      while (j < c.size() && c[j] == '_') ++j;
      if (j - i > 2) return "has more than two '_' in a row";
    } else if (c[i] == '.') {
      ++j;
    } else {
      return "has a character a repository may not have";
    }
    if (j >= c.size() || !isLowerAlnum(c[j]))
      return "has two separators in a row ('.', '_', '__' or '-' must stand between letters or "
             "digits)";
    i = j;
  }
  return "";
}

bool isDnsName(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = host.find('.', start);
    const std::string_view label =
        host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 || !isAlnum(label.front()) || !isAlnum(label.back()))
      return false;
    for (char c : label)
      if (!isAlnum(c) && c != '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// host[:port] as the grammar allows; the problem, or "".
std::string registryProblem(std::string_view reg) {
  std::string_view host = reg;
  std::string_view port;
  bool has_port = false;
  if (!reg.empty() && reg.front() == '[') {
    const std::size_t close = reg.find(']');
    if (close == std::string_view::npos) return "has an IPv6 address without ']'";
    const std::string inner(reg.substr(1, close - 1));
    in6_addr a6{};
    if (::inet_pton(AF_INET6, inner.c_str(), &a6) != 1) return "has a malformed IPv6 address";
    std::string_view rest = reg.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return "has text after the IPv6 address";
      port = rest.substr(1);
      has_port = true;
    }
    host = {};
  } else {
    const std::size_t colon = reg.find(':');
    if (colon != std::string_view::npos) {
      host = reg.substr(0, colon);
      port = reg.substr(colon + 1);
      has_port = true;
    }
    if (!isDnsName(host)) return "is not a host name, IPv4 address or [IPv6 address]";
  }
  if (has_port) {
    if (port.empty() || port.size() > 5) return "has a port that is not 1 to 65535";
    std::uint32_t n = 0;
    for (char c : port) {
      if (c < '0' || c > '9') return "has a port that is not 1 to 65535";
      n = n * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (n == 0 || n > 65535) return "has a port that is not 1 to 65535";
  }
  return "";
}

std::string lowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

bool isDigest(std::string_view text) noexcept {
  constexpr std::string_view kPrefix = "sha256:";
  if (text.size() != kPrefix.size() + 64 || text.substr(0, kPrefix.size()) != kPrefix) return false;
  return isLowerHex(text.substr(kPrefix.size()));
}

bool isTag(std::string_view text) noexcept {
  if (text.empty() || text.size() > kMaxTagBytes || !isWordChar(text.front())) return false;
  for (char c : text)
    if (!isWordChar(c) && c != '.' && c != '-') return false;
  return true;
}

Result<ImageReference> parseImageReference(std::string_view text) {
  try {
    if (text.empty()) return refuse(text, "is empty");
    if (text.size() > kMaxReferenceBytes)
      return refuse(text, "is longer than " + std::to_string(kMaxReferenceBytes) + " bytes");
    // Common slips, each named with its fix: a URL, a digest alone (short
    // or without its algorithm), which would otherwise read as a Docker Hub
    // repository and be looked up there.
    if (const std::size_t scheme = text.find("://"); scheme != std::string_view::npos)
      return refuse(text, "has a scheme: a reference is written without one, as " +
                              inQuotes(text.substr(scheme + 3)));
    if (text.rfind("sha256:", 0) == 0 && !isDigest(text))
      return refuse(text, "is not a whole digest (sha256: and 64 lowercase hex digits)");
    if (text.size() == 64 && isLowerHex(text))
      return refuse(text, "is a digest without its algorithm: write sha256:" + std::string(text));
    ImageReference ref;
    std::string_view rest = text;

    // "@digest" ends the reference: neither a name nor a tag has an '@'.
    if (const std::size_t at = rest.find('@'); at != std::string_view::npos) {
      const std::string_view digest = rest.substr(at + 1);
      if (!isDigest(digest))
        return refuse(
            text, "the digest " + inQuotes(digest) + " is not sha256: and 64 lowercase hex digits");
      ref.digest = std::string(digest);
      rest = rest.substr(0, at);
    }

    // ":tag" is after the last '/'; a ':' before it belongs to a port.
    const std::size_t last_slash = rest.rfind('/');
    const std::size_t colon = rest.rfind(':');
    if (colon != std::string_view::npos &&
        (last_slash == std::string_view::npos || colon > last_slash)) {
      const std::string_view tag = rest.substr(colon + 1);
      if (tag.empty()) return refuse(text, "the tag after ':' is empty");
      if (tag.size() > kMaxTagBytes)
        return refuse(text, "the tag " + inQuotes(tag) + " is longer than " +
                                std::to_string(kMaxTagBytes) + " bytes");
      if (!isTag(tag))
        return refuse(text, "the tag " + inQuotes(tag) + " has a character a tag may not have");
      ref.tag = std::string(tag);
      rest = rest.substr(0, colon);
    }
    if (rest.empty()) return refuse(text, "has no repository name");

    // The registry part, by the Docker rule.
    std::string_view repository = rest;
    const std::size_t first_slash = rest.find('/');
    if (first_slash != std::string_view::npos) {
      const std::string_view first = rest.substr(0, first_slash);
      const bool is_registry =
          first.find_first_of(".:") != std::string_view::npos || first == "localhost";
      if (is_registry) {
        if (std::string problem = registryProblem(first); !problem.empty())
          return refuse(text, "the registry " + inQuotes(first) + " " + problem);
        ref.registry = lowerAscii(first);
        repository = rest.substr(first_slash + 1);
      }
    }
    if (ref.registry.empty() || ref.registry == "docker.io" || ref.registry == "index.docker.io")
      ref.registry = std::string(kDockerHubRegistry);

    if (repository.empty()) return refuse(text, "has no repository name");
    for (std::size_t start = 0;;) {
      const std::size_t slash = repository.find('/', start);
      const std::string_view component = repository.substr(
          start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
      if (std::string problem = componentProblem(component); !problem.empty())
        return refuse(text, "the repository " + inQuotes(repository) + " " + problem);
      if (slash == std::string_view::npos) break;
      start = slash + 1;
    }
    ref.repository = std::string(repository);
    if (ref.registry == kDockerHubRegistry && ref.repository.find('/') == std::string::npos)
      ref.repository = "library/" + ref.repository;
    if (ref.repository.size() > kMaxRepositoryBytes)
      return refuse(
          text, "the repository is longer than " + std::to_string(kMaxRepositoryBytes) + " bytes");
    if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
    return ref;
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kExecutionRejected, "image reference: out of memory while parsing");
  }
}

std::string toString(const ImageReference& ref) {
  std::string out = ref.registry + "/" + ref.repository;
  if (!ref.tag.empty()) out += ":" + ref.tag;
  if (!ref.digest.empty()) out += "@" + ref.digest;
  return out;
}

}  // namespace airlock::images
