#include "airlock/sandbox/oci/shim_protocol.h"

#include <cstring>

namespace airlock::oci {

void encodeShimRecord(const ShimRecord& record, char out[kShimRecordBytes]) noexcept {
  const std::uint32_t type = static_cast<std::uint32_t>(record.type);
  const std::uint32_t zero = 0;
  std::memcpy(out, &type, 4);
  std::memcpy(out + 4, &zero, 4);
  std::memcpy(out + 8, &record.value, 8);
}

void encodeTerminalResize(const TerminalResize& size, char out[kResizeRecordBytes]) noexcept {
  std::memcpy(out, &size.rows, 2);
  std::memcpy(out + 2, &size.columns, 2);
}

TerminalResize decodeTerminalResize(const char in[kResizeRecordBytes]) noexcept {
  TerminalResize size;
  std::memcpy(&size.rows, in, 2);
  std::memcpy(&size.columns, in + 2, 2);
  return size;
}

ShimDecode decodeShimRecords(std::string_view input) noexcept {
  ShimDecode d;
  while (input.size() - d.consumed >= kShimRecordBytes) {
    const char* p = input.data() + d.consumed;
    std::uint32_t type = 0, pad = 0;
    std::int64_t value = 0;
    std::memcpy(&type, p, 4);
    std::memcpy(&pad, p + 4, 4);
    std::memcpy(&value, p + 8, 8);
    if (pad != 0 || type < static_cast<std::uint32_t>(ShimRecordType::kStarted) ||
        type > static_cast<std::uint32_t>(ShimRecordType::kKilling)) {
      d.malformed = true;
      return d;
    }
    d.records.push_back(ShimRecord{static_cast<ShimRecordType>(type), value});
    d.consumed += kShimRecordBytes;
  }
  return d;
}

}  // namespace airlock::oci
