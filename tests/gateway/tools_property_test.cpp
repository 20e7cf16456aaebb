// Properties of the tool layer over generated input: arbitrary JSON
// arguments never crash a tool and always give a result or a typed failure;
// a validation failure names an argument; whatever run_command sends passes
// the core command rules with a timeout no larger than the declared one.
// Plus the head-and-tail excerpt's bounds.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/gateway/tools/job_tools.h"
#include "airlock/gateway/tools/output_excerpt.h"
#include "airlock/gateway/tools/tool_registry.h"
#include "gateway_test_support.h"

// How rapidcheck prints a counterexample (found by ADL).
namespace nlohmann {
inline void showValue(const json& value, std::ostream& os) {
  os << value.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 2000);
}
}  // namespace nlohmann

namespace airlock::gateway {
namespace {

using nlohmann::json;

// Strings biased towards what the tools care about: paths, NULs, long
// values, non-UTF-8 bytes (which a JSON value built in-process may hold).
rc::Gen<std::string> interestingString() {
  return rc::gen::oneOf(
      rc::gen::element<std::string>("", ".", "..", "/", "a", "a/b", "../x", "/etc/passwd",
                                    "./run.sh", "echo", "true", "cat", "sleep", "ls -la",
                                    std::string("a\0b", 3), "\xff\xfe", "a//b", "dir/"),
      rc::gen::map(rc::gen::inRange<std::size_t>(250, 70000),
                   [](std::size_t n) { return std::string(n, 'a'); }),
      rc::gen::arbitrary<std::string>());
}

rc::Gen<json> scalar() {
  return rc::gen::oneOf(
      rc::gen::just(json(nullptr)),
      rc::gen::map(rc::gen::arbitrary<bool>(), [](bool b) { return json(b); }),
      rc::gen::map(rc::gen::arbitrary<std::int64_t>(), [](std::int64_t v) { return json(v); }),
      rc::gen::map(rc::gen::arbitrary<std::uint64_t>(), [](std::uint64_t v) { return json(v); }),
      rc::gen::map(rc::gen::arbitrary<double>(), [](double v) { return json(v); }),
      rc::gen::element(json(0), json(1), json(5), json(300), json(301), json(-1), json(1.5),
                       json(1e300)),
      rc::gen::map(interestingString(), [](std::string s) { return json(std::move(s)); }));
}

rc::Gen<json> value(int depth) {
  if (depth <= 0) return scalar();
  return rc::gen::oneOf(
      scalar(), scalar(),
      rc::gen::map(rc::gen::container<std::vector<json>>(rc::gen::resize(6, value(depth - 1))),
                   [](std::vector<json> items) { return json(std::move(items)); }),
      rc::gen::map(rc::gen::container<std::vector<std::string>>(rc::gen::resize(
                       6, rc::gen::map(interestingString(),
                                       [](std::string s) { return s.substr(0, 300); }))),
                   [](std::vector<std::string> items) { return json(std::move(items)); }));
}

// An arguments value: usually an object with the tools' own keys.
rc::Gen<json> arguments() {
  const auto key = rc::gen::oneOf(
      rc::gen::element<std::string>("command", "working_directory", "timeout_seconds", "path",
                                    "text", "filename", "media_type"),
      rc::gen::element<std::string>("command", "path", "extra", ""));
  const auto object = rc::gen::map(rc::gen::container<std::vector<std::pair<std::string, json>>>(
                                       rc::gen::resize(5, rc::gen::pair(key, value(2)))),
                                   [](std::vector<std::pair<std::string, json>> members) {
                                     json out = json::object();
                                     for (auto& [k, v] : members) out[k] = std::move(v);
                                     return out;
                                   });
  return rc::gen::oneOf(object, object, object, value(2));
}

TEST(ToolsProperty, ArbitraryArgumentsGiveAResultOrATypedFailure) {
  const ToolRegistry registry = builtinTools();
  EXPECT_TRUE(rc::check("every tool, any arguments", [&] {
    testing::FakeSandbox box;
    const auto name =
        *rc::gen::element<std::string>("sandbox_run_command", "workspace_read_text",
                                       "workspace_write_text", "workspace_list", "artifact_export");
    const json args = *arguments();
    ToolResult result = registry.call(name, args, box.context);  // noexcept
    if (result) {
      RC_ASSERT(result->is_object());
      // The result serializes strictly: every string in it is UTF-8 (byte
      // fields that are not are {"base64": ...}).
      RC_ASSERT(!result->dump().empty());
    } else {
      RC_ASSERT(!result.error().message.empty());
      RC_ASSERT(isValidUtf8(result.error().message));
      RC_ASSERT(isValidUtf8(result.error().argument));
      RC_ASSERT(result.error().code != ErrorCode::kExecutionUnavailable);  // no internal errors
      if (result.error().isValidation()) RC_ASSERT(!result.error().argument.empty());
    }
    // A command that failed validation never reached the service.
    if (name == "sandbox_run_command" && !result && result.error().isValidation() &&
        result.error().argument != "working_directory") {
      RC_ASSERT(box.env.history().empty());
    }
  }));
}

TEST(ToolsProperty, PlannedCommandsPassTheCoreRules) {
  const ToolOptions options;
  EXPECT_TRUE(rc::check("planRunCommand output is a valid command", [&] {
    testing::FakeSandbox box;
    json args = *arguments();
    if (*rc::gen::arbitrary<bool>() && args.is_object()) {
      args["command"] =
          *rc::gen::container<std::vector<std::string>>(rc::gen::resize(4, interestingString()));
    }
    auto command = planRunCommand(args, box.context, options);
    if (!command) {
      RC_ASSERT(!command.error().message.empty());
      return;
    }
    RC_ASSERT(validateCommand(*command).has_value());
    RC_ASSERT(command->timeout_seconds >= 1);
    RC_ASSERT(command->timeout_seconds <= options.service_hard_cap.count());
    if (args.contains("timeout_seconds") && !args["timeout_seconds"].is_null()) {
      RC_ASSERT(command->timeout_seconds <= options.declared_timeout.count());
    }
    RC_ASSERT(command->maximum_output_bytes == 4 * options.max_output_bytes);
  }));
}

// The terminal size parser the job routes and tools share: a size is taken
// exactly when both fields are whole numbers from 1 to kMaxTerminalCells
// and no other key is present, and it is then the size given; otherwise
// the error names the first offending key.
TEST(TerminalSizeProperty, TakenExactlyWhenBothFieldsAreInRange) {
  EXPECT_TRUE(rc::check("terminalSizeFromJson", [] {
    const auto cell = rc::gen::oneOf(rc::gen::inRange<std::int64_t>(-3, 1004),
                                     rc::gen::arbitrary<std::int64_t>());
    json body = json::object();
    const bool has_rows = *rc::gen::weightedElement<bool>({{9, true}, {1, false}});
    const bool has_columns = *rc::gen::weightedElement<bool>({{9, true}, {1, false}});
    const std::int64_t rows = *cell, columns = *cell;
    if (has_rows) body["rows"] = rows;
    if (has_columns) body["columns"] = columns;
    const bool extra = *rc::gen::weightedElement<bool>({{1, true}, {5, false}});
    if (extra) body["size"] = 1;
    const bool rows_ok = has_rows && rows >= 1 && rows <= kMaxTerminalCells;
    const bool columns_ok = has_columns && columns >= 1 && columns <= kMaxTerminalCells;
    const auto parsed = terminalSizeFromJson(body, "pty");
    if (!extra && rows_ok && columns_ok) {
      RC_ASSERT(parsed.has_value());
      RC_ASSERT(parsed->rows == rows);
      RC_ASSERT(parsed->columns == columns);
      return;
    }
    RC_ASSERT(!parsed.has_value());
    RC_ASSERT(parsed.error().code == ErrorCode::kToolValidationError);
    const std::string& why = parsed.error().context;
    if (extra) {
      RC_ASSERT(why.find("unknown key \"size\"") != std::string::npos);
    } else if (!rows_ok) {
      RC_ASSERT(why.starts_with("pty.rows "));
    } else {
      RC_ASSERT(why.starts_with("pty.columns "));
    }
  }));
}

TEST(OutputExcerptProperty, HeadAndTailIsBoundedAndKeepsBothEnds) {
  EXPECT_TRUE(rc::check("headAndTail", [] {
    const auto bytes = *rc::gen::arbitrary<std::string>();
    const auto budget = *rc::gen::inRange<std::int64_t>(0, 200);
    const std::string marker = "[...]";
    const std::string out = headAndTail(bytes, budget, marker);
    if (static_cast<std::int64_t>(bytes.size()) <= budget) {
      RC_ASSERT(out == bytes);
      return;
    }
    RC_ASSERT(out.size() <= static_cast<std::size_t>(budget) + marker.size());
    const auto at = out.find(marker);
    RC_ASSERT(at != std::string::npos);
    RC_ASSERT(bytes.compare(0, at, out, 0, at) == 0);  // head is a prefix
    const std::string tail = out.substr(at + marker.size());
    RC_ASSERT(bytes.size() >= tail.size());
    RC_ASSERT(bytes.compare(bytes.size() - tail.size(), tail.size(), tail) == 0);  // tail a suffix
    if (isValidUtf8(bytes)) RC_ASSERT(isValidUtf8(out));
  }));
}

TEST(OutputExcerptProperty, UnicodeTextStaysValid) {
  EXPECT_TRUE(rc::check("UTF-8 in, UTF-8 out", [] {
    const auto pieces = *rc::gen::container<std::vector<std::string>>(
        rc::gen::element<std::string>("a", "é", "€", "𝄞", "\n"));
    std::string text;
    for (const auto& p : pieces) text += p;
    const auto budget = *rc::gen::inRange<std::int64_t>(1, 64);
    RC_ASSERT(isValidUtf8(headAndTail(text, budget, "…")));
  }));
}

TEST(OutputExcerptProperty, BudgetSplitSumsToTheSmallerOfTotalAndSizes) {
  EXPECT_TRUE(rc::check("splitOutputBudget", [] {
    const auto total = *rc::gen::inRange<std::int64_t>(0, 1 << 20);
    const auto a = *rc::gen::inRange<std::int64_t>(0, 1 << 21);
    const auto b = *rc::gen::inRange<std::int64_t>(0, 1 << 21);
    const auto [sa, sb] = splitOutputBudget(total, a, b);
    RC_ASSERT(sa >= 0 && sb >= 0);
    RC_ASSERT(sa <= a && sb <= b);
    RC_ASSERT(sa + sb == std::min(total, a + b));
  }));
}

}  // namespace
}  // namespace airlock::gateway
