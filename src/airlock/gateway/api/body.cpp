// The request-body helpers the API's route files share (body.h).
#include "airlock/gateway/api/body.h"

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/ids.h"
#include "airlock/core/json.h"
#include "airlock/core/limits_defaults.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;

// Largest output a caller may ask for: the result holds all of it.
constexpr std::int64_t kMaxOutputCeiling = std::int64_t{256} << 20;

}  // namespace

HttpResponse jsonResponse(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

HttpResponse noContent() {
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

HttpResponse unknownEnvironment(std::string_view environment_id) {
  return errorResponse(404, "not_found", "no live environment " + quoteForMessage(environment_id));
}

HttpResponse unknownArtifact(std::string_view artifact_id) {
  return errorResponse(404, "not_found", "no artifact " + quoteForMessage(artifact_id));
}

HttpResponse unknownNote(std::string_view run_id, std::string_view key) {
  return errorResponse(404, "not_found",
                       "run " + quoteForMessage(run_id) + " has no note " + quoteForMessage(key));
}

Error badRequest(std::string message) {
  return Error{ErrorCode::kToolValidationError, 0, std::move(message)};
}

Result<std::string> platformIdentifier(const json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || !it->is_string())
    return tl::unexpected(badRequest(std::string(field) + " is required and must be a string"));
  const std::string v = it->get<std::string>();
  if (!isPlatformIdentifier(v))
    return tl::unexpected(
        badRequest(std::string(field) + " must be 1-128 characters of A-Z a-z 0-9 . _ : -"));
  return v;
}

Result<std::int64_t> wholeNumber(const json& body, const char* field,
                                 std::optional<std::int64_t> fallback) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    if (fallback) return *fallback;
    return tl::unexpected(badRequest(std::string(field) + " is required"));
  }
  auto n = int64FromJson(*it);
  if (!n) return tl::unexpected(badRequest(std::string(field) + " " + n.error().context));
  return *n;
}

Result<std::uint64_t> countField(const json& body, const CountSpec& spec,
                                 std::optional<std::uint64_t> fallback) {
  auto it = body.find(spec.field);
  if (it == body.end() || it->is_null()) {
    if (fallback) return *fallback;
    return tl::unexpected(badRequest(countExpectation(spec) + " (it is required)"));
  }
  auto n = countFromJson(*it, spec);
  if (!n) return tl::unexpected(badRequest(n.error().context));
  return n;
}

Result<std::uint64_t> queryCount(const std::optional<std::string>& text, const CountSpec& spec,
                                 std::uint64_t fallback) {
  if (!text) return fallback;
  auto n = countFromText(*text, spec);
  if (!n) return tl::unexpected(badRequest(n.error().context));
  return n;
}

Result<json> parseBody(const std::string& body) {
  if (body.empty()) return json::object();
  auto j = parseUntrustedJson(body);
  if (!j)
    return tl::unexpected(badRequest("the request body is not valid JSON: " + j.error().context));
  if (!j->is_object()) return tl::unexpected(badRequest("the request body must be a JSON object"));
  return j;
}

Result<void> limitsInto(const json& body, ExecutionCommand& c) {
  if (auto wd = body.find("working_directory"); wd != body.end() && !wd->is_null()) {
    if (!wd->is_string()) return tl::unexpected(badRequest("working_directory must be a string"));
    c.working_directory = wd->get<std::string>();
  }
  auto timeout = wholeNumber(body, "timeout_seconds", kDeclaredRunCommandTimeoutSeconds);
  if (!timeout) return tl::unexpected(timeout.error());
  c.timeout_seconds = *timeout;
  auto cap = wholeNumber(body, "maximum_output_bytes", kDefaultMaximumOutputBytes);
  if (!cap) return tl::unexpected(cap.error());
  if (*cap <= 0 || *cap > kMaxOutputCeiling)
    return tl::unexpected(badRequest("maximum_output_bytes must be between 1 and " +
                                     std::to_string(kMaxOutputCeiling)));
  c.maximum_output_bytes = *cap;
  return {};
}

Result<std::vector<std::string>> argvFrom(const json& body) {
  auto argv = body.find("argv");
  if (argv == body.end() || !argv->is_array() || argv->empty())
    return tl::unexpected(badRequest("argv is required and must be a non-empty array of strings"));
  std::vector<std::string> out;
  for (const auto& a : *argv) {
    if (!a.is_string()) return tl::unexpected(badRequest("argv must be an array of strings"));
    out.push_back(a.get<std::string>());
  }
  if (auto problem = shellStringProblem(out, ArgvSpelling::kJson))
    return tl::unexpected(badRequest(*problem));
  return out;
}

Result<void> variablesInto(const json& body, const std::string& key,
                           std::map<std::string, std::string>& vars) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_object())
    return tl::unexpected(badRequest(key + " must be an object of strings: {\"NAME\": \"value\"}"));
  for (const auto& [name, value] : it->items()) {
    if (!value.is_string())
      return tl::unexpected(
          badRequest(key + " value of " + quoteForMessage(name) + " must be a string"));
    const std::string& text = value.get_ref<const std::string&>();
    if (auto ok = checkAddedVariable(key, name, text); !ok)
      return tl::unexpected(badRequest(ok.error().context));
    vars[name] = text;
  }
  return {};
}

Result<std::map<std::string, std::string>> envAdditionsFrom(const json& body) {
  std::map<std::string, std::string> out;
  if (auto ok = variablesInto(body, "env", out); !ok) return tl::unexpected(ok.error());
  return out;
}

}  // namespace airlock::gateway
