#include "airlock/core/units.h"

#include <array>
#include <limits>
#include <optional>

#include "airlock/core/encoding.h"

namespace airlock {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

bool isSpace(char c) {
  return c == ' ' || c == '\t';
}
bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? char(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

enum class Scan { kOk, kEmpty, kOverflow };

// Consumes leading decimal digits of `s` into `value`.
Scan scanDigits(std::string_view& s, std::int64_t& value) {
  if (s.empty() || !isDigit(s.front())) return Scan::kEmpty;
  value = 0;
  while (!s.empty() && isDigit(s.front())) {
    const int d = s.front() - '0';
    if (value > (kInt64Max - d) / 10) return Scan::kOverflow;
    value = value * 10 + d;
    s.remove_prefix(1);
  }
  return Scan::kOk;
}

std::optional<std::int64_t> checkedMultiply(std::int64_t a, std::int64_t b) {
  if (b != 0 && a > kInt64Max / b) return std::nullopt;
  return a * b;
}

struct Unit {
  std::string_view name;
  std::int64_t factor;
};

constexpr std::array<Unit, 14> kSizeUnits{{
    {"", 1},
    {"B", 1},
    {"K", std::int64_t{1} << 10},
    {"KB", std::int64_t{1} << 10},
    {"KiB", std::int64_t{1} << 10},
    {"M", std::int64_t{1} << 20},
    {"MB", std::int64_t{1} << 20},
    {"MiB", std::int64_t{1} << 20},
    {"G", std::int64_t{1} << 30},
    {"GB", std::int64_t{1} << 30},
    {"GiB", std::int64_t{1} << 30},
    {"T", std::int64_t{1} << 40},
    {"TB", std::int64_t{1} << 40},
    {"TiB", std::int64_t{1} << 40},
}};

constexpr std::array<Unit, 5> kDurationUnits{{
    {"", 1000},
    {"ms", 1},
    {"s", 1000},
    {"m", 60 * 1000},
    {"h", 60 * 60 * 1000},
}};

std::optional<std::int64_t> sizeFactor(std::string_view unit) {
  for (const auto& u : kSizeUnits) {
    if (equalsIgnoreCase(unit, u.name)) return u.factor;
  }
  return std::nullopt;
}

std::optional<std::int64_t> durationFactor(std::string_view unit) {
  for (const auto& u : kDurationUnits) {
    if (equalsIgnoreCase(unit, u.name)) return u.factor;
  }
  return std::nullopt;
}

tl::unexpected<Error> invalid(std::string_view what, std::string_view text,
                              const std::string& why) {
  return fail(ErrorCode::kToolValidationError,
              "invalid " + std::string(what) + " " + quoteForMessage(text) + ": " + why);
}

constexpr std::string_view kSizeShape =
    "expected a whole number with an optional unit B, K, M, G or T (e.g. 512M)";
constexpr std::string_view kDurationShape =
    "expected a whole number with an optional unit ms, s, m or h (e.g. 30s)";
constexpr std::string_view kCpuShape =
    "expected a number of CPUs like 1, 0.5 or 2.25, or millicores like 500m";

// "-5" is a negative number; "--" or "-x" is an option where the value
// should be (`--memory -- true`: the value is missing).
bool startsNumber(std::string_view rest) noexcept {
  return !rest.empty() && ((rest.front() >= '0' && rest.front() <= '9') || rest.front() == '.');
}
constexpr std::string_view kNotAValue = "is not a value (the value is missing?); ";

// Shared shape of sizes and durations: digits, optional spaces, unit.
template <class FactorFn>
Result<std::int64_t> parseWithUnit(std::string_view what, std::string_view text,
                                   std::string_view shape, std::string_view unit_word,
                                   FactorFn factor_of) {
  std::string_view rest = trim(text);
  if (rest.empty()) return invalid(what, text, "empty; " + std::string(shape));
  if (rest.front() == '-') {
    if (!startsNumber(rest.substr(1)))
      return invalid(what, text, std::string(kNotAValue) + std::string(shape));
    return invalid(what, text, "must not be negative; " + std::string(shape));
  }
  std::int64_t number = 0;
  switch (scanDigits(rest, number)) {
    case Scan::kEmpty:
      return invalid(what, text, std::string(shape));
    case Scan::kOverflow:
      return invalid(what, text,
                     "too large (the maximum is " + std::to_string(kInt64Max) + " " +
                         std::string(unit_word) + ")");
    case Scan::kOk:
      break;
  }
  if (!rest.empty() && (rest.front() == '.' || rest.front() == ',')) {
    return invalid(what, text, "must be a whole number; use a smaller unit; " + std::string(shape));
  }
  rest = trim(rest);
  const std::optional<std::int64_t> factor = factor_of(rest);
  if (!factor) {
    return invalid(what, text, "unknown unit " + quoteForMessage(rest) + "; " + std::string(shape));
  }
  const auto total = checkedMultiply(number, *factor);
  if (!total) {
    return invalid(what, text,
                   "too large (the maximum is " + std::to_string(kInt64Max) + " " +
                       std::string(unit_word) + ")");
  }
  return *total;
}

}  // namespace

Result<std::int64_t> parseSize(std::string_view text) {
  return parseWithUnit("size", text, kSizeShape, "bytes", sizeFactor);
}

Result<std::chrono::milliseconds> parseDuration(std::string_view text) {
  auto ms = parseWithUnit("duration", text, kDurationShape, "milliseconds", durationFactor);
  if (!ms) return tl::unexpected(ms.error());
  return std::chrono::milliseconds{*ms};
}

Result<std::int64_t> parseCpus(std::string_view text) {
  std::string_view rest = trim(text);
  if (rest.empty()) return invalid("CPU count", text, "empty; " + std::string(kCpuShape));
  if (rest.front() == '-') {
    if (!startsNumber(rest.substr(1)))
      return invalid("CPU count", text, std::string(kNotAValue) + std::string(kCpuShape));
    return invalid("CPU count", text, "must not be negative; " + std::string(kCpuShape));
  }
  std::int64_t whole = 0;
  const Scan scan = scanDigits(rest, whole);
  if (scan == Scan::kEmpty) return invalid("CPU count", text, std::string(kCpuShape));
  const auto too_large = [&] {
    return invalid("CPU count", text,
                   "too large (the maximum is " + std::to_string(kInt64Max) + " millicores)");
  };
  if (scan == Scan::kOverflow) return too_large();

  if (rest == "m" || rest == "M") return whole;  // already millicores
  std::int64_t fraction = 0;
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    if (rest.empty() || !isDigit(rest.front())) {
      return invalid("CPU count", text, std::string(kCpuShape));
    }
    int place = 0;
    while (!rest.empty() && isDigit(rest.front())) {
      const int d = rest.front() - '0';
      if (place < 3) {
        fraction = fraction * 10 + d;
      } else if (d != 0) {
        return invalid("CPU count", text,
                       "more precise than a millicore; use at most three decimal places (e.g. "
                       "0.125)");
      }
      ++place;
      rest.remove_prefix(1);
    }
    for (; place < 3; ++place) fraction *= 10;
  }
  if (!rest.empty()) return invalid("CPU count", text, std::string(kCpuShape));
  const auto millis = checkedMultiply(whole, 1000);
  if (!millis || *millis > kInt64Max - fraction) return too_large();
  return *millis + fraction;
}

std::string formatSize(std::int64_t bytes) {
  static constexpr std::array<Unit, 4> kUnits{{
      {"TiB", std::int64_t{1} << 40},
      {"GiB", std::int64_t{1} << 30},
      {"MiB", std::int64_t{1} << 20},
      {"KiB", std::int64_t{1} << 10},
  }};
  // The largest unit that divides exactly, so parseSize(formatSize(n)) == n.
  if (bytes > 0) {
    for (const auto& u : kUnits) {
      if (bytes % u.factor == 0)
        return std::to_string(bytes / u.factor) + " " + std::string(u.name);
    }
  }
  return std::to_string(bytes) + " B";
}

}  // namespace airlock
