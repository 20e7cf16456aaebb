#include "airlock/gateway/tools/output_excerpt.h"

#include <algorithm>

namespace airlock::gateway {
namespace {

bool isContinuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> splitOutputBudget(std::int64_t total,
                                                        std::int64_t stdout_size,
                                                        std::int64_t stderr_size) noexcept {
  total = std::max<std::int64_t>(total, 0);
  stdout_size = std::max<std::int64_t>(stdout_size, 0);
  stderr_size = std::max<std::int64_t>(stderr_size, 0);
  const std::int64_t half_err = total / 2;
  const std::int64_t half_out = total - half_err;
  if (stdout_size <= half_out) return {stdout_size, std::min(stderr_size, total - stdout_size)};
  if (stderr_size <= half_err) return {std::min(stdout_size, total - stderr_size), stderr_size};
  return {half_out, half_err};
}

std::string headAndTail(std::string_view bytes, std::int64_t budget, std::string_view marker) {
  if (budget >= 0 && bytes.size() <= static_cast<std::uint64_t>(budget)) return std::string(bytes);
  if (budget <= 0) return std::string(marker);
  const std::size_t tail_len = static_cast<std::size_t>(budget / 2);
  std::size_t head_end = static_cast<std::size_t>(budget) - tail_len;
  std::size_t tail_begin = bytes.size() - tail_len;
  // Never split a UTF-8 sequence: move the head's end back to a lead byte
  // and the tail's start forward past continuation bytes (at most 3 each,
  // so invalid input cannot make this loop long).
  for (int i = 0; i < 3 && head_end > 0 && head_end < bytes.size() &&
                  isContinuation(static_cast<unsigned char>(bytes[head_end]));
       ++i) {
    --head_end;
  }
  for (int i = 0; i < 3 && tail_begin < bytes.size() &&
                  isContinuation(static_cast<unsigned char>(bytes[tail_begin]));
       ++i) {
    ++tail_begin;
  }
  std::string out;
  out.reserve(head_end + marker.size() + (bytes.size() - tail_begin));
  out.append(bytes.substr(0, head_end));
  out.append(marker);
  out.append(bytes.substr(tail_begin));
  return out;
}

}  // namespace airlock::gateway
