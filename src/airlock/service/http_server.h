// The HTTP/1.1 server of `airlock serve` (Boost.Beast on Asio with C++20
// coroutines). It moves bytes and enforces request bounds; its
// RequestHandler (request_handler.h: the API) decides.
//
// Bounds: headers up to settings.max_header_bytes (431 past it), bodies up
// to settings.max_body_bytes (413), a request must arrive within
// settings.request_timeout (unauthenticated_request_timeout for a connection
// that has not yet sent the service token), else the connection is closed.
// Transfer codings other than "chunked" are refused (501). Connections:
// at most settings.max_connections, and max_unauthenticated_connections of
// those that have not authenticated; past a bound the connection waiting
// longest for its next request is closed (unauthenticated first), never one
// with a request in progress. The descriptor limit is raised at start; an
// accept that finds none free closes an idle connection or waits, it never
// spins.
//
// Threads: one loop thread accepts, reads and writes for every connection
// (an idle or slow connection costs a coroutine, never a thread) and
// answers the routes that need no token (/healthz) itself. Requests that run a command or program
// (RequestHandler::runsCommand) run on threads of their own, at most
// settings.max_concurrent_executions at once (503 past it; a slot is held
// while the command runs, not while its answer is written), at a lower CPU
// priority than the loop; every other request runs on a small pool of its
// own, so long commands never hold up provisioning, listing or health.
//
// Streaming execute: the command's output is queued for the client without
// ever blocking the command, so its timeout and cap hold whatever the client
// does. What is queued is bounded by the output cap, times the JSON
// escaping of the bytes (up to 6x for control bytes) and the result line's
// second copy. A client that hangs up (seen within 100 ms, even behind
// bytes it sent), fails a write, or takes nothing within request_timeout
// is gone: its command is cancelled. Every write, streamed or not, is made
// in pieces of at most 256 KiB, each under request_timeout.
//
// Authentication: the token counts only from the request head (never a
// chunked trailer). A request without it is answered 401 on the loop and
// its connection closes: it never takes an execution slot or a worker. A
// head with the token marks the request in progress, so its body is never
// cut off to make room.
//
// Logs: one JSON line per request on stderr (time, method, route: its
// pattern (routeLabel), status, milliseconds); never a header value or a
// body.
//
// Lifecycle: run() serves until SIGINT/SIGTERM or stop(); then it stops
// accepting, closes idle connections, tells the adapter to shut down
// (running commands end with SERVICE_SHUTDOWN), waits for in-flight
// responses (at most a few seconds for a client that does not read),
// destroys every environment and returns. The reaper runs every
// settings.reaper_interval.
#pragma once

#include <cstdint>
#include <memory>

#include "airlock/core/error.h"
#include "airlock/port/execution_environment.h"
#include "airlock/service/request_handler.h"
#include "airlock/service/settings.h"

namespace airlock::service {

class HttpServer {
 public:
  // Binds settings.listen (ExecutionUnavailable naming the address when it
  // cannot). `env` is shut down when the server stops.
  static Result<std::unique_ptr<HttpServer>> create(const Settings& settings, RequestHandler& api,
                                                    ExecutionEnvironment& env);
  virtual ~HttpServer() = default;
  // The bound port (useful with port 0).
  virtual std::uint16_t port() const = 0;
  // Serves until stopped; returns after the shutdown sequence above.
  virtual void run() = 0;
  // Thread-safe, idempotent.
  virtual void stop() = 0;
};

}  // namespace airlock::service
