// A shell script as a command, the same for every mechanism's tests
// (linux/linux_test_support.h, oci/gvisor_test_support.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "airlock/port/execution_environment.h"

namespace airlock::testing {

inline ExecutionCommand shell(std::string script, std::int64_t timeout_seconds = 60) {
  ExecutionCommand c;
  c.argv = {"sh", "-c", std::move(script)};
  c.timeout_seconds = timeout_seconds;
  c.maximum_output_bytes = 1 << 20;
  return c;
}

}  // namespace airlock::testing
