// The routes of `airlock serve`'s HTTP API: one table (routes.cpp), one row
// per (method, path pattern). Everything else is derived from it: Api's
// routing (the handler a request reaches, with its named segments), 404 for
// an unknown path, 405 with an Allow header for a known path and another
// method, 400 for a query parameter the route does not take, the tenant
// check, which requests run a command (the server bounds them) or stream,
// and the route label of metrics and logs (the pattern). docs/openapi.yaml
// documents the same rows; tests/service/routes_test.cpp fails when the two
// differ.
//
// Tenants (spec 000, "EnvironmentHandle": a handle carries its tenant so
// that a call for one tenant never reaches another's). Two kinds of bearer
// credential: the service token is the operator's and may name any tenant
// (or none: the all-tenant view); a tenant key (service/tenant_keys.h) acts
// for its own tenant only. Each route takes a tenant in exactly one place
// (TenantScope), and the dispatcher checks it once, before the handler runs:
//   - a malformed tenant_id is 400;
//   - on a route of one environment, an environment of another tenant is
//     answered exactly as an unknown id (404 not_found; destroy 204 and
//     nothing destroyed), so a call for one tenant never reads, changes or
//     learns of another's (the schedule routes, whose schedules outlive
//     their environment, need it live when the call has a tenant);
//   - a tenant_id where the route takes none is 400 naming it: in the query
//     of a route whose tenant is in its JSON body (provision, lease, tool
//     call), on an operator route, anywhere else as any unknown query
//     parameter (a misspelt ?tenant= too: never the all-tenant view).
// With a tenant key:
//   - the call's tenant is the key's: a tenant_id may be left out (even
//     where the service token must give one), and naming the key's own
//     tenant changes nothing;
//   - a tenant_id naming another tenant is answered, on a route of one
//     object (an environment, an artifact, a note), exactly as an unknown id
//     of that object is (404; destroy 204), whoever owns it; on any other
//     route (a listing, provision, upload, lease) 403 forbidden, the same
//     answer whatever tenant is named;
//   - an operator route (kOperator) is 403 forbidden;
//   - listings show the key's tenant's objects only.
// Any query parameter named twice, or not valid percent-encoding, is 400
// too: a call is never answered for a value other than the one it meant.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/service/http_message.h"

namespace airlock::gateway {

class Api;
struct RouteCall;

// What a route holds of a tenant, and where its call names one.
enum class TenantScope : std::uint8_t {
  // Nothing of any tenant's (health, images, the tool list): no tenant_id.
  kNone,
  // The operator's, spanning every tenant (metrics, the fire outbox): a
  // tenant_id is refused (400 bad_request) rather than answered with all,
  // and a tenant key is refused (403 forbidden).
  kOperator,
  // ?tenant_id=T, optional: named, only T's environments are reached (the
  // listing shows T's only); absent, the call is the operator's (a tenant
  // key's: its own tenant's).
  kQuery,
  // ?tenant_id=T, required of the service token (400 without it; a tenant
  // key's call is its own tenant's): only T's artifacts and notes.
  kQueryRequired,
  // The JSON body's "tenant_id" names it (provision, lease, tool call); a
  // ?tenant_id is refused (400 bad_request), never weighed against it. The
  // dispatcher parses the body (RouteCall::body).
  kBody,
};

// Traits of a route (Route::flags, or-ed).
enum RouteFlag : unsigned {
  // Answered without the service token, at once on the server's loop
  // thread (it must never block): /healthz.
  kNoAuthentication = 1U << 0U,
  // Runs a command or program for as long as its own timeout: the server
  // runs it on a thread of its own and bounds how many run at once.
  kRunsCommand = 1U << 1U,
  // With ?stream=1 the answer is NDJSON lines as output is produced
  // (Api::handleStreaming).
  kStreams = 1U << 2U,
  // An environment the call's tenant may not see is answered as an unknown
  // id is here: 204, nothing done (destroy is idempotent).
  kUnknownIdSucceeds = 1U << 3U,
  // The environment the call acts on is its JSON body's "environment_id"
  // (and its tenant the body's "tenant_id"): the dispatcher reads both.
  kEnvironmentInBody = 1U << 4U,
  // The internal API's (spec 000, "Where the boundary is"): authenticated
  // with the internal service credential alone (Api::attachInternalCredential),
  // absent without one; no tenant (TenantScope::kNone).
  kInternal = 1U << 5U,
};

// A route's handler: a member of Api given the matched call.
using RouteHandler = service::HttpResponse (Api::*)(const RouteCall&);

inline constexpr std::size_t kMaxQueryParams = 6;

struct Route {
  std::string_view method;   // "GET", "POST", "PUT", "DELETE"
  std::string_view pattern;  // "/v1/environments/{environment_id}/files": literal
                             // segments and {named} ones, each one whole segment
  RouteHandler handler;
  TenantScope tenant = TenantScope::kNone;
  unsigned flags = 0;  // RouteFlag
  // The query parameters it takes, tenant_id included where it takes one;
  // empty strings pad the array.
  std::array<std::string_view, kMaxQueryParams> query{};
  std::string_view help;  // what it does, one line

  bool has(RouteFlag flag) const { return (flags & flag) != 0; }
  // `query` without the padding.
  std::span<const std::string_view> queryParams() const;
  bool takes(std::string_view param) const;
};

// The table, in no particular order: no two patterns match one path.
std::span<const Route> routes();

// What the table says of a request path.
struct RouteLookup {
  // The route of the path and method; nullptr when there is none.
  const Route* route = nullptr;
  // Every route of the path, any method (empty: an unknown path, 404).
  std::vector<const Route*> of_path;
  // The named segments of the path, as sent (percent-encoded).
  std::vector<std::pair<std::string_view, std::string_view>> segments;
};
// `path` is the target before '?'; empty segments are skipped ("//" is "/").
RouteLookup lookupRoute(std::string_view method, std::string_view path);

// The pattern `path` matches, or "other" for a path that is no route, so
// that a client cannot mint label values (metric series) by inventing
// paths.
std::string_view routePattern(std::string_view path);

// The route label of metrics and logs: routePattern's, as a string (e.g.
// "/v1/environments/{environment_id}/execute"; "other" for no route).
std::string routeLabel(std::string_view path);

// "GET, DELETE": the methods of `lookup.of_path`, for the Allow header.
std::string allowedMethods(const RouteLookup& lookup);

// Who a request's bearer credential speaks for.
struct Caller {
  // The tenant of a tenant key; nullopt for the service token (the
  // operator, who may name any tenant).
  std::optional<std::string> key_tenant;
};

// A request matched to its route and admitted by the dispatcher (the token,
// the method, the query parameters and the tenant are checked): what a
// handler is given.
struct RouteCall {
  const service::HttpRequest& request;
  const Route& route;
  // The named segments, percent-decoded ("environment_id" -> "0190...").
  std::map<std::string, std::string, std::less<>> params;
  // The query parameters, percent-decoded ('+' is a space); each name once,
  // each one the route takes.
  std::map<std::string, std::string, std::less<>> query;
  // The call's tenant, checked (TenantScope): a tenant key's always;
  // otherwise the query's for kQuery and kQueryRequired (always set for the
  // latter), the body's "tenant_id" for kBody; nullopt when none is named.
  std::optional<std::string> tenant;
  // kBody routes: the body, parsed (a JSON object).
  std::shared_ptr<const nlohmann::json> body;

  // A named segment of the pattern ("" for a name it does not have).
  const std::string& param(std::string_view name) const;
  // A query parameter; nullopt when the call did not send it.
  std::optional<std::string> queryValue(std::string_view name) const;
};

}  // namespace airlock::gateway
