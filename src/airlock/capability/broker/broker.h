// The capability broker: the service's end of one execution's capability
// channel (spec 001, "Wire", "Invariants"; docs/capabilities.md;
// the frames are docs/wire.md).
//
// One BrokerSession per execution. It owns the sandbox's capability channel
// (port/capability_channel.h, from
// ExecutionEnvironment::openCapabilityChannel): it writes the token file
// ("token", 64 hex characters, mode 0400, the sandbox user's) through it and
// listens on its socket ("cap.sock", the sandbox user's, 0600). The program
// connects (any number of connections) and sends frames; for each `cap_call` the broker checks, in
// this order, and answers a refusal named by its code:
//   1. the token, compared in constant time; a token of a finished session
//      or of another execution is refused            -> "bad_token"
//   2. the deadline: `deadline_ms` is a budget counted from when the frame
//      was read; 0 is already past                    -> "deadline_exceeded"
//   3. the policy: the capability is on this execution's allowlist
//                                                      -> "denied"
//   4. the capability exists (or has a platform route) -> "unknown_capability"
//   5. the admission ceiling of its class, counted per execution
//      (spawn 32, send 128, note 256, notes 64), the refusal naming it:
//      "ceiling spawn=32 reached"                      -> "spawn_ceiling_reached"
//                                                         / "admission_ceiling_reached"
// An admitted call runs on one of the session's workers (CallPlacement) with
// a CancelToken that fires when the program sends `cancel` for it, when its
// connection closes or faults, when its deadline passes (the answer is then
// "deadline_exceeded") and when the session finishes; capabilities stop
// their effect when it fires (proc.run kills its process group). An inline
// call runs on its connection's reader, which reads nothing until it has
// answered; its token never fires, and its deadline is checked when it
// returns.
//
// Every call that reached the broker as a well-formed or invalid cap_call
// produces exactly one audit line (JSON, one line, no newline inside):
//   {"ts_ms":..., "execution":"...", "call_id":N, "cap":"proc.run",
//    "verdict":"ok"|"refused"|"error", "code":"...", "duration_us":N,
//    "request_bytes":N, "response_bytes":N}
// It never contains the token or argument values.
//
// Boot shapes: kRun accepts one `outcome` frame (the first wins; a second is
// noted in outcomeProblem()). kServe accepts `hook_result`s answering
// invoke(); the token file's token is then not a working token: each
// invocation mints a working token, sends it in the hook_call, and revokes it
// when the answer arrives (spec 001: install, then spawn; answer, then clear).
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/capability/wire/frame.h"
#include "airlock/capability/wire/value.h"
#include "airlock/core/error.h"
#include "airlock/port/cancel_token.h"
#include "airlock/port/capability_channel.h"

namespace airlock::capability {

using BrokerClock = std::chrono::steady_clock;

// The token file the broker writes in the capability directory (the socket
// beside it is the channel's, kCapabilitySocketName).
inline constexpr std::string_view kTokenFileName = "token";

enum class BootShape { kRun, kServe };

// Admission ceilings per execution (spec 001 "Invariants": four of the six
// strand calls carry a lifetime ceiling; we apply the same classes to the
// capabilities that mint something or feed a process).
enum class CeilingClass { kNone, kSpawn, kSend, kNote, kNotes };
struct Ceilings {
  std::uint32_t spawn = 32;  // proc.run, job.start, strand.spawn
  std::uint32_t send = 128;  // job.send, job.send_last, strand.send, peer.send
  std::uint32_t note = 256;  // notes.put, strand.note
  std::uint32_t notes = 64;  // notes.get, notes.list, strand.notes
};
std::string_view ceilingClassName(CeilingClass c) noexcept;  // "spawn", "send", ...

// What a capability handler gets for one call.
struct CallContext {
  std::string_view capability;
  const wire::Value& args;
  BrokerClock::time_point deadline;  // the caller's, possibly cut by the session
  const CancelToken& cancel;         // fires on cancel, disconnect, deadline, finish
};

// A handler returns the answer: a value, or a refusal {code, message}.
// Handlers must return soon after `cancel` fires. They must not throw; a
// thrown exception is answered "internal_error".
using Handler = std::function<wire::Answer(const CallContext&)>;

// The capabilities a session can serve, by dotted name, with their ceiling
// class. Routes by module prefix ("strand", "peer", "workflow", "mcp")
// serve every name in the module: the embedding platform registers those.
// Where a call runs. kWorker: on one of the session's workers, so the
// connection keeps reading (cancel frames, other calls) while it runs; for
// anything that may block (processes, jobs, files, the network). kInline:
// on the connection's reader thread, saving the hand-off to a worker (most
// of a round trip on a 2-vCPU VM: bench_cap_roundtrip); only for handlers
// that never block and finish in microseconds (notes).
enum class CallPlacement { kWorker, kInline };

class CapabilityTable {
 public:
  void add(std::string name, CeilingClass ceiling, Handler handler,
           CallPlacement placement = CallPlacement::kWorker);
  void addModuleRoute(std::string module, Handler handler);
  struct Entry {
    CeilingClass ceiling = CeilingClass::kNone;
    Handler handler;
    CallPlacement placement = CallPlacement::kWorker;
  };
  // nullptr when neither a name nor a module route serves `name`.
  const Entry* find(std::string_view name) const;
  // Every exact name added, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, Entry, std::less<>> by_name_;
  std::map<std::string, Entry, std::less<>> by_module_;
};

// The ceiling class of a capability name when the table does not say
// (module routes): strand.spawn -> spawn, *.send/send_last -> send, ...
CeilingClass defaultCeilingClass(std::string_view capability) noexcept;

// Policy: which capabilities this execution may call. Entries are exact
// names ("proc.run") or a module wildcard ("fs.*"); "*" allows everything.
// Empty allows nothing.
struct Policy {
  std::set<std::string> allowed;
  bool allows(std::string_view capability) const;
};

struct SessionOptions {
  std::string execution_id;  // named in audit lines
  BootShape shape = BootShape::kRun;
  Policy policy;
  Ceilings ceilings;
  // Bounds on what one execution can make the service hold, whatever the
  // ceilings say (each connection has a reader thread and may buffer up to
  // one 16 MiB frame; each call in flight has a thread): connections beyond
  // max_connections are closed at once, and a call beyond
  // max_calls_in_flight is refused with admission_ceiling_reached
  // ("ceiling in_flight=64 reached"). Worst case per execution:
  // max_connections x 16 MiB of frame buffers.
  std::uint32_t max_connections = 4;
  std::uint32_t max_calls_in_flight = 64;
  // The longest any call may take, whatever its deadline_ms says (the
  // execution's own remaining time); zero means no cut.
  std::chrono::milliseconds max_call_budget{0};
  // Receives one line per call (no trailing newline). May be called from
  // several threads at once; must not call back into the session.
  std::function<void(std::string_view line)> audit;
};

// The result of a single-shot run: the outcome frame, if one arrived.
struct OutcomeReport {
  std::optional<wire::Outcome> outcome;
  // Set when something was wrong with it: a second outcome, a malformed one
  // (the outcome is then Errored saying so), or none at all (empty here;
  // the caller decides from the exit of the program).
  std::string problem;
};

class BrokerSession {
 public:
  // Writes the token file through `channel` (kept until the session is
  // destroyed), listens on it and starts accepting. Errors:
  // ExecutionUnavailable (the token file or the socket could not be made;
  // a token file already written is removed again).
  static Result<std::unique_ptr<BrokerSession>> open(std::unique_ptr<CapabilityChannel> channel,
                                                     SessionOptions options,
                                                     std::shared_ptr<const CapabilityTable> table);

  // finish().
  ~BrokerSession();

  // Ends the session: the token is revoked (any later call with it is
  // refused, even on a new session in the same directory), every call in
  // flight is cancelled and its thread joined, every connection is closed,
  // and the channel stops listening; the socket and token file are removed
  // through it. Idempotent.
  void finish();

  // The token's bytes (as written to the token file), for tests and for a
  // caller that passes the token by other means.
  const std::string& token() const noexcept;

  // kRun: the outcome frame received so far.
  OutcomeReport outcome() const;

  // kServe: sends one hook_call and waits for its hook_result, at most
  // `budget`. A working token is installed for the invocation and revoked
  // when it ends. Errors: ExecutionUnavailable (no serving connection, the
  // connection closed, or no answer within the budget).
  Result<wire::Answer> invoke(const std::string& hook, const std::string& name,
                              const wire::Value& args, std::chrono::milliseconds budget);

  // Waits until every connection accepted so far has been read to its end
  // (the program closed it or died) and every call it started has answered
  // (cancelled if still running) and been audited, at most `timeout`.
  // Returns whether they all were. A single-shot run calls it after the program ended, so that
  // the outcome frame is read before finish().
  bool waitForConnectionsClosed(std::chrono::milliseconds timeout);

  // Number of calls answered so far (any verdict).
  std::uint64_t callsAnswered() const noexcept;

  struct Impl;

 private:
  explicit BrokerSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Compares two byte strings in time that depends only on their lengths.
bool constantTimeEqual(std::string_view a, std::string_view b) noexcept;

}  // namespace airlock::capability
