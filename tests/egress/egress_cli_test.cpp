// `airlock egress check` (cli/egress_command.h), the built binary run as a
// user would run it. Each run happens in a forked child that first enters a
// private network and mount namespace (testing/hermetic_net.h) where
// /etc/hosts is the test's file and resolv.conf is empty: names resolve from
// the file, a miss fails inside the namespace, and no DNS query can leave
// the machine. Names the policy refuses are in the hosts file too, so a
// check that resolved them anyway would print a "resolved:" line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hermetic_net.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;  // exit status; -1 killed by a signal; -2 the namespace failed
  std::string out;
  std::string err;
};

std::string readAll(int fd) {
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

class EgressCheckCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for a private network namespace";
    char tmpl[] = "/tmp/airlock-egress-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // glibc compares /etc/hosts names literally and the resolver asks for
    // "name." (never the bare name, so search domains cannot apply): the
    // hosts lines carry the trailing dot. The resolver is not changed for it.
    std::ofstream hosts(dir_ / "hosts");
    hosts << "127.0.0.1 localhost\n"
             "93.184.215.14 hooks.example.com.\n"
             "93.184.215.14 private.example.com.\n"
             "10.0.0.7 private.example.com.\n"
             "169.254.169.254 meta.example.com.\n"
             "93.184.215.14 evil.example.org.\n";
    std::ofstream(dir_ / "resolv.conf");
    writePolicy(
        "egress:\n"
        "  mode: allowlist\n"
        "  destinations:\n"
        "    - host: hooks.example.com\n"
        "      ports: [443]\n"
        "    - host: \"*.example.com\"\n"
        "      ports: [443]\n");
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
  }

  void writePolicy(const std::string& yaml) { std::ofstream(dir_ / "policy.yaml") << yaml; }
  std::string policy() const { return (dir_ / "policy.yaml").string(); }

  Outcome run(const std::vector<std::string>& args) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return {};
    std::vector<std::string> storage = {AIRLOCK_BINARY};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string hosts = (dir_ / "hosts").string();
    const std::string resolv = (dir_ / "resolv.conf").string();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Only syscalls from here to exec.
      if (airlock::egress::testing::enterHermeticNetwork(hosts.c_str(), resolv.c_str()) != 0)
        ::_exit(99);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(98);
    }
    ::close(out[1]);
    ::close(err[1]);
    Outcome o;
    o.out = readAll(out[0]);
    o.err = readAll(err[0]);
    ::close(out[0]);
    ::close(err[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status)) o.status = WEXITSTATUS(status) == 99 ? -2 : WEXITSTATUS(status);
    return o;
  }

  Outcome check(const std::string& target) {
    return run({"egress", "check", "--policy", policy(), target});
  }

  fs::path dir_;
};

bool hasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST_F(EgressCheckCli, AllowedUrlPrintsTheResolvedAddressAndExitsZero) {
  const Outcome o = check("https://hooks.example.com/hook?token=x");
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_TRUE(hasLine(o.out, "decision: allowed")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "reason: allowed")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "point: outbound_guard")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "host: hooks.example.com")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "port: 443")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "resolved: 93.184.215.14 (public)")) << o.out;
  EXPECT_EQ(o.err, "");
}

TEST_F(EgressCheckCli, AllowedHostPortIsTheProxysDecision) {
  const Outcome o = check("hooks.example.com:443");
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_TRUE(hasLine(o.out, "point: proxy")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "resolved: 93.184.215.14 (public)")) << o.out;
}

TEST_F(EgressCheckCli, OnePrivateAddressDeniesTheNameAndIsNamed) {
  const Outcome o = check("private.example.com:443");
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  EXPECT_TRUE(hasLine(o.out, "decision: denied")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "reason: resolved_denied:private")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "resolved: 93.184.215.14 (public)")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "resolved: 10.0.0.7 (denied: private)")) << o.out;
}

TEST_F(EgressCheckCli, MetadataAddressIsDenied) {
  const Outcome o = check("https://meta.example.com/latest/meta-data/");
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  EXPECT_TRUE(hasLine(o.out, "reason: resolved_denied:link_local")) << o.out;
  EXPECT_TRUE(hasLine(o.out, "resolved: 169.254.169.254 (denied: link_local)")) << o.out;
}

TEST_F(EgressCheckCli, UnknownNameIsADnsRefusal) {
  const Outcome o = check("nowhere.example.com:443");
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  EXPECT_NE(o.out.find("\nreason: dns_"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("resolved:"), std::string::npos) << o.out;
}

TEST_F(EgressCheckCli, RefusedBeforeDnsWithTheirReasons) {
  const std::pair<const char*, const char*> cases[] = {
      {"evil.example.org:443", "host_not_allowed"},
      {"https://evil.example.org/", "host_not_allowed"},
      {"hooks.example.com:80", "port_not_allowed"},
      {"http://169.254.169.254/latest/meta-data/", "ip_literal"},
      {"127.1:443", "ip_literal"},
      {"gopher://hooks.example.com:443/_x", "scheme_not_allowed"},
      {"https://user:pw@hooks.example.com/", "malformed_authority"},
      {"hooks.example.com:0443", "malformed_authority"},
  };
  for (const auto& [target, reason] : cases) {
    SCOPED_TRACE(target);
    const Outcome o = check(target);
    EXPECT_EQ(o.status, 1) << o.out << o.err;
    EXPECT_TRUE(hasLine(o.out, "decision: denied")) << o.out;
    EXPECT_TRUE(hasLine(o.out, std::string("reason: ") + reason)) << o.out;
    EXPECT_EQ(o.out.find("resolved:"), std::string::npos) << "a refused name was resolved";
  }
}

// The detail names what was refused in plain quotes ("..."), never the
// \x22 of a second escaping pass; bytes that cannot be shown stay escaped.
TEST_F(EgressCheckCli, DetailQuotesReadAsQuotesAndUnprintableBytesStayEscaped) {
  for (const std::string& target : std::vector<std::string>{
           "gopher://hooks.example.com/", "hooks.example.com:0443", "hooks.exa\x01mple.com:443"}) {
    SCOPED_TRACE(target);
    const Outcome o = check(target);
    EXPECT_EQ(o.status, 1) << o.out << o.err;
    const auto at = o.out.find("\ndetail: ");
    ASSERT_NE(at, std::string::npos) << o.out;
    const std::string detail = o.out.substr(at + 9, o.out.find('\n', at + 1) - at - 9);
    EXPECT_EQ(detail.find("\\x22"), std::string::npos) << detail;
    EXPECT_NE(detail.find('"'), std::string::npos) << detail;
    for (unsigned char c : detail) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << detail;
  }
  const Outcome control = check(std::string("hooks.exa\x01mple.com:443"));
  EXPECT_NE(control.out.find("\\x01"), std::string::npos) << control.out;
}

TEST_F(EgressCheckCli, JsonOutput) {
  const Outcome o =
      run({"egress", "check", "--json", "--policy", policy(), "private.example.com:443"});
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  const auto j = nlohmann::json::parse(o.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << o.out;
  EXPECT_EQ(j.value("decision", ""), "denied");
  EXPECT_EQ(j.value("reason", ""), "resolved_denied:private");
  EXPECT_EQ(j.value("host", ""), "private.example.com");
  EXPECT_EQ(j.value("port", 0), 443);
  ASSERT_TRUE(j["resolved"].is_array());
  ASSERT_EQ(j["resolved"].size(), 2u);
  EXPECT_EQ(j["resolved"][1]["address"], "10.0.0.7");
  EXPECT_EQ(j["resolved"][1]["class"], "private");
  EXPECT_EQ(j["resolved"][1]["denied"], true);
  EXPECT_EQ(j["resolved"][0]["denied"], false);
}

TEST_F(EgressCheckCli, BadPolicyFileNamesLineAndColumn) {
  writePolicy(
      "egress:\n"
      "  mode: allowlist\n"
      "  destinations:\n"
      "    - host: Hooks.Example.com\n"
      "      ports: [443]\n");
  const Outcome o = check("hooks.example.com:443");
  EXPECT_EQ(o.status, 125) << o.out << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_NE(o.err.find(policy() + ":4:"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
}

TEST_F(EgressCheckCli, MissingPolicyOrTargetIsAUsageError) {
  Outcome o = run(
      {"egress", "check", "--policy", (dir_ / "absent.yaml").string(), "hooks.example.com:443"});
  EXPECT_EQ(o.status, 125) << o.out << o.err;
  EXPECT_NE(o.err.find("absent.yaml"), std::string::npos) << o.err;
  o = run({"egress", "check", "hooks.example.com:443"});
  EXPECT_EQ(o.status, 125) << o.out << o.err;
  EXPECT_NE(o.err.find("--policy"), std::string::npos) << o.err;
  o = run({"egress", "check", "--policy", policy()});
  EXPECT_EQ(o.status, 125) << o.out << o.err;
}

}  // namespace
