// The bounded HTTP client (egress/http_client.h) against the scripted
// loopback servers of tests/images/http_test_server.h, with test hop
// policies. Every URL is a 127.0.0.0/8 literal, except the pin test's name,
// which the binary's private network namespace (main() below,
// testing/hermetic_net.h) maps to a trap in /etc/hosts: a client that let
// libcurl resolve it would reach the trap, never the server the pin names.
#include "airlock/egress/http_client.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>

#include "airlock/sys/unique_fd.h"
#include "hermetic_main.h"
#include "http_test_server.h"

namespace airlock::egress {
namespace {

// The server's side (the client's own types are HttpRequest and ServedResponse).
using ServedRequest = images::testing::HttpRequest;
using ServedResponse = images::testing::HttpResponse;
using images::testing::HttpTestServer;

bool g_hermetic = false;  // set by main() when the namespace is in place

constexpr const char* kHostsTrap = "127.0.0.3";  // /etc/hosts's answer for pinned.example

ServedResponse redirect(int status, const std::string& location) {
  return {status, {{"Location", location}}, ""};
}

// A policy that allows every hop with `headers` and records what it saw.
struct RecordingPolicy {
  HttpHeaders headers;
  std::vector<HopContext> seen;
  HopDecision operator()(const HopContext& ctx) {
    seen.push_back(ctx);
    HopPlan plan;
    plan.headers = headers;
    return plan;
  }
};

TEST(HttpClient, FollowsRedirectsAndTellsThePolicyEachHop) {
  HttpTestServer a("127.0.0.2", [](const ServedRequest& req) -> ServedResponse {
    if (req.path == "/start") return redirect(302, "/next?x=1");
    if (req.path == "/next") return {200, {{"X-Final", "yes"}}, "done"};
    return {404, {}, ""};
  });
  ASSERT_TRUE(a.ok());
  RecordingPolicy policy;
  HttpRequest request;
  request.url = a.origin() + "/start";
  const auto r = httpFetch(request, [&policy](const HopContext& c) { return policy(c); });
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "done");
  EXPECT_EQ(r->url, a.origin() + "/next?x=1");
  ASSERT_EQ(r->hops.size(), 2u);
  EXPECT_EQ(r->hops[0].status, 302);
  EXPECT_EQ(r->hops[1].dialed, "127.0.0.2");
  ASSERT_EQ(policy.seen.size(), 2u);
  EXPECT_EQ(policy.seen[0].index, 0);
  EXPECT_EQ(policy.seen[0].previous_url, "");
  EXPECT_EQ(policy.seen[1].index, 1);
  EXPECT_EQ(policy.seen[1].location, "/next?x=1");
  EXPECT_TRUE(policy.seen[1].relative);
  EXPECT_EQ(policy.seen[1].previous_url, a.origin() + "/start");
  EXPECT_EQ(policy.seen[1].redirect_status, 302);
  EXPECT_EQ(policy.seen[1].url, a.origin() + "/next?x=1");
}

TEST(HttpClient, RedirectChainsStopAtTheCap) {
  HttpTestServer a("127.0.0.2", [](const ServedRequest&) { return redirect(302, "/loop"); });
  ASSERT_TRUE(a.ok());
  RecordingPolicy policy;
  HttpRequest request;
  request.url = a.origin() + "/loop";
  request.limits.max_redirects = 3;
  const auto r = httpFetch(request, [&policy](const HopContext& c) { return policy(c); });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, HttpFailure::kTooManyRedirects);
  EXPECT_EQ(r.error().detail, "more than 3 redirects");
  EXPECT_EQ(r.error().hops.size(), 4u);
  EXPECT_EQ(a.requests().size(), 4u);
  EXPECT_EQ(policy.seen.size(), 4u);  // the policy is not asked about the fifth
}

TEST(HttpClient, BodiesAreCappedUnlessASinkTakesThem) {
  const std::string big(5000, 'x');
  HttpTestServer a("127.0.0.2", [&big](const ServedRequest& req) -> ServedResponse {
    if (req.path == "/redirect-with-body") return {302, {{"Location", "/big"}}, big};
    return {200, {}, big};
  });
  ASSERT_TRUE(a.ok());
  RecordingPolicy policy;
  const auto allow = [&policy](const HopContext& c) { return policy(c); };
  HttpRequest request;
  request.url = a.origin() + "/big";
  request.limits.max_body_bytes = 4096;
  auto r = httpFetch(request, allow);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, HttpFailure::kBodyTooLarge);
  // A redirect's body is held too (and dropped).
  request.url = a.origin() + "/redirect-with-body";
  request.sink = [](long, std::string_view) { return true; };
  r = httpFetch(request, allow);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, HttpFailure::kBodyTooLarge);
  // The final body to a sink: every byte, and the sink may stop it.
  request.url = a.origin() + "/big";
  std::string got;
  request.sink = [&got](long status, std::string_view bytes) {
    EXPECT_EQ(status, 200);
    got.append(bytes);
    return true;
  };
  r = httpFetch(request, allow);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(got, big);
  EXPECT_TRUE(r->body.empty());
  EXPECT_FALSE(r->stopped);
  request.sink = [](long, std::string_view) { return false; };
  r = httpFetch(request, allow);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpClient, ResponseHeadersAreCapped) {
  HttpTestServer a("127.0.0.2", [](const ServedRequest&) -> ServedResponse {
    ServedResponse resp{200, {}, "ok"};
    for (int i = 0; i < 100; ++i) resp.headers.emplace_back("X-Filler-" + std::to_string(i), "y");
    return resp;
  });
  ASSERT_TRUE(a.ok());
  HttpRequest request;
  request.url = a.origin() + "/";
  request.limits.max_header_bytes = 512;
  const auto r = httpFetch(request, [](const HopContext&) -> HopDecision { return HopPlan{}; });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, HttpFailure::kHeadersTooLarge);
}

TEST(HttpClient, ARefusedHopStopsTheChainWithThePolicysReason) {
  HttpTestServer b("127.0.0.4", [](const ServedRequest&) { return ServedResponse{200, {}, "b"}; });
  ASSERT_TRUE(b.ok());
  HttpTestServer a("127.0.0.2",
                   [&b](const ServedRequest&) { return redirect(307, b.origin() + "/landing"); });
  ASSERT_TRUE(a.ok());
  HttpRequest request;
  request.url = a.origin() + "/start";
  const auto r = httpFetch(request, [](const HopContext& ctx) -> HopDecision {
    if (ctx.index > 0) return tl::unexpected(HopRefusal{"not_here", "hop " + ctx.url + " refused"});
    return HopPlan{};
  });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, HttpFailure::kRefused);
  EXPECT_EQ(r.error().code, "not_here");
  EXPECT_EQ(r.error().detail, "hop " + b.origin() + "/landing refused");
  EXPECT_EQ(r.error().hops.size(), 1u);
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_TRUE(b.requests().empty());
}

// A policy like the outbound guard's: from the first hop to another origin
// on, only a safe list of the caller's headers goes along.
TEST(HttpClient, HeadersThePolicyDropsAcrossOriginsAreNotSent) {
  HttpTestServer b("127.0.0.4", [](const ServedRequest&) { return ServedResponse{200, {}, "b"}; });
  ASSERT_TRUE(b.ok());
  HttpTestServer a("127.0.0.2",
                   [&b](const ServedRequest&) { return redirect(302, b.origin() + "/landing"); });
  ASSERT_TRUE(a.ok());
  const HttpHeaders caller = {{"X-Api-Key", "k"},
                              {"Authorization", "Bearer t"},
                              {"Cookie", "s=1"},
                              {"X-Custom", "c"},
                              {"Accept", "text/plain"}};
  std::string first_origin;
  HttpRequest request;
  request.url = a.origin() + "/start";
  const auto r = httpFetch(request, [&](const HopContext& ctx) -> HopDecision {
    const auto origin = urlOrigin(ctx.url);
    if (!origin) return tl::unexpected(HopRefusal{"bad_url", ctx.url});
    if (first_origin.empty()) first_origin = origin->origin;
    HopPlan plan;
    for (const auto& h : caller)
      if (origin->origin == first_origin || h.first == "Accept") plan.headers.push_back(h);
    return plan;
  });
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  ASSERT_EQ(a.requests().size(), 1u);
  ASSERT_EQ(b.requests().size(), 1u);
  const ServedRequest at_a = a.requests()[0];
  const ServedRequest at_b = b.requests()[0];
  for (const char* name : {"x-api-key", "authorization", "cookie", "x-custom", "accept"})
    EXPECT_TRUE(at_a.hasHeader(name)) << name;
  for (const char* name : {"x-api-key", "authorization", "cookie", "x-custom"})
    EXPECT_FALSE(at_b.hasHeader(name)) << name;
  EXPECT_EQ(at_b.header("accept"), "text/plain");
}

// The client keeps the cross-origin rule itself: a policy that hands every
// hop every header (as the registry client's or any later caller's might)
// still gets only the safe ones sent from the first hop at another origin
// (here the same address on another port) on, even back at the first
// origin; a same-origin redirect keeps them all. 307 keeps the POST body,
// so Content-Type goes along too.
TEST(HttpClient, AHopAtAnotherOriginCarriesOnlyTheSafeHeadersWhateverThePolicyReturns) {
  std::string a_origin;
  HttpTestServer b("127.0.0.2",
                   [&a_origin](const ServedRequest&) { return redirect(307, a_origin + "/back"); });
  ASSERT_TRUE(b.ok());
  HttpTestServer a("127.0.0.2", [&b](const ServedRequest& req) -> ServedResponse {
    if (req.path == "/start") return redirect(307, "/same");
    if (req.path == "/same") return redirect(307, b.origin() + "/other");
    return {200, {}, "done"};
  });
  ASSERT_TRUE(a.ok());
  ASSERT_NE(a.port(), b.port());
  a_origin = a.origin();
  RecordingPolicy policy;
  policy.headers = {{"X-Api-Key", "k"},       {"Authorization", "Bearer t"},
                    {"Cookie", "s=1"},        {"X-Custom", "c"},
                    {"Accept", "text/plain"}, {"Accept-Language", "en"},
                    {"User-Agent", "ua"},     {"Content-Type", "application/json"}};
  HttpRequest request;
  request.url = a.origin() + "/start";
  request.method = "POST";
  request.body = "{}";
  const auto r = httpFetch(request, std::ref(policy));
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->body, "done");
  const auto at_a = a.requests();
  const auto at_b = b.requests();
  ASSERT_EQ(at_a.size(), 3u);
  ASSERT_EQ(at_b.size(), 1u);
  const std::vector<ServedRequest> first_origin = {at_a[0], at_a[1]};
  const std::vector<ServedRequest> after_leaving = {at_b[0], at_a[2]};
  for (const auto& req : first_origin)
    for (const auto& [name, value] : policy.headers) {
      std::string n = name;
      for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      EXPECT_EQ(req.header(n), value) << req.path << ": " << name;
    }
  for (const auto& req : after_leaving) {
    for (const char* name : {"x-api-key", "authorization", "cookie", "x-custom"})
      EXPECT_FALSE(req.hasHeader(name)) << req.path << ": " << name;
    EXPECT_EQ(req.header("accept"), "text/plain") << req.path;
    EXPECT_EQ(req.header("accept-language"), "en") << req.path;
    EXPECT_EQ(req.header("user-agent"), "ua") << req.path;
    EXPECT_EQ(req.header("content-type"), "application/json") << req.path;
  }
  ASSERT_EQ(policy.seen.size(), 4u);
  EXPECT_FALSE(policy.seen[0].cross_origin);
  EXPECT_FALSE(policy.seen[1].cross_origin);
  EXPECT_TRUE(policy.seen[2].cross_origin);
  EXPECT_TRUE(policy.seen[3].cross_origin) << "once left, the first origin is another one too";
}

TEST(HttpClient, TheCrossOriginSafeListIsShortAndCaseInsensitive) {
  for (const char* name :
       {"Accept", "ACCEPT-LANGUAGE", "accept-encoding", "Cache-Control", "User-Agent"}) {
    EXPECT_TRUE(isCrossOriginSafeHeader(name, false)) << name;
    EXPECT_TRUE(isCrossOriginSafeHeader(name, true)) << name;
  }
  for (const char* name : {"Content-Type", "content-language"}) {
    EXPECT_FALSE(isCrossOriginSafeHeader(name, false)) << name << " without the body";
    EXPECT_TRUE(isCrossOriginSafeHeader(name, true)) << name << " with the body";
  }
  for (const char* name : {"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key",
                           "X-Custom-Token", "Origin", "Referer", ""})
    EXPECT_FALSE(isCrossOriginSafeHeader(name, true)) << name;
}

TEST(HttpClient, ADowngradeFromHttpsIsWhatThePolicySeesAndRefuses) {
  EXPECT_TRUE(isSchemeDowngrade("https://a.example/x", "http://a.example/x"));
  EXPECT_TRUE(isSchemeDowngrade("HTTPS://a.example/x", "http://b.example/"));
  EXPECT_FALSE(isSchemeDowngrade("http://a.example/x", "https://a.example/x"));
  EXPECT_FALSE(isSchemeDowngrade("https://a.example/x", "https://b.example/"));
  EXPECT_FALSE(isSchemeDowngrade("", "http://a.example/"));  // hop 0

  // A scheme-relative Location keeps the previous hop's scheme; an absolute
  // one is handed over as written, so a policy sees any scheme change.
  HttpTestServer b("127.0.0.4", [](const ServedRequest&) { return ServedResponse{200, {}, "b"}; });
  ASSERT_TRUE(b.ok());
  HttpTestServer a("127.0.0.2", [&b](const ServedRequest& req) -> ServedResponse {
    if (req.path == "/rel") return redirect(302, "//" + b.authority() + "/x");
    return redirect(302, "HTTP://" + b.authority() + "/y");
  });
  ASSERT_TRUE(a.ok());
  std::vector<HopContext> seen;
  const auto refuseDowngrades = [&seen](const HopContext& ctx) -> HopDecision {
    seen.push_back(ctx);
    if (isSchemeDowngrade(ctx.previous_url, ctx.url))
      return tl::unexpected(HopRefusal{"downgrade", ctx.url});
    return HopPlan{};
  };
  HttpRequest request;
  request.url = a.origin() + "/rel";
  auto r = httpFetch(request, refuseDowngrades);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].url, "http://" + b.authority() + "/x");
  EXPECT_FALSE(seen[1].relative);
  request.url = a.origin() + "/abs";
  r = httpFetch(request, refuseDowngrades);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(seen.back().url, "HTTP://" + b.authority() + "/y");
}

TEST(HttpClient, SeeOtherTurnsAPostIntoAGetWithoutTheBody) {
  HttpTestServer a("127.0.0.2", [](const ServedRequest& req) -> ServedResponse {
    if (req.path == "/post") return redirect(303, "/result");
    return {200, {}, req.method};
  });
  ASSERT_TRUE(a.ok());
  RecordingPolicy policy;
  HttpRequest request;
  request.url = a.origin() + "/post";
  request.method = "POST";
  request.body = "payload";
  const auto r = httpFetch(request, [&policy](const HopContext& c) { return policy(c); });
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->body, "GET");
  ASSERT_EQ(policy.seen.size(), 2u);
  EXPECT_EQ(policy.seen[0].method, "POST");
  EXPECT_TRUE(policy.seen[0].with_body);
  EXPECT_EQ(policy.seen[1].method, "GET");
  EXPECT_FALSE(policy.seen[1].with_body);
  EXPECT_EQ(a.requests()[0].method, "POST");
  EXPECT_EQ(a.requests()[1].method, "GET");
}

TEST(HttpClient, CancelStopsATransferInProgress) {
  sys::UniqueFd cancel(::eventfd(0, EFD_CLOEXEC));
  ASSERT_TRUE(cancel.valid());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  // The server cancels once the request has arrived, then holds the answer
  // until the fetch has returned.
  HttpTestServer a("127.0.0.2", [&](const ServedRequest&) -> ServedResponse {
    const std::uint64_t one = 1;
    EXPECT_EQ(::write(cancel.get(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
    released.wait();
    return {200, {}, "late"};
  });
  ASSERT_TRUE(a.ok());
  HttpRequest request;
  request.url = a.origin() + "/slow";
  request.limits.hop_timeout = std::chrono::minutes(5);  // a cancel that did not work would wait
  request.cancel_fd = cancel.get();
  const auto started = std::chrono::steady_clock::now();
  const auto r = httpFetch(request, [](const HopContext&) -> HopDecision { return HopPlan{}; });
  const auto took = std::chrono::steady_clock::now() - started;
  release.set_value();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, HttpFailure::kCancelled);
  EXPECT_LT(took, std::chrono::minutes(1));
  EXPECT_EQ(a.requests().size(), 1u);
  // Already cancelled: nothing is dialled.
  const auto again = httpFetch(request, [](const HopContext&) -> HopDecision { return HopPlan{}; });
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().kind, HttpFailure::kCancelled);
  EXPECT_TRUE(again.error().hops.empty());
  EXPECT_EQ(a.requests().size(), 1u);
}

TEST(HttpClient, ThePastDeadlineFailsBeforeDialling) {
  HttpTestServer a("127.0.0.2", [](const ServedRequest&) { return ServedResponse{200, {}, "a"}; });
  ASSERT_TRUE(a.ok());
  HttpRequest request;
  request.url = a.origin() + "/";
  request.limits.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  const auto r = httpFetch(request, [](const HopContext&) -> HopDecision { return HopPlan{}; });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, HttpFailure::kTimeout);
  EXPECT_TRUE(a.requests().empty());
}

TEST(HttpClient, AnInvalidPlanIsNotSent) {
  HttpTestServer a("127.0.0.2", [](const ServedRequest&) { return ServedResponse{200, {}, "a"}; });
  ASSERT_TRUE(a.ok());
  HttpRequest request;
  request.url = a.origin() + "/";
  for (const HopPlan& plan :
       {HopPlan{"", {{"X-Bad", "a\r\nX-Injected: 1"}}, {}}, HopPlan{"", {}, {"not-an-address"}}}) {
    const auto r = httpFetch(request, [&plan](const HopContext&) -> HopDecision { return plan; });
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().kind, HttpFailure::kInvalidPlan);
  }
  EXPECT_TRUE(a.requests().empty());
}

TEST(HttpClient, APinnedHopDialsThePinnedAddressNeverTheResolver) {
  if (!g_hermetic) GTEST_SKIP() << "needs root for a private network namespace";
  HttpTestServer a("127.0.0.2", [](const ServedRequest&) {
    return ServedResponse{200, {}, "pinned"};
  });
  ASSERT_TRUE(a.ok());
  HttpRequest request;
  request.url = "http://pinned.example:" + std::to_string(a.port()) + "/";
  const auto r = httpFetch(request, [](const HopContext&) -> HopDecision {
    return HopPlan{"", {}, {"127.0.0.2"}};
  });
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->body, "pinned");
  EXPECT_EQ(r->hops[0].dialed, "127.0.0.2");
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_EQ(a.requests()[0].header("host"), "pinned.example:" + std::to_string(a.port()));
}

TEST(HttpClient, UrlOriginIsSchemeHostAndExplicitPort) {
  const auto o = urlOrigin("HTTP://Example.COM/x?y");
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->scheme, "http");
  EXPECT_EQ(o->origin, "http://example.com:80");
  EXPECT_EQ(o->authority, "example.com");
  EXPECT_EQ(o->port, 80);
  const auto p = urlOrigin("https://127.0.0.1:5000/v2/");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->origin, "https://127.0.0.1:5000");
  EXPECT_EQ(p->authority, "127.0.0.1:5000");
  EXPECT_FALSE(urlOrigin("not a url").has_value());
}

}  // namespace
}  // namespace airlock::egress

// The whole binary runs in its own network and mount namespace (see the top
// of this file), entered before any thread exists.
int main(int argc, char** argv) {
  std::ostringstream hosts;
  hosts << "127.0.0.1 localhost\n"
        << airlock::egress::kHostsTrap << " pinned.example pinned.example.\n";
  return airlock::egress::testing::runTestsInHermeticNetwork(
      argc, argv, "http client tests", hosts.str(), airlock::egress::g_hermetic,
      "the pin test is skipped");
}
