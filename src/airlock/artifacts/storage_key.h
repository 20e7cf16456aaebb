// The storage key (spec 000, "The storage key is derived, never composed";
// gate artifact_key_opaque). The key is a function of exactly two
// platform-generated values, the tenant and the artifact id, and nothing
// else: no filename, no media type, nothing a tool passed in. Both inputs
// are validated types (artifact_types.h) whose spelling cannot contain '/',
// '.' or NUL, so each of the three parts is one plain name.
#pragma once

#include <string>

#include "airlock/artifacts/artifact_types.h"

namespace airlock::artifacts {

// tenant_id / first two characters of artifact_id / artifact_id. The shard
// keeps a filesystem directory from holding every object of a tenant.
struct StorageKey {
  std::string tenant;  // == tenant_id
  std::string shard;   // == artifact_id[:2]
  std::string object;  // == artifact_id
  std::string str() const { return tenant + "/" + shard + "/" + object; }
  bool operator==(const StorageKey&) const = default;
};

StorageKey storageKey(const TenantId& tenant_id, const ArtifactId& artifact_id);

}  // namespace airlock::artifacts
