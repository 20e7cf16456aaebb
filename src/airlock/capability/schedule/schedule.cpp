#include "airlock/capability/schedule/schedule.h"

#include <algorithm>
#include <limits>

namespace airlock::capability::schedule {
namespace {

tl::unexpected<CronError> refuse(std::string field, std::string message) {
  return tl::unexpected(CronError{std::move(field), std::move(message)});
}

bool validName(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::int64_t clampAdd(std::int64_t a, std::uint64_t b) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  return b > static_cast<std::uint64_t>(kMax - a) ? kMax : a + static_cast<std::int64_t>(b);
}

// floor(a / b) for b > 0 (C++ division truncates toward zero).
std::int64_t floorDiv(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// The every interval from its cadence ("3600"); nullopt when corrupt.
std::optional<std::int64_t> intervalOf(std::string_view cadence) {
  if (cadence.empty()) return std::nullopt;
  std::int64_t i = 0;
  for (char ch : cadence) {
    if (ch < '0' || ch > '9' || i > std::numeric_limits<std::int64_t>::max() / 10 - 10)
      return std::nullopt;
    i = i * 10 + (ch - '0');
  }
  if (i <= 0) return std::nullopt;
  return i;
}

}  // namespace

std::string_view timingName(TimingKind kind) noexcept {
  switch (kind) {
    case TimingKind::kEvery:
      return "every";
    case TimingKind::kAt:
      return "at";
    case TimingKind::kCron:
      return "cron";
    case TimingKind::kAfter:
      return "after";
  }
  return "after";
}

std::string ScheduleRecord::when() const {
  switch (kind) {
    case TimingKind::kEvery:
      return "every " + cadence + "s";
    case TimingKind::kCron:
      return "cron " + cadence + " at " + formatUtcOffset(offset_minutes);
    case TimingKind::kAt:
    case TimingKind::kAfter:
      return "at " + cadence;
  }
  return cadence;
}

tl::expected<ScheduleRecord, CronError> planSchedule(const ScheduleRequest& req,
                                                     std::string creator, std::int64_t now_s,
                                                     const ScheduleCeilings& c) {
  if (!validName(req.name))
    return refuse("name", "must be 1..64 bytes of letters, digits, '.', '_' or '-'");
  if (req.body.size() > c.max_body_bytes)
    return refuse("body", "is larger than " + std::to_string(c.max_body_bytes) + " bytes");
  if (req.offset && req.kind != TimingKind::kCron)
    return refuse("offset", "is taken only with cron (" + std::string(timingName(req.kind)) +
                                " names no fields to shift)");
  const bool recurring = req.kind == TimingKind::kEvery || req.kind == TimingKind::kCron;
  if (req.bounds && !recurring)
    return refuse("bounds", "apply only to every and cron (" + std::string(timingName(req.kind)) +
                                " fires once)");
  ScheduleRecord r;
  r.creator = std::move(creator);
  r.name = req.name;
  r.target = r.creator;
  r.kind = req.kind;
  r.wake = req.wake;
  r.body = req.body;
  r.created_at_s = now_s;
  if (recurring) {
    r.max_fires = c.max_fires;
    std::uint64_t expires_after = c.expires_after_s;
    if (req.bounds) {
      // Bounds can only narrow.
      if (auto m = req.bounds->max_fires) {
        if (*m == 0) return refuse("bounds.max_fires", "must be at least 1");
        if (*m > c.max_fires)
          return refuse("bounds.max_fires", std::to_string(*m) + " is above the ceiling " +
                                                std::to_string(c.max_fires));
        r.max_fires = *m;
      }
      if (auto e = req.bounds->expires_after_s) {
        if (*e == 0) return refuse("bounds.expires_after_s", "must be at least 1");
        if (*e > c.expires_after_s)
          return refuse("bounds.expires_after_s", std::to_string(*e) + " is above the ceiling " +
                                                      std::to_string(c.expires_after_s));
        expires_after = *e;
      }
    }
    r.expires_at_s = clampAdd(now_s, expires_after);
  }
  switch (req.kind) {
    case TimingKind::kEvery: {
      if (req.interval_s < c.min_interval_s)
        return refuse("interval_s", std::to_string(req.interval_s) + " is below the minimum " +
                                        std::to_string(c.min_interval_s));
      if (req.interval_s > c.max_interval_s)
        return refuse("interval_s", std::to_string(req.interval_s) + " is above the ceiling " +
                                        std::to_string(c.max_interval_s));
      const auto i = static_cast<std::int64_t>(req.interval_s);
      r.cadence = std::to_string(req.interval_s);
      r.next_fire_s = (now_s / i + 1) * i;  // the epoch-aligned grid
      break;
    }
    case TimingKind::kCron: {
      auto e = CronExpression::parse(req.cron);
      if (!e) return tl::unexpected(e.error());
      if (req.offset) {
        auto o = parseUtcOffset(*req.offset);
        if (!o) return tl::unexpected(o.error());
        r.offset_minutes = *o;
      }
      r.cadence = e->canonical();
      r.next_fire_s = e->nextAfter(now_s, r.offset_minutes);
      if (!r.next_fire_s)
        return refuse("expression", "never fires (no day matches " + r.cadence + ")");
      break;
    }
    case TimingKind::kAt: {
      if (req.at_unix_s <= now_s)
        return refuse("at", "is not in the future (now is " + std::to_string(now_s) + ")");
      if (req.at_unix_s > clampAdd(now_s, c.expires_after_s))
        return refuse("at", "is more than " + std::to_string(c.expires_after_s) +
                                " seconds ahead (the ceiling)");
      r.next_fire_s = req.at_unix_s;
      break;
    }
    case TimingKind::kAfter: {
      if (req.after_s < 1 || req.after_s > c.max_after_s)
        return refuse("after_s", std::to_string(req.after_s) + " is outside 1.." +
                                     std::to_string(c.max_after_s));
      r.next_fire_s = now_s + static_cast<std::int64_t>(req.after_s);
      break;
    }
  }
  if (!recurring) {
    r.max_fires = 1;
    r.expires_at_s = *r.next_fire_s;
    r.cadence = std::to_string(*r.next_fire_s);
  } else if (*r.next_fire_s > r.expires_at_s) {
    return refuse(req.kind == TimingKind::kCron ? "expression" : "interval_s",
                  "first fires at " + std::to_string(*r.next_fire_s) +
                      ", after the schedule expires (" + std::to_string(r.expires_at_s) + ")");
  }
  return r;
}

std::optional<std::int64_t> occurrenceAfter(const ScheduleRecord& r, std::int64_t after_s) {
  std::optional<std::int64_t> next;
  switch (r.kind) {
    case TimingKind::kAt:
    case TimingKind::kAfter:
      return std::nullopt;
    case TimingKind::kEvery: {
      auto i = intervalOf(r.cadence);
      if (!i) return std::nullopt;
      const std::int64_t slot = floorDiv(after_s, *i);
      if (slot >= std::numeric_limits<std::int64_t>::max() / *i) return std::nullopt;
      next = (slot + 1) * *i;  // the epoch-aligned grid
      break;
    }
    case TimingKind::kCron: {
      auto e = CronExpression::parse(r.cadence);
      if (!e) return std::nullopt;
      next = e->nextAfter(after_s, r.offset_minutes);
      break;
    }
  }
  if (!next || *next > r.expires_at_s) return std::nullopt;
  return next;
}

std::optional<std::int64_t> nextFireAfter(const ScheduleRecord& r, std::int64_t fired_at_s,
                                          std::uint64_t fires) {
  if (fires >= r.max_fires) return std::nullopt;
  return occurrenceAfter(r, fired_at_s);
}

std::optional<FireStep> stepFire(const ScheduleRecord& r, std::int64_t now_s) {
  if (!r.next_fire_s) return std::nullopt;
  FireStep step;
  step.occurrence_s = *r.next_fire_s;
  step.fire_number = r.fires + 1;
  step.next_fire_s = nextFireAfter(r, std::max(now_s, step.occurrence_s), step.fire_number);
  return step;
}

}  // namespace airlock::capability::schedule
