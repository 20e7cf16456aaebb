// Decoding of the execution node's internal API (port/wire_json.h), what a
// gateway reads from a node and a node from a gateway: never crashes, never
// throws, and whatever decodes re-encodes to text that decodes to the same
// text again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "airlock/port/wire_json.h"

namespace {

// The age of a live environment is measured again at each encoding: it is
// left out of the comparison.
std::string comparable(const nlohmann::json& j) {
  nlohmann::json copy = j;
  if (copy.is_object()) copy.erase("provisioned_ms_ago");
  return copy.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

template <class T>
void roundTrip(const nlohmann::json& j) {
  auto decoded = airlock::wireFromJson<T>(j);
  if (!decoded) {
    if (decoded.error().context.empty()) std::abort();
    return;
  }
  const nlohmann::json once = *decoded;
  auto again = airlock::wireFromJson<T>(nlohmann::json::parse(airlock::toJsonText(*decoded)));
  if (!again) std::abort();
  const nlohmann::json twice = *again;
  if (comparable(once) != comparable(twice)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = airlock::parseUntrustedJson(text);
  if (!parsed) return 0;
  roundTrip<airlock::Error>(*parsed);
  roundTrip<airlock::NodeStatus>(*parsed);
  roundTrip<airlock::LiveEnvironment>(*parsed);
  roundTrip<airlock::WorkspaceEntry>(*parsed);
  roundTrip<airlock::WorkspaceStat>(*parsed);
  roundTrip<airlock::WorkspaceProvenance>(*parsed);
  roundTrip<airlock::TerminalSize>(*parsed);
  roundTrip<airlock::SideCommand>(*parsed);
  roundTrip<airlock::JobStartRequest>(*parsed);
  roundTrip<airlock::JobStarted>(*parsed);
  roundTrip<airlock::JobSnapshot>(*parsed);
  roundTrip<airlock::JobPollRequest>(*parsed);
  return 0;
}
