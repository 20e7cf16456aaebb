// The one mapping between StoredArtifact and a database row, shared by the
// SQLite and PostgreSQL adapters. Columns, in this order everywhere:
//   artifact_id, tenant_id, run_id, origin, filename, media_type,
//   size_bytes, sha256, trust, created_at_ms, expires_at_ms
// A row is decoded as untrusted data: any field that does not parse is an
// ExecutionUnavailable "corrupt artifact row" naming the column, never an
// exception. Both adapters read a row (storage::Row) and bind its values
// (storage::Value) through the functions here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "airlock/artifacts/artifact_types.h"
#include "airlock/storage/row.h"
#include "airlock/storage/sql_value.h"

namespace airlock::artifacts {

struct ArtifactRow {
  std::string artifact_id;
  std::string tenant_id;
  std::optional<std::string> run_id;
  std::string origin;
  std::string filename;  // raw bytes
  std::string media_type;
  std::int64_t size_bytes = 0;
  std::string sha256;
  std::string trust;
  std::int64_t created_at_ms = 0;
  std::optional<std::int64_t> expires_at_ms;
};

ArtifactRow encodeRow(const StoredArtifact& artifact);
Result<StoredArtifact> decodeRow(const ArtifactRow& row);

// The 11 columns in the order above (filename as bytes), for binding as
// parameters 1 to 11.
std::vector<storage::Value> rowValues(ArtifactRow row);
// A result row whose SELECT list is the 11 columns in that order.
Result<StoredArtifact> readArtifact(const storage::Row& row);

std::int64_t toUnixMs(Timestamp t) noexcept;
Timestamp fromUnixMs(std::int64_t ms) noexcept;

}  // namespace airlock::artifacts
