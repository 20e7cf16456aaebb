// Size, duration and CPU parsers (CLI flags, configuration): total, and a
// parsed size formats and parses back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "airlock/core/units.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto bytes = airlock::parseSize(text)) {
    auto again = airlock::parseSize(airlock::formatSize(*bytes));
    if (!again || *again != *bytes) std::abort();
  }
  (void)airlock::parseDuration(text);
  (void)airlock::parseCpus(text);
  return 0;
}
