#include "airlock/capability/schedule/cron.h"

#include <chrono>
#include <cstdio>
#include <vector>

namespace airlock::capability::schedule {
namespace {

constexpr std::size_t kMaxExpressionBytes = 256;
constexpr std::size_t kMaxItems = 64;

struct FieldSpec {
  const char* name;
  int min;
  int max;
};
constexpr FieldSpec kFields[5] = {{"minute", 0, 59},
                                  {"hour", 0, 23},
                                  {"day_of_month", 1, 31},
                                  {"month", 1, 12},
                                  {"day_of_week", 0, 7}};

// Untrusted text in a message: printable ASCII only, at most 64 bytes.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > 64) out += "...";
  return out + "\"";
}

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

// 1 or 2 decimal digits.
std::optional<int> number(std::string_view s) {
  if (s.empty() || s.size() > 2) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (!isDigit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Sets the field's bits (values min..max; day_of_week 7 becomes 0) into `bits`.
tl::expected<bool, CronError> parseField(std::string_view text, const FieldSpec& f,
                                         std::vector<bool>& bits) {
  auto err = [&](std::string m) { return tl::unexpected(CronError{f.name, std::move(m)}); };
  if (text.empty()) return err("is empty");
  bits.assign(static_cast<std::size_t>(f.max) + 1, false);
  std::size_t items = 0;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t comma = text.find(',', pos);
    const std::string_view item =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (++items > kMaxItems) return err("has more than 64 items");
    if (item.empty()) return err("has an empty item in " + quoted(text));
    std::string_view base = item;
    int step = 1;
    if (const std::size_t slash = item.find('/'); slash != std::string_view::npos) {
      base = item.substr(0, slash);
      auto s = number(item.substr(slash + 1));
      if (!s) return err("step in " + quoted(item) + " must be 1 or 2 digits");
      if (*s == 0) return err("step in " + quoted(item) + " must be at least 1");
      if (*s > f.max - f.min + 1)
        return err("step in " + quoted(item) + " is larger than the field's span");
      step = *s;
      if (base != "*" && base.find('-') == std::string_view::npos)
        return err(quoted(item) + ": a step needs \"*\" or a range (write start-" +
                   std::to_string(f.max) + "/step)");
    }
    int lo = f.min, hi = f.max;
    if (base == "*") {
      // whole range
    } else if (const std::size_t dash = base.find('-'); dash != std::string_view::npos) {
      auto a = number(base.substr(0, dash));
      auto b = number(base.substr(dash + 1));
      if (!a || !b)
        return err(quoted(item) + " is not a number range (only digits: no names, L, W, ? or #)");
      lo = *a;
      hi = *b;
      if (lo > hi) return err("range " + quoted(item) + " starts above its end");
    } else {
      auto a = number(base);
      if (!a) return err(quoted(item) + " is not a number (only digits: no names, L, W, ? or #)");
      lo = hi = *a;
    }
    if (lo < f.min || hi > f.max)
      return err(quoted(item) + " is out of range " + std::to_string(f.min) + "-" +
                 std::to_string(f.max));
    for (int v = lo; v <= hi; v += step) bits[static_cast<std::size_t>(v)] = true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return text.front() != '*';
}

// Days since 1970-01-01 -> civil date and weekday (0 = Sunday).
struct Civil {
  int year;
  unsigned month;
  unsigned day;
  unsigned weekday;
};
Civil civilFromDays(std::int64_t days) {
  using namespace std::chrono;
  const sys_days d{std::chrono::days{days}};
  const year_month_day ymd{d};
  return Civil{static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
               static_cast<unsigned>(ymd.day()), weekday{d}.c_encoding()};
}

// The values `bits` marks in [field.min, field.max] as bits of `into`,
// folded modulo its size: day of week 7 is Sunday, bit 0.
template <std::size_t N>
void setBits(std::bitset<N>& into, const std::vector<bool>& bits, const FieldSpec& field) {
  for (int v = field.min; v <= field.max; ++v) {
    if (bits[static_cast<std::size_t>(v)]) into.set(static_cast<std::size_t>(v) % N);
  }
}

std::int64_t floorDiv(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

}  // namespace

tl::expected<CronExpression, CronError> CronExpression::parse(std::string_view text) {
  if (text.size() > kMaxExpressionBytes)
    return tl::unexpected(CronError{"expression", "is longer than 256 bytes"});
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= text.size()) break;
    std::size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t') ++j;
    parts.push_back(text.substr(i, j - i));
    i = j;
  }
  if (parts.size() == 1 && !parts[0].empty() && parts[0][0] == '@')
    return tl::unexpected(CronError{
        "expression", "macros such as " + quoted(parts[0]) + " are not taken; write five fields"});
  if (parts.size() != 5)
    return tl::unexpected(
        CronError{"expression",
                  "needs exactly five fields (minute hour day_of_month month day_of_week), got " +
                      std::to_string(parts.size())});
  CronExpression e;
  std::vector<bool> bits[5];
  for (int f = 0; f < 5; ++f) {
    auto restricted = parseField(parts[static_cast<std::size_t>(f)], kFields[f], bits[f]);
    if (!restricted) return tl::unexpected(restricted.error());
    if (f == 2) e.dom_restricted_ = *restricted;
    if (f == 4) e.dow_restricted_ = *restricted;
    if (f > 0) e.canonical_ += ' ';
    e.canonical_ += parts[static_cast<std::size_t>(f)];
  }
  setBits(e.minute_, bits[0], kFields[0]);
  setBits(e.hour_, bits[1], kFields[1]);
  setBits(e.dom_, bits[2], kFields[2]);
  setBits(e.month_, bits[3], kFields[3]);
  setBits(e.dow_, bits[4], kFields[4]);
  return e;
}

bool CronExpression::matches(std::int64_t unix_seconds, int offset_minutes) const noexcept {
  const std::int64_t local = floorDiv(unix_seconds, 60) + offset_minutes;  // minutes
  const std::int64_t days = floorDiv(local, 1440);
  const auto minute_of_day = static_cast<std::size_t>(local - days * 1440);
  const Civil c = civilFromDays(days);
  if (!month_.test(c.month)) return false;
  const bool dom_ok = dom_.test(c.day), dow_ok = dow_.test(c.weekday);
  const bool day_ok =
      (dom_restricted_ && dow_restricted_) ? (dom_ok || dow_ok) : (dom_ok && dow_ok);
  return day_ok && hour_.test(minute_of_day / 60) && minute_.test(minute_of_day % 60);
}

std::optional<std::int64_t> CronExpression::nextAfter(std::int64_t unix_seconds, int offset_minutes,
                                                      int horizon_days) const noexcept {
  constexpr std::int64_t kMaxUnix = 253402300799;  // 9999-12-31T23:59:59Z
  if (unix_seconds < 0 || unix_seconds > kMaxUnix || offset_minutes < -14 * 60 ||
      offset_minutes > 14 * 60)
    return std::nullopt;
  // Work in local minutes; convert back at the end.
  std::int64_t local = floorDiv(unix_seconds, 60) + 1 + offset_minutes;
  const std::int64_t limit = local + std::int64_t{horizon_days} * 1440;
  while (local <= limit && local < kMaxUnix / 60) {
    const std::int64_t days = floorDiv(local, 1440);
    const std::int64_t minute_of_day = local - days * 1440;
    const Civil c = civilFromDays(days);
    const bool dom_ok = dom_.test(c.day), dow_ok = dow_.test(c.weekday);
    const bool day_ok =
        (dom_restricted_ && dow_restricted_) ? (dom_ok || dow_ok) : (dom_ok && dow_ok);
    if (!month_.test(c.month) || !day_ok) {
      local = (days + 1) * 1440;  // next day, 00:00
      continue;
    }
    const auto hour = static_cast<std::size_t>(minute_of_day / 60);
    if (!hour_.test(hour)) {
      local = days * 1440 + static_cast<std::int64_t>(hour + 1) * 60;  // next hour, :00
      continue;
    }
    if (!minute_.test(static_cast<std::size_t>(minute_of_day % 60))) {
      ++local;
      continue;
    }
    return (local - offset_minutes) * 60;
  }
  return std::nullopt;
}

tl::expected<int, CronError> parseUtcOffset(std::string_view text) {
  auto bad = [&]() {
    return tl::unexpected(CronError{
        "offset", quoted(text) + " is not a fixed offset [+-]HH:MM between -14:00 and +14:00"});
  };
  if (text.size() != 6 || (text[0] != '+' && text[0] != '-') || text[3] != ':') return bad();
  auto h = number(text.substr(1, 2));
  auto m = number(text.substr(4, 2));
  if (!h || !m || !isDigit(text[1]) || !isDigit(text[2]) || !isDigit(text[4]) || !isDigit(text[5]))
    return bad();
  if (*m > 59) return bad();
  const int total = *h * 60 + *m;
  if (total > 14 * 60) return bad();
  return text[0] == '-' ? -total : total;
}

std::string formatUtcOffset(int offset_minutes) {
  const int a = offset_minutes < 0 ? -offset_minutes : offset_minutes;
  char buf[8];
  (void)std::snprintf(buf, sizeof buf, "%c%02d:%02d", offset_minutes < 0 ? '-' : '+',
                      (a / 60) % 100, a % 60);
  return buf;
}

}  // namespace airlock::capability::schedule
