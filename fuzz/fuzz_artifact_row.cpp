// Artifact identifiers and metadata rows as untrusted bytes (a database
// row, an id from an API path): parsing is total, anything accepted
// satisfies the invariants the storage key relies on, and a decoded row
// encodes back to itself.
//
// Input: NUL-separated fields artifact_id, tenant_id, run_id ("" = NULL),
// origin, filename, media_type, sha256, trust, then 24 bytes holding
// size_bytes, created_at_ms and expires_at_ms (little-endian; expires_at
// NULL when its top bit is set).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/artifacts/artifact_types.h"
#include "airlock/artifacts/repository_rows.h"
#include "airlock/artifacts/storage_key.h"
#include "airlock/core/ids.h"

using namespace airlock;             // NOLINT
using namespace airlock::artifacts;  // NOLINT

namespace {

void checkKeyPart(const std::string& part) {
  if (part.empty() || part == "." || part == ".." || part.find('/') != std::string::npos ||
      part.find('\0') != std::string::npos)
    std::abort();
}

std::int64_t take64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return static_cast<std::int64_t>(v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view whole(reinterpret_cast<const char*>(data), size);
  auto tenant = TenantId::parse(whole);
  auto id = ArtifactId::parse(whole);
  if (id && !isUuid(id->str())) std::abort();
  if (tenant && id) {
    const StorageKey key = storageKey(*tenant, *id);
    checkKeyPart(key.tenant);
    checkKeyPart(key.shard);
    checkKeyPart(key.object);
  }
  if (auto o = parseArtifactOrigin(whole); o && artifactOriginName(*o) != whole) std::abort();
  if (auto t = parseTrustLevel(whole); t && trustLevelName(*t) != whole) std::abort();

  if (size < 24) return 0;
  std::vector<std::string> fields;
  std::string_view text(reinterpret_cast<const char*>(data), size - 24);
  while (fields.size() < 7) {
    const auto nul = text.find('\0');
    if (nul == std::string_view::npos) break;
    fields.emplace_back(text.substr(0, nul));
    text.remove_prefix(nul + 1);
  }
  fields.emplace_back(text);
  if (fields.size() != 8) return 0;
  const std::uint8_t* ints = data + size - 24;
  ArtifactRow row;
  row.artifact_id = fields[0];
  row.tenant_id = fields[1];
  if (!fields[2].empty()) row.run_id = fields[2];
  row.origin = fields[3];
  row.filename = fields[4];
  row.media_type = fields[5];
  row.sha256 = fields[6];
  row.trust = fields[7];
  row.size_bytes = take64(ints);
  row.created_at_ms = take64(ints + 8);
  const std::int64_t expires = take64(ints + 16);
  if (expires >= 0) row.expires_at_ms = expires;

  auto decoded = decodeRow(row);
  if (!decoded) return 0;
  checkKeyPart(decoded->metadata.tenant_id.str());
  (void)validateMetadata(decoded->metadata);  // total, whatever the fields
  const ArtifactRow again = encodeRow(*decoded);
  if (again.artifact_id != row.artifact_id || again.tenant_id != row.tenant_id ||
      again.run_id != row.run_id || again.origin != row.origin || again.filename != row.filename ||
      again.media_type != row.media_type || again.size_bytes != row.size_bytes ||
      again.sha256 != row.sha256 || again.trust != row.trust ||
      again.created_at_ms != row.created_at_ms || again.expires_at_ms != row.expires_at_ms)
    std::abort();
  return 0;
}
