#include "airlock/capability/broker/broker.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <system_error>
#include <thread>
#include <vector>

#include "airlock/core/thread_annotations.h"
#include "airlock/sys/random.h"

namespace airlock::capability {

using wire::Value;

std::string_view ceilingClassName(CeilingClass c) noexcept {
  switch (c) {
    case CeilingClass::kSpawn:
      return "spawn";
    case CeilingClass::kSend:
      return "send";
    case CeilingClass::kNote:
      return "note";
    case CeilingClass::kNotes:
      return "notes";
    case CeilingClass::kNone:
      break;
  }
  return "none";
}

void CapabilityTable::add(std::string name, CeilingClass ceiling, Handler handler,
                          CallPlacement placement) {
  by_name_[std::move(name)] = Entry{ceiling, std::move(handler), placement};
}

void CapabilityTable::addModuleRoute(std::string module, Handler handler) {
  by_module_[std::move(module)] = Entry{CeilingClass::kNone, std::move(handler)};
}

std::vector<std::string> CapabilityTable::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [name, entry] : by_name_) out.push_back(name);
  return out;
}

const CapabilityTable::Entry* CapabilityTable::find(std::string_view name) const {
  if (auto it = by_name_.find(name); it != by_name_.end()) return &it->second;
  const auto dot = name.find('.');
  if (dot == std::string_view::npos) return nullptr;
  if (auto it = by_module_.find(name.substr(0, dot)); it != by_module_.end()) return &it->second;
  return nullptr;
}

CeilingClass defaultCeilingClass(std::string_view c) noexcept {
  auto ends = [&](std::string_view suffix) {
    return c.size() >= suffix.size() && c.substr(c.size() - suffix.size()) == suffix;
  };
  if (c == "proc.run" || c == "job.start" || ends(".spawn")) return CeilingClass::kSpawn;
  if (ends(".send") || ends(".send_last")) return CeilingClass::kSend;
  if (c == "notes.put" || ends(".note")) return CeilingClass::kNote;
  if (c == "notes.get" || c == "notes.list" || ends(".notes")) return CeilingClass::kNotes;
  return CeilingClass::kNone;
}

bool Policy::allows(std::string_view capability) const {
  if (allowed.count("*") != 0) return true;
  if (allowed.find(std::string(capability)) != allowed.end()) return true;
  const auto dot = capability.find('.');
  if (dot == std::string_view::npos) return false;
  return allowed.find(std::string(capability.substr(0, dot)) + ".*") != allowed.end();
}

bool constantTimeEqual(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff = static_cast<unsigned char>(
        diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
  return diff == 0;
}

namespace {

// A session token or a working id: 32 random bytes, as hex.
Result<std::string> randomToken() {
  return sys::randomHexToken(32);
}

template <typename N>
void appendNumber(std::string& out, N n) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, r.ptr);
}

// `s` as a JSON string: printable ASCII without quote or backslash as is,
// anything else through nlohmann::json (escapes, U+FFFD for invalid UTF-8).
void appendJsonString(std::string& out, std::string_view s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out +=
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `"key":json` into an object written by hand (`out` starts with '{'), after
// a comma unless it is the first field.
void appendRawField(std::string& out, std::string_view key, std::string_view json) {
  if (out.size() > 1) out += ',';
  out += '"';
  out += key;
  out += "\":";
  out += json;
}
// `"key":` and a number or a JSON string, likewise.
template <typename N>
void appendField(std::string& out, std::string_view key, N n) {
  appendRawField(out, key, {});
  appendNumber(out, n);
}
void appendField(std::string& out, std::string_view key, std::string_view s) {
  appendRawField(out, key, {});
  appendJsonString(out, s);
}

wire::Refusal refusal(std::string code, std::string message) {
  return wire::Refusal{std::move(code), std::move(message)};
}

// The field of Ceilings that bounds each counted class (kNone is not).
constexpr std::pair<CeilingClass, std::uint32_t Ceilings::*> kCeilingFields[] = {
    {CeilingClass::kSpawn, &Ceilings::spawn},
    {CeilingClass::kSend, &Ceilings::send},
    {CeilingClass::kNote, &Ceilings::note},
    {CeilingClass::kNotes, &Ceilings::notes},
};

// Why an admitted call stopped before its handler answered.
enum class Stop : int { kNone = 0, kCancelFrame, kDisconnect, kDeadline, kFinish };

// How a call stopped before its answer is reported: the audit line's
// verdict and code, and the refusal message the program is sent (nullptr:
// none, the channel is gone or closing).
struct StopReport {
  std::string_view verdict;
  const char* code;
  const char* refusal;
};

StopReport stopReport(Stop stop) {
  switch (stop) {
    case Stop::kDeadline:
      return {"refused", "deadline_exceeded", "the call's deadline passed; its effect was stopped"};
    case Stop::kCancelFrame:
      return {"cancelled", "cancelled", "the call was cancelled; its effect was stopped"};
    case Stop::kDisconnect:
      return {"cancelled", "disconnected", nullptr};
    case Stop::kNone:
    case Stop::kFinish:
      break;
  }
  return {"cancelled", "finished", nullptr};
}

struct Call {
  std::uint64_t id = 0;
  std::string capability;
  BrokerClock::time_point started;
  BrokerClock::time_point deadline;
  std::size_t request_bytes = 0;
  // A worker call's own token; `cancel` points at it, or, for an inline
  // call, at its connection's (which nothing fires: see onCapCall).
  std::optional<CancelToken> own_cancel;
  const CancelToken* cancel = nullptr;
  std::atomic<int> stop{0};
  void halt(Stop why) {
    int expected = 0;
    if (stop.compare_exchange_strong(expected, static_cast<int>(why))) cancel->cancel();
  }
};

}  // namespace

struct Connection {
  std::unique_ptr<CapabilityConnection> stream;
  Mutex write_mu;
  bool write_broken GUARDED_BY(write_mu) = false;
  Mutex mu;
  std::map<std::uint64_t, std::shared_ptr<Call>> in_flight GUARDED_BY(mu);
  CondVar workers_done;
  int workers GUARDED_BY(mu) = 0;
  std::thread reader;
  std::atomic<bool> closed{false};
  // The token inline calls get (created by the reader at the first one, and
  // used only by it). Nothing fires it: an inline call is never in
  // in_flight, so no cancel frame, deadline or disconnect reaches it.
  std::optional<CancelToken> inline_cancel;

  // The frame's bytes; a result the peer could not decode (say, a string
  // that is not UTF-8) becomes an error answer instead, never a frame the
  // peer would fault on.
  static std::string encode(const wire::Frame& frame) {
    auto encoded = wire::encodeFrame(frame);
    if (!encoded) {
      wire::Frame fallback{
          frame.id, wire::CapResult{refusal("internal_error", "the result could not be encoded: " +
                                                                  encoded.error().context)}};
      encoded = wire::encodeFrame(fallback);
      if (!encoded) return {};
    }
    return std::move(*encoded);
  }

  // The refusal (`code`, `message`) answering call `id`, encoded.
  static std::string encodeRefusal(std::uint64_t id, std::string code, std::string message) {
    return encode(wire::Frame{id, wire::CapResult{refusal(std::move(code), std::move(message))}});
  }

  bool send(const wire::Frame& frame, std::size_t* bytes = nullptr) {
    const std::string encoded = encode(frame);
    if (bytes) *bytes = encoded.size();
    return write(encoded);
  }

  bool write(const std::string& encoded) EXCLUDES(write_mu) {
    if (encoded.empty()) return false;
    MutexLock lk(write_mu);
    if (write_broken) return false;
    if (!stream->send(encoded)) {
      write_broken = true;
      return false;
    }
    return true;
  }
};

struct PendingHook {
  std::optional<wire::Answer> answer;
  bool connection_gone = false;
};

struct BrokerSession::Impl {
  SessionOptions options;
  std::shared_ptr<const CapabilityTable> table;
  std::string token;
  std::atomic<bool> token_revoked{false};
  // Set by open(), closed by finish(); the object lives as long as the session.
  std::unique_ptr<CapabilityChannel> channel;
  std::optional<CancelToken> stop;
  std::thread acceptor;
  std::atomic<bool> finished{false};
  std::atomic<std::uint64_t> answered{0};
  std::atomic<std::uint32_t> calls_in_flight{0};  // across every connection

  // The workers that run admitted calls: created on demand while none is
  // idle, up to max_calls_in_flight, and reused (a thread per call cost
  // ~50 us of the round trip; bench_cap_roundtrip). Joined by finish().
  Mutex pool_mu;
  CondVar pool_cv;
  std::deque<std::function<void()>> pool_queue GUARDED_BY(pool_mu);
  std::vector<std::thread> pool_threads GUARDED_BY(pool_mu);
  int pool_idle GUARDED_BY(pool_mu) = 0;
  bool pool_stop GUARDED_BY(pool_mu) = false;

  // Queues `task`; false when no worker can take it (none idle and no
  // thread can be created). Each queued task needs an idle worker of its
  // own: a worker counts as idle from when it waits until it wakes, so tasks
  // queued in between (two calls decoded from one read) are already spoken
  // for; without a new thread the second would wait behind the first, which
  // may block until its deadline (job.wait behind the job.send it needs).
  bool submit(std::function<void()> task) EXCLUDES(pool_mu) {
    MutexLock lk(pool_mu);
    if (pool_stop) return false;
    if (pool_queue.size() >= static_cast<std::size_t>(pool_idle) &&
        pool_threads.size() < options.max_calls_in_flight) {
      try {
        pool_threads.emplace_back([this] { workerLoop(); });
      } catch (const std::system_error&) {
        if (pool_threads.empty()) return false;  // nobody would ever run it
      }
    }
    pool_queue.push_back(std::move(task));
    pool_cv.notifyOne();
    return true;
  }

  void workerLoop() EXCLUDES(pool_mu) {
    MutexLock lk(pool_mu);
    for (;;) {
      ++pool_idle;
      while (!pool_stop && pool_queue.empty()) pool_cv.wait(pool_mu);
      --pool_idle;
      if (pool_queue.empty()) return;  // stopping, nothing left to run
      auto task = std::move(pool_queue.front());
      pool_queue.pop_front();
      lk.unlock();
      task();
      lk.lock();
    }
  }

  void stopPool() EXCLUDES(pool_mu) {
    std::vector<std::thread> threads;
    {
      MutexLock lk(pool_mu);
      pool_stop = true;
      threads.swap(pool_threads);
    }
    pool_cv.notifyAll();
    for (auto& t : threads) t.join();
  }

  Mutex mu;
  std::list<std::shared_ptr<Connection>> connections GUARDED_BY(mu);
  std::map<CeilingClass, std::uint32_t> admitted GUARDED_BY(mu);
  OutcomeReport outcome GUARDED_BY(mu);
  std::set<std::string> working_tokens GUARDED_BY(mu);  // serve shape
  std::map<std::uint64_t, PendingHook> pending_hooks GUARDED_BY(mu);
  std::uint64_t next_hook_id GUARDED_BY(mu) = 1;
  CondVar hooks_cv;
  CondVar closed_cv;  // a connection was read to its end
  // Taken off the listen queue, not yet in connections.
  int accepting GUARDED_BY(mu) = 0;
  std::weak_ptr<Connection> serving GUARDED_BY(mu);

  // Every accepted connection read to its end, none being accepted.
  bool allConnectionsClosed() const REQUIRES(mu) {
    if (accepting != 0) return false;
    for (const auto& c : connections)
      if (!c->closed.load()) return false;
    return true;
  }

  // options.execution_id as a JSON string, quotes included (open()).
  std::string audit_execution;

  // The audit line, formatted by hand (one allocation; it is on every
  // call's path, before the answer): the fields of broker.h in that order,
  // strings escaped as nlohmann::json dumps them (invalid UTF-8 replaced).
  void audit(std::string_view cap, std::uint64_t id, std::string_view verdict,
             std::string_view code, BrokerClock::time_point started, std::size_t request_bytes,
             std::size_t response_bytes) {
    answered.fetch_add(1);
    if (!options.audit) return;
    const long long ts_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    const long long duration_us =
        std::chrono::duration_cast<std::chrono::microseconds>(BrokerClock::now() - started).count();
    std::string line = "{";
    line.reserve(192 + audit_execution.size() + cap.size() + code.size());
    appendField(line, "ts_ms", ts_ms);
    appendRawField(line, "execution", audit_execution);
    appendField(line, "call_id", id);
    appendField(line, "cap", cap);
    appendField(line, "verdict", verdict);
    appendField(line, "code", code);
    appendField(line, "duration_us", duration_us);
    appendField(line, "request_bytes", request_bytes);
    appendField(line, "response_bytes", response_bytes);
    line += '}';
    options.audit(line);
  }

  bool tokenAccepted(const std::string& presented) EXCLUDES(mu) {
    if (token_revoked.load()) return false;
    if (options.shape == BootShape::kRun) return constantTimeEqual(presented, token);
    MutexLock lk(mu);
    bool ok = false;
    for (const auto& t : working_tokens) ok |= constantTimeEqual(presented, t);
    return ok;
  }

  // Counts the call against its class's ceiling; the refusal when full.
  std::optional<wire::Refusal> admit(CeilingClass c) EXCLUDES(mu) {
    if (c == CeilingClass::kNone) return std::nullopt;
    std::uint32_t limit = 0;
    for (const auto& [counted, field] : kCeilingFields) {
      if (counted == c) limit = options.ceilings.*field;
    }
    MutexLock lk(mu);
    auto& n = admitted[c];
    if (n >= limit) {
      const std::string name(ceilingClassName(c));
      return refusal(
          c == CeilingClass::kSpawn ? "spawn_ceiling_reached" : "admission_ceiling_reached",
          "ceiling " + name + "=" + std::to_string(limit) + " reached");
    }
    ++n;
    return std::nullopt;
  }

  void acceptLoop() EXCLUDES(mu);
  void admitConnection(const std::shared_ptr<Connection>& conn) REQUIRES(mu);
  void serveConnection(const std::shared_ptr<Connection>& conn) EXCLUDES(mu);
  // serveConnection's steps, in order.
  enum class ReadStep { kData, kAgain, kEnd };  // bytes in `got`; read again; stop reading
  ReadStep readSome(Connection& conn, std::span<char> buf, CapabilityRead& got);
  int nextReadTimeoutMs(Connection& conn, bool& calls_running);
  // Every whole frame decoded so far, dispatched; false when the stream faulted.
  bool dispatchFrames(const std::shared_ptr<Connection>& conn, wire::FrameDecoder& decoder,
                      BrokerClock::time_point read_at) EXCLUDES(mu);
  void onInvalidFrame(Connection& conn, const wire::Invalid& inv, BrokerClock::time_point read_at,
                      std::size_t frame_bytes) EXCLUDES(mu);
  void onFrame(const std::shared_ptr<Connection>& conn, wire::Frame& frame,
               BrokerClock::time_point read_at, std::size_t frame_bytes) EXCLUDES(mu);
  void closeConnection(const std::shared_ptr<Connection>& conn) EXCLUDES(mu);
  void onCapCall(const std::shared_ptr<Connection>& conn, std::uint64_t id, wire::CapCall call,
                 BrokerClock::time_point read_at, std::size_t request_bytes);
  void runCall(Connection& conn, Call& call, const CapabilityTable::Entry* entry,
               const Value& args);
};

void BrokerSession::Impl::acceptLoop() {
  for (;;) {
    if (channel->waitForConnection(*stop) != CapabilityWait::kConnection) return;
    // Counted from before accept until the connection is in `connections`
    // (or dropped), in one critical section with that: a connection that
    // has left the listen queue is never missed by waitForConnectionsClosed.
    {
      MutexLock lk(mu);
      ++accepting;
    }
    auto conn = std::make_shared<Connection>();
    conn->stream = channel->accept();
    MutexLock lk(mu);
    const bool stop_accepting = finished.load();
    if (!stop_accepting) admitConnection(conn);
    --accepting;
    closed_cv.notifyAll();
    if (stop_accepting) return;
  }
}

// A connection just accepted (its stream null when accept failed): served,
// or closed unread.
void BrokerSession::Impl::admitConnection(const std::shared_ptr<Connection>& conn) {
  if (!conn->stream) return;
  // At most max_connections open at once: each holds a thread and may
  // buffer a whole frame. The rest are closed unread (the peer sees EOF).
  std::size_t open_now = 0;
  for (const auto& c : connections) open_now += c->closed.load() ? 0 : 1;
  if (open_now >= options.max_connections) return;
  try {
    conn->reader = std::thread([this, conn] { serveConnection(conn); });
  } catch (const std::system_error&) {
    return;  // no thread to serve it (the host is out of them): closed unread
  }
  connections.push_back(conn);
  if (options.shape == BootShape::kServe && serving.expired()) serving = conn;
}

// Reads the connection until it ends, faults or the session finishes,
// dispatching every frame; then closes it (closeConnection).
void BrokerSession::Impl::serveConnection(const std::shared_ptr<Connection>& conn) {
  wire::FrameDecoder decoder;
  char buf[65536];
  for (;;) {
    CapabilityRead got;
    const ReadStep step = readSome(*conn, buf, got);
    if (step == ReadStep::kAgain) continue;
    if (step == ReadStep::kEnd) break;
    const auto read_at = BrokerClock::now();
    decoder.feed(std::string_view(buf, got.bytes));
    if (!dispatchFrames(conn, decoder, read_at)) break;
  }
  closeConnection(conn);
}

// The wait for the connection's next bytes: until the nearest deadline of
// a call in flight (halting the calls already past theirs), or -1 (no
// timeout) when none has one left. `calls_running`: whether any is in flight.
int BrokerSession::Impl::nextReadTimeoutMs(Connection& conn, bool& calls_running) {
  int timeout_ms = -1;
  MutexLock lk(conn.mu);
  calls_running = !conn.in_flight.empty();
  const auto now = BrokerClock::now();
  for (auto& [id, call] : conn.in_flight) {
    if (call->stop.load() != 0) continue;
    if (call->deadline <= now) {
      call->halt(Stop::kDeadline);
      continue;
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(call->deadline - now).count() + 1;
    if (timeout_ms < 0 || left < timeout_ms)
      timeout_ms = static_cast<int>(std::min<long long>(left, 60000));
  }
  return timeout_ms;
}

BrokerSession::Impl::ReadStep BrokerSession::Impl::readSome(Connection& conn, std::span<char> buf,
                                                            CapabilityRead& got) {
  bool calls_running = false;
  const int timeout_ms = nextReadTimeoutMs(conn, calls_running);
  if (calls_running) {
    // timeout_ms -1 is kNoTimeout.
    got = conn.stream->read(buf, &*stop, std::chrono::milliseconds(timeout_ms));
    if (got.status == CapabilityReadStatus::kStopped) return ReadStep::kEnd;
    if (got.status == CapabilityReadStatus::kTimedOut) return ReadStep::kAgain;
  } else {
    // No call of this connection in flight, so no deadline to watch and
    // nothing that can add one but this thread: block in read (one
    // syscall per frame instead of poll and read). finish() shuts the
    // read side down to wake it, after setting `finished`.
    got = conn.stream->read(buf);
    if (finished.load()) return ReadStep::kEnd;
  }
  return got.status == CapabilityReadStatus::kData ? ReadStep::kData : ReadStep::kEnd;
}

bool BrokerSession::Impl::dispatchFrames(const std::shared_ptr<Connection>& conn,
                                         wire::FrameDecoder& decoder,
                                         BrokerClock::time_point read_at) {
  for (;;) {
    auto ev = decoder.next();
    if (std::holds_alternative<wire::FrameDecoder::NeedMore>(ev)) return true;
    if (std::holds_alternative<wire::Fault>(ev)) return false;
    if (std::holds_alternative<wire::Dropped>(ev)) continue;
    if (auto* inv = std::get_if<wire::Invalid>(&ev)) {
      onInvalidFrame(*conn, *inv, read_at, decoder.lastFrameBytes());
      continue;
    }
    onFrame(conn, std::get<wire::Frame>(ev), read_at, decoder.lastFrameBytes());
  }
}

// A frame that decoded but is not valid: an invalid cap_call is answered
// (and audited) bad_request; an invalid outcome or hook_result is recorded
// as such where the shape expects one; anything else is dropped.
void BrokerSession::Impl::onInvalidFrame(Connection& conn, const wire::Invalid& inv,
                                         BrokerClock::time_point read_at, std::size_t frame_bytes) {
  if (inv.kind == wire::Kind::kCapCall) {
    const std::string bytes = Connection::encode(
        wire::Frame{inv.id, wire::CapResult{refusal("bad_request", inv.reason)}});
    audit("", inv.id, "refused", "bad_request", read_at, frame_bytes, bytes.size());
    conn.write(bytes);
  } else if (inv.kind == wire::Kind::kOutcome && options.shape == BootShape::kRun) {
    MutexLock lk(mu);
    if (!outcome.outcome) {
      outcome.outcome = wire::Outcome{
          wire::Errored{"the program's outcome frame was malformed: " + inv.reason, {}}};
      outcome.problem = "malformed outcome";
    } else {
      outcome.problem = "more than one outcome frame";
    }
  } else if (inv.kind == wire::Kind::kHookResult && options.shape == BootShape::kServe) {
    MutexLock lk(mu);
    if (auto it = pending_hooks.find(inv.id); it != pending_hooks.end() && !it->second.answer) {
      it->second.answer =
          refusal("crashed", "the extension's hook_result was malformed: " + inv.reason);
      hooks_cv.notifyAll();
    }
  }
}

void BrokerSession::Impl::onFrame(const std::shared_ptr<Connection>& conn, wire::Frame& frame,
                                  BrokerClock::time_point read_at, std::size_t frame_bytes) {
  switch (frame.kind()) {
    case wire::Kind::kCapCall:
      onCapCall(conn, frame.id, std::move(std::get<wire::CapCall>(frame.body)), read_at,
                frame_bytes);
      break;
    case wire::Kind::kCancel: {
      MutexLock lk(conn->mu);
      if (auto it = conn->in_flight.find(frame.id); it != conn->in_flight.end())
        it->second->halt(Stop::kCancelFrame);
      break;
    }
    case wire::Kind::kOutcome:
      if (options.shape == BootShape::kRun) {
        MutexLock lk(mu);
        if (!outcome.outcome)
          outcome.outcome = std::move(std::get<wire::Outcome>(frame.body));
        else
          outcome.problem = "more than one outcome frame";
      }
      break;
    case wire::Kind::kHookResult:
      if (options.shape == BootShape::kServe) {
        MutexLock lk(mu);
        if (auto it = pending_hooks.find(frame.id);
            it != pending_hooks.end() && !it->second.answer) {
          it->second.answer = std::move(std::get<wire::HookResult>(frame.body).answer);
          hooks_cv.notifyAll();
        }
      }
      break;
    default:
      break;  // a kind the service does not accept: dropped
  }
}

// The connection is gone (or faulted, or the session finishes): every
// effect it started is cancelled, and waited for. Only then is it closed:
// waitForConnectionsClosed() promises every call answered and audited.
void BrokerSession::Impl::closeConnection(const std::shared_ptr<Connection>& conn) {
  {
    MutexLock lk(conn->mu);
    const Stop why = finished.load() ? Stop::kFinish : Stop::kDisconnect;
    for (auto& [id, call] : conn->in_flight) call->halt(why);
    while (conn->workers != 0) conn->workers_done.wait(conn->mu);
  }
  conn->closed.store(true);
  conn->stream->shutdown();
  MutexLock lk(mu);
  closed_cv.notifyAll();
  for (auto& [id, pending] : pending_hooks) {
    if (!pending.answer && serving.lock() == conn) pending.connection_gone = true;
  }
  hooks_cv.notifyAll();
}

// `request_bytes`: the frame's bytes on the stream (FrameDecoder).
void BrokerSession::Impl::onCapCall(const std::shared_ptr<Connection>& conn, std::uint64_t id,
                                    wire::CapCall call, BrokerClock::time_point read_at,
                                    std::size_t request_bytes) {
  // The audit line is written before the answer: a program that has its
  // answer can rely on the line existing.
  auto refuse = [&](wire::Refusal r) {
    const std::string code = r.code;
    const std::string bytes = Connection::encode(wire::Frame{id, wire::CapResult{std::move(r)}});
    audit(call.capability, id, "refused", code, read_at, request_bytes, bytes.size());
    conn->write(bytes);
  };
  if (!tokenAccepted(call.token))
    return refuse(refusal(
        "bad_token", "the call's token is not this execution's (revoked, replayed or foreign)"));
  if (call.deadline_ms == 0)
    return refuse(refusal("deadline_exceeded", "the call arrived with no time left"));
  if (!options.policy.allows(call.capability))
    return refuse(
        refusal("denied", "capability " + call.capability + " is not allowed for this execution"));
  const CapabilityTable::Entry* entry = table ? table->find(call.capability) : nullptr;
  if (entry == nullptr) {
    const auto module = call.capability.substr(0, call.capability.find('.'));
    if (module == "strand" || module == "peer" || module == "workflow" || module == "mcp")
      return refuse(
          refusal("unavailable",
                  "capability " + call.capability +
                      " needs a handler from the embedding platform, and none is registered"));
    return refuse(refusal("unknown_capability", "no capability is named " + call.capability));
  }
  const CeilingClass ceiling =
      entry->ceiling != CeilingClass::kNone ? entry->ceiling : defaultCeilingClass(call.capability);
  // Every admitted call holds a thread until it answers: bounded per
  // execution whatever its class (job.wait and fs.* have no ceiling).
  if (calls_in_flight.fetch_add(1) >= options.max_calls_in_flight) {
    calls_in_flight.fetch_sub(1);
    return refuse(
        refusal("admission_ceiling_reached",
                "ceiling in_flight=" + std::to_string(options.max_calls_in_flight) + " reached"));
  }
  struct InFlightSlot {
    std::atomic<std::uint32_t>& n;
    bool held = true;
    ~InFlightSlot() {
      if (held) n.fetch_sub(1);
    }
  } slot{calls_in_flight};
  if (auto full = admit(ceiling)) return refuse(std::move(*full));

  auto budget =
      std::chrono::milliseconds(std::min<std::uint64_t>(call.deadline_ms, 24ull * 3600 * 1000));
  if (options.max_call_budget.count() > 0) budget = std::min(budget, options.max_call_budget);
  auto duplicate = [&] {
    return refusal("bad_request", "call id " + std::to_string(id) + " is already in flight");
  };
  if (entry->placement == CallPlacement::kInline) {
    // It runs here, and the reader reads nothing until it has answered, so
    // no cancel frame can name it; nor is it in in_flight, where deadline,
    // disconnect and finish halt calls: it needs no token of its own (the
    // connection's is never fired) and no entry. Its deadline is still
    // checked when it returns (runCall), and an id in flight on a worker is
    // still refused.
    {
      MutexLock lk(conn->mu);
      if (conn->in_flight.count(id) != 0) return refuse(duplicate());
    }
    if (!conn->inline_cancel) {
      auto token = CancelToken::create();
      if (!token) return refuse(refusal("unavailable", "the broker could not track the call"));
      conn->inline_cancel.emplace(std::move(*token));
    }
    Call c;
    c.id = id;
    c.capability = std::move(call.capability);
    c.started = read_at;
    c.deadline = read_at + budget;
    c.request_bytes = request_bytes;
    c.cancel = &*conn->inline_cancel;
    slot.held = false;  // runCall gives the slot back
    runCall(*conn, c, entry, call.args);
    return;
  }

  auto token = CancelToken::create();
  if (!token) return refuse(refusal("unavailable", "the broker could not track the call"));
  auto c = std::make_shared<Call>();
  c->id = id;
  c->capability = call.capability;
  c->started = read_at;
  c->deadline = read_at + budget;
  c->request_bytes = request_bytes;
  c->own_cancel.emplace(std::move(*token));
  c->cancel = &*c->own_cancel;
  {
    MutexLock lk(conn->mu);
    if (conn->in_flight.count(id) != 0) return refuse(duplicate());
    conn->in_flight[id] = c;
    ++conn->workers;
  }
  auto args = std::make_shared<Value>(std::move(call.args));
  auto task = [this, conn, c, entry, args] {
    runCall(*conn, *c, entry, *args);
    MutexLock lk(conn->mu);
    conn->in_flight.erase(c->id);
    if (--conn->workers == 0) conn->workers_done.notifyAll();
  };
  if (submit(std::move(task))) {
    slot.held = false;  // runCall gives the slot back
  } else {
    {
      MutexLock lk(conn->mu);
      conn->in_flight.erase(id);
      if (--conn->workers == 0) conn->workers_done.notifyAll();
    }
    return refuse(
        refusal("unavailable", "the service has no thread for the call right now; retry later"));
  }
}

// Runs the handler, writes the audit line and the answer, and gives back
// the call's calls_in_flight slot. The caller owns `call` (and, for a worker
// call, its in_flight entry).
void BrokerSession::Impl::runCall(Connection& conn, Call& call, const CapabilityTable::Entry* entry,
                                  const Value& args) {
  wire::Answer answer = Value::nil();
  try {
    CallContext ctx{call.capability, args, call.deadline, *call.cancel};
    answer = entry->handler(ctx);
  } catch (const std::exception& e) {
    answer = refusal("internal_error", std::string("the capability failed: ") + e.what());
  } catch (...) {
    answer = refusal("internal_error", "the capability failed");
  }
  Stop stop = static_cast<Stop>(call.stop.load());
  if (stop == Stop::kNone && BrokerClock::now() > call.deadline) stop = Stop::kDeadline;
  std::string bytes;
  std::string_view verdict = "ok";
  std::string code;
  if (stop == Stop::kNone) {
    if (auto* r = std::get_if<wire::Refusal>(&answer)) {
      verdict = "error";
      code = r->code;
    }
    bytes = Connection::encode(wire::Frame{call.id, wire::CapResult{std::move(answer)}});
  } else {
    const StopReport report = stopReport(stop);
    verdict = report.verdict;
    code = report.code;
    if (report.refusal != nullptr) bytes = Connection::encodeRefusal(call.id, code, report.refusal);
  }
  audit(call.capability, call.id, verdict, code, call.started, call.request_bytes, bytes.size());
  if (!bytes.empty()) conn.write(bytes);
  calls_in_flight.fetch_sub(1);
}

BrokerSession::BrokerSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BrokerSession::~BrokerSession() {
  finish();
}

const std::string& BrokerSession::token() const noexcept {
  return impl_->token;
}

std::uint64_t BrokerSession::callsAnswered() const noexcept {
  return impl_->answered.load();
}

OutcomeReport BrokerSession::outcome() const {
  MutexLock lk(impl_->mu);
  return impl_->outcome;
}

Result<std::unique_ptr<BrokerSession>> BrokerSession::open(
    std::unique_ptr<CapabilityChannel> channel, SessionOptions options,
    std::shared_ptr<const CapabilityTable> table) {
  if (!channel) return fail(ErrorCode::kExecutionUnavailable, "no capability channel");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->audit_execution.clear();
  appendJsonString(impl->audit_execution, impl->options.execution_id);
  impl->table = std::move(table);
  auto token = randomToken();
  if (!token) return tl::unexpected(token.error());
  impl->token = std::move(*token);
  auto stop = CancelToken::create();
  if (!stop) return tl::unexpected(stop.error());
  impl->stop.emplace(std::move(*stop));
  impl->channel = std::move(channel);
  // The token file is replaced atomically (writeFile), so the program never
  // reads half a token.
  if (auto r = impl->channel->writeFile(kTokenFileName, impl->token, 0400,
                                        CapabilityFileOwner::kSandboxUser);
      !r)
    return tl::unexpected(
        Error{r.error().code, r.error().sys_errno, "write the token file: " + r.error().context});
  if (auto r = impl->channel->listen(); !r) {
    (void)impl->channel->removeFile(kTokenFileName);
    return tl::unexpected(r.error());
  }
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->acceptLoop(); });
  return std::unique_ptr<BrokerSession>(new BrokerSession(std::move(impl)));
}

void BrokerSession::finish() {
  Impl& s = *impl_;
  if (s.finished.exchange(true)) return;
  s.token_revoked.store(true);
  s.stop->cancel();
  if (s.acceptor.joinable()) s.acceptor.join();
  std::list<std::shared_ptr<Connection>> conns;
  {
    MutexLock lk(s.mu);
    conns = s.connections;
    s.working_tokens.clear();
  }
  // A reader with no call in flight waits in read(), not on `stop`.
  for (auto& c : conns) c->stream->shutdownRead();
  for (auto& c : conns)
    if (c->reader.joinable()) c->reader.join();
  // Every call has answered (each reader waited for its connection's).
  s.stopPool();
  s.channel->close();  // the acceptor is joined: nothing waits on the channel
  (void)s.channel->removeFile(kTokenFileName);
  MutexLock lk(s.mu);
  s.hooks_cv.notifyAll();
}

bool BrokerSession::waitForConnectionsClosed(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  const auto until = BrokerClock::now() + timeout;
  // Connections still in the listen queue count too: wait for the acceptor
  // to take them (connectionQueued may run while the acceptor waits or
  // accepts; it is false once finish() has closed the channel).
  while (BrokerClock::now() < until) {
    if (s.finished.load() || !s.channel->connectionQueued()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  MutexLock lk(s.mu);
  while (!s.allConnectionsClosed()) {
    if (s.closed_cv.waitUntil(s.mu, until) == std::cv_status::timeout)
      return s.allConnectionsClosed();
  }
  return true;
}

Result<wire::Answer> BrokerSession::invoke(const std::string& hook, const std::string& name,
                                           const Value& args, std::chrono::milliseconds budget) {
  Impl& s = *impl_;
  if (s.options.shape != BootShape::kServe)
    return fail(ErrorCode::kExecutionRejected, "invoke needs a serving session");
  auto working = randomToken();
  if (!working) return tl::unexpected(working.error());
  std::shared_ptr<Connection> conn;
  std::uint64_t id = 0;
  {
    MutexLock lk(s.mu);
    conn = s.serving.lock();
    if (!conn || conn->closed.load() || s.finished.load())
      return fail(ErrorCode::kExecutionUnavailable, "no serving program is connected");
    id = s.next_hook_id++;
    s.pending_hooks[id] = PendingHook{};
    // Install, then ask: the token works before the program can use it.
    s.working_tokens.insert(*working);
  }
  auto cleanup = [&] {
    // Answer, then clear: the token is revoked once the invocation ends.
    MutexLock lk(s.mu);
    s.working_tokens.erase(*working);
    s.pending_hooks.erase(id);
  };
  wire::HookCall call{*working, hook, name, args,
                      static_cast<std::uint64_t>(std::max<std::int64_t>(0, budget.count()))};
  if (!conn->send(wire::Frame{id, call})) {
    cleanup();
    return fail(ErrorCode::kExecutionUnavailable, "the serving program's connection is closed");
  }
  MutexLock lk(s.mu);
  const auto until = BrokerClock::now() + budget;
  for (;;) {
    const PendingHook& pending = s.pending_hooks[id];
    if (pending.answer.has_value() || pending.connection_gone || s.finished.load()) break;
    if (s.hooks_cv.waitUntil(s.mu, until) == std::cv_status::timeout) break;
  }
  auto p = s.pending_hooks[id];
  lk.unlock();
  cleanup();
  if (p.answer) return *p.answer;
  if (p.connection_gone || s.finished.load())
    return fail(ErrorCode::kExecutionUnavailable,
                "the serving program's connection closed during the invocation");
  return fail(ErrorCode::kExecutionUnavailable,
              "the serving program did not answer within the deadline");
}

}  // namespace airlock::capability
