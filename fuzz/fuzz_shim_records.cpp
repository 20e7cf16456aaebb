// The host's decoder of the bytes an in-sandbox shim sends
// (sandbox/oci/shim_protocol.h): never reads past its input, consumes whole
// records only, and every record it returns re-encodes to the bytes it
// came from.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "airlock/sandbox/oci/shim_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto d = airlock::oci::decodeShimRecords(input);
  if (d.consumed > size || d.consumed != d.records.size() * airlock::oci::kShimRecordBytes)
    std::abort();
  if (!d.malformed && size - d.consumed >= airlock::oci::kShimRecordBytes) std::abort();
  for (std::size_t i = 0; i < d.records.size(); ++i) {
    char buf[airlock::oci::kShimRecordBytes];
    airlock::oci::encodeShimRecord(d.records[i], buf);
    if (std::memcmp(buf, input.data() + i * airlock::oci::kShimRecordBytes, sizeof buf) != 0)
      std::abort();
  }
  return 0;
}
