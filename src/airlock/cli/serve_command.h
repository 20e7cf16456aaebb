// `airlock serve`: loads settings, runs the startup check, builds the
// adapter, and serves the HTTP API until SIGINT/SIGTERM (docs/cli.md).
#pragma once

#include <optional>
#include <string>

namespace airlock::cli {

// Returns the process exit status: 0 after a clean shutdown, 125 when the
// settings are invalid, the startup check refuses, or the service cannot
// start (one "airlock: ..." line on stderr saying why).
int executeServe(const std::optional<std::string>& config_path);

}  // namespace airlock::cli
