// schedule.*: durable schedules in the metadata database, under the
// execution's id.
#include <algorithm>

#include "airlock/capability/broker/call_args.h"
#include "airlock/gateway/capabilities/capability_modules.h"

namespace airlock::gateway {

namespace sched = capability::schedule;

using namespace capability::handler_terms;

namespace {

std::int64_t scheduleNow(const sched::ScheduleServices& s) {
  if (s.now_s) return s.now_s();
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Refusal invalidSchedule(const sched::CronError& e) {
  return Refusal{"invalid_schedule", e.text()};
}

Value scheduleValue(const sched::ScheduleRecord& r) {
  Map cadence{{"kind", Value::string(std::string(sched::timingName(r.kind)))}};
  switch (r.kind) {
    case sched::TimingKind::kEvery:
      cadence.emplace_back("interval_s",
                           Value::integer(static_cast<std::int64_t>(std::stoll(r.cadence))));
      break;
    case sched::TimingKind::kCron:
      cadence.emplace_back("expression", Value::string(r.cadence));
      cadence.emplace_back("offset", Value::string(sched::formatUtcOffset(r.offset_minutes)));
      break;
    case sched::TimingKind::kAt:
    case sched::TimingKind::kAfter:
      cadence.emplace_back("at", Value::integer(r.next_fire_s.value_or(r.expires_at_s)));
      break;
  }
  return Value::map(
      {{"name", Value::string(r.name)},
       {"target", Value::string(r.target)},
       {"wake", Value::boolean(r.wake)},
       {"when", Value::string(r.when())},
       {"cadence", Value::map(std::move(cadence))},
       {"next_fire_unix_s", r.next_fire_s ? Value::integer(*r.next_fire_s) : Value::nil()},
       {"max_fires", Value::integer(static_cast<std::int64_t>(r.max_fires))},
       {"fires", Value::integer(static_cast<std::int64_t>(r.fires))},
       {"expires_at_unix_s", Value::integer(r.expires_at_s)}});
}

capability::Arg<std::uint64_t> requiredUint(const Value& args, std::string_view key) {
  const Value* v = args.find(key);
  if (v == nullptr || !v->asUnsigned())
    return tl::unexpected(
        badRequest("args." + std::string(key) + " must be a non-negative integer"));
  return *v->asUnsigned();
}

// The timing's own field into `req`: interval_s, at, expression or after_s.
std::optional<Refusal> parseTiming(const Value& args, sched::ScheduleRequest& req) {
  switch (req.kind) {
    case sched::TimingKind::kEvery: {
      auto i = requiredUint(args, "interval_s");
      if (!i) return i.error();
      req.interval_s = *i;
      break;
    }
    case sched::TimingKind::kAt: {
      auto a = requiredUint(args, "at");
      if (!a) return a.error();
      req.at_unix_s = static_cast<std::int64_t>(std::min<std::uint64_t>(*a, 1ull << 62));
      break;
    }
    case sched::TimingKind::kCron: {
      auto e = capability::requiredString(args, "expression");
      if (!e) return e.error();
      req.cron = std::move(*e);
      break;
    }
    case sched::TimingKind::kAfter: {
      auto a = requiredUint(args, "after_s");
      if (!a) return a.error();
      req.after_s = *a;
      break;
    }
  }
  return std::nullopt;
}

// args.bounds into `req`: {max_fires, expires_after_s}, each optional.
std::optional<Refusal> parseBounds(const Value& args, sched::ScheduleRequest& req) {
  const Value* b = args.find("bounds");
  if (b == nullptr || b->isNil()) return std::nullopt;
  if (b->asMap() == nullptr) return badRequest("args.bounds must be a map");
  sched::Bounds bounds;
  for (const char* key : {"max_fires", "expires_after_s"}) {
    const Value* v = b->find(key);
    if (v == nullptr || v->isNil()) continue;
    if (!v->asUnsigned())
      return badRequest("args.bounds." + std::string(key) + " must be a non-negative integer");
    (std::string_view(key) == "max_fires" ? bounds.max_fires : bounds.expires_after_s) =
        *v->asUnsigned();
  }
  req.bounds = bounds;
  return std::nullopt;
}

tl::expected<sched::ScheduleRequest, Refusal> parseScheduleArgs(const Value& args,
                                                                sched::TimingKind kind) {
  if (args.asMap() == nullptr) return tl::unexpected(badRequest("args must be a map"));
  sched::ScheduleRequest req;
  req.kind = kind;
  auto name = capability::requiredString(args, "name");
  if (!name) return tl::unexpected(name.error());
  req.name = std::move(*name);
  if (auto refused = parseTiming(args, req)) return tl::unexpected(std::move(*refused));
  // Offset and bounds are read for every timing so that the schedule layer
  // refuses them by name beside the wrong one.
  if (const Value* o = args.find("offset"); o != nullptr && !o->isNil()) {
    if (o->asString() == nullptr) return tl::unexpected(badRequest("args.offset must be a string"));
    req.offset = *o->asString();
  }
  if (auto refused = parseBounds(args, req)) return tl::unexpected(std::move(*refused));
  if (const Value* w = args.find("wake"); w != nullptr && !w->isNil()) {
    if (!w->asBool()) return tl::unexpected(badRequest("args.wake must be a boolean"));
    req.wake = *w->asBool();
  }
  auto body = capability::optionalString(args, "body", "");
  if (!body) return tl::unexpected(body.error());
  req.body = std::move(*body);
  return req;
}

Answer scheduleCreate(const GatewayCapabilityServices& s, sched::TimingKind kind,
                      const CallContext& ctx) {
  auto req = parseScheduleArgs(ctx.args, kind);
  if (!req) return req.error();
  auto record =
      sched::planSchedule(*req, s.execution_id, scheduleNow(s.schedule), s.schedule.ceilings);
  if (!record) return invalidSchedule(record.error());
  if (auto r = s.schedule.store->create(*record, s.schedule.ceilings.max_per_creator); !r) {
    if (r.error().code == ErrorCode::kExecutionRejected)
      return Refusal{"invalid_schedule", r.error().context};
    return Refusal{"unavailable", r.error().message()};
  }
  return scheduleValue(*record);
}

Answer scheduleList(const GatewayCapabilityServices& s) {
  auto rows = s.schedule.store->list(s.execution_id);
  if (!rows) return Refusal{"unavailable", rows.error().message()};
  Array out;
  for (const auto& r : *rows) out.push_back(scheduleValue(r));
  return Value::array(std::move(out));
}

Answer scheduleCancel(const GatewayCapabilityServices& s, const CallContext& ctx) {
  if (ctx.args.asMap() == nullptr) return badRequest("args must be a map");
  auto name = capability::requiredString(ctx.args, "name");
  if (!name) return name.error();
  auto removed = s.schedule.store->cancel(s.execution_id, *name);
  if (!removed) return Refusal{"unavailable", removed.error().message()};
  if (!*removed) return Refusal{"not_found", "no schedule of this execution is named " + *name};
  return Value::nil();
}

}  // namespace

void addScheduleCapabilities(capability::CapabilityTable& table,
                             const GatewayCapabilityServices& services) {
  using capability::CeilingClass;
  if (!services.schedule.store) {
    table.addModuleRoute("schedule", [](const CallContext& c) -> Answer {
      return Refusal{"unavailable",
                     "capability " + std::string(c.capability) +
                         " needs the metadata database, which this execution has none of"};
    });
    return;
  }
  const GatewayCapabilityServices& s = services;
  using K = sched::TimingKind;
  for (auto [name, kind] :
       {std::pair{"schedule.every", K::kEvery}, std::pair{"schedule.at", K::kAt},
        std::pair{"schedule.cron", K::kCron}, std::pair{"schedule.after", K::kAfter}}) {
    const K k = kind;
    table.add(name, CeilingClass::kNone,
              [s, k](const CallContext& c) { return scheduleCreate(s, k, c); });
  }
  table.add("schedule.list", CeilingClass::kNone,
            [s](const CallContext&) { return scheduleList(s); });
  table.add("schedule.cancel", CeilingClass::kNone,
            [s](const CallContext& c) { return scheduleCancel(s, c); });
}

}  // namespace airlock::gateway
