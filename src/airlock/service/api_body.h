// Request-body helpers the API's route files share (internal to
// airlock_service; api.cpp defines them). Each error is ToolValidationError
// ("bad_request" over HTTP) whose message names the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/service/api.h"

namespace airlock::service::body {

// The body as a JSON object; an empty body is {}.
Result<nlohmann::json> parse(const std::string& text);
// An ExecutionCommand with only the limits of {working_directory?,
// timeout_seconds?, maximum_output_bytes?} set (no argv), with the execute
// route's defaults and caps; other keys are not looked at.
Result<ExecutionCommand> commandLimits(const nlohmann::json& object);
// An integer field; `fallback` when absent or null, else an error naming it.
Result<std::int64_t> wholeNumber(const nlohmann::json& object, const char* field,
                                 std::optional<std::int64_t> fallback);
// A JSON response.
HttpResponse reply(int status, const nlohmann::json& object);

}  // namespace airlock::service::body
