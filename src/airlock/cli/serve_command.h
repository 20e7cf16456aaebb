// `airlock serve`: loads settings, runs the startup check, builds the
// adapter, and serves the HTTP API until SIGINT/SIGTERM (docs/cli.md).
// With a role (--role, or the `role` setting; spec 000, "Where the boundary
// is"): `gateway` serves the public API over the execution_nodes (a node
// pool of remote nodes, gateway/node_pool.h) with its artifact store and
// schedules; `execution` becomes airlock-node, found beside this executable
// (cli/serve_execution.h), which serves the node's internal API and links no
// database client.
#pragma once

#include <optional>
#include <string>

namespace airlock::cli {

// Returns the process exit status: 0 after a clean shutdown, 125 when the
// settings are invalid, the startup check refuses, or the service cannot
// start (one "airlock: ..." line on stderr saying why). `role`: --role's
// value, which wins over the settings' (gateway or execution).
int executeServe(const std::optional<std::string>& config_path,
                 const std::optional<std::string>& role = std::nullopt);

}  // namespace airlock::cli
