// Fuzzes the capabilities' argument parser
// (execution/capabilities/execution_capabilities.h parseProcRequest) over
// every value the wire can decode: the args of a cap_call are the program's
// bytes. It must never crash, and whatever it
// accepts must have a non-empty argv without NUL bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "airlock/capability/wire/msgpack.h"
#include "airlock/execution/capabilities/execution_capabilities.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto value = airlock::capability::wire::decodeValue(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!value) return 0;
  for (bool allow_stdin : {false, true}) {
    auto parsed = airlock::execution::parseProcRequest(*value, allow_stdin);
    if (!parsed) {
      if (parsed.error().code != "bad_request") std::abort();
      continue;
    }
    if (parsed->command.argv.empty() || parsed->command.argv[0].empty()) std::abort();
    for (const auto& a : parsed->command.argv)
      if (a.find('\0') != std::string::npos) std::abort();
    if (!allow_stdin && parsed->stdin_data) std::abort();
  }
  return 0;
}
