// Decoding of the port's JSON (requests from the network in `serve`): never
// crashes, never throws, and whatever decodes re-encodes to an equal value.
// parseUntrustedJson, the parser every request body, tool call and MCP
// message goes through: what it accepts nlohmann accepts as the same value
// (it only refuses more: a key named twice), and its own output, which has
// no repeated key, parses again to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "airlock/core/json.h"

namespace {
template <class T>
void roundTrip(std::string_view text) {
  auto decoded = airlock::fromJson<T>(text);
  if (!decoded) return;
  auto again = airlock::fromJson<T>(airlock::toJsonText(*decoded));
  if (!again || !(*again == *decoded)) std::abort();
}

void strictParse(std::string_view text) {
  auto strict = airlock::parseUntrustedJson(text);
  if (!strict) {
    if (strict.error().context.empty()) std::abort();
    return;
  }
  const auto lenient = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (lenient.is_discarded() || lenient != *strict) std::abort();
  const std::string again = strict->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto reparsed = airlock::parseUntrustedJson(again);
  if (!reparsed || *reparsed != *strict) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  strictParse(text);
  roundTrip<airlock::ExecutionCommand>(text);
  roundTrip<airlock::ExecutionResult>(text);
  roundTrip<airlock::EnvironmentSpec>(text);
  roundTrip<airlock::EnvironmentHandle>(text);
  return 0;
}
