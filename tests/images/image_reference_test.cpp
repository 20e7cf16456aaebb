// Image references (images/image_reference.h): a table of good and bad
// references, and properties: every valid reference round-trips through
// toString, and arbitrary text never crashes the parser.
#include "airlock/images/image_reference.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

namespace airlock::images {
namespace {

const std::string kHex64(64, 'a');
const std::string kDigest = "sha256:" + std::string(64, '0');

struct Good {
  std::string text;
  ImageReference want;
};

TEST(ImageReference, GoodReferencesParseAndNormalize) {
  const std::vector<Good> cases = {
      {"127.0.0.1:5000/team/py:3.12", {"127.0.0.1:5000", "team/py", "3.12", ""}},
      {"registry.example.com/x@" + kDigest, {"registry.example.com", "x", "", kDigest}},
      {"docker.io/library/debian:12", {"registry-1.docker.io", "library/debian", "12", ""}},
      {"debian", {"registry-1.docker.io", "library/debian", "latest", ""}},
      {"debian:12", {"registry-1.docker.io", "library/debian", "12", ""}},
      {"team/py", {"registry-1.docker.io", "team/py", "latest", ""}},
      {"index.docker.io/debian", {"registry-1.docker.io", "library/debian", "latest", ""}},
      {"registry-1.docker.io/debian", {"registry-1.docker.io", "library/debian", "latest", ""}},
      {"localhost/app", {"localhost", "app", "latest", ""}},
      {"localhost:5000/app:v1", {"localhost:5000", "app", "v1", ""}},
      {"[::1]:5000/a/b:c", {"[::1]:5000", "a/b", "c", ""}},
      {"Registry.Example.COM/x", {"registry.example.com", "x", "latest", ""}},
      {"r.io/a.b/c_d/e__f/g-h/i---j:T_a.g-1", {"r.io", "a.b/c_d/e__f/g-h/i---j", "T_a.g-1", ""}},
      {"r.io/x:v1@" + kDigest, {"r.io", "x", "v1", kDigest}},
      {"r.io/x:" + std::string(128, 'a'), {"r.io", "x", std::string(128, 'a'), ""}},
      {"r.io:1/x", {"r.io:1", "x", "latest", ""}},
      {"r.io:65535/x", {"r.io:65535", "x", "latest", ""}},
  };
  for (const auto& c : cases) {
    auto r = parseImageReference(c.text);
    ASSERT_TRUE(r) << c.text << ": " << r.error().context;
    EXPECT_EQ(r->registry, c.want.registry) << c.text;
    EXPECT_EQ(r->repository, c.want.repository) << c.text;
    EXPECT_EQ(r->tag, c.want.tag) << c.text;
    EXPECT_EQ(r->digest, c.want.digest) << c.text;
  }
}

struct Bad {
  std::string text;
  std::string problem;  // a part of the message
};

TEST(ImageReference, BadReferencesAreRefusedNamingTheProblem) {
  const std::vector<Bad> cases = {
      {"", "is empty"},
      {"127.0.0.1:5000/team/py:3.1$", "the tag '3.1$' has a character a tag may not have"},
      {"r.io/x:", "the tag after ':' is empty"},
      {"r.io/x:.v1", "has a character a tag may not have"},
      {"r.io/x:" + std::string(129, 'a'), "is longer than 128 bytes"},
      {"r.io/Team/py", "has an upper-case letter"},
      {"Team/py", "has an upper-case letter"},
      {"r.io/a//b", "has an empty path component"},
      {"r.io/a/", "has an empty path component"},
      {"_x/y", "does not start and end with a lowercase letter or digit"},
      {"r.io/-a", "does not start and end with a lowercase letter or digit"},
      {"r.io/a.", "does not start and end"},
      {"r.io/a..b", "two separators in a row"},
      {"r.io/a___b", "more than two '_'"},
      {"r.io/a b", "has a character a repository may not have"},
      {"r.io/x@sha256:" + std::string(63, 'a'), "is not sha256: and 64 lowercase hex digits"},
      {"r.io/x@sha256:" + std::string(64, 'A'), "is not sha256: and 64 lowercase hex digits"},
      {"r.io/x@sha512:" + std::string(128, 'a'), "is not sha256: and 64 lowercase hex digits"},
      {"r.io/x@", "is not sha256"},
      {"r.io:0/x", "port that is not 1 to 65535"},
      {"r.io:65536/x", "port that is not 1 to 65535"},
      {"r.io:/x", "port that is not 1 to 65535"},
      {"r-.io/x", "is not a host name"},
      {"[::1/x", "without ']'"},
      {"[zz]:5000/x", "malformed IPv6"},
      {"r.io/", "has no repository name"},
      {":tag", "has no repository name"},
      {"r.io/x\n", "does not start and end"},
      {std::string(2000, 'a'), "is longer than 1024 bytes"},
      {"r.io/" + std::string(300, 'a'), "longer than 255 bytes"},
      {"http://127.0.0.1:5000/x:1",
       "has a scheme: a reference is written without one, as '127.0.0.1:5000/x:1'"},
      {"sha256:0e2c", "is not a whole digest"},
      {std::string(64, 'e'),
       "is a digest without its algorithm: write sha256:" + std::string(64, 'e')},
  };
  for (const auto& c : cases) {
    auto r = parseImageReference(c.text);
    ASSERT_FALSE(r) << "accepted: " << c.text;
    EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected) << c.text;
    EXPECT_NE(r.error().context.find(c.problem), std::string::npos)
        << c.text << " -> " << r.error().context;
    EXPECT_EQ(r.error().context.rfind("image reference '", 0), 0u) << r.error().context;
  }
}

TEST(ImageReference, ANewlineInTheInputIsEscapedInTheMessage) {
  auto r = parseImageReference("r.io/x:a\nb");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().context.find('\n'), std::string::npos) << r.error().context;
}

TEST(ImageReference, IsDigestAndIsTag) {
  EXPECT_TRUE(isDigest("sha256:" + kHex64));
  EXPECT_FALSE(isDigest("sha256:" + kHex64 + "a"));
  EXPECT_FALSE(isDigest("SHA256:" + kHex64));
  EXPECT_FALSE(isDigest(kHex64));
  EXPECT_FALSE(isDigest("sha256:" + std::string(63, 'a') + "g"));
  EXPECT_TRUE(isTag("v1.2-rc_3"));
  EXPECT_TRUE(isTag("_"));
  EXPECT_FALSE(isTag(""));
  EXPECT_FALSE(isTag("-v1"));
  EXPECT_FALSE(isTag("v/1"));
  EXPECT_FALSE(isTag(std::string(129, 'a')));
}

TEST(ImageReference, ToStringWritesEveryPart) {
  EXPECT_EQ(toString({"127.0.0.1:5000", "team/py", "3.12", ""}), "127.0.0.1:5000/team/py:3.12");
  EXPECT_EQ(toString({"r.io", "x", "", kDigest}), "r.io/x@" + kDigest);
  EXPECT_EQ(toString({"r.io", "x", "t", kDigest}), "r.io/x:t@" + kDigest);
}

// Generators of the grammar's pieces.
rc::Gen<std::string> genAlnum() {
  return rc::gen::nonEmpty(rc::gen::container<std::string>(
      rc::gen::elementOf(std::string("abcdefghijklmnopqrstuvwxyz0123456789"))));
}

rc::Gen<std::string> genComponent() {
  return rc::gen::exec([] {
    std::string c = *rc::gen::resize(8, genAlnum());
    const int parts = *rc::gen::inRange(0, 3);
    for (int i = 0; i < parts; ++i) {
      c += *rc::gen::element<std::string>(".", "_", "__", "-", "--");
      c += *rc::gen::resize(8, genAlnum());
    }
    return c;
  });
}

rc::Gen<std::string> genRegistry() {
  return rc::gen::exec([] {
    const int kind = *rc::gen::inRange(0, 7);
    switch (kind) {
      case 0:
        return std::string();
      case 1:
        return std::string("localhost");
      case 2:
        return "127.0.0.1:" + std::to_string(*rc::gen::inRange(1, 65536));
      case 3:
        return "[::1]:" + std::to_string(*rc::gen::inRange(1, 65536));
      case 4:
        return std::string("docker.io");
      case 5:
        return *rc::gen::resize(8, genAlnum()) + ".example";
      default:
        return *rc::gen::resize(8, genAlnum()) +
               ".io:" + std::to_string(*rc::gen::inRange(1, 65536));
    }
  });
}

rc::Gen<std::string> genReference() {
  return rc::gen::exec([] {
    std::string text = *genRegistry();
    if (!text.empty()) text += "/";
    const int n = *rc::gen::inRange(1, 4);
    // Without a registry the first component must not read as one (a '.'
    // in it would make it a host name).
    for (int i = 0; i < n; ++i)
      text += (i ? "/" : "") +
              (i == 0 && text.empty() ? *rc::gen::resize(8, genAlnum()) : *genComponent());
    if (*rc::gen::arbitrary<bool>()) {
      std::string tag = *rc::gen::element<std::string>("_", "a", "Z", "9");
      tag += *rc::gen::resize(
          40, rc::gen::container<std::string>(rc::gen::elementOf(std::string("abcXYZ019_.-"))));
      text += ":" + tag;
    }
    if (*rc::gen::arbitrary<bool>()) {
      std::string hex =
          *rc::gen::container<std::string>(64, rc::gen::elementOf(std::string("0123456789abcdef")));
      text += "@sha256:" + hex;
    }
    return text;
  });
}

RC_GTEST_PROP(ImageReference, ValidReferencesRoundTripThroughToString, ()) {
  const std::string text = *genReference();
  auto first = parseImageReference(text);
  RC_ASSERT(first.has_value());
  auto again = parseImageReference(toString(*first));
  RC_ASSERT(again.has_value());
  RC_ASSERT(*again == *first);
  RC_ASSERT(!first->tag.empty() || !first->digest.empty());
}

RC_GTEST_PROP(ImageReference, ArbitraryTextNeverCrashesAndAcceptedTextRoundTrips,
              (const std::string& text)) {
  auto r = parseImageReference(text);
  if (!r) {
    RC_ASSERT(r.error().code == ErrorCode::kExecutionRejected);
    RC_ASSERT(!r.error().context.empty());
    return;
  }
  auto again = parseImageReference(toString(*r));
  RC_ASSERT(again.has_value());
  RC_ASSERT(*again == *r);
}

RC_GTEST_PROP(ImageReference, MutatedValidReferencesNeverCrash, ()) {
  std::string text = *genReference();
  const std::size_t at = *rc::gen::inRange<std::size_t>(0, text.size());
  text[at] = *rc::gen::arbitrary<char>();
  auto r = parseImageReference(text);
  if (r) {
    auto again = parseImageReference(toString(*r));
    RC_ASSERT(again.has_value());
    RC_ASSERT(*again == *r);
  }
}

}  // namespace
}  // namespace airlock::images
