// The lexical half of resolve(): any accepted path is relative, free of
// empty, "." and ".." components and NUL, within the length limits, and
// idempotent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "airlock/core/command_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto rel = airlock::checkRelativePath(text);
  if (!rel) return 0;
  const std::string& p = *rel;
  if (p.size() > 4096 || (!p.empty() && (p.front() == '/' || p.back() == '/'))) std::abort();
  if (p.find('\0') != std::string::npos || p.find("//") != std::string::npos) std::abort();
  std::size_t start = 0;
  while (start <= p.size() && !p.empty()) {
    std::size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string_view comp(p.data() + start, end - start);
    if (comp.empty() || comp == "." || comp == ".." || comp.size() > 255) std::abort();
    start = end + 1;
  }
  auto again = airlock::checkRelativePath(p.empty() ? std::string_view(".") : std::string_view(p));
  if (!again || *again != p) std::abort();
  return 0;
}
