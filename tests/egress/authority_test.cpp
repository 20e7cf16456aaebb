// The strict authority parser and host canonicalization (parser differentials
// on the authority: every spelling that has bypassed another parser).
#include "airlock/egress/authority.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "egress_printers.h"

namespace airlock::egress {
namespace {

Reason reasonOf(std::string_view text) {
  auto r = parseAuthority(text);
  return r ? Reason::kAllowed : r.error().reason;
}

TEST(ParseAuthority, AcceptsNamesAndCanonicalizes) {
  auto a = parseAuthority("PyPI.ORG:443");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->host, "pypi.org");
  EXPECT_EQ(a->port, 443);
  EXPECT_EQ(parseAuthority("files.pythonhosted.org.:443")->host, "files.pythonhosted.org");
  EXPECT_EQ(parseAuthority("foo_bar.example.com:1")->host, "foo_bar.example.com");
  EXPECT_EQ(parseAuthority("xn--80ak6aa92e.pythonhosted.org:65535")->port, 65535);
  EXPECT_EQ(parseAuthority("127.0.0.1.example.com:443")->host, "127.0.0.1.example.com");
  EXPECT_EQ(parseAuthority("1e100.net:443")->host, "1e100.net");
  EXPECT_EQ(parseAuthority("localhost:443")->host, "localhost");  // refused by policy, not syntax
}

TEST(ParseAuthority, PortIsRequiredCanonicalAndInRange) {
  for (const char* bad :
       {"pypi.org", "pypi.org:", "pypi.org:0", "pypi.org:0443", "pypi.org:+443", "pypi.org:-1",
        "pypi.org:443abc", "pypi.org:65536", "pypi.org:65979", "pypi.org:4294967739",
        "pypi.org:443:443", "pypi.org:0x1bb", "pypi.org:443 ", "pypi.org: 443", "pypi.org:١٢٣"})
    EXPECT_NE(reasonOf(bad), Reason::kAllowed) << bad;
  EXPECT_EQ(reasonOf("pypi.org:0443"), Reason::kMalformedAuthority);
  EXPECT_EQ(reasonOf("pypi.org:65979"), Reason::kMalformedAuthority);
  EXPECT_EQ(parseAuthority("pypi.org", 80)->port, 80);
  EXPECT_EQ(parseAuthority("pypi.org:8080", 80)->port, 8080);
  EXPECT_FALSE(parseAuthority("pypi.org:", 80).has_value());
}

TEST(ParseAuthority, ForbiddenBytesAreRefusedFirst) {
  for (std::string bad : {"pypi.org@evil.com:443", "evil.com\\@pypi.org:443", "pypi%2eorg:443",
                          "pypi.org :443", "pypi.org\t:443", "pypi.org\r\n:443",
                          "::ffff:1.2.3.4%x.pythonhosted.org:443", "a.b\x7f.org:443"})
    EXPECT_EQ(reasonOf(bad), Reason::kMalformedAuthority) << bad;
  EXPECT_EQ(reasonOf(std::string("evil\0.pythonhosted.org:443", 26)), Reason::kMalformedAuthority);
  EXPECT_EQ(reasonOf("pyp\xd1\x96.org:443"), Reason::kNonAsciiHost);
  EXPECT_EQ(reasonOf("\xe2\x93\x9f\xe2\x93\xa8.org:443"), Reason::kNonAsciiHost);
  EXPECT_EQ(reasonOf("pypi\xef\xbc\x8eorg:443"), Reason::kNonAsciiHost);  // fullwidth dot
}

TEST(ParseAuthority, MalformedNames) {
  for (const char* bad : {"pypi.org..:443", ".pypi.org:443", "pypi..org:443", ".:443", ":443",
                          "*.pythonhosted.org:443", "[pypi.org]:443", "[pypi.org:443",
                          "pypi.org]:443", "a/b.org:443", "a?.org:443", "a#.org:443"})
    EXPECT_EQ(reasonOf(bad), Reason::kMalformedAuthority) << bad;
  const std::string label64(64, 'a');
  EXPECT_EQ(reasonOf(label64 + ".org:443"), Reason::kMalformedAuthority);
  EXPECT_EQ(reasonOf(std::string(63, 'a') + ".org:443"), Reason::kAllowed);
  std::string long_name;
  while (long_name.size() < 260) long_name += "abcdefghi.";
  long_name += "org";  // > 253
  EXPECT_EQ(reasonOf(long_name + ":443"), Reason::kMalformedAuthority);
}

TEST(ParseAuthority, EveryIpv4SpellingIsAnIpLiteral) {
  for (const char* lit :
       {"127.0.0.1:443", "2130706433:443", "017700000001:443", "127.1:443", "0x7f.0.0.1:443",
        "0x7f000001:443", "012.0.0.1:443", "0.0.0.0:443", "0:443", "169.254.169.254:80",
        "0x7f.1:443", "127.0.0.1.:443", "a.0x:443", "foo.123:443", "0X7F.1:443", "1.2.3.4.5:443"})
    EXPECT_EQ(reasonOf(lit), Reason::kIpLiteral) << lit;
}

TEST(ParseAuthority, Ipv6LiteralsAreIpLiterals) {
  for (const char* lit : {"[::1]:443", "[::]:443", "[::ffff:7f00:1]:443", "[::ffff:a9fe:a9fe]:80",
                          "[2606:4700:4700::1111]:443", "[::ffff:127.0.0.1]:443"})
    EXPECT_EQ(reasonOf(lit), Reason::kIpLiteral) << lit;
  EXPECT_EQ(reasonOf("::1:443"), Reason::kMalformedAuthority);  // unbracketed
  EXPECT_EQ(reasonOf("[::1]x:443"), Reason::kMalformedAuthority);
  EXPECT_EQ(reasonOf("[fe80::1%25eth0]:443"), Reason::kMalformedAuthority);
}

TEST(ParseHostName, SharesTheRules) {
  EXPECT_EQ(parseHostName("Example.COM.").value(), "example.com");
  EXPECT_EQ(parseHostName("10.0.0.1").error().reason, Reason::kIpLiteral);
  EXPECT_EQ(parseHostName("[::1]").error().reason, Reason::kIpLiteral);
  EXPECT_EQ(parseHostName("a:1").error().reason, Reason::kMalformedAuthority);
  EXPECT_EQ(parseHostName("éxämple.com").error().reason, Reason::kNonAsciiHost);
}

TEST(SanitizeForLog, EscapesEverythingUnprintable) {
  EXPECT_EQ(sanitizeForLog(std::string("a\0b\"\\\xff", 6)), "a\\x00b\\x22\\x5c\\xff");
  EXPECT_EQ(sanitizeForLog("abcdef", 3), "abc...");
}

TEST(PrintableMessage, KeepsQuotesAndBackslashesAndEscapesTheUnprintable) {
  EXPECT_EQ(printableMessage("host \"example.com\" is not allowed"),
            "host \"example.com\" is not allowed");
  EXPECT_EQ(printableMessage("a \"b\\x01\" c"), "a \"b\\x01\" c")
      << "already escaped parts are kept";
  EXPECT_EQ(printableMessage(std::string("x\n\0\xff", 4)), "x\\x0a\\x00\\xff");
  EXPECT_EQ(printableMessage("abcdef", 3), "abc...");
}

// --- properties

rc::Gen<std::string> genString(std::size_t min, std::size_t max, std::string alphabet) {
  return rc::gen::mapcat(rc::gen::inRange<std::size_t>(min, max + 1), [alphabet](std::size_t n) {
    return rc::gen::container<std::string>(n, rc::gen::elementOf(alphabet));
  });
}

rc::Gen<std::string> genName() {
  const std::string any = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
  return rc::gen::mapcat(rc::gen::inRange<std::size_t>(0, 5), [any](std::size_t n) {
    return rc::gen::map(
        rc::gen::pair(rc::gen::container<std::vector<std::string>>(n, genString(1, 20, any)),
                      genString(1, 10, "abcdefghijklmnopqrstuvwxyzABC")),
        [](const std::pair<std::vector<std::string>, std::string>& p) {
          std::string name;
          for (const auto& l : p.first) name += l + ".";
          return name + p.second;  // the last label has only letters: never numeric
        });
  });
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

RC_GTEST_PROP(ParseAuthorityProperty, ValidNamesParseToTheirLowercaseForm, ()) {
  const std::string name = *genName();
  const auto port = *rc::gen::inRange<std::uint32_t>(1, 65536);
  const bool dot = *rc::gen::arbitrary<bool>();
  const auto a = parseAuthority(name + (dot ? "." : "") + ":" + std::to_string(port));
  RC_ASSERT(a.has_value());
  RC_ASSERT(a->host == lower(name));
  RC_ASSERT(a->port == port);
}

RC_GTEST_PROP(ParseAuthorityProperty, AcceptedAuthoritiesAreCanonicalAndStable,
              (const std::string& text)) {
  const auto a = parseAuthority(text);
  if (!a) return;
  RC_ASSERT(!a->host.empty());
  RC_ASSERT(a->host.back() != '.');
  RC_ASSERT(a->host.size() <= 253u);
  RC_ASSERT(a->port >= 1);
  for (char c : a->host)
    RC_ASSERT((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.');
  const auto again = parseAuthority(a->host + ":" + std::to_string(a->port));
  RC_ASSERT(again.has_value());
  RC_ASSERT(*again == *a);
}

RC_GTEST_PROP(ParseAuthorityProperty, AForbiddenByteAnywhereIsRefused, ()) {
  const std::string name = *genName();
  const char bad =
      *rc::gen::elementOf(std::string("@%\\ \t\r\n\x01\x7f", 9) + std::string(1, '\0'));
  const std::string text = name + ":443";
  const auto at = *rc::gen::inRange<std::size_t>(0, text.size() + 1);
  std::string mutated = text;
  mutated.insert(at, 1, bad);
  const auto r = parseAuthority(mutated);
  RC_ASSERT(!r.has_value());
  RC_ASSERT(r.error().reason == Reason::kMalformedAuthority);
}

RC_GTEST_PROP(ParseAuthorityProperty, NumericLastLabelIsAlwaysAnIpLiteral,
              (std::uint32_t a, std::uint32_t b)) {
  const std::string name = *genName();
  RC_ASSERT(reasonOf(name + "." + std::to_string(a) + ":443") == Reason::kIpLiteral);
  RC_ASSERT(reasonOf(std::to_string(a) + "." + std::to_string(b) + ":443") == Reason::kIpLiteral);
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%x", a);
  RC_ASSERT(reasonOf(name + "." + hex + ":443") == Reason::kIpLiteral);
}

}  // namespace
}  // namespace airlock::egress
