// A client for the OCI distribution API, pull side only: OCI distribution
// spec "Pulling manifests" (GET /v2/<name>/manifests/<reference>) and
// "Pulling blobs" (GET /v2/<name>/blobs/<digest>), with anonymous token
// authentication as Docker's "Token Authentication Specification" describes
// it (a 401 with `WWW-Authenticate: Bearer realm="...",service="...",
// scope="..."`; a GET of the realm with those as query parameters; a JSON
// answer whose "token" or "access_token" is sent as `Authorization: Bearer`
// and the request tried once more). Basic credentials are not supported
// yet: a registry that asks for them fails with a message saying so.
//
// Transport: the bounded HTTP client (egress/http_client.h, libcurl), with
// this client's own rule for each hop:
//   * HTTPS with certificate and host verification (the system store, or
//     RegistryClientOptions::ca_file), except for registries reached over
//     plain HTTP: loopback ones (127.0.0.0/8, [::1], "localhost", any port)
//     and those listed in insecure_registries. A token realm or a redirect
//     over plain HTTP is followed only from such a registry (never from
//     HTTPS down to HTTP) and only to such a host. The registry is trusted
//     as the operator named it: the egress policy (egress/) does not apply
//     to these requests, and a redirect may lead to any HTTPS host;
//   * proxy environment variables (http_proxy, HTTPS_PROXY, ALL_PROXY,
//     NO_PROXY) are ignored (CURLOPT_PROXY ""): the service's registry
//     traffic goes direct; no .netrc, no cookies, no decompression (a digest
//     is over the bytes as sent), protocols http and https only;
//   * redirects (301, 302, 303, 307, 308) are followed hop by hop, at
//     most 5 per request: the Authorization header goes only to the
//     registry's own origin (scheme, host and port), never to a redirect
//     target elsewhere (a blob store);
//   * each HTTP exchange is bounded by RegistryClientOptions::timeout.
//
// Verification: nothing from the registry is returned before it is checked.
// A manifest fetched by digest must hash to it; one fetched by tag must hash
// to the Docker-Content-Digest header when the registry sends one. A blob
// must hash to the digest asked for and have exactly the expected size.
//
// Errors name the registry, the repository and what failed:
//   registry 127.0.0.1:5000: repository team/py has no tag 3.13 (404)
// Codes: ExecutionRejected when the image as named cannot be pulled and
// trying again will not help (unknown repository, tag or digest (404: an
// unknown image is a rejected specification in the error taxonomy), access
// denied (401/403 after the token), a bad reference, a document that does
// not parse, a digest or size mismatch, a body over its cap);
// ExecutionUnavailable when trying again may (connection refused, timeout,
// TLS failure, 429, 5xx, a transfer cut short, a write to out_fd failing:
// sys_errno set).
//
// Thread-safe: every request uses its own curl handle; the token cache is
// guarded by a mutex. Calls block for the network.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/thread_annotations.h"
#include "airlock/images/image_reference.h"

namespace airlock::images {

struct RegistryClientOptions {
  // Bound on each HTTP exchange (a token request, one hop of a manifest or
  // blob GET), connection included.
  std::chrono::seconds timeout{300};
  // Registries reached over plain HTTP besides loopback ones, as the
  // reference's registry is written ("10.0.0.5:5000", "registry.local"),
  // compared case-insensitively. Everything else is HTTPS.
  std::vector<std::string> insecure_registries;
  // Called from fetchBlob on the calling thread as bytes arrive (done,
  // expected_size). May be empty; an exception it throws is ignored.
  std::function<void(std::int64_t done_bytes, std::int64_t total_bytes)> progress;
  // PEM bundle to verify registry certificates with; "" is the system store.
  std::string ca_file;
};

struct FetchedManifest {
  std::string media_type;  // the Content-Type's media type (mediaTypeOf), may be ""
  std::string bytes;       // the body, exactly as sent, at most kMaxDocumentBytes
  std::string digest;      // "sha256:" + SHA-256 of bytes
};

class RegistryClient {
 public:
  explicit RegistryClient(RegistryClientOptions options = {});
  RegistryClient(const RegistryClient&) = delete;
  RegistryClient& operator=(const RegistryClient&) = delete;

  // GET /v2/<repo>/manifests/<tag_or_digest> with an Accept of the two index
  // and two manifest types (oci_documents.h). tag_or_digest must be a tag or
  // a digest (isTag / isDigest), else ExecutionRejected. By digest, the
  // bytes' SHA-256 must equal it; by tag, the Docker-Content-Digest header
  // (if present) must equal the computed one. The body is not parsed here.
  Result<FetchedManifest> fetchManifest(const ImageReference& ref, std::string_view tag_or_digest);

  // The linux/amd64 image manifest `ref` names (its digest when it has one,
  // else its tag): fetched, classified (classifyDocument); an index is
  // parsed, its linux/amd64 entry chosen (selectPlatform) and that manifest
  // fetched by digest (its size must equal the entry's). The manifest
  // returned parses (parseImageManifest); its config's platform is for the
  // caller to check (the config is a blob). A nested index is refused.
  Result<FetchedManifest> resolve(const ImageReference& ref);

  // GET /v2/<repo>/blobs/<digest>, following redirects, streaming the body
  // to out_fd (borrowed, written at its current offset, never more than
  // expected_size bytes). ExecutionRejected if more than expected_size
  // bytes arrive (the transfer stops at the first byte over), if fewer do
  // in a complete response, or if their SHA-256 is not `digest` (the message
  // says which, with both values). On any error out_fd may hold part of the
  // blob: the caller discards it.
  Result<void> fetchBlob(const ImageReference& ref, const std::string& digest,
                         std::int64_t expected_size, int out_fd);

 private:
  struct Exchange;
  // One GET with auth and redirects (registry_client.cpp).
  Result<void> get(const ImageReference& ref, const std::string& path, Exchange& ex);
  Result<FetchedManifest> resolveChecked(const ImageReference& ref);
  std::string cachedToken(const std::string& key) EXCLUDES(mu_);
  void storeToken(const std::string& key, std::string token) EXCLUDES(mu_);

  RegistryClientOptions options_;
  Mutex mu_;
  // Bearer tokens by "registry/repository".
  std::map<std::string, std::string> tokens_ GUARDED_BY(mu_);
};

// Whether `registry` (host[:port] as in ImageReference) is reached over
// plain HTTP: a loopback address or name, or one of `insecure`.
bool isPlainHttpRegistry(std::string_view registry, const std::vector<std::string>& insecure);

}  // namespace airlock::images
