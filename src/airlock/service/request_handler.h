// What the HTTP server (http_server.h) serves: the requests it has read,
// and the periodic passes it runs. The server only moves bytes and enforces
// request bounds; everything a request means is the handler's (the API:
// gateway/api/api.h). Keeping this interface between them lets the server be
// built without the handlers.
//
// Thread-safety: every method may be called concurrently from the server's
// threads (its loop, its pools, its timers).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/port/cancel_token.h"
#include "airlock/service/http_message.h"
#include "airlock/service/metrics.h"

namespace airlock::service {

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;

  // The answer to one request (an unknown route, a missing token: an error
  // response, never an exception).
  virtual HttpResponse handle(const HttpRequest& request) = 0;
  // Answers a request that wantsStream(): each NDJSON line (no newline) to
  // `emit` as it is produced, the result line last. A request refused
  // before its command starts emits nothing and returns the refusal;
  // otherwise the return value is the final response (the lines were the
  // answer). `cancel` ends the command with CANCELLED.
  virtual HttpResponse handleStreaming(const HttpRequest& request,
                                       const std::function<void(std::string)>& emit,
                                       const CancelToken* cancel) = 0;

  // A request whose answer streams (?stream=1 on a route that can).
  virtual bool wantsStream(const HttpRequest& request) const = 0;
  // A request that runs a command or program for as long as its own
  // timeout: the server runs these on threads of their own and bounds how
  // many run at once.
  virtual bool runsCommand(const HttpRequest& request) const = 0;
  // A request that needs no token: the server answers it at once, on its
  // loop (it must never block).
  virtual bool needsNoToken(const HttpRequest& request) const = 0;
  // True when the request carries the service token.
  virtual bool authorized(const HttpRequest& request) const = 0;
  // The label of a request path in metrics and logs: a fixed set, so a
  // client cannot mint series by inventing paths.
  virtual std::string routeLabel(std::string_view path) const = 0;

  // One reaper pass (every settings.reaper_interval); how many environments
  // were destroyed.
  virtual int reap() = 0;
  // One schedule firing pass (every schedule_fire_interval); how many fired.
  virtual Result<std::size_t> fireSchedules() = 0;
  // Destroys every environment (shutdown).
  virtual void destroyAll() = 0;
  // Where request counts and latencies go.
  virtual Metrics& metrics() = 0;
};

}  // namespace airlock::service
