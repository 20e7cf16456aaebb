// The gateway side's capabilities (spec 000 "Where the boundary is": the
// gateway holds credentials, notes, schedules and the outbound guard; spec
// 001 "Durable code-mode notes", "cap/schedule"; docs/capabilities.md has
// every capability's arguments, result and refusal codes): the ones that
// never touch a sandbox.
//
//   notes.put / notes.get / notes.list   a JSON blackboard per run, kept in
//               the metadata repository (NoteServices), so a later program
//               of the same tenant's run reads what an earlier one put
//   net.fetch   one HTTP(S) request through the outbound guard
//               (egress/outbound_guard.h), decided by the same decide() as
//               the sandbox proxy against the execution's egress policy
//   schedule.every / schedule.at / schedule.cron / schedule.after /
//   schedule.list / schedule.cancel   durable schedules
//               (capability/schedule/schedule.h)
//
// They register into a CapabilityTable (capability/broker/broker.h) beside
// the execution side's proc, fs and job (execution/capabilities); the one
// table code mode serves is composed in capability/broker/capabilities.h.
// This library (airlock_gateway_capabilities) links the wire, the broker's
// table types, the outbound guard, the schedule store and the artifact store
// (job_output_artifacts.h); nothing of the execution side or the sandbox.
//
// Every argument parser here is total over any wire Value: a wrong shape is
// the refusal "bad_request" naming the field, never an exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "airlock/artifacts/metadata_repository.h"
#include "airlock/capability/broker/broker.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/core/types.h"
#include "airlock/egress/outbound_guard.h"

namespace airlock::gateway {

// Notes: key length, encoded value size.
inline constexpr std::size_t kNoteKeyMaxBytes = 256;
inline constexpr std::size_t kNoteValueMaxBytes = std::size_t{64} << 10;
// The largest request body net.fetch sends.
inline constexpr std::size_t kNetBodyMaxBytes = std::size_t{8} << 20;

// What net.fetch decides and dials with: the execution's egress policy
// (EnvironmentSpec.egress compiled with egress::compilePolicy), the resolver
// and the address classifier, exactly as the sandbox proxy has them. A null
// policy (or resolver, or classifier) refuses every URL with "mode_deny"
// without a lookup. `limits` are the guard's caps; each call's transfer is
// further cut to its timeout_ms and to the call's deadline.
struct NetServices {
  std::shared_ptr<const egress::Policy> policy;
  std::shared_ptr<egress::Resolver> resolver;
  std::shared_ptr<const egress::AddressClassifier> classifier;
  egress::OutboundLimits limits;
};

// The production composition for an execution: `egress` compiled by
// egress::compilePolicy (a deny policy refuses everything), the platform
// resolver (GetaddrinfoResolver) and the production classifier (fixed
// denylist plus this host's interface addresses), as the proxy has them.
// Errors: ConfigurationError from compilePolicy.
Result<NetServices> productionNetServices(const airlock::EgressPolicy& egress);

// net.fetch's arguments:
//   {url: str, method: str (optional, GET|HEAD|POST|PUT|PATCH|DELETE),
//    headers: {str: str} (optional), body: str | bin (optional),
//    timeout_ms: uint (optional; 0 or absent: the call's deadline alone)}
struct NetFetchRequest {
  egress::OutboundRequest request;
  std::chrono::milliseconds timeout{0};
};
tl::expected<NetFetchRequest, capability::wire::Refusal> parseNetFetchRequest(
    const capability::wire::Value& args);

// Where notes.* keeps the notes of one tenant's run (spec 001, "Durable
// code-mode notes"). Keys are the run's own: a program names a key, never a
// tenant or run, so it reads and writes its own run's blackboard only, and
// each put records the writer (the environment id). A note expires
// `retention` after its last put (the artifact retention: it lives as long
// as the run's other metadata); the API's reaper pass deletes it then.
struct NoteServices {
  // Borrowed; must outlive the table. Null: the notes live in memory for
  // the table's life (one program), as before (`airlock run --code`, tests).
  artifacts::ArtifactRepository* repository = nullptr;
  std::string tenant_id;
  std::string run_id;
  std::string writer;
  std::chrono::milliseconds retention = std::chrono::hours(24 * 30);
  std::function<Timestamp()> clock;  // empty: the system clock
};

// At most this many notes in one run's repository blackboard: a put of a
// new key past it is refused "too_large" (so notes.list, which answers at
// most this many keys, always answers all of them; two puts racing at the
// bound may pass it by one each).
inline constexpr std::size_t kNotesListMax = 10000;

// What the capabilities act on, for one execution.
struct GatewayCapabilityServices {
  // The execution's environment id: the creator every schedule.* call
  // creates, lists and cancels under.
  std::string execution_id;
  NetServices net;  // default: every URL refused (mode_deny)
  // Where schedule.* keeps its schedules; a null store: schedule.* is
  // refused "unavailable" (no metadata database).
  capability::schedule::ScheduleServices schedule;
  NoteServices notes;  // default: in memory, for the table's life
};

// Adds notes.* (notes.put: ceiling note; notes.get, notes.list: notes; run
// inline in memory, on a worker over a repository), net.fetch and schedule.* (with no store, a
// module route refusing every schedule.* call "unavailable") to `table`.
// In-memory notes live as long as the table's handlers.
void addGatewayCapabilities(capability::CapabilityTable& table,
                            const GatewayCapabilityServices& services);

}  // namespace airlock::gateway
