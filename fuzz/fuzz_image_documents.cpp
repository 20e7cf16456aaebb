// Image references and OCI image documents (src/airlock/images): the
// parsers of registry bytes are total (no crash, no throw, every refusal an
// ExecutionRejected with a message) and what they accept keeps their
// promises: digests are sha256 + 64 hex, sizes non-negative, layer types
// the four distributable ones, Env entries NAME=value without NUL, a
// selected platform entry is an image manifest for linux/amd64, and an
// accepted reference round-trips through toString. One digest, one kind
// (CVE-2021-41190): no bytes parse both as an index and as a manifest, and
// a kind classifyDocument accepts under a Content-Type is the one the bytes
// have without it.
// Input: the first line is the Content-Type given to classifyDocument, the
// rest the document; the whole input is also parsed as a reference.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "airlock/images/image_reference.h"
#include "airlock/images/oci_documents.h"

namespace {

using namespace airlock;
using namespace airlock::images;

template <class T>
void checkRefusal(const Result<T>& r) {
  if (!r && (r.error().code != ErrorCode::kExecutionRejected || r.error().context.empty()))
    std::abort();
}

void checkDescriptor(const Descriptor& d) {
  if (!isDigest(d.digest) || d.size < 0) std::abort();
}

void checkReference(std::string_view text) {
  auto r = parseImageReference(text);
  checkRefusal(r);
  if (!r) return;
  if (r->registry.empty() || r->repository.empty()) std::abort();
  if (r->tag.empty() && r->digest.empty()) std::abort();
  if (!r->tag.empty() && !isTag(r->tag)) std::abort();
  if (!r->digest.empty() && !isDigest(r->digest)) std::abort();
  auto again = parseImageReference(toString(*r));
  if (!again || !(*again == *r)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nl = input.find('\n');
  const std::string_view header = nl == std::string_view::npos ? "" : input.substr(0, nl);
  const std::string_view doc = nl == std::string_view::npos ? input : input.substr(nl + 1);

  const auto kind = classifyDocument(header, doc);
  checkRefusal(kind);
  if (kind) {
    const auto own = classifyDocument("", doc);
    if (!own || *own != *kind) std::abort();
  }

  auto index = parseImageIndex(doc);
  checkRefusal(index);
  if (index) {
    if (index->manifests.size() > kMaxIndexEntries) std::abort();
    for (const auto& d : index->manifests) checkDescriptor(d);
    auto chosen = selectPlatform(*index);
    checkRefusal(chosen);
    if (chosen &&
        (!chosen->platform || chosen->platform->os != "linux" ||
         chosen->platform->architecture != "amd64" ||
         (chosen->media_type != kOciManifestType && chosen->media_type != kDockerManifestType)))
      std::abort();
  }

  auto manifest = parseImageManifest(doc);
  checkRefusal(manifest);
  if (manifest) {
    checkDescriptor(manifest->config);
    if (manifest->config.size > static_cast<std::int64_t>(kMaxDocumentBytes)) std::abort();
    for (const auto& l : manifest->layers) {
      checkDescriptor(l);
      if (l.media_type != kOciLayerTarType && l.media_type != kOciLayerGzipType &&
          l.media_type != kOciLayerZstdType && l.media_type != kDockerLayerGzipType)
        std::abort();
    }
  }

  if (index && manifest) std::abort();
  if (index && kind && *kind != DocumentKind::kIndex) std::abort();
  if (manifest && kind && *kind != DocumentKind::kManifest) std::abort();

  auto config = parseImageConfig(doc);
  checkRefusal(config);
  if (config) {
    for (const auto& e : config->env) {
      const std::size_t eq = e.find('=');
      if (eq == std::string::npos || eq == 0 || e.find('\0') != std::string::npos) std::abort();
    }
    for (const auto& d : config->diff_ids)
      if (!isDigest(d)) std::abort();
    if (config->user.find('\0') != std::string::npos) std::abort();
  }

  checkReference(input);
  return 0;
}
