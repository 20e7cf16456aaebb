// The HTTP/1.1 server of `airlock serve` (Boost.Beast on Asio with C++20
// coroutines). It moves bytes and enforces request bounds; Api decides.
//
// Bounds: headers up to settings.max_header_bytes (431 past it), bodies up
// to settings.max_body_bytes (413), a request must arrive within
// settings.request_timeout (the connection is closed otherwise); a handler
// runs on a worker pool of settings.max_concurrent_executions threads, so a
// long execute never blocks other requests. Keep-alive is honoured.
//
// Logs: one JSON line per request on stderr (time, method, route with ids
// replaced by {id}, status, milliseconds); never a header value or a body.
//
// Lifecycle: run() serves until SIGINT/SIGTERM or stop(); then it stops
// accepting, tells the adapter to shut down (running commands end with
// SERVICE_SHUTDOWN), waits for in-flight requests, destroys every
// environment and returns. The reaper runs every settings.reaper_interval.
#pragma once

#include <cstdint>
#include <memory>

#include "airlock/core/error.h"
#include "airlock/sandbox/execution_environment.h"
#include "airlock/service/api.h"
#include "airlock/service/settings.h"

namespace airlock::service {

class HttpServer {
 public:
  // Binds settings.listen (ExecutionUnavailable naming the address when it
  // cannot). `env` is shut down when the server stops.
  static Result<std::unique_ptr<HttpServer>> create(const Settings& settings, Api& api,
                                                    ExecutionEnvironment& env);
  virtual ~HttpServer() = default;
  // The bound port (useful with port 0).
  virtual std::uint16_t port() const = 0;
  // Serves until stopped; returns after the shutdown sequence above.
  virtual void run() = 0;
  // Thread-safe, idempotent.
  virtual void stop() = 0;
};

// "/v1/environments/0190.../execute" -> "/v1/environments/{id}/execute";
// a path that is no route of api.h -> "other" (labels stay a fixed set):
// the route label of metrics and logs.
std::string routeLabel(std::string_view path);

}  // namespace airlock::service
