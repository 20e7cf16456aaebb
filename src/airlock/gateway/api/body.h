// What the API's route files share (internal to airlock_gateway_api; body.cpp
// defines it): the HTTP plumbing's names, and the helpers that read a JSON
// request body. Each error is ToolValidationError ("bad_request" over HTTP)
// whose message names the field.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/json.h"
#include "airlock/core/types.h"
#include "airlock/service/http_message.h"
#include "airlock/service/metrics.h"
#include "airlock/service/request_keys.h"
#include "airlock/service/settings.h"

namespace airlock::gateway {

using service::errorResponse;
using service::HttpRequest;
using service::HttpResponse;
using service::httpStatusFor;
using service::Metrics;
using service::percentDecoded;
using service::queryParam;
using service::refuseUnknownKeys;
using service::Settings;

// A JSON response of `status`.
HttpResponse jsonResponse(int status, const nlohmann::json& body);
// 204, no body.
HttpResponse noContent();
// The answers to an id that names nothing of the call's tenant, one per
// kind of object (404 not_found); the dispatcher gives the same to a tenant
// key's call naming another tenant, so that the two cannot be told apart.
HttpResponse unknownEnvironment(std::string_view environment_id);
HttpResponse unknownArtifact(std::string_view artifact_id);
HttpResponse unknownNote(std::string_view run_id, std::string_view key);
// ToolValidationError with `message`.
Error badRequest(std::string message);
// The body as a JSON object; an empty body is {}.
Result<nlohmann::json> parseBody(const std::string& body);
// A platform identifier field (tenant, run): 1..128 bytes of [A-Za-z0-9._:-].
Result<std::string> platformIdentifier(const nlohmann::json& body, const char* field);
// An integer field; `fallback` when absent or null, else an error naming it.
Result<std::int64_t> wholeNumber(const nlohmann::json& body, const char* field,
                                 std::optional<std::int64_t> fallback);
// A count field (countFromJson: a whole number, 0 or more, at most
// spec.max); `fallback` when absent or null, else an error that says what
// the field takes (countExpectation).
Result<std::uint64_t> countField(const nlohmann::json& body, const CountSpec& spec,
                                 std::optional<std::uint64_t> fallback);
// A count query parameter (countFromText); `fallback` when absent.
Result<std::uint64_t> queryCount(const std::optional<std::string>& text, const CountSpec& spec,
                                 std::uint64_t fallback);
// The limits of a command (working_directory?, timeout_seconds?,
// maximum_output_bytes?) into `c`, with the execute route's defaults and
// caps; other keys are not looked at.
Result<void> limitsInto(const nlohmann::json& body, ExecutionCommand& c);
// `argv` of a command or job body: a non-empty array of strings that is not
// a whole shell line in one element (shellStringProblem).
Result<std::vector<std::string>> argvFrom(const nlohmann::json& body);
// The body's member `key` as {name: value} variables set into `vars` (over
// what it holds), each checked by the tier rules (checkAddedVariable, its
// messages naming `key`); absent or null sets nothing. Errors: bad request
// naming the key, or the variable and what is wrong with it.
Result<void> variablesInto(const nlohmann::json& body, const std::string& key,
                           std::map<std::string, std::string>& vars);
// `env` of a command or job body: the variables added over the sandbox's
// environment (variablesInto); absent or null is empty.
Result<std::map<std::string, std::string>> envAdditionsFrom(const nlohmann::json& body);

}  // namespace airlock::gateway
