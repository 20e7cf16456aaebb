// Tenant API keys (service/tenant_keys.h): the key file's parser over any
// bytes (a clear error naming the line, never a crash, never the line's
// content), the lookup, the file's access checks, and the
// tenant_keys_file setting with its startup check.
#include "airlock/service/tenant_keys.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "airlock/service/settings.h"
#include "airlock/sys/sha256.h"

namespace airlock::service {
namespace {

constexpr std::string_view kSource = "tenant keys file \"k\"";

std::string lineFor(const std::string& tenant, const std::string& key) {
  return tenant + " sha256:" + sys::sha256Hex(key);
}

// The 1-based line number an error names ("...: line N: ..."), 0 if none.
std::size_t lineNamed(const std::string& context) {
  const std::string marker = std::string(kSource) + ": line ";
  if (context.rfind(marker, 0) != 0) return 0;
  return std::strtoul(context.c_str() + marker.size(), nullptr, 10);
}

TEST(TenantKeys, ALineMakesAKeyItsTenantsAndNothingElse) {
  const std::string text = "# the operator's keys\n\n" + lineFor("tenant-a", "key-of-a") +
                           "\n  \t" + lineFor("tenant-b", "key-of-b") + "\t \r\n" +
                           lineFor("tenant-a", "second-key-of-a");
  auto keys = TenantKeys::parse(text, kSource);
  ASSERT_TRUE(keys) << keys.error().message();
  EXPECT_EQ(keys->size(), 3u);
  EXPECT_EQ(keys->tenantOf("key-of-a"), "tenant-a");
  EXPECT_EQ(keys->tenantOf("second-key-of-a"), "tenant-a") << "a tenant may have two keys";
  EXPECT_EQ(keys->tenantOf("key-of-b"), "tenant-b");
  EXPECT_EQ(keys->tenantOf("key-of-c"), std::nullopt);
  EXPECT_EQ(keys->tenantOf(""), std::nullopt);
  EXPECT_EQ(keys->tenantOf(sys::sha256Hex("key-of-a")), std::nullopt)
      << "the digest is not the key";
  EXPECT_EQ(TenantKeys().tenantOf("key-of-a"), std::nullopt);
}

TEST(TenantKeys, EachMistakeIsNamedWithItsLineAndNeverQuoted) {
  const std::string good = lineFor("tenant-a", "key-of-a");
  const std::string pasted = "alk_" + std::string(64, '7');  // a key where its digest goes
  struct Case {
    std::string text;
    std::size_t line;
    std::string says;
  };
  const std::vector<Case> cases = {
      {good + "\n" + "tenant-b " + pasted + "\n", 2, "the second field is not sha256:"},
      {"\n" + pasted + "\n", 2, "expected two fields"},
      {good + "\n" + good + "\n", 2, "already on line 1"},
      {"ten/ant sha256:" + std::string(64, 'a'), 1, "the first field, the tenant id"},
      {"t sha256:" + std::string(63, 'a'), 1, "64 lower-case hex"},
      {"t sha256:" + std::string(64, 'A'), 1, "64 lower-case hex"},
      {"t sha256:" + std::string(64, 'a') + " extra", 1, "found 3 fields"},
      {std::string("t\0x sha256:", 11) + std::string(64, 'a'), 1, "the tenant id"},
  };
  for (const Case& c : cases) {
    auto keys = TenantKeys::parse(c.text, kSource);
    ASSERT_FALSE(keys) << c.text;
    EXPECT_EQ(keys.error().code, ErrorCode::kConfigurationError);
    EXPECT_EQ(lineNamed(keys.error().context), c.line) << keys.error().context;
    EXPECT_NE(keys.error().context.find(c.says), std::string::npos) << keys.error().context;
    EXPECT_EQ(keys.error().context.find(pasted), std::string::npos) << keys.error().context;
    EXPECT_EQ(keys.error().context.find(std::string(63, 'a')), std::string::npos)
        << keys.error().context;
  }
}

// Any bytes: either a table, or ConfigurationError naming a line the text
// has; never a crash.
RC_GTEST_PROP(TenantKeysProperty, AnyBytesParseOrNameALineOfThem, (const std::string& text)) {
  auto keys = TenantKeys::parse(text, kSource);
  if (keys) return;
  RC_ASSERT(keys.error().code == ErrorCode::kConfigurationError);
  const std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  const std::size_t named = lineNamed(keys.error().context);
  RC_ASSERT(named >= 1);
  RC_ASSERT(named <= lines + 1);
}

rc::Gen<std::string> genTenant() {
  return rc::gen::resize(20, rc::gen::nonEmpty(rc::gen::container<std::string>(
                                 rc::gen::elementOf(std::string("ABCXYZabcxyz0189._:-")))));
}

// A file of generated tenants and keys, with comments, blank lines and
// padding between them, maps every key to its tenant; a line of rubbish put
// anywhere is named by its number, and no key is repeated in the message.
RC_GTEST_PROP(TenantKeysProperty, GeneratedFilesMapEveryKeyAndNameTheBadLine, ()) {
  const auto tenants = *rc::gen::resize(
      8, rc::gen::nonEmpty(rc::gen::container<std::vector<std::string>>(genTenant())));
  std::vector<std::string> lines;
  std::vector<std::pair<std::string, std::string>> issued;  // (key, tenant)
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    const std::string key =
        "alk_" + std::to_string(i) + "_" +
        *rc::gen::container<std::string>(rc::gen::elementOf(std::string("0123456789abcdef")));
    issued.emplace_back(key, tenants[i]);
    if (*rc::gen::arbitrary<bool>()) lines.emplace_back("# comment " + std::to_string(i));
    if (*rc::gen::arbitrary<bool>()) lines.emplace_back(" \t");
    lines.push_back(*rc::gen::elementOf(std::vector<std::string>{"", " ", "\t"}) +
                    lineFor(tenants[i], key) +
                    *rc::gen::elementOf(std::vector<std::string>{"", " ", "\r"}));
  }
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  auto keys = TenantKeys::parse(text, kSource);
  RC_ASSERT(keys.has_value());
  for (const auto& [key, tenant] : issued) RC_ASSERT(keys->tenantOf(key) == tenant);
  RC_ASSERT(!keys->tenantOf("alk_not-issued").has_value());

  // One key pasted in as it is, on a line of its own or as a digest.
  const std::string& leaked = issued.front().first;
  const std::size_t at = *rc::gen::inRange<std::size_t>(0, lines.size() + 1);
  const std::string bad = *rc::gen::elementOf(std::vector<std::string>{
      leaked, tenants.front() + " " + leaked, tenants.front() + " sha256:" + leaked});
  lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at), bad);
  text.clear();
  for (const auto& line : lines) text += line + "\n";
  auto refused = TenantKeys::parse(text, kSource);
  RC_ASSERT(!refused.has_value());
  RC_ASSERT(lineNamed(refused.error().context) == at + 1);
  RC_ASSERT(refused.error().context.find(leaked) == std::string::npos);
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/airlock-tenant-keys-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text, mode_t mode) const {
    const std::string file = path + "/" + name;
    std::ofstream(file) << text;
    ::chmod(file.c_str(), mode);
    return file;
  }
  std::string path;
};

TEST(TenantKeys, TheFileMustBeRegularAndOnlyTheOwnersToRead) {
  TempDir dir;
  const std::string text = lineFor("tenant-a", "key-of-a") + "\n";
  const std::string good = dir.write("keys", text, 0600);
  auto keys = TenantKeys::loadFile(good);
  ASSERT_TRUE(keys) << keys.error().message();
  EXPECT_EQ(keys->tenantOf("key-of-a"), "tenant-a");
  EXPECT_TRUE(TenantKeys::loadFile(dir.write("read-only", text, 0400)));

  for (mode_t mode : {0640, 0604, 0660, 0602}) {
    auto open = TenantKeys::loadFile(dir.write("open", text, mode));
    ASSERT_FALSE(open) << std::oct << mode;
    EXPECT_NE(open.error().context.find("group and others must have no access"), std::string::npos)
        << open.error().context;
  }
  ASSERT_EQ(::symlink(good.c_str(), (dir.path + "/link").c_str()), 0);
  auto link = TenantKeys::loadFile(dir.path + "/link");
  EXPECT_FALSE(link) << "a symlink is not followed";
  auto directory = TenantKeys::loadFile(dir.path);
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().context.find("not a regular file"), std::string::npos);
  auto missing = TenantKeys::loadFile(dir.path + "/missing");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find(dir.path + "/missing"), std::string::npos);
  EXPECT_NE(missing.error().message().find("No such file"), std::string::npos);
  auto big =
      TenantKeys::loadFile(dir.write("big", std::string(kMaxTenantKeysFileBytes + 1, '#'), 0600));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().context.find("larger than"), std::string::npos);
  // Owned by another user: refused (the test runs as root, which chowns).
  const std::string other = dir.write("other", text, 0600);
  ASSERT_EQ(::chown(other.c_str(), 65534, 65534), 0);
  auto foreign = TenantKeys::loadFile(other);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().context.find("owned by uid 65534"), std::string::npos);
  // A parse error names the file and the line.
  auto bad = TenantKeys::loadFile(dir.write("bad", text + "tenant-b nonsense\n", 0600));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().context.find("tenant keys file \"" + dir.path + "/bad\": line 2: "),
            std::string::npos)
      << bad.error().context;
}

TEST(Settings, TenantKeysFileIsAnAbsolutePathLoadedAtStart) {
  auto unset = parseSettings("", "settings.yaml");
  ASSERT_TRUE(unset);
  EXPECT_EQ(unset->tenant_keys_file, "");
  EXPECT_TRUE(checkTenantKeys(*unset));

  auto relative = parseSettings("tenant_keys_file: keys.txt\n", "settings.yaml");
  ASSERT_FALSE(relative);
  EXPECT_EQ(relative.error().context,
            "settings.yaml line 1, column 19: tenant_keys_file \"keys.txt\" must be an absolute "
            "path (or empty: no tenant keys)");

  TempDir dir;
  const std::string good = dir.write("keys", lineFor("tenant-a", "key-of-a") + "\n", 0600);
  auto set = parseSettings("tenant_keys_file: " + good + "\n", "settings.yaml");
  ASSERT_TRUE(set) << set.error().message();
  EXPECT_EQ(set->tenant_keys_file, good);
  EXPECT_TRUE(checkTenantKeys(*set));
  EXPECT_TRUE(checkStartup(*set));

  Settings s = *set;
  s.tenant_keys_file = dir.write("open", lineFor("tenant-a", "key-of-a") + "\n", 0644);
  for (auto refused : {checkTenantKeys(s), checkStartup(s)}) {
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kConfigurationError);
    EXPECT_EQ(
        refused.error().context.rfind(
            "tenant_keys_file: tenant keys file \"" + s.tenant_keys_file + "\" has mode 0644", 0),
        0u)
        << refused.error().context;
  }
  // The operator's token listed as a tenant's key.
  s.service_token = "key-of-a-is-long-enough";
  s.tenant_keys_file = dir.write("token", lineFor("tenant-a", s.service_token) + "\n", 0600);
  auto shared = checkStartup(s);
  ASSERT_FALSE(shared);
  EXPECT_EQ(shared.error().context,
            "tenant_keys_file: the service_token is also a key of tenant \"tenant-a\"; give the "
            "tenant a key of its own");
  s.service_token.clear();
  s.tenant_keys_file = dir.write("bad", "tenant-a key-of-a\n", 0600);
  auto bad = checkStartup(s);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().context.find("line 1: the second field"), std::string::npos)
      << bad.error().context;
  EXPECT_EQ(bad.error().context.find("key-of-a"), std::string::npos) << bad.error().context;
}

TEST(TenantKeys, TheLineHoldsTheDigestNotTheKey) {
  const std::string line = tenantKeyLine("tenant-a", "alk_secret");
  EXPECT_EQ(line, "tenant-a sha256:" + sys::sha256Hex("alk_secret"));
  EXPECT_EQ(line.find("alk_secret"), std::string::npos);
  auto keys = TenantKeys::parse(line, kSource);
  ASSERT_TRUE(keys) << keys.error().message();
  EXPECT_EQ(keys->tenantOf("alk_secret"), "tenant-a");
}

}  // namespace
}  // namespace airlock::service
