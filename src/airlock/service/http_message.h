// The request and response of `airlock serve`'s HTTP API as plain values,
// the error body every route answers with, and the percent-decoding of
// paths and queries: what the Beast server (http_server.h) and the handlers
// behind a RequestHandler (request_handler.h) share.
//
// Errors are {"error": {"code", "message"}} with the stable lower_snake_case
// codes of core/error.h, or a code of the HTTP layer's own ("unauthorized",
// "not_found", "method_not_allowed", "bad_request", "payload_too_large").
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/sys/byte_source.h"

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
  // When set, the body is this source's bytes instead of `body`, sent as a
  // chunked response as they are read: the server reads it off its loop,
  // one read at a time, and writes each read as a chunk before the next
  // (so a slow client holds the source back, never memory), until it
  // returns 0. A read error after the head was sent closes the connection
  // without the last chunk: the client sees a cut response, never a short
  // body that looks whole. Shared so that a response stays copyable.
  std::shared_ptr<sys::ByteSource> body_source;
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
