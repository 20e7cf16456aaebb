#include "airlock/execution/internal_api.h"

#include <utility>

namespace airlock::execution {

// A first shape: the routes are not served yet (every call answers 503).

InternalApi::InternalApi(ExecutionNode& node, InternalApiOptions options, service::Metrics& metrics)
    : node_(node), options_(std::move(options)), metrics_(metrics) {}

service::HttpResponse InternalApi::handle(const service::HttpRequest& /*request*/) {
  return service::errorResponse(
      Error{ErrorCode::kExecutionUnavailable, 0, "the internal API is not served yet"});
}

service::HttpResponse InternalApi::handleStreaming(const service::HttpRequest& request,
                                                   const std::function<void(std::string)>& /*emit*/,
                                                   const CancelToken* /*cancel*/) {
  return handle(request);
}

bool InternalApi::wantsStream(const service::HttpRequest& /*request*/) const {
  return false;
}
bool InternalApi::runsCommand(const service::HttpRequest& /*request*/) const {
  return false;
}
bool InternalApi::needsNoToken(const service::HttpRequest& /*request*/) const {
  return false;
}
bool InternalApi::authorized(const service::HttpRequest& /*request*/) const {
  return false;
}
std::string InternalApi::routeLabel(std::string_view /*path*/) const {
  return "other";
}

int InternalApi::reap() {
  return node_.reap(options_.stale_leases);
}

NodeStatus InternalApi::status() const {
  return NodeStatus{options_.node_name, node_.liveCount(), options_.capacity};
}

}  // namespace airlock::execution
