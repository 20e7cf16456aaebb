#include "airlock/artifacts/storage_key.h"

namespace airlock::artifacts {

StorageKey storageKey(const TenantId& tenant_id, const ArtifactId& artifact_id) {
  return StorageKey{tenant_id.str(), artifact_id.str().substr(0, 2), artifact_id.str()};
}

}  // namespace airlock::artifacts
