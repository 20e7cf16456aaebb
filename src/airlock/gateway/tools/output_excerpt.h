// Head-and-tail excerpts of command output for the model (spec 000,
// "sandbox.run_command": output above the limit is truncated to a
// head-and-tail excerpt and the full output becomes an artifact). Pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace airlock::gateway {

// Splits a budget of `total` bytes between stdout and stderr: a stream that
// fits in half keeps its size and leaves the rest to the other; otherwise
// each gets half (the remainder byte to stdout). The two shares sum to at
// most `total`, and to exactly min(total, a + b).
std::pair<std::int64_t, std::int64_t> splitOutputBudget(std::int64_t total,
                                                        std::int64_t stdout_size,
                                                        std::int64_t stderr_size) noexcept;

// When bytes.size() <= budget: bytes unchanged. Otherwise the first and
// last budget/2 bytes (head gets the odd byte) joined by `marker`. The cut
// points move back (head) or forward (tail) over at most 3 bytes so that a
// UTF-8 sequence is never split; valid UTF-8 in gives valid UTF-8 out when
// the marker is valid UTF-8. The result never has more than
// budget + marker.size() bytes. budget <= 0 gives the marker alone.
std::string headAndTail(std::string_view bytes, std::int64_t budget, std::string_view marker);

}  // namespace airlock::gateway
