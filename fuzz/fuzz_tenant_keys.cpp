// The tenant key file parser (src/airlock/service/tenant_keys.h) over any
// bytes: a table or a ConfigurationError naming a line the input has, never
// a crash; a parsed table answers a lookup of any token.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "airlock/service/tenant_keys.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSource = "keys";
  auto keys = airlock::service::TenantKeys::parse(text, kSource);
  if (keys) {
    (void)keys->tenantOf(text);
    return 0;
  }
  if (keys.error().code != airlock::ErrorCode::kConfigurationError) std::abort();
  const std::string& context = keys.error().context;
  constexpr std::string_view kMarker = "keys: line ";
  if (context.rfind(kMarker, 0) != 0) std::abort();
  const unsigned long line = std::strtoul(context.c_str() + kMarker.size(), nullptr, 10);
  const auto lines = static_cast<unsigned long>(std::count(text.begin(), text.end(), '\n'));
  if (line < 1 || line > lines + 1) std::abort();
  return 0;
}
