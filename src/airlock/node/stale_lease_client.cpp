#include "airlock/node/stale_lease_client.h"

#include <algorithm>
#include <memory>

#include "airlock/egress/http_client.h"
#include "airlock/port/stale_lease_wire.h"

namespace airlock::node {
namespace {

// Why `response` is no answer, or "" when it is one.
std::string unanswered(const egress::HttpResult& response) {
  if (!response) {
    switch (response.error().kind) {
      case egress::HttpFailure::kConnectFailed:
        return "no connection: " + response.error().detail;
      case egress::HttpFailure::kTimeout:
        return "no answer in time";
      case egress::HttpFailure::kTooManyRedirects:
        return "a redirect (not followed)";
      default:
        return "the request failed: " + response.error().detail;
    }
  }
  if (response->status != 200) return "HTTP " + std::to_string(response->status);
  return "";
}

// The stale ids among `leases` by the first gateway that answers; none
// when no gateway does.
std::vector<std::string> ask(const GatewayEndpoints& endpoints,
                             const std::vector<LiveLease>& leases) {
  const std::string body = staleLeaseQuestionBody(leases);
  const egress::HttpHeaders headers = {{"Authorization", "Bearer " + endpoints.credential},
                                       {"Content-Type", "application/json"}};
  for (const std::string& url : endpoints.urls) {
    egress::HttpRequest request;
    std::string base = url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    request.url = base + "/internal/v1/leases/stale";
    request.method = "POST";
    request.body = body;
    request.limits.max_redirects = 0;  // the credential goes to this URL only
    request.limits.connect_timeout = endpoints.timeout;
    request.limits.hop_timeout = endpoints.timeout;
    request.limits.deadline = std::chrono::steady_clock::now() + endpoints.timeout;
    const auto response =
        egress::httpFetch(request, [&](const egress::HopContext&) -> egress::HopDecision {
          return egress::HopPlan{"", headers, {}};
        });
    std::string why = unanswered(response);
    if (why.empty()) {
      auto stale = staleLeaseAnswerFrom(response->body, leases);
      if (stale) return std::move(*stale);
      why = "a malformed answer: " + stale.error().message();
    }
    if (endpoints.on_unanswered) endpoints.on_unanswered(url, why);
  }
  return {};
}

}  // namespace

StaleLeaseQuery staleLeaseQueryOverHttp(GatewayEndpoints endpoints) {
  return [endpoints = std::make_shared<const GatewayEndpoints>(std::move(endpoints))](
             const std::vector<LiveLease>& leases) {
    std::vector<std::string> stale;
    for (std::size_t first = 0; first < leases.size(); first += kMaxStaleLeaseQuestion) {
      const auto end = leases.begin() + static_cast<std::ptrdiff_t>(std::min(
                                            leases.size(), first + kMaxStaleLeaseQuestion));
      const std::vector<LiveLease> part(leases.begin() + static_cast<std::ptrdiff_t>(first), end);
      auto answer = ask(*endpoints, part);
      stale.insert(stale.end(), answer.begin(), answer.end());
    }
    return stale;
  };
}

}  // namespace airlock::node
