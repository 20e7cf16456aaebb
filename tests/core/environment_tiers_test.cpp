#include "airlock/core/environment_tiers.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace airlock {
namespace {

using HostEnv = std::map<std::string, std::string>;

auto lookupIn(const HostEnv& env) {
  return [&env](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

const HostEnv kCredentialHost = {
    {"DATABASE_URL", "postgres://u:p@db/x"},
    {"AWS_SECRET_ACCESS_KEY", "AKIAsecret"},
    {"OPENAI_API_KEY", "sk-live"},
    {"AIRLOCK_SERVICE_TOKEN", "svc"},
    {"PIP_INDEX_URL", "https://pypi.internal/simple"},
    {"TZ", "UTC"},
    {"HOME", "/root"},
    {"PATH", "/host/bin"},
    {"LD_PRELOAD", "/evil.so"},
};

TEST(Tier0, RequiredNamesAreTier0) {
  for (const char* name : {"DATABASE_URL",
                           "AWS_ACCESS_KEY_ID",
                           "AWS_SECRET_ACCESS_KEY",
                           "AWS_SESSION_TOKEN",
                           "AWS_SECURITY_TOKEN",
                           "GOOGLE_APPLICATION_CREDENTIALS",
                           "AZURE_CLIENT_SECRET",
                           "OPENAI_API_KEY",
                           "ANTHROPIC_API_KEY",
                           "GEMINI_API_KEY",
                           "GOOGLE_API_KEY",
                           "MISTRAL_API_KEY",
                           "COHERE_API_KEY",
                           "HF_TOKEN",
                           "GITHUB_TOKEN",
                           "GH_TOKEN",
                           "PGPASSWORD",
                           "REDIS_URL",
                           "AIRLOCK_API_TOKEN",
                           "AIRLOCK_SERVICE_TOKEN",
                           "SSH_AUTH_SOCK",
                           "KUBECONFIG",
                           "DOCKER_HOST",
                           "LD_PRELOAD",
                           "LD_LIBRARY_PATH"}) {
    EXPECT_TRUE(isTier0Name(name)) << name;
  }
}

TEST(Tier0, PatternsMatchCaseInsensitively) {
  for (const char* name :
       {"AIRLOCK_ANYTHING", "airlock_x", "MY_API_KEY", "my_api_key", "STRIPE_SECRET",
        "APP_SECRET_KEY", "SLACK_TOKEN", "slack_token", "DB_PASSWORD", "Db_Password",
        "SERVICE_CREDENTIALS", "database_url", "Openai_Api_Key"}) {
    EXPECT_TRUE(isTier0Name(name)) << name;
  }
}

TEST(Tier0, OrdinaryNamesAreNotTier0) {
  for (const char* name : {"HTTP_PROXY", "TZ", "LANG", "PYTHONUNBUFFERED", "TOKENIZER_PATH",
                           "SECRETARY", "API_KEYS_DIR", "PASSWORD_HINT_FILE", "AIRLOCK"}) {
    EXPECT_FALSE(isTier0Name(name)) << name;
  }
}

TEST(Tier0, TheListContainsTheRequiredPatterns) {
  const auto names = tier0Names();
  for (const char* pattern : {"AIRLOCK_*", "*_API_KEY", "*_SECRET", "*_SECRET_KEY", "*_TOKEN",
                              "*_PASSWORD", "*_CREDENTIALS"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), pattern), names.end()) << pattern;
  }
}

TEST(EnvName, Syntax) {
  EXPECT_TRUE(isValidEnvName("A"));
  EXPECT_TRUE(isValidEnvName("_x9"));
  EXPECT_TRUE(isValidEnvName("http_proxy"));
  EXPECT_FALSE(isValidEnvName(""));
  EXPECT_FALSE(isValidEnvName("9A"));
  EXPECT_FALSE(isValidEnvName("A-B"));
  EXPECT_FALSE(isValidEnvName("A=B"));
  EXPECT_FALSE(isValidEnvName("A B"));
  EXPECT_FALSE(isValidEnvName(std::string("A\0B", 3)));
  EXPECT_FALSE(isValidEnvName("Ä"));
}

// A variable added to one command: the same tiers as a spec's environment,
// every refusal a ToolValidationError naming the variable.
TEST(AddedVariable, RefusesCredentialsPlatformNamesBadNamesAndNulNamingThem) {
  EXPECT_TRUE(checkAddedVariable("env", "PYTHONHASHSEED", "0"));
  EXPECT_TRUE(checkAddedVariable("env", "_x1", ""));
  for (const auto& [name, value, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"GITHUB_TOKEN", "x", "credential"},
           {"my_api_key", "x", "credential"},
           {"PATH", "/x", "set by Airlock"},
           {"https_proxy", "http://p", "set by Airlock"},
           {"1X", "x", "not a valid variable name"},
           {"A-B", "x", "not a valid variable name"},
           {"OK", std::string("a\0b", 3), "NUL"}}) {
    auto r = checkAddedVariable("env", name, value);
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError) << name;
    EXPECT_NE(r.error().context.find("env variable \"" + name + "\""), std::string::npos)
        << r.error().context;
    EXPECT_NE(r.error().context.find(says), std::string::npos) << r.error().context;
  }
}

TEST(ValidateTier1, AcceptsAValidList) {
  const std::vector<std::string> names = {"PIP_INDEX_URL", "LC_ALL", "TZ"};
  EXPECT_EQ(validateTier1Names(names).value(), names);
  EXPECT_TRUE(validateTier1Names(std::vector<std::string>{}).value().empty());
}

TEST(ValidateTier1, RejectsTier0NamesNamingTheEntry) {
  const std::vector<std::string> names = {"TZ", "OPENAI_API_KEY"};
  const auto r = validateTier1Names(names);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kConfigurationError);
  EXPECT_NE(r.error().context.find("#2 \"OPENAI_API_KEY\""), std::string::npos)
      << r.error().context;
  EXPECT_NE(r.error().context.find("tier 0"), std::string::npos);
}

TEST(ValidateTier1, RejectsInvalidNames) {
  const std::vector<std::string> names = {"GOOD", "BAD-NAME"};
  const auto r = validateTier1Names(names);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kConfigurationError);
  EXPECT_NE(r.error().context.find("\"BAD-NAME\""), std::string::npos);
}

TEST(ValidateTier1, RejectsDuplicates) {
  const std::vector<std::string> names = {"TZ", "PIP_INDEX_URL", "TZ"};
  const auto r = validateTier1Names(names);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().context.find("#3 \"TZ\" is listed twice"), std::string::npos)
      << r.error().context;
}

TEST(ValidateTier1, RejectsTier2Names) {
  const std::vector<std::string> names = {"PATH"};
  const auto r = validateTier1Names(names);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().context.find("tier 2"), std::string::npos);
}

// Only the adapter sets the proxy variables, and only for a sandbox with
// egress: the host's proxy URL (which may carry credentials) is never passed
// through, in either spelling.
TEST(ValidateTier1, RejectsProxyVariablesInEitherSpelling) {
  for (const char* name : {"HTTP_PROXY", "https_proxy", "ALL_PROXY", "no_proxy", "Https_Proxy"}) {
    const auto r = validateTier1Names(std::vector<std::string>{name});
    ASSERT_FALSE(r.has_value()) << name;
    EXPECT_NE(r.error().context.find("tier 2"), std::string::npos) << r.error().context;
  }
}

TEST(BuildEnvironment, Tier2IsSynthesized) {
  const HostEnv host;
  const auto built = buildEnvironment(std::vector<std::string>{}, lookupIn(host), ".", {});
  const std::map<std::string, std::string> expected = {{"HOME", "/workspace"},
                                                       {"PWD", "/workspace"},
                                                       {"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                                       {"TMPDIR", "/tmp"},
                                                       {"LANG", "C.UTF-8"}};
  EXPECT_EQ(built.variables, expected);
  EXPECT_FALSE(built.tier1_error.has_value());
}

TEST(BuildEnvironment, PwdFollowsTheWorkingDirectory) {
  const HostEnv host;
  EXPECT_EQ(buildEnvironment(std::vector<std::string>{}, lookupIn(host), "src/app", {})
                .variables.at("PWD"),
            "/workspace/src/app");
  EXPECT_EQ(
      buildEnvironment(std::vector<std::string>{}, lookupIn(host), "", {}).variables.at("PWD"),
      "/workspace");
}

TEST(BuildEnvironment, BridgeVariablesArePresentOnlyWithABridge) {
  const HostEnv host;
  const auto with = buildEnvironment(std::vector<std::string>{}, lookupIn(host), ".",
                                     BridgeEndpoint{"/run/bridge.sock", "one-time"});
  EXPECT_EQ(with.variables.at("AIRLOCK_BRIDGE_SOCKET"), "/run/bridge.sock");
  EXPECT_EQ(with.variables.at("AIRLOCK_BRIDGE_TOKEN"), "one-time");
  const auto without = buildEnvironment(std::vector<std::string>{}, lookupIn(host), ".", {});
  EXPECT_EQ(without.variables.count("AIRLOCK_BRIDGE_SOCKET"), 0u);
  EXPECT_EQ(without.variables.count("AIRLOCK_BRIDGE_TOKEN"), 0u);
}

TEST(BuildEnvironment, Tier1IsCopiedOnlyWhenSetOnTheHost) {
  const auto built = buildEnvironment(std::vector<std::string>{"PIP_INDEX_URL", "NOT_SET_ANYWHERE"},
                                      lookupIn(kCredentialHost), ".", {});
  EXPECT_EQ(built.variables.at("PIP_INDEX_URL"), "https://pypi.internal/simple");
  EXPECT_EQ(built.variables.count("NOT_SET_ANYWHERE"), 0u);
  EXPECT_EQ(built.variables.count("TZ"), 0u);  // set on the host but not listed
  EXPECT_EQ(built.variables.count("DATABASE_URL"), 0u);
  EXPECT_EQ(built.variables.at("HOME"), "/workspace");  // not the host's /root
  EXPECT_EQ(built.variables.size(), 6u);
}

TEST(BuildEnvironment, UnreadableTier1ListMeansTier2AloneAndTheErrorIsReported) {
  const Result<std::vector<std::string>> broken =
      fail(ErrorCode::kConfigurationError, "cannot parse tier1 list");
  const auto built = buildEnvironment(broken, lookupIn(kCredentialHost), ".", {});
  ASSERT_TRUE(built.tier1_error.has_value());
  EXPECT_EQ(built.tier1_error->context, "cannot parse tier1 list");
  EXPECT_EQ(built.variables.size(), 5u);
  EXPECT_EQ(built.variables.count("PIP_INDEX_URL"), 0u);
  EXPECT_EQ(built.variables.at("PATH"), std::string(kImagePath));
}

TEST(BuildEnvironment, AnUnvalidatedListNamingTier0FailsClosed) {
  const auto built = buildEnvironment(std::vector<std::string>{"PIP_INDEX_URL", "DATABASE_URL"},
                                      lookupIn(kCredentialHost), ".", {});
  ASSERT_TRUE(built.tier1_error.has_value());
  EXPECT_EQ(built.tier1_error->code, ErrorCode::kConfigurationError);
  EXPECT_EQ(built.variables.count("DATABASE_URL"), 0u);
  EXPECT_EQ(built.variables.count("PIP_INDEX_URL"), 0u);  // tier 2 alone, not a partial list
  EXPECT_EQ(built.variables.size(), 5u);
}

TEST(BuildEnvironment, HostValuesWithNulAreNotCopied) {
  const HostEnv host = {{"TZ", std::string("U\0TC", 4)}};
  const auto built = buildEnvironment(std::vector<std::string>{"TZ"}, lookupIn(host), ".", {});
  EXPECT_EQ(built.variables.count("TZ"), 0u);
}

// --- property ------------------------------------------------------------

rc::Gen<std::string> tier0NameGen() {
  std::vector<std::string> exact;
  for (const auto entry : tier0Names()) {
    if (!entry.starts_with('*') && !entry.ends_with('*')) exact.emplace_back(entry);
  }
  const auto stem = rc::gen::nonEmpty(
      rc::gen::container<std::string>(rc::gen::elementOf(std::string("ABCXYZabcxyz_019"))));
  return rc::gen::oneOf(
      rc::gen::elementOf(exact), rc::gen::map(stem, [](std::string s) { return "AIRLOCK_" + s; }),
      rc::gen::map(
          rc::gen::pair(stem, rc::gen::element<std::string>("_API_KEY", "_secret", "_SECRET_KEY",
                                                            "_Token", "_PASSWORD", "_CREDENTIALS")),
          [](std::pair<std::string, std::string> p) { return "X" + p.first + p.second; }));
}

rc::Gen<std::string> envNameGen() {
  return rc::gen::map(
      rc::gen::pair(rc::gen::elementOf(std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZ_abc")),
                    rc::gen::container<std::string>(
                        rc::gen::elementOf(std::string("ABCDEKLMNOPSTUXYZ_0189abc")))),
      [](std::pair<char, std::string> p) { return std::string(1, p.first) + p.second; });
}

TEST(BuildEnvironment, NoTier0NameEverAppearsAndEveryValueIsAccountedFor) {
  EXPECT_TRUE(rc::check("built environment holds only tier 2 and listed host values", [] {
    HostEnv host;
    const auto secrets = *rc::gen::container<std::vector<std::string>>(tier0NameGen());
    for (const auto& name : secrets) host[name] = *rc::gen::arbitrary<std::string>();
    // Ordinary names the operator might list, also set on the host.
    const auto ordinary = *rc::gen::container<std::vector<std::string>>(envNameGen());
    for (const auto& name : ordinary) host[name] = *rc::gen::arbitrary<std::string>();
    // Tier-2 names on the host too: they must never leak through.
    host["HOME"] = "/root";
    host["PATH"] = "/host/bin";

    // Any valid tier-1 list: ordinary names minus tier 0/2, deduplicated.
    std::vector<std::string> candidates = ordinary;
    const auto extra = *rc::gen::container<std::vector<std::string>>(envNameGen());
    candidates.insert(candidates.end(), extra.begin(), extra.end());
    std::vector<std::string> tier1;
    for (const auto& name : candidates) {
      if (isTier0Name(name) || isTier2Name(name)) continue;
      if (std::find(tier1.begin(), tier1.end(), name) != tier1.end()) continue;
      tier1.push_back(name);
    }
    RC_ASSERT(validateTier1Names(tier1).has_value());

    std::optional<BridgeEndpoint> bridge;
    if (*rc::gen::arbitrary<bool>()) bridge = BridgeEndpoint{"/run/b.sock", "tok"};
    const bool broken = *rc::gen::arbitrary<bool>();
    const Result<std::vector<std::string>> list =
        broken ? Result<std::vector<std::string>>(fail(ErrorCode::kConfigurationError, "x"))
               : Result<std::vector<std::string>>(tier1);

    const auto built = buildEnvironment(list, lookupIn(host), "w", bridge);
    RC_ASSERT(built.tier1_error.has_value() == broken);
    std::map<std::string, std::string> tier2 = {{"HOME", "/workspace"},
                                                {"PWD", "/workspace/w"},
                                                {"PATH", std::string(kImagePath)},
                                                {"TMPDIR", "/tmp"},
                                                {"LANG", "C.UTF-8"}};
    if (bridge) {
      tier2["AIRLOCK_BRIDGE_SOCKET"] = bridge->socket_path;
      tier2["AIRLOCK_BRIDGE_TOKEN"] = bridge->token;
    }
    for (const auto& [name, value] : built.variables) {
      if (const auto it = tier2.find(name); it != tier2.end()) {
        RC_ASSERT(value == it->second);  // synthesized, never the host's
        continue;
      }
      RC_ASSERT(!isTier0Name(name));
      RC_ASSERT(!broken);
      RC_ASSERT(std::find(tier1.begin(), tier1.end(), name) != tier1.end());
      RC_ASSERT(host.count(name) == 1);
      RC_ASSERT(value == host.at(name));
    }
    for (const auto& [name, value] : tier2) RC_ASSERT(built.variables.count(name) == 1);
    if (!broken) {
      for (const auto& name : tier1) {
        const auto it = host.find(name);
        if (it != host.end() && it->second.find('\0') == std::string::npos) {
          RC_ASSERT(built.variables.count(name) == 1);
        }
      }
    }
    for (const auto& name : secrets) {
      if (!isTier2Name(name)) RC_ASSERT(built.variables.count(name) == 0);
    }
  }));
}

}  // namespace
}  // namespace airlock
