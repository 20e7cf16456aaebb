// The proxy's request head: CONNECT only; other forms refused with reasons;
// Host never chooses the destination.
#include "airlock/egress/request_head.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "egress_printers.h"
#include "fake_dns.h"

namespace airlock::egress {
namespace {

Reason refusal(std::string_view head) {
  auto r = parseRequestHead(head);
  return r ? Reason::kAllowed : r.error().reason;
}

TEST(RequestHead, AcceptsConnectWithOrWithoutAMatchingHost) {
  for (const char* head :
       {"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n", "CONNECT pypi.org:443 HTTP/1.0\r\n\r\n",
        "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n",
        "CONNECT pypi.org:443 HTTP/1.1\r\nhost:PYPI.org\r\nUser-Agent: curl/8\r\n\r\n",
        "CONNECT PyPI.org.:443 HTTP/1.1\r\nHOST: pypi.org.:443 \r\nProxy-Connection: "
        "keep-alive\r\n\r\n"}) {
    auto r = parseRequestHead(head);
    ASSERT_TRUE(r.has_value()) << head << ": " << r.error().detail;
    EXPECT_EQ(r->form, RequestForm::kConnect);
    EXPECT_EQ(r->target, (Authority{"pypi.org", 443}));
  }
}

TEST(RequestHead, HostMustNameTheTarget) {
  EXPECT_EQ(refusal("CONNECT pypi.org:443 HTTP/1.1\r\nHost: evil.com\r\n\r\n"),
            Reason::kHostHeaderMismatch);
  EXPECT_EQ(refusal("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:8443\r\n\r\n"),
            Reason::kHostHeaderMismatch);
  EXPECT_EQ(refusal("CONNECT pypi.org:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n"),
            Reason::kHostHeaderMismatch);
  EXPECT_EQ(refusal("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org@evil\r\n\r\n"),
            Reason::kHostHeaderMismatch);
  EXPECT_EQ(refusal("CONNECT pypi.org:443 HTTP/1.1\r\nHost: \r\n\r\n"),
            Reason::kHostHeaderMismatch);
  EXPECT_EQ(refusal("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org\r\nHost: pypi.org\r\n\r\n"),
            Reason::kMalformedRequest);
}

TEST(RequestHead, OtherFormsAreRefusedWithTheirReason) {
  EXPECT_EQ(refusal("GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n"),
            Reason::kOriginFormNotSupported);
  EXPECT_EQ(refusal("GET https://pypi.org/ HTTP/1.1\r\n\r\n"), Reason::kHttpsAbsoluteForm);
  EXPECT_EQ(refusal("GET HTTPS://pypi.org/ HTTP/1.1\r\n\r\n"), Reason::kHttpsAbsoluteForm);
  EXPECT_EQ(refusal("GET gopher://pypi.org:70/_x HTTP/1.1\r\n\r\n"), Reason::kSchemeNotAllowed);
  EXPECT_EQ(refusal("OPTIONS * HTTP/1.1\r\n\r\n"), Reason::kMalformedRequest);
  EXPECT_EQ(refusal("GET pypi.org:443 HTTP/1.1\r\n\r\n"), Reason::kMalformedRequest);
  EXPECT_EQ(refusal("GET http://user@pypi.org/ HTTP/1.1\r\n\r\n"), Reason::kMalformedAuthority);
  EXPECT_EQ(refusal("GET http://0x7f.1/ HTTP/1.1\r\n\r\n"), Reason::kIpLiteral);
  auto abs = parseRequestHead("GET http://pypi.org/simple/?q#f HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(abs.has_value());
  EXPECT_EQ(abs->form, RequestForm::kAbsoluteHttp);
  EXPECT_EQ(abs->target, (Authority{"pypi.org", 80}));
}

TEST(RequestHead, StrictFraming) {
  for (const std::string& head : std::vector<std::string>{
           "CONNECT pypi.org:443 HTTP/1.1\n\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\n\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\nX: a\rb\r\n\r\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\n\r\nextra",
           "CONNECT pypi.org:443 HTTP/1.1\r\n\r\n\r\n",
           "CONNECT  pypi.org:443 HTTP/1.1\r\n\r\n",
           "CONNECT pypi.org:443  HTTP/1.1\r\n\r\n",
           "CONNECT pypi.org:443\r\n\r\n",
           "CONNECT pypi.org:443 HTTP/2.0\r\n\r\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\nHost : pypi.org\r\n\r\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\nX: a\x01\r\n\r\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\n: v\r\n\r\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\nnocolon\r\n\r\n",
           "CON\"NECT pypi.org:443 HTTP/1.1\r\n\r\n",
           "connect pypi.org:443 HTTP/1.1\r\n\r\n",
           std::string("CONNECT pypi.org:443 HTTP/1.1\r\nX: \0\r\n\r\n", 40),
           "\r\n\r\n",
           "",
       })
    EXPECT_EQ(refusal(head), Reason::kMalformedRequest) << sanitizeForLog(head);
  std::string big =
      "CONNECT pypi.org:443 HTTP/1.1\r\nX: " + std::string(kMaxRequestHead, 'a') + "\r\n\r\n";
  EXPECT_EQ(refusal(big), Reason::kMalformedRequest);
}

TEST(DecideRequest, AbsoluteFormIsDecidedByNameAndNeverResolvedOrAllowed) {
  auto policy = *loadEgressPolicy(
      "egress:\n  mode: allowlist\n  destinations:\n    - host: pypi.org\n      ports: [80, 443]\n",
      "t");
  testing::FakeDns dns;
  dns.setDefault({"151.101.0.223"});
  GetaddrinfoResolver resolver(dns.backend());
  AddressClassifier classifier(std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{}));
  auto d = decideRequest(*policy, "GET http://pypi.org/ HTTP/1.1\r\n\r\n", resolver, classifier);
  EXPECT_EQ(d.reason, Reason::kAbsoluteFormNotSupported);
  EXPECT_EQ(d.host, "pypi.org");
  EXPECT_EQ(d.port, 80);
  d = decideRequest(*policy, "GET http://evil.com/ HTTP/1.1\r\n\r\n", resolver, classifier);
  EXPECT_EQ(d.reason, Reason::kHostNotAllowed);
  d = decideRequest(*policy, "GET http://pypi.org:8080/ HTTP/1.1\r\n\r\n", resolver, classifier);
  EXPECT_EQ(d.reason, Reason::kPortNotAllowed);
  EXPECT_EQ(dns.lookupCount(), 0u);
  d = decideRequest(*policy, "CONNECT pypi.org:443 HTTP/1.1\r\n\r\n", resolver, classifier);
  EXPECT_TRUE(d.allowed());
  EXPECT_EQ(dns.lookupCount(), 1u);
}

TEST(DecideRequest, StatusCodes) {
  EXPECT_EQ(httpStatusFor(Reason::kAllowed), 200);
  EXPECT_EQ(httpStatusFor(Reason::kMalformedAuthority), 400);
  EXPECT_EQ(httpStatusFor(Reason::kHostHeaderMismatch), 400);
  EXPECT_EQ(httpStatusFor(Reason::kHostNotAllowed), 403);
  EXPECT_EQ(httpStatusFor(Reason::kResolvedDenied), 403);
  EXPECT_EQ(httpStatusFor(Reason::kIpLiteral), 403);
  EXPECT_EQ(httpStatusFor(Reason::kOriginFormNotSupported), 405);
  EXPECT_EQ(httpStatusFor(Reason::kDnsError), 502);
  EXPECT_EQ(httpStatusFor(Reason::kInternalError), 500);
}

RC_GTEST_PROP(RequestHeadProperty, ConnectTargetIsExactlyTheParsedAuthority,
              (const std::string& target, const std::string& junk)) {
  const std::string head = "CONNECT " + target + " HTTP/1.1\r\nX-J: " + junk + "\r\n\r\n";
  const auto r = parseRequestHead(head);
  if (!r) return;
  const auto a = parseAuthority(target);
  RC_ASSERT(a.has_value());
  RC_ASSERT(r->target == *a);
  RC_ASSERT(r->form == RequestForm::kConnect);
}

// --- a head still arriving --------------------------------------------------

std::string earlyDetail(std::string_view received) {
  const auto r = refuseEarly(received);
  if (!r) return "<undecided>";
  EXPECT_EQ(r->reason, Reason::kMalformedRequest) << sanitizeForLog(received);
  return r->detail;
}

TEST(RefuseEarly, NotHttpIsRefusedFromTheFirstBytes) {
  EXPECT_EQ(earlyDetail(std::string("\x05\x01\x00", 3)).rfind("a SOCKS5 greeting; ", 0), 0u);
  EXPECT_EQ(earlyDetail(std::string("\x04\x01\x01\xbb\x7f\x00\x00\x01", 8))
                .rfind("a SOCKS4 greeting; ", 0),
            0u);
  EXPECT_EQ(earlyDetail("\x16\x03\x01").rfind("a TLS handshake; ", 0), 0u);
  EXPECT_EQ(earlyDetail(" CONNECT").rfind("not an HTTP request; ", 0), 0u);
  EXPECT_EQ(earlyDetail("\x05"), earlyDetail(std::string("\x05\x01\x00", 3)))
      << "one byte is enough";
}

TEST(RefuseEarly, BareLineEndsAndBrokenLinesAreRefusedAsSoonAsTheyArrive) {
  const std::string line = "CONNECT pypi.org:443 HTTP/1.1";
  EXPECT_EQ(earlyDetail("GET / HTTP/1.1\n").rfind("bare LF", 0), 0u);
  EXPECT_EQ(earlyDetail(line + "\n").rfind("bare LF", 0), 0u);
  EXPECT_EQ(earlyDetail(line + "\r\nHost: pypi.org\n").rfind("bare LF", 0), 0u);
  EXPECT_EQ(earlyDetail(line + "\rX"), "bare CR in request head");
  EXPECT_EQ(earlyDetail(std::string("CONNECT \0", 9)), "NUL in request head");
  EXPECT_EQ(earlyDetail("CO\"NNECT"), "invalid method");
  EXPECT_EQ(earlyDetail("CONNECT  "), "empty method or request-target");
  EXPECT_EQ(earlyDetail("CONNECT pypi.org:443 HTTP/2"), "unsupported HTTP version");
  EXPECT_EQ(earlyDetail("CONNECT pypi.org:443 HTTP/1.1 x").rfind("request line must be", 0), 0u);
  EXPECT_EQ(earlyDetail("CONNECT pypi.org:443\r\n").rfind("request line must be", 0), 0u);
  EXPECT_EQ(earlyDetail(line + "\r\n folded"), "obsolete line folding");
  EXPECT_EQ(earlyDetail(line + "\r\n\tfolded"), "obsolete line folding");
  EXPECT_EQ(earlyDetail(line + "\r\n: v"), "header line without a name");
  EXPECT_EQ(earlyDetail(line + "\r\nHost : pypi.org"), "invalid header name");
  EXPECT_EQ(earlyDetail(line + "\r\nnocolon\r\n"), "header line without a name");
  EXPECT_EQ(earlyDetail(line + "\r\nX: a\x01"), "control byte in a header value");
}

TEST(RefuseEarly, EveryPrefixOfAHeadThatParsesIsUndecided) {
  for (const std::string head : {"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n",
                                 "CONNECT pypi.org:443 HTTP/1.0\r\nX:\t a\tb \r\n\r\n",
                                 // refused later, for reasons only the whole head shows
                                 "GET / HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
                                 "CONNECT pypi.org:443 HTTP/1.1\r\nHost: evil.test\r\n\r\n",
                                 "connect pypi.org:443 HTTP/1.1\r\n\r\n"}) {
    for (std::size_t n = 0; n <= head.size(); ++n)
      EXPECT_EQ(earlyDetail(head.substr(0, n)), "<undecided>") << sanitizeForLog(head.substr(0, n));
  }
  // What follows the head is tunnel payload, whatever its bytes.
  EXPECT_EQ(earlyDetail(std::string("CONNECT pypi.org:443 HTTP/1.1\r\n\r\n\x05\n\0", 36)),
            "<undecided>");
}

// Near-HTTP text: the pieces of request heads and the bytes that break them.
rc::Gen<std::string> genNearHttp() {
  static const std::vector<std::string> pieces = {"CONNECT",
                                                  "GET",
                                                  " ",
                                                  "\r\n",
                                                  "\r",
                                                  "\n",
                                                  "\t",
                                                  ":",
                                                  "a",
                                                  "Host",
                                                  "HTTP/1.1",
                                                  "HTTP/1.0",
                                                  "HTTP/2",
                                                  "/",
                                                  "x.example:443",
                                                  "\x05",
                                                  "\x16",
                                                  "\x01",
                                                  std::string(1, '\0')};
  return rc::gen::map(rc::gen::container<std::vector<std::string>>(rc::gen::elementOf(pieces)),
                      [](const std::vector<std::string>& parts) {
                        std::string out;
                        for (const auto& p : parts) out += p;
                        return out;
                      });
}

RC_GTEST_PROP(RefuseEarlyProperty, WhatItRefusesTheHeadParserRefusesAsMalformed, ()) {
  const std::string text = *genNearHttp();
  // The head a proxy would read: up to the first empty line.
  std::string head = text + "\r\n\r\n";
  head.resize(head.find("\r\n\r\n") + 4);
  const auto parsed = parseRequestHead(head);
  for (std::size_t n = 0; n <= head.size(); ++n) {
    if (!refuseEarly(head.substr(0, n))) continue;
    RC_ASSERT(!parsed.has_value());
    RC_ASSERT(parsed.error().reason == Reason::kMalformedRequest);
  }
}

RC_GTEST_PROP(RefuseEarlyProperty, AWellFormedConnectIsNeverRefusedEarly, ()) {
  const std::string host = *rc::gen::element<std::string>("pypi.org", "a.example", "x-1.test");
  const auto port = *rc::gen::inRange<int>(1, 65536);
  std::string head = "CONNECT " + host + ":" + std::to_string(port) + " HTTP/1." +
                     (*rc::gen::arbitrary<bool>() ? "1" : "0") + "\r\n";
  const auto headers = *rc::gen::container<std::vector<std::string>>(rc::gen::element<std::string>(
      "User-Agent: curl/8.0", "X:", "Proxy-Connection:\tkeep-alive ", "Accept: */*"));
  for (const auto& h : headers) head += h + "\r\n";
  head += "\r\n";
  RC_ASSERT(parseRequestHead(head).has_value());
  for (std::size_t n = 0; n <= head.size(); ++n) RC_ASSERT(!refuseEarly(head.substr(0, n)));
}

}  // namespace
}  // namespace airlock::egress
