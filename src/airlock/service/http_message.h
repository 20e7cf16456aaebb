// The request and response of `airlock serve`'s HTTP API as plain values,
// the error body every route answers with, and the percent-decoding of
// paths and queries: what the Beast server (http_server.h) and the handlers
// behind a RequestHandler (request_handler.h) share.
//
// Errors are {"error": {"code", "message"}} with the stable lower_snake_case
// codes of core/error.h, or a code of the HTTP layer's own ("unauthorized",
// "not_found", "method_not_allowed", "bad_request", "payload_too_large").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/core/error.h"

namespace airlock::service {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // "/v1/environments/abc/files?path=a%20b"
  std::string authorization;  // the Authorization header's value, or empty
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// The HTTP status of an error code: 400 for the caller's input (validation,
// containment), 404, 409 for a rejected or suspicious handle, 422 for an
// integrity failure, 503 when the service cannot serve now, 500 otherwise.
int httpStatusFor(ErrorCode code) noexcept;

// The response for an Error: its HTTP status and JSON body.
HttpResponse errorResponse(const Error& error);
HttpResponse errorResponse(int status, std::string_view code, std::string_view message);

// Percent-decodes a query parameter's value; nullopt when malformed.
std::optional<std::string> queryParam(const std::string& query, const std::string& name);
// Percent-decodes `raw` (a path segment; a query value with plus_is_space,
// where "+" is a space); nullopt when a "%" is not followed by two hex digits.
std::optional<std::string> percentDecoded(std::string_view raw, bool plus_is_space);

}  // namespace airlock::service
