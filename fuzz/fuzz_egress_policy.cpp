// The egress policy loader: total on any bytes (yaml-cpp exceptions
// stay inside the loader); an accepted policy holds only canonical entries
// and answers check() for any name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "airlock/egress/authority.h"
#include "airlock/egress/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace airlock::egress;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto loaded = loadEgressPolicy(text, "fuzz");
  if (!loaded) {
    if (loaded.error().context.rfind("fuzz", 0) != 0) std::abort();
    return 0;
  }
  const Policy& p = **loaded;
  for (const Destination& d : p.destinations()) {
    if (d.ports.empty()) std::abort();
    for (std::size_t i = 0; i < d.ports.size(); ++i) {
      if (d.ports[i] == 0 || (i > 0 && d.ports[i - 1] >= d.ports[i])) std::abort();
    }
    std::string_view name = d.host;
    const bool wildcard = name.rfind("*.", 0) == 0;
    if (wildcard) name.remove_prefix(2);
    auto canonical = parseHostName(name);
    if (!canonical || *canonical != name) std::abort();
    // An entry matches its own name (or one label under its wildcard) on its ports.
    const std::string probe = wildcard ? "x." + std::string(name) : std::string(name);
    if (p.mode() == airlock::EgressMode::kAllowlist &&
        p.check(probe, d.ports.front()) != Reason::kAllowed)
      std::abort();
  }
  (void)p.check("pypi.org", 443);
  // The value form compiles back to the same policy (one set of rules).
  auto again = compilePolicy(p.toValue(), "fuzz");
  if (!again || !((*again)->toValue() == p.toValue())) std::abort();
  return 0;
}
