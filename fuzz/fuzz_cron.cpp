// schedule.cron's parser (src/airlock/capability/schedule/cron.h) and the
// fixed-offset parser over any bytes: total; a parsed expression's canonical
// form parses to the same sets, and nextAfter() lands on a matching minute
// strictly later.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "airlock/capability/schedule/cron.h"

using airlock::capability::schedule::CronExpression;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto offset = airlock::capability::schedule::parseUtcOffset(text)) {
    auto again = airlock::capability::schedule::parseUtcOffset(
        airlock::capability::schedule::formatUtcOffset(*offset));
    if (!again || *again != *offset) std::abort();
  }
  auto e = CronExpression::parse(text);
  if (!e) {
    if (e.error().field.empty()) std::abort();
    return 0;
  }
  auto again = CronExpression::parse(e->canonical());
  if (!again || again->minutes() != e->minutes() || again->hours() != e->hours() ||
      again->daysOfMonth() != e->daysOfMonth() || again->months() != e->months() ||
      again->daysOfWeek() != e->daysOfWeek())
    std::abort();
  constexpr std::int64_t t = 1'767'225'600;  // 2026-01-01T00:00:00Z
  if (auto next = e->nextAfter(t, 0, 366 * 9)) {
    if (*next <= t || *next % 60 != 0 || !e->matches(*next, 0)) std::abort();
  }
  return 0;
}
