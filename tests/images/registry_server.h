// A throwaway registry for the registry client tests: the real
// docker-registry (Debian's docker-registry package, the CNCF distribution
// registry; $AIRLOCK_DOCKER_REGISTRY overrides /usr/bin/docker-registry),
// run as `docker-registry serve <config>` with filesystem storage in a
// temporary directory, listening on 127.0.0.1 only, plain HTTP, no auth.
//
// The config cannot say "port 0", so start() picks a free loopback port by
// binding port 0 and closing it, and tries again with another (at most 5
// times) when the registry exits because the port was taken meanwhile. It
// then polls GET /v2/ until it answers 200 (bounded: 30 s). The registry
// gets PR_SET_PDEATHSIG so it dies with the test process; stop() (and the
// destructor) kills it by pid, reaps it and removes the directory.
//
// Also: runTool(), to run skopeo and friends with a clean environment.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "airlock/core/error.h"

namespace airlock::images::testing {

class RegistryServer {
 public:
  RegistryServer() = default;
  ~RegistryServer() { stop(); }
  RegistryServer(const RegistryServer&) = delete;
  RegistryServer& operator=(const RegistryServer&) = delete;

  // The error says which step failed and where the registry's log is.
  Result<void> start();
  void stop();

  // "127.0.0.1:PORT".
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::uint16_t port() const { return port_; }

 private:
  Result<void> startOnce(std::uint16_t port, bool* port_taken);

  std::string dir_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

struct ToolRun {
  int exit_code = -1;  // 128 + signal when killed
  std::string output;  // stdout
  std::string errors;  // stderr
};

// Runs argv[0] (an absolute path) with HOME and XDG_RUNTIME_DIR set to
// `home`, PATH=/usr/sbin:/usr/bin:/sbin:/bin and nothing else (no proxy
// variables), stdin /dev/null; waits for it.
ToolRun runTool(const std::vector<std::string>& argv, const std::string& home);

// GET http://<authority><path> over a plain socket: the status, or 0 when
// nothing answered.
int httpStatus(const std::string& ip, std::uint16_t port, const std::string& path);

}  // namespace airlock::images::testing
