// The five-field UTC cron expression of schedule.cron (spec 001
// "cap/schedule": "the standard five fields and nothing more: no seconds
// field, no month or day names, none of L/W/?/#, and the two day fields ORed
// rather than ANDed when both are restricted"; docs/capabilities.md).
//
// Grammar (whitespace = one or more spaces or tabs, nothing else):
//   expression := field ws field ws field ws field ws field   (at most 256 bytes)
//   field      := item ("," item)*                            (at most 64 items)
//   item       := "*" | number | number "-" number
//               | "*" "/" step | number "-" number "/" step
//   number, step := 1 or 2 decimal digits
// Fields, in order, with their ranges: minute 0-59, hour 0-23,
// day_of_month 1-31, month 1-12, day_of_week 0-7 (0 and 7 are Sunday).
// Refused: a range whose start is above its end, a step of 0 or larger than
// its field's span, "n/step" (write "n-max/step"), names, macros ("@daily"),
// L, W, ?, #, a sixth field. A day pair that can never fire
// ("0 0 31 2 *") is accepted by the parser and refused by the schedule
// layer (nextAfter finds nothing).
//
// Day rule (Vixie cron): when both day fields are restricted (neither starts
// with "*"), a day matches if EITHER matches; otherwise both must.
//
// Offsets: the fields are read in UTC, or on a fixed offset written
// [+-]HH:MM between -14:00 and +14:00 (a fixed offset, never a zone: nothing
// here follows daylight saving).
//
// Parsing is total over any bytes (untrusted input; fuzz/fuzz_cron.cpp).
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace airlock::capability::schedule {

struct CronError {
  std::string
      field;  // "minute", "hour", "day_of_month", "month", "day_of_week", "expression", "offset"
  std::string message;  // what is wrong, naming the offending text (cut to 64 bytes)
  std::string text() const { return field + ": " + message; }
};

class CronExpression {
 public:
  static tl::expected<CronExpression, CronError> parse(std::string_view text);

  // The expression with its fields joined by one space.
  const std::string& canonical() const noexcept { return canonical_; }

  // Whether the minute containing `unix_seconds` (UTC) matches, its fields
  // read at `offset_minutes` from UTC.
  bool matches(std::int64_t unix_seconds, int offset_minutes) const noexcept;

  // The first matching minute strictly after `unix_seconds`, searched up to
  // `horizon_days` days ahead; nullopt when none falls in it. Needs
  // unix_seconds in [0, 253402300799] (years 1970..9999), else nullopt.
  std::optional<std::int64_t> nextAfter(std::int64_t unix_seconds, int offset_minutes,
                                        int horizon_days = 366 * 9) const noexcept;

  const std::bitset<60>& minutes() const noexcept { return minute_; }
  const std::bitset<24>& hours() const noexcept { return hour_; }
  const std::bitset<32>& daysOfMonth() const noexcept { return dom_; }  // bit 0 unused
  const std::bitset<13>& months() const noexcept { return month_; }     // bit 0 unused
  const std::bitset<7>& daysOfWeek() const noexcept { return dow_; }    // 0 = Sunday
  bool dayOfMonthRestricted() const noexcept { return dom_restricted_; }
  bool dayOfWeekRestricted() const noexcept { return dow_restricted_; }

 private:
  std::bitset<60> minute_;
  std::bitset<24> hour_;
  std::bitset<32> dom_;
  std::bitset<13> month_;
  std::bitset<7> dow_;
  bool dom_restricted_ = false;
  bool dow_restricted_ = false;
  std::string canonical_;
};

// "[+-]HH:MM", -14:00..+14:00, minutes 00-59 -> signed minutes east of UTC.
tl::expected<int, CronError> parseUtcOffset(std::string_view text);
// The inverse: "+02:00", "-05:30", "+00:00".
std::string formatUtcOffset(int offset_minutes);

}  // namespace airlock::capability::schedule
