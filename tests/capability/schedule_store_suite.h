// One ScheduleStore test suite for every backend (schedule.h): schedules,
// due/recordFire, and the firing outbox (fireDue, pendingFires,
// acknowledgeFires) with its bound, its coalescing and its at-most-once
// guarantee under two concurrent callers. Instantiated once per backend
// (schedule_store_sqlite_test.cpp, schedule_store_postgres_test.cpp) and
// unchanged between them, like tests/artifacts/metadata_suite.h.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "airlock/capability/schedule/schedule.h"

namespace airlock::capability::schedule::testing {

class ScheduleStoreBackend {
 public:
  virtual ~ScheduleStoreBackend() = default;
  // Why this backend cannot run here (its server binaries are absent), or
  // nullopt. The suite skips with the reason printed.
  virtual std::optional<std::string> skipReason() { return std::nullopt; }
  // A new connection to this backend's database (a fresh one per backend
  // object, migrated on first open).
  virtual Result<std::shared_ptr<ScheduleStore>> open(const ScheduleStoreOptions& options) = 0;
  // The version the database's schedule_migrations ledger records.
  virtual Result<int> schemaVersion() = 0;
  // Before any open(): writes the database as schema version 1 left it (the
  // table `schedules` and its ledger at 1) holding `record`.
  virtual Result<void> seedVersion1(const ScheduleRecord& record) = 0;
};

struct ScheduleBackendFactory {
  std::string name;
  std::function<std::unique_ptr<ScheduleStoreBackend>()> make;
};

// Test names and failure messages show the backend's name.
inline void PrintTo(const ScheduleBackendFactory& factory, std::ostream* os) {
  *os << factory.name;
}

class ScheduleStoreSuite : public ::testing::TestWithParam<ScheduleBackendFactory> {
 protected:
  void SetUp() override;
  std::unique_ptr<ScheduleStoreBackend> backend_;
  std::shared_ptr<ScheduleStore> store_;
};

}  // namespace airlock::capability::schedule::testing
