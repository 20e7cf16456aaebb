// Settings of `airlock serve`: YAML, environment overrides, and messages that
// name the setting, its value and where it was written.
#include "airlock/service/settings.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace airlock::service {
namespace {

EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string errorOf(std::string_view yaml) {
  auto s = parseSettings(yaml, "settings.yaml");
  EXPECT_FALSE(s.has_value()) << yaml;
  if (s) return "";
  EXPECT_EQ(s.error().code, ErrorCode::kConfigurationError);
  return s.error().context;
}

TEST(Settings, EmptyDocumentGivesTheDefaults) {
  auto s = parseSettings("", "settings.yaml");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->node_name, "") << "one node: environment ids are bare UUIDv7s";
  EXPECT_EQ(s->deployment_mode, DeploymentMode::kDevelopment);
  EXPECT_EQ(s->auth_mode, AuthMode::kDev);
  EXPECT_EQ(s->sandbox, Mechanism::kLinux);
  EXPECT_EQ(s->listen, "127.0.0.1:8420");
  EXPECT_EQ(s->reaper_interval, std::chrono::seconds(60));
  EXPECT_EQ(s->limit_defaults, defaultLimits());
  EXPECT_EQ(s->artifacts.retention_days, 30);
  EXPECT_TRUE(checkStartup(*s));
}

TEST(Settings, ParsesEveryKind) {
  auto s = parseSettings(R"(
deployment_mode: production
auth_mode: token
sandbox: gvisor
service_token: 0123456789abcdef0123
state_dir: /var/lib/airlock
listen: "[::1]:9000"
reaper_interval: 2m
limits:
  defaults:
    memory_bytes: 512M
    wall_clock_seconds: 60
  ceilings:
    memory_bytes: 8G
    pids_max: 1024
artifacts:
  retention_days: 7
  tenant_byte_cap: 1G
)",
                         "settings.yaml");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->deployment_mode, DeploymentMode::kProduction);
  EXPECT_EQ(s->auth_mode, AuthMode::kToken);
  EXPECT_EQ(s->sandbox, Mechanism::kGvisor);
  EXPECT_EQ(s->state_dir, "/var/lib/airlock");
  EXPECT_EQ(s->listen, "[::1]:9000");
  EXPECT_EQ(s->reaper_interval, std::chrono::seconds(120));
  EXPECT_EQ(s->limit_defaults.memory_bytes, 512 << 20);
  EXPECT_EQ(s->limit_defaults.wall_clock_seconds, 60);
  EXPECT_EQ(s->limit_ceilings.memory_bytes, std::int64_t{8} << 30);
  EXPECT_EQ(s->limit_ceilings.pids_max, 1024);
  EXPECT_EQ(s->artifacts.retention_days, 7);
  EXPECT_EQ(s->artifacts.tenant_byte_cap, 1 << 30);
  EXPECT_TRUE(checkStartup(*s)) << checkStartup(*s).error().message();
}

// images: references or {name, reference}; default_image names one of
// them or host; a bad entry is refused naming it.
TEST(Settings, ImagesAreReferencesWithOptionalNamesAndTheDefaultIsOneOfThem) {
  auto s = parseSettings(
      "images:\n  - 127.0.0.1:5000/team/py:3.12\n  - name: node\n    reference: "
      "r.example/node@sha256:" +
          std::string(64, 'c') + "\ndefault_image: node\n",
      "settings.yaml");
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ(s->images.size(), 2u);
  EXPECT_EQ(s->images[0].name, "127.0.0.1:5000/team/py:3.12");
  EXPECT_EQ(s->images[0].reference, "127.0.0.1:5000/team/py:3.12");
  EXPECT_EQ(s->images[1].name, "node");
  EXPECT_EQ(s->default_image, "node");
  EXPECT_TRUE(checkStartup(*s));
  EXPECT_EQ(parseSettings("", "s")->default_image, "host");

  for (auto [yaml, expected] : std::vector<std::pair<std::string, std::string>>{
           {"images: r/x:1\n", "images must be a list"},
           {"images:\n  - name: a\n", "has no reference"},
           {"images:\n  - {name: A B, reference: r/x:1}\n", "must be 1-63 characters"},
           {"images:\n  - {name: host, reference: r/x:1}\n", "is the host image's"},
           {"images:\n  - {name: a, reference: r/x:1}\n  - {name: a, reference: r/y:1}\n",
            "is there twice"},
           {"images:\n  - {name: a, ref: r/x:1}\n", "unknown setting \"images.ref\""},
           {"images:\n  - r.io/Team/py:1\n",
            "settings.yaml line 2, column 5: images: image reference"},
       }) {
    auto bad = parseSettings(yaml, "settings.yaml");
    ASSERT_FALSE(bad) << yaml;
    EXPECT_NE(bad.error().message().find(expected), std::string::npos) << bad.error().message();
  }
  auto fake = parseSettings("sandbox: fake\nimages:\n  - r.io/x:1\n", "s");
  ASSERT_TRUE(fake);
  ASSERT_FALSE(checkStartup(*fake));
  EXPECT_NE(checkStartup(*fake).error().message().find("sandbox=fake runs no images"),
            std::string::npos);
  auto no_such = parseSettings("default_image: ruby\n", "s");
  ASSERT_TRUE(no_such);
  auto refused = checkStartup(*no_such);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("default_image \"ruby\" is not host nor the name"),
            std::string::npos)
      << refused.error().message();
}

TEST(Settings, ErrorsNameTheSettingTheValueAndTheLine) {
  EXPECT_EQ(errorOf("deployment_mode: development\nsandbox: dockr\n"),
            "settings.yaml line 2, column 10: sandbox \"dockr\" is not one of linux, gvisor, "
            "microvm, fake");
  EXPECT_EQ(errorOf("auth_mode: oauth\n"),
            "settings.yaml line 1, column 12: auth_mode \"oauth\" is not one of dev, token");
  EXPECT_EQ(errorOf("sandbox_mode: linux\n"),
            "settings.yaml line 1, column 15: unknown setting \"sandbox_mode\"");
  EXPECT_EQ(errorOf("limits:\n  defaults:\n    memory: 1G\n"),
            "settings.yaml line 3, column 13: unknown setting \"limits.defaults.memory\"");
  EXPECT_NE(errorOf("limits:\n  defaults:\n    memory_bytes: lots\n")
                .find("limits.defaults.memory_bytes"),
            std::string::npos);
  EXPECT_NE(
      errorOf("listen: example.com:80\n").find("listen \"example.com:80\" needs an IP address"),
      std::string::npos);
  EXPECT_NE(errorOf("listen: 127.0.0.1:99999\n").find("no valid port"), std::string::npos);
  EXPECT_NE(errorOf("state_dir: relative/dir\n")
                .find("state_dir \"relative/dir\" must be an absolute path"),
            std::string::npos);
  EXPECT_NE(errorOf("reaper_interval: 500ms\n").find("reaper_interval"), std::string::npos);
  EXPECT_NE(errorOf("node_name: Node_1\n").find("node_name \"Node_1\" must be 1-63 characters"),
            std::string::npos);
  EXPECT_NE(errorOf("sandbox: [linux]\n").find("must be a single value"), std::string::npos);
  EXPECT_NE(errorOf("a: b: c\n").find("not valid YAML"), std::string::npos);
  EXPECT_NE(errorOf("- just\n- a list\n").find("must be a mapping"), std::string::npos);
  EXPECT_NE(errorOf("service_token: short\n").find("service_token must be at least 16"),
            std::string::npos);
}

TEST(Settings, EnvironmentOverridesTheFileAndNamesTheVariable) {
  auto file = parseSettings("sandbox: fake\nlisten: 127.0.0.1:1\n", "settings.yaml");
  ASSERT_TRUE(file);
  auto s = applyEnvironment(
      *file, envOf({{"AIRLOCK_SANDBOX", "linux"}, {"AIRLOCK_LISTEN", "0.0.0.0:8080"}}));
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->sandbox, Mechanism::kLinux);
  EXPECT_EQ(s->listen, "0.0.0.0:8080");
  auto bad = applyEnvironment(*file, envOf({{"AIRLOCK_DEPLOYMENT_MODE", "prod"}}));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().context,
            "environment variable AIRLOCK_DEPLOYMENT_MODE: deployment_mode \"prod\" is not one of "
            "development, "
            "production");
}

TEST(Settings, SessionJobsAreAllowedUnlessRefused) {
  EXPECT_TRUE(Settings{}.allow_session_jobs);
  auto s = parseSettings("session_jobs: refused\n", "settings.yaml");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_FALSE(s->allow_session_jobs);
  s = parseSettings("session_jobs: allowed\n", "settings.yaml");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_TRUE(s->allow_session_jobs);
  const std::string bad = errorOf("session_jobs: maybe\n");
  EXPECT_NE(bad.find("session_jobs \"maybe\" must be allowed or refused"), std::string::npos)
      << bad;
}

TEST(Settings, ScheduleSettingsAreParsedAndADatabaseSecretIsNeverRepeated) {
  auto s =
      parseSettings("schedule_fire_interval: 5s\nschedule_database: postgresql://u:pw@db/airlock\n",
                    "settings.yaml");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->schedule_fire_interval, std::chrono::seconds(5));
  EXPECT_EQ(s->schedule_database, "postgresql://u:pw@db/airlock");
  EXPECT_EQ(Settings{}.schedule_fire_interval, std::chrono::seconds(1));
  EXPECT_TRUE(Settings{}.schedule_database.empty());
  const std::string bad = errorOf("schedule_database: host=db password=hunter2\n");
  EXPECT_NE(bad.find("schedule_database"), std::string::npos) << bad;
  EXPECT_EQ(bad.find("hunter2"), std::string::npos) << bad;
  EXPECT_NE(errorOf("schedule_fire_interval: 100ms\n").find("schedule_fire_interval"),
            std::string::npos);
  auto env = applyEnvironment(Settings{}, envOf({{"AIRLOCK_SCHEDULE_DATABASE", "postgres://x/y"}}));
  ASSERT_TRUE(env) << env.error().message();
  EXPECT_EQ(env->schedule_database, "postgres://x/y");
}

// Spec 000's limits table rows the service enforces beside ResourceLimits,
// and an environment's lifetime: the spec's defaults, values up to their
// ceilings, and a value above one (or malformed) refused naming the setting.
TEST(Settings, LifetimeStartBudgetAndListingHaveTheSpecsDefaultsAndCeilings) {
  const Settings defaults;
  EXPECT_EQ(defaults.environment_lifetime, std::chrono::seconds(1800));
  EXPECT_EQ(defaults.environment_hard_cap, std::chrono::seconds(1800));
  EXPECT_EQ(defaults.start_budget, std::chrono::seconds(30));
  EXPECT_EQ(defaults.files_changed_listing, 1000);
  auto s = parseSettings(
      "environment_lifetime: 10m\nenvironment_hard_cap: 8h\nstart_budget: 60s\n"
      "files_changed_listing: 10000\n",
      "settings.yaml");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->environment_lifetime, std::chrono::seconds(600));
  EXPECT_EQ(s->environment_hard_cap, std::chrono::hours(8));
  EXPECT_EQ(s->start_budget, std::chrono::seconds(60));
  EXPECT_EQ(s->files_changed_listing, 10000);
  EXPECT_TRUE(checkStartup(*s)) << checkStartup(*s).error().message();

  EXPECT_EQ(errorOf("start_budget: 61s\n"),
            "settings.yaml line 1, column 15: start_budget 61s is above its ceiling of 60s");
  EXPECT_EQ(errorOf("files_changed_listing: 10001\n"),
            "settings.yaml line 1, column 24: files_changed_listing 10001 is above its ceiling "
            "of 10000");
  EXPECT_EQ(errorOf("environment_hard_cap: 25h\n"),
            "settings.yaml line 1, column 23: environment_hard_cap 90000s is above its ceiling "
            "of 86400s");
  EXPECT_NE(errorOf("files_changed_listing: many\n").find("files_changed_listing \"many\""),
            std::string::npos);
  EXPECT_NE(errorOf("environment_lifetime: 1500ms\n").find("environment_lifetime"),
            std::string::npos);

  auto longer = parseSettings("environment_lifetime: 1h\n", "settings.yaml");
  ASSERT_TRUE(longer);
  auto refused = checkStartup(*longer);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().context,
            "environment_lifetime 3600s is above environment_hard_cap 1800s: no environment "
            "lives longer than the hard cap");
  auto env = applyEnvironment(Settings{}, envOf({{"AIRLOCK_ENVIRONMENT_HARD_CAP", "2h"},
                                                 {"AIRLOCK_ENVIRONMENT_LIFETIME", "15m"}}));
  ASSERT_TRUE(env) << env.error().message();
  EXPECT_EQ(env->environment_hard_cap, std::chrono::hours(2));
  EXPECT_EQ(env->environment_lifetime, std::chrono::minutes(15));
}

TEST(Settings, MissingFileIsNamed) {
  auto s = loadSettings(std::string("/nonexistent/airlock.yaml"), envOf({}));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().context, "settings file \"/nonexistent/airlock.yaml\" cannot be read");
}

TEST(Settings, LimitDefaultsAboveTheirCeilingsAreRefusedAtStart) {
  auto s = parseSettings(
      "limits:\n  defaults:\n    memory_bytes: 4G\n  ceilings:\n    memory_bytes: 1G\n",
      "settings.yaml");
  ASSERT_TRUE(s);
  auto r = checkStartup(*s);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().context.find("limits.defaults: limits.memory_bytes"), std::string::npos)
      << r.error().context;
  auto raised = parseSettings("limits:\n  ceilings:\n    pids_max: 10000\n", "settings.yaml");
  ASSERT_TRUE(raised);
  auto r2 = checkStartup(*raised);
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().context.find(
                "limits.ceilings.pids_max 10000 is above the spec's fixed ceiling of 4096"),
            std::string::npos)
      << r2.error().context;
}

// Production with dev authentication (a random token in a file) does not
// start, whatever the mechanism; the message names both settings and their
// values. Development with dev auth, and production with a token, do.
TEST(Settings, ProductionRefusesDevAuthNamingBothSettings) {
  for (Mechanism m : {Mechanism::kGvisor, Mechanism::kMicrovm}) {
    Settings s;
    s.sandbox = m;
    s.deployment_mode = DeploymentMode::kProduction;
    s.auth_mode = AuthMode::kDev;
    auto r = checkStartup(s);
    ASSERT_FALSE(r) << "production started with auth_mode=dev on " << mechanismName(m);
    EXPECT_EQ(r.error().code, ErrorCode::kConfigurationError);
    const std::string& why = r.error().context;
    EXPECT_EQ(why.rfind("refusing to start: ", 0), 0u) << why;
    EXPECT_NE(why.find("deployment_mode=production"), std::string::npos) << why;
    EXPECT_NE(why.find("auth_mode=dev"), std::string::npos) << why;
    // A token set by hand does not make dev auth production auth.
    s.service_token = "0123456789abcdef0123";
    EXPECT_FALSE(checkStartup(s)) << mechanismName(m);
    s.auth_mode = AuthMode::kToken;
    EXPECT_TRUE(checkStartup(s)) << checkStartup(s).error().message();
    s.deployment_mode = DeploymentMode::kDevelopment;
    s.auth_mode = AuthMode::kDev;
    EXPECT_TRUE(checkStartup(s)) << checkStartup(s).error().message();
  }
  auto loaded = loadSettings(std::nullopt, envOf({{"AIRLOCK_DEPLOYMENT_MODE", "production"},
                                                  {"AIRLOCK_SANDBOX", "gvisor"}}));
  ASSERT_TRUE(loaded) << loaded.error().message();
  auto r = checkStartup(*loaded);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().context.find("auth_mode=dev"), std::string::npos) << r.error().context;
}

TEST(Settings, TokenAuthNeedsAToken) {
  Settings s;
  s.sandbox = Mechanism::kGvisor;
  s.auth_mode = AuthMode::kToken;
  auto r = checkStartup(s);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().context.find("requires service_token"), std::string::npos);
}

}  // namespace
}  // namespace airlock::service

namespace airlock::service {
namespace {

TEST(Settings, EgressPolicyIsValidatedAtStart) {
  char dir[] = "/tmp/airlock-settings-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string deny = std::string(dir) + "/deny.yaml",
                    allow = std::string(dir) + "/allow.yaml", bad = std::string(dir) + "/bad.yaml";
  std::ofstream(deny) << "egress:\n  mode: deny\n";
  std::ofstream(allow) << "egress:\n  mode: allowlist\n  destinations:\n    - host: "
                          "api.example.com\n      ports: [443]\n";
  std::ofstream(bad) << "egress:\n  mode: allow\n";
  Settings s;
  s.egress_policy_path = deny;
  EXPECT_TRUE(checkStartup(s));
  s.egress_policy_path = allow;
  EXPECT_TRUE(checkStartup(s));
  s.egress_policy_path = bad;
  auto invalid = checkStartup(s);
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.error().context.rfind("egress_policy: ", 0), 0u) << invalid.error().context;
  s.egress_policy_path = std::string(dir) + "/missing.yaml";
  EXPECT_FALSE(checkStartup(s));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace airlock::service
