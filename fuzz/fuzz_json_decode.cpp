// Decoding of the port's JSON (requests from the network in `serve`): never
// crashes, never throws, and whatever decodes re-encodes to an equal value.
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
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  roundTrip<airlock::ExecutionCommand>(text);
  roundTrip<airlock::ExecutionResult>(text);
  roundTrip<airlock::EnvironmentSpec>(text);
  roundTrip<airlock::EnvironmentHandle>(text);
  return 0;
}
