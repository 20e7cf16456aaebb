// Gate "no credential reaches a sandbox" (spec 000) for the linux mechanism:
// the service's own environment is full of realistic credentials; a command
// that dumps its environment and every environ it can read sees none.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <sstream>

#include "linux_test_support.h"

namespace airlock::testing {
namespace {

TEST(LinuxCredentials, EnvironmentHoldsOnlyTierTwoNames) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  ::setenv("AWS_SECRET_ACCESS_KEY", "canary-aws-wJalrXUtnFEMI", 1);
  ::setenv("DATABASE_URL", "postgres://svc:canary-db-pass@db.internal:5432/app", 1);
  ::setenv("OPENAI_API_KEY", "sk-canary-openai-0123456789", 1);
  TempStateDir state;
  auto options = testOptions(state.path());
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  // The CLI's path: tier 1 empty, built from the service's environment.
  auto built = buildEnvironment(
      std::vector<std::string>{},
      [](std::string_view n) -> std::optional<std::string> {
        const char* v = std::getenv(std::string(n).c_str());
        return v ? std::optional<std::string>(v) : std::nullopt;
      },
      ".", std::nullopt);
  auto spec = linuxSpec(options);
  spec.environment = built.variables;
  auto h = (*env)->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  auto r = (*env)->execute(
      *h, shell("env; echo ---; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"));
  ASSERT_TRUE(r) << r.error().message();
  (void)(*env)->destroy(*h);

  for (const char* canary : {"canary-aws", "canary-db-pass", "sk-canary-openai"})
    EXPECT_EQ(r->stdout_data.find(canary), std::string::npos) << canary;
  std::istringstream in(r->stdout_data.substr(0, r->stdout_data.find("---")));
  std::string line;
  std::set<std::string> names;
  while (std::getline(in, line)) names.insert(line.substr(0, line.find('=')));
  const std::set<std::string> tier2 = {"HOME", "PWD", "PATH", "TMPDIR", "LANG"};
  for (const auto& n : names) EXPECT_TRUE(tier2.count(n)) << "unexpected variable " << n;
  EXPECT_TRUE(names.count("PATH"));
  EXPECT_TRUE(names.count("HOME"));
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ::unsetenv("DATABASE_URL");
  ::unsetenv("OPENAI_API_KEY");
}

}  // namespace
}  // namespace airlock::testing
