// One metadata test suite for every ArtifactRepository adapter. A backend
// gives each test a fresh empty database and can open as many connections
// to it as a test wants; the suite is instantiated once per adapter
// (metadata_sqlite_test.cpp, metadata_postgres_test.cpp) and does not
// change between them.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "airlock/artifacts/metadata_repository.h"

namespace airlock::artifacts::testing {

class RepositoryBackend {
 public:
  virtual ~RepositoryBackend() = default;
  // A new connection to this backend's database (created empty on first use).
  virtual Result<std::unique_ptr<ArtifactRepository>> open() = 0;
  // The schema version the database records.
  virtual Result<int> schemaVersion() = 0;
};

struct BackendFactory {
  std::string name;
  std::function<std::unique_ptr<RepositoryBackend>()> make;
};

class MetadataRepositoryTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override;
  std::unique_ptr<RepositoryBackend> backend_;
  std::unique_ptr<ArtifactRepository> repo_;
};

}  // namespace airlock::artifacts::testing
