#include "airlock/service/http_message.h"

#include <nlohmann/json.hpp>

namespace airlock::service {
namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

int httpStatusFor(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kToolValidationError:
    case ErrorCode::kWorkspaceEscape:
      return 400;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kExecutionRejected:
    case ErrorCode::kSandboxEscapeSuspected:
    case ErrorCode::kEnvironmentBusy:
      return 409;
    case ErrorCode::kEnvironmentGone:
      return 410;
    case ErrorCode::kArtifactIntegrityError:
      return 422;
    case ErrorCode::kExecutionUnavailable:
      return 503;
    case ErrorCode::kConfigurationError:
      return 500;
  }
  return 500;
}

HttpResponse errorResponse(int status, std::string_view code, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = nlohmann::json{{"error", {{"code", code}, {"message", message}}}}.dump();
  return r;
}

HttpResponse errorResponse(const Error& error) {
  return errorResponse(httpStatusFor(error.code), errorCodeName(error.code), error.message());
}

std::optional<std::string> percentDecoded(std::string_view raw, bool plus_is_space) {
  std::string out;
  for (std::size_t k = 0; k < raw.size(); ++k) {
    if (raw[k] == '%') {
      if (k + 2 >= raw.size()) return std::nullopt;
      const int hi = hexValue(raw[k + 1]), lo = hexValue(raw[k + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      k += 2;
    } else if (raw[k] == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(raw[k]);
    }
  }
  return out;
}

std::optional<std::string> queryParam(const std::string& query, const std::string& name) {
  std::size_t i = 0;
  while (i <= query.size()) {
    std::size_t amp = query.find('&', i);
    if (amp == std::string::npos) amp = query.size();
    const std::string_view item(query.data() + i, amp - i);
    const std::size_t eq = item.find('=');
    if (item.substr(0, eq) == name) {
      return percentDecoded(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1),
                            true);
    }
    i = amp + 1;
  }
  return std::nullopt;
}

}  // namespace airlock::service
