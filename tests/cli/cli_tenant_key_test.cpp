// `airlock tenant-key create` (cli/tenant_key_command.h), run as a user
// runs it: the key printed once, the line holding only its digest, --append
// writing a file the service loads, and bad input refused with one line that
// leaves the file as it was.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "airlock/service/tenant_keys.h"

namespace {

struct Ran {
  int status = -1;
  std::string out;  // stdout and stderr, in order
};

// The binary with `args` (each single-quoted for the shell: the test's own
// strings, no quote in them).
Ran runAirlock(const std::string& args) {
  Ran ran;
  const std::string command = std::string("'") + AIRLOCK_BINARY + "' " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return ran;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) ran.out.append(buffer, got);
  const int raw = ::pclose(pipe);
  ran.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return ran;
}

// "name: value" lines.
std::map<std::string, std::string> fieldsOf(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(": ");
    if (colon != std::string::npos) fields[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return fields;
}

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/airlock-cli-tenant-key-XXXXXX";
    path = ::mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST(CliTenantKey, CreatePrintsTheKeyOnceAndALineHoldingOnlyItsDigest) {
  const Ran ran = runAirlock("tenant-key create acme");
  ASSERT_EQ(ran.status, 0) << ran.out;
  const auto fields = fieldsOf(ran.out);
  EXPECT_EQ(fields.at("tenant_id"), "acme");
  const std::string& key = fields.at("key");
  EXPECT_EQ(key.rfind("alk_", 0), 0u) << key;
  EXPECT_EQ(key.size(), 4u + 64u) << key;
  const std::string& line = fields.at("line");
  EXPECT_EQ(line, airlock::service::tenantKeyLine("acme", key));
  EXPECT_EQ(line.find(key.substr(4)), std::string::npos) << "the line holds no key";
  const Ran again = runAirlock("tenant-key create acme");
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(fieldsOf(again.out).at("key"), key) << "each key is new";
}

TEST(CliTenantKey, AppendWritesAFileTheServiceLoads) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string file = dir.path + "/tenant-keys";
  const Ran a = runAirlock("tenant-key create tenant-a --append '" + file + "'");
  ASSERT_EQ(a.status, 0) << a.out;
  const Ran b = runAirlock("tenant-key create tenant-b --append '" + file + "'");
  ASSERT_EQ(b.status, 0) << b.out;
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string text = readAll(file);
  EXPECT_EQ(text, fieldsOf(a.out).at("line") + "\n" + fieldsOf(b.out).at("line") + "\n");
  auto keys = airlock::service::TenantKeys::loadFile(file);
  ASSERT_TRUE(keys) << keys.error().message();
  EXPECT_EQ(keys->tenantOf(fieldsOf(a.out).at("key")), "tenant-a");
  EXPECT_EQ(keys->tenantOf(fieldsOf(b.out).at("key")), "tenant-b");
}

TEST(CliTenantKey, BadInputIsOneLineAndLeavesTheFileAsItWas) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const Ran bad_id = runAirlock("tenant-key create 'a/b'");
  EXPECT_EQ(bad_id.status, 125) << bad_id.out;
  EXPECT_EQ(bad_id.out,
            "airlock: error: tenant-key create: the tenant id \"a/b\" is not 1-128 characters of "
            "A-Z a-z 0-9 . _ : -\n");

  const std::string open_file = dir.path + "/open";
  std::ofstream(open_file) << "# keys\n";
  ::chmod(open_file.c_str(), 0644);
  const Ran open = runAirlock("tenant-key create acme --append '" + open_file + "'");
  EXPECT_EQ(open.status, 125) << open.out;
  EXPECT_NE(open.out.find("has mode 0644"), std::string::npos) << open.out;
  EXPECT_EQ(open.out.find("key: "), std::string::npos) << "no key is printed: " << open.out;
  EXPECT_EQ(readAll(open_file), "# keys\n");

  const std::string broken = dir.path + "/broken";
  std::ofstream(broken) << "acme not-a-digest\n";
  ::chmod(broken.c_str(), 0600);
  const Ran refused = runAirlock("tenant-key create acme --append '" + broken + "'");
  EXPECT_EQ(refused.status, 125) << refused.out;
  EXPECT_NE(refused.out.find("line 1: the second field"), std::string::npos) << refused.out;
  EXPECT_EQ(readAll(broken), "acme not-a-digest\n");

  const Ran missing = runAirlock("tenant-key create");
  EXPECT_EQ(missing.status, 125) << missing.out;
}

}  // namespace
