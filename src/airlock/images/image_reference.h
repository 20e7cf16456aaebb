// Image references: "127.0.0.1:5000/team/py:3.12",
// "registry.example.com/x@sha256:<64 hex>", "debian:12".
//
// Grammar: the OCI distribution spec ("Pulling manifests": the <name> and
// <reference> rules) and the Docker reference grammar it comes from:
//
//   reference  := name [ ":" tag ] [ "@" digest ]
//   name       := [ registry "/" ] repository
//   registry   := host [ ":" port ]      host: a DNS name (components of
//                 [A-Za-z0-9] with inner '-', joined by '.'), a dotted IPv4
//                 address, or "[" IPv6 "]"; port: 1..65535
//   repository := component ( "/" component )*   at most 255 bytes
//   component  := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
//   tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//   digest     := "sha256:" 64 lowercase hex digits (the only algorithm
//                 accepted: see isDigest)
//
// The first "/"-separated part is the registry when it contains '.' or ':'
// or is "localhost" (the Docker rule, less its "has an upper-case letter"
// case: "Team/py" is refused as a repository with an upper-case letter, so
// that a lower-cased registry still reads as one); otherwise the whole name
// is a repository on Docker Hub. Normalization:
//   * no registry, "docker.io" or "index.docker.io": "registry-1.docker.io"
//     (the host Docker Hub's distribution API answers on);
//   * on Docker Hub a one-component repository gets "library/" in front
//     ("debian" is "library/debian");
//   * the registry is lower-cased (host names compare case-insensitively);
//   * neither tag nor digest: tag "latest". With a digest and no tag the
//     tag stays empty; with both, both are kept (the digest is what is
//     pulled: see RegistryClient::resolve).
#pragma once

#include <string>
#include <string_view>

#include "airlock/core/error.h"

namespace airlock::images {

inline constexpr std::string_view kDockerHubRegistry = "registry-1.docker.io";
inline constexpr std::size_t kMaxRepositoryBytes = 255;
inline constexpr std::size_t kMaxTagBytes = 128;
// Longer text is refused before it is looked at.
inline constexpr std::size_t kMaxReferenceBytes = 1024;

struct ImageReference {
  std::string registry;    // "127.0.0.1:5000", "[::1]:5000", "registry-1.docker.io"
  std::string repository;  // "team/py", "library/debian"
  std::string tag;         // "3.12"; "" only when a digest is given
  std::string digest;      // "sha256:<64 hex>" or ""

  bool operator==(const ImageReference&) const = default;
};

// Parses and normalizes (above). Never throws. ExecutionRejected naming the
// reference and the problem:
//   image reference 'X': the tag 'Y' has a character a tag may not have
//   image reference 'X': the repository 'Team/py' has an upper-case letter
//   image reference 'X': the digest 'sha512:...' is not sha256: and 64 lowercase hex digits
Result<ImageReference> parseImageReference(std::string_view text);

// "registry/repository[:tag][@digest]"; parses back to an equal value.
std::string toString(const ImageReference& ref);

// "sha256:" followed by exactly 64 lowercase hex digits.
bool isDigest(std::string_view text) noexcept;

// A tag as the grammar above allows (1 to 128 bytes).
bool isTag(std::string_view text) noexcept;

}  // namespace airlock::images
