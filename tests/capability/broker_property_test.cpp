// Properties of the capabilities' argument parsers (execution_capabilities.h): total
// over any wire value, and faithful for well-formed requests.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "airlock/execution/capabilities/execution_capabilities.h"

namespace airlock::testing {
namespace {

using capability::wire::Array;
using capability::wire::Map;
using capability::wire::Value;

rc::Gen<std::string> genText() {
  return rc::gen::oneOf(
      rc::gen::element<std::string>("", "ls", "a b", "cwd", "sub/dir", "..", "/abs", "X"),
      rc::gen::map(rc::gen::container<std::string>(rc::gen::inRange<char>(1, 127)),
                   [](std::string s) { return s; }),
      rc::gen::arbitrary<std::string>());
}

rc::Gen<Value> genScalar() {
  return rc::gen::oneOf(
      rc::gen::just(Value()), rc::gen::map(rc::gen::arbitrary<bool>(), &Value::boolean),
      rc::gen::map(rc::gen::arbitrary<std::int64_t>(), &Value::integer),
      rc::gen::map(rc::gen::arbitrary<std::uint64_t>(), &Value::unsignedInteger),
      rc::gen::map(genText(), &Value::string), rc::gen::map(genText(), &Value::bytes));
}

rc::Gen<Value> genValue(int depth) {
  if (depth == 0) return genScalar();
  const auto child = rc::gen::lazy([depth] { return genValue(depth - 1); });
  return rc::gen::oneOf(
      genScalar(),
      rc::gen::map(rc::gen::resize(6, rc::gen::container<Array>(child)), &Value::array),
      rc::gen::map(
          rc::gen::resize(6, rc::gen::container<std::vector<std::pair<std::string, Value>>>(
                                 rc::gen::pair(genText(), child))),
          [](std::vector<std::pair<std::string, Value>> entries) {
            return Value::map(Map(entries));
          }));
}

// Maps that look like proc.run arguments, with each field sometimes wrong.
rc::Gen<Value> genProcArgs() {
  const auto field = [](const char* name, rc::Gen<Value> g) {
    return rc::gen::map(rc::gen::pair(rc::gen::arbitrary<bool>(), g),
                        [name](std::pair<bool, Value> p) {
                          return std::pair{p.first, std::pair<std::string, Value>{name, p.second}};
                        });
  };
  const auto argv = rc::gen::oneOf(
      rc::gen::map(rc::gen::resize(5, rc::gen::container<std::vector<std::string>>(genText())),
                   [](std::vector<std::string> v) {
                     Array a;
                     for (auto& s : v) a.push_back(Value::string(s));
                     return Value::array(a);
                   }),
      genValue(2));
  return rc::gen::map(
      rc::gen::tuple(
          field("argv", argv),
          field("cwd", rc::gen::oneOf(rc::gen::map(genText(), &Value::string), genScalar())),
          field("env", genValue(2)), field("stdin", genScalar()), field("timeout_ms", genScalar())),
      [](auto t) {
        Map m;
        auto add = [&](const std::pair<bool, std::pair<std::string, Value>>& f) {
          if (f.first) m.push_back(f.second);
        };
        add(std::get<0>(t));
        add(std::get<1>(t));
        add(std::get<2>(t));
        add(std::get<3>(t));
        add(std::get<4>(t));
        return Value::map(m);
      });
}

RC_GTEST_PROP(ProcRequestProperty, TotalOverAnyValue, ()) {
  const Value args = *rc::gen::oneOf(genValue(3), genProcArgs());
  const bool allow_stdin = *rc::gen::arbitrary<bool>();
  auto parsed = execution::parseProcRequest(args, allow_stdin);
  if (!parsed) {
    RC_ASSERT(parsed.error().code == "bad_request");
    RC_ASSERT(!parsed.error().message.empty());
    return;
  }
  // Whatever was accepted has the shape the side process needs.
  RC_ASSERT(!parsed->command.argv.empty());
  RC_ASSERT(!parsed->command.argv[0].empty());
  for (const auto& a : parsed->command.argv) RC_ASSERT(a.find('\0') == std::string::npos);
  RC_ASSERT(!parsed->command.working_directory.empty());
  if (!allow_stdin) RC_ASSERT(!parsed->stdin_data.has_value());
  for (const auto& [k, v] : parsed->command.env_additions)
    RC_ASSERT(v.find('\0') == std::string::npos);
}

RC_GTEST_PROP(ProcRequestProperty, WellFormedRequestsKeepTheirArgv, ()) {
  const auto argv = *rc::gen::nonEmpty(rc::gen::resize(
      8, rc::gen::container<std::vector<std::string>>(
             rc::gen::nonEmpty(rc::gen::container<std::string>(rc::gen::inRange<char>(1, 127))))));
  Array a;
  for (const auto& s : argv) a.push_back(Value::string(s));
  const auto timeout = *rc::gen::inRange<std::uint64_t>(0, 1000000);
  auto parsed = execution::parseProcRequest(
      Value::map({{"argv", Value::array(a)}, {"timeout_ms", Value::unsignedInteger(timeout)}}),
      true);
  RC_ASSERT(parsed.has_value());
  RC_ASSERT(parsed->command.argv == argv);
  RC_ASSERT(parsed->command.working_directory == ".");
  RC_ASSERT(parsed->timeout.count() == static_cast<std::int64_t>(timeout));
}

TEST(ProcRequestTest, ReservedEnvironmentNamesAreRefused) {
  for (const char* name : {"PATH", "AWS_SECRET_ACCESS_KEY", "HOME"}) {
    auto parsed =
        execution::parseProcRequest(Value::map({{"argv", Value::array({Value::string("env")})},
                                                {"env", Value::map({{name, Value::string("x")}})}}),
                                    true);
    ASSERT_FALSE(parsed.has_value()) << name;
    EXPECT_EQ(parsed.error().code, "bad_request");
  }
  auto ok = execution::parseProcRequest(
      Value::map({{"argv", Value::array({Value::string("env")})},
                  {"env", Value::map({{"MY_FLAG", Value::string("1")}})}}),
      true);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->command.env_additions.at("MY_FLAG"), "1");
}

}  // namespace
}  // namespace airlock::testing
