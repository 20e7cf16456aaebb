#include "airlock/capability/broker/capabilities.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "airlock/capability/wire/msgpack.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/thread_annotations.h"
#include "airlock/egress/classifier.h"
#include "airlock/egress/resolver.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock::capability {

using wire::Array;
using wire::Map;
using wire::Refusal;
using wire::Value;

namespace {

Refusal badRequest(std::string message) {
  return Refusal{"bad_request", std::move(message)};
}

// The refusal for an error of the port (workspace, side processes).
Refusal refusalFor(const Error& e) {
  switch (e.code) {
    case ErrorCode::kWorkspaceEscape:
      return Refusal{"workspace_escape", e.message()};
    case ErrorCode::kNotFound:
      return Refusal{"not_found", e.message()};
    case ErrorCode::kToolValidationError:
      return Refusal{"bad_request", e.message()};
    case ErrorCode::kExecutionRejected:
    case ErrorCode::kEnvironmentBusy:
    case ErrorCode::kEnvironmentGone:
      return Refusal{"rejected", e.message()};
    default:
      return Refusal{"unavailable", e.message()};
  }
}

Value text(std::string bytes) {
  return isValidUtf8(bytes) ? Value::string(std::move(bytes)) : Value::bytes(std::move(bytes));
}

const Value* field(const Value& args, std::string_view key) {
  return args.find(key);
}

tl::expected<std::string, Refusal> requiredString(const Value& args, std::string_view key) {
  const Value* v = field(args, key);
  if (v == nullptr || v->asString() == nullptr)
    return tl::unexpected(badRequest("args." + std::string(key) + " must be a string"));
  return *v->asString();
}

tl::expected<std::string, Refusal> optionalString(const Value& args, std::string_view key,
                                                  std::string fallback) {
  const Value* v = field(args, key);
  if (v == nullptr || v->isNil()) return fallback;
  if (v->asString() == nullptr)
    return tl::unexpected(badRequest("args." + std::string(key) + " must be a string"));
  return *v->asString();
}

// A str or bin field, as bytes.
tl::expected<std::optional<std::string>, Refusal> optionalData(const Value& args,
                                                               std::string_view key) {
  const Value* v = field(args, key);
  if (v == nullptr || v->isNil()) return std::optional<std::string>{};
  if (auto* s = v->asString()) return std::optional<std::string>(*s);
  if (auto* b = v->asBytes()) return std::optional<std::string>(*b);
  return tl::unexpected(badRequest("args." + std::string(key) + " must be a string or bytes"));
}

tl::expected<std::uint64_t, Refusal> optionalUint(const Value& args, std::string_view key,
                                                  std::uint64_t fallback) {
  const Value* v = field(args, key);
  if (v == nullptr || v->isNil()) return fallback;
  auto n = v->asUnsigned();
  if (!n)
    return tl::unexpected(
        badRequest("args." + std::string(key) + " must be a non-negative integer"));
  return *n;
}

std::chrono::milliseconds leftUntil(BrokerClock::time_point t) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(t - BrokerClock::now()));
}

// ---- proc.run ----------------------------------------------------------------

wire::Answer procRun(const SandboxServices& s, const CallContext& ctx) {
  auto req = parseProcRequest(ctx.args, true);
  if (!req) return req.error();
  req->command.with_stdin = req->stdin_data.has_value();
  const auto started = BrokerClock::now();
  auto proc = s.env->startSideProcess(s.handle, req->command);
  if (!proc) return refusalFor(proc.error());
  SideProcess& p = **proc;
  auto deadline = ctx.deadline;
  bool timeout_first = false;
  if (req->timeout.count() > 0 && started + req->timeout < deadline) {
    deadline = started + req->timeout;
    timeout_first = true;
  }
  struct Stream {
    std::string data;
    bool truncated = false;
  } out, err;
  SidePumpHooks hooks;
  if (req->stdin_data) hooks.stdin_data = *req->stdin_data;
  hooks.output = [&](bool is_stdout, std::string_view chunk) {
    Stream& stream = is_stdout ? out : err;
    const std::size_t room = kProcRunStreamCap - std::min(kProcRunStreamCap, stream.data.size());
    const std::size_t take = std::min(room, chunk.size());
    stream.data.append(chunk.substr(0, take));
    if (take < chunk.size()) stream.truncated = true;
  };
  hooks.stop_fd = ctx.cancel.pollFd();
  hooks.deadline = deadline;
  // The call's own timeout is a result (timed_out); the caller's deadline is a refusal.
  hooks.continue_after_deadline = timeout_first;
  const SidePumpOutcome pumped = p.pump(hooks);
  if (pumped.end == SidePumpEnd::kStopped)
    return Refusal{"cancelled", "cancelled"};  // the broker answers for it
  if (pumped.end == SidePumpEnd::kDeadline && !timeout_first)
    return Refusal{"deadline_exceeded", "the call's deadline passed"};
  const bool timed_out = pumped.end == SidePumpEnd::kDeadline;
  const std::optional<int> status = pumped.wait_status;
  Map result;
  if (status && WIFEXITED(*status) && !timed_out) {
    result.emplace_back("exit_code", Value::integer(WEXITSTATUS(*status)));
    result.emplace_back("signal", Value::nil());
  } else if (status && WIFSIGNALED(*status)) {
    result.emplace_back("exit_code",
                        timed_out ? Value::nil() : Value::integer(128 + WTERMSIG(*status)));
    result.emplace_back("signal", Value::integer(WTERMSIG(*status)));
  } else {
    result.emplace_back("exit_code", Value::nil());
    result.emplace_back("signal", Value::nil());
  }
  result.emplace_back("stdout", text(std::move(out.data)));
  result.emplace_back("stderr", text(std::move(err.data)));
  result.emplace_back("timed_out", Value::boolean(timed_out));
  result.emplace_back("stdout_truncated", Value::boolean(out.truncated));
  result.emplace_back("stderr_truncated", Value::boolean(err.truncated));
  result.emplace_back("duration_ms",
                      Value::integer(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         BrokerClock::now() - started)
                                         .count()));
  return Value::map(std::move(result));
}

// ---- fs ------------------------------------------------------------------------

wire::Answer fsRead(const SandboxServices& s, const CallContext& ctx) {
  auto path = requiredString(ctx.args, "path");
  if (!path) return path.error();
  auto ws = s.env->workspace(s.handle);
  if (!ws) return refusalFor(ws.error());
  auto data = (*ws)->read(*path);
  if (!data) return refusalFor(data.error());
  if (data->size() > kFsMaxBytes)
    return Refusal{"too_large", "the file is larger than fs.read returns (" +
                                    std::to_string(kFsMaxBytes) + " bytes)"};
  return Value::bytes(std::move(*data));
}

wire::Answer fsWrite(const SandboxServices& s, const CallContext& ctx) {
  auto path = requiredString(ctx.args, "path");
  if (!path) return path.error();
  auto data = optionalData(ctx.args, "data");
  if (!data) return data.error();
  if (!*data) return badRequest("args.data must be a string or bytes");
  if ((*data)->size() > kFsMaxBytes)
    return Refusal{"too_large", "fs.write takes at most " + std::to_string(kFsMaxBytes) + " bytes"};
  auto ws = s.env->workspace(s.handle);
  if (!ws) return refusalFor(ws.error());
  if (auto r = (*ws)->write(*path, **data); !r) return refusalFor(r.error());
  return Value::nil();
}

wire::Answer fsList(const SandboxServices& s, const CallContext& ctx) {
  auto path = optionalString(ctx.args, "path", ".");
  if (!path) return path.error();
  auto ws = s.env->workspace(s.handle);
  if (!ws) return refusalFor(ws.error());
  auto entries = (*ws)->listdir(path->empty() ? "." : *path);
  if (!entries) return refusalFor(entries.error());
  Array out;
  for (auto& e : *entries) {
    const char* type = e.type == WorkspaceEntry::Type::kFile        ? "file"
                       : e.type == WorkspaceEntry::Type::kDirectory ? "directory"
                       : e.type == WorkspaceEntry::Type::kSymlink   ? "symlink"
                                                                    : "other";
    out.push_back(Value::map({{"name", text(e.name)},
                              {"type", Value::string(type)},
                              {"size", Value::integer(e.size_bytes)}}));
  }
  return Value::array(std::move(out));
}

// ---- notes ---------------------------------------------------------------------

// JSON-shaped: what a JSON blackboard can hold (no bytes, finite floats).
bool jsonShaped(const Value& v, int depth = 0) {
  if (depth > 64) return false;
  switch (v.type()) {
    case Value::Type::kBytes:
      return false;
    case Value::Type::kFloat: {
      double d = *v.asFloat();
      return d == d && d - d == 0;
    }
    case Value::Type::kArray:
      for (const auto& e : *v.asArray())
        if (!jsonShaped(e, depth + 1)) return false;
      return true;
    case Value::Type::kMap:
      for (const auto& [k, e] : *v.asMap())
        if (!jsonShaped(e, depth + 1)) return false;
      return true;
    default:
      return true;
  }
}

struct NotesBoard {
  Mutex mu;
  std::map<std::string, Value> notes GUARDED_BY(mu);
};

wire::Answer notesPut(NotesBoard& b, const CallContext& ctx) {
  auto key = requiredString(ctx.args, "key");
  if (!key) return key.error();
  if (key->empty() || key->size() > kNoteKeyMaxBytes)
    return badRequest("args.key must be 1 to " + std::to_string(kNoteKeyMaxBytes) + " bytes");
  const Value* value = field(ctx.args, "value");
  if (value == nullptr) return badRequest("args.value is required (nil is a value)");
  if (!jsonShaped(*value))
    return badRequest("args.value must be JSON-shaped (no bytes, finite numbers)");
  std::string encoded;
  if (!wire::encodeValue(*value, encoded) || encoded.size() > kNoteValueMaxBytes)
    return Refusal{"too_large",
                   "a note holds at most " + std::to_string(kNoteValueMaxBytes) + " bytes"};
  MutexLock lk(b.mu);
  b.notes[*key] = *value;
  return Value::nil();
}

wire::Answer notesGet(NotesBoard& b, const CallContext& ctx) {
  auto key = requiredString(ctx.args, "key");
  if (!key) return key.error();
  MutexLock lk(b.mu);
  auto it = b.notes.find(*key);
  if (it == b.notes.end()) return Refusal{"not_found", "no note is named " + *key};
  return it->second;
}

wire::Answer notesList(NotesBoard& b, const CallContext& ctx) {
  auto prefix = optionalString(ctx.args, "prefix", "");
  if (!prefix) return prefix.error();
  MutexLock lk(b.mu);
  Array keys;
  for (auto it = b.notes.lower_bound(*prefix);
       it != b.notes.end() && it->first.rfind(*prefix, 0) == 0; ++it)
    keys.push_back(Value::string(it->first));
  return Value::array(std::move(keys));
}

// ---- jobs ------------------------------------------------------------------------

// Whether bytes read in chunks are UTF-8 so far. A sequence split between
// chunks is carried (at most 3 bytes) and completed from the next chunk.
class Utf8Tracker {
 public:
  void feed(std::string_view data) {
    if (!valid_) return;
    if (!carry_.empty()) {
      const std::size_t need =
          sequenceLength(static_cast<unsigned char>(carry_[0])) - carry_.size();
      if (data.size() < need) {
        carry_.append(data);
        return;
      }
      carry_.append(data.substr(0, need));
      data.remove_prefix(need);
      valid_ = isValidUtf8(carry_);
      carry_.clear();
      if (!valid_) return;
    }
    const std::size_t cut = incompleteTail(data);
    valid_ = isValidUtf8(data.substr(0, data.size() - cut));
    if (valid_) carry_.assign(data.substr(data.size() - cut));
  }
  // At the end of the stream: nothing left half-finished.
  bool valid() const { return valid_ && carry_.empty(); }

 private:
  // The length a lead byte announces; 0 for a continuation or invalid byte.
  static std::size_t sequenceLength(unsigned char b) {
    if (b < 0x80) return 1;
    if ((b & 0xE0) == 0xC0) return 2;
    if ((b & 0xF0) == 0xE0) return 3;
    if ((b & 0xF8) == 0xF0) return 4;
    return 0;
  }
  // How many bytes at the end start a sequence the data does not finish.
  static std::size_t incompleteTail(std::string_view data) {
    for (std::size_t i = 1; i <= std::min<std::size_t>(3, data.size()); ++i) {
      const auto b = static_cast<unsigned char>(data[data.size() - i]);
      if ((b & 0xC0) == 0x80) continue;
      const std::size_t len = sequenceLength(b);
      return len > i ? i : 0;
    }
    return 0;
  }
  bool valid_ = true;
  std::string carry_;
};

// An unnamed file in `dir` for one stream's spool (JobSpillServices).
Result<sys::UniqueFd> openSpoolFile(const std::string& dir) {
  sys::UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (fd.valid()) return fd;
  // EOPNOTSUPP: the filesystem has no O_TMPFILE; EISDIR: the kernel has none.
  if (errno != EOPNOTSUPP && errno != EISDIR)
    return failErrno(ErrorCode::kExecutionUnavailable,
                     "open(O_TMPFILE) in the spool directory " + dir, errno);
  std::string path = dir + "/airlock-job-spool-XXXXXX";
  fd.reset(::mkostemp(path.data(), O_CLOEXEC));
  if (!fd.valid())
    return failErrno(ErrorCode::kExecutionUnavailable, "mkstemp in the spool directory " + dir,
                     errno);
  if (::unlink(path.c_str()) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "unlink a spool file in " + dir, errno);
  return fd;
}

// One stream's host copy while its job runs. Touched by the pump thread only.
struct StreamSpool {
  sys::UniqueFd fd;
  sys::Sha256 hash;
  std::uint64_t written = 0;
  std::uint64_t dropped = 0;
  std::optional<std::string> error;  // the spool failed; the stream spills nothing
  Utf8Tracker utf8;

  // `spooled_total` counts what every stream of the execution has spooled,
  // against cfg.max_total_bytes: a byte is kept only when both the stream's
  // cap and the execution's budget have room.
  void append(const JobSpillServices& cfg, std::atomic<std::uint64_t>& spooled_total,
              const char* data, std::size_t size) {
    if (error) return;
    const std::uint64_t room = cfg.max_stream_bytes - std::min(cfg.max_stream_bytes, written);
    const std::uint64_t want = std::min<std::uint64_t>(room, size);
    std::uint64_t used = spooled_total.load();
    std::uint64_t grant = 0;
    do grant = std::min(want, cfg.max_total_bytes - std::min(cfg.max_total_bytes, used));
    while (grant > 0 && !spooled_total.compare_exchange_weak(used, used + grant));
    const auto take = static_cast<std::size_t>(grant);
    dropped += size - take;
    if (take == 0) return;
    if (!fd.valid()) {
      auto opened = openSpoolFile(cfg.spool_dir);
      if (!opened) {
        error = "spooling failed: " + opened.error().message();
        return;
      }
      fd = std::move(*opened);
    }
    if (!sys::writeAll(fd.get(), data, take)) {
      error =
          "spooling failed after " + std::to_string(written) + " bytes: " + std::strerror(errno);
      fd.reset();
      return;
    }
    hash.update(data, take);
    utf8.feed(std::string_view(data, take));
    written += take;
  }
};

// A spool file from its start, for put(). Fails once the table is being
// destroyed, which is how a spill in progress is abandoned.
class SpoolSource final : public artifacts::ByteSource {
 public:
  SpoolSource(sys::UniqueFd fd, const std::atomic<bool>& stopping)
      : fd_(std::move(fd)), stopping_(stopping) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override {
    if (stopping_.load())
      return fail(ErrorCode::kExecutionUnavailable,
                  "the execution ended before the spill was stored");
    const ssize_t n = sys::preadSome(fd_.get(), buffer, size, offset_);
    if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "read the spool file", errno);
    offset_ += n;
    return static_cast<std::size_t>(n);
  }

 private:
  sys::UniqueFd fd_;
  const std::atomic<bool>& stopping_;
  off_t offset_ = 0;
};

// What one stream's spill came to.
struct StreamSpill {
  std::optional<std::string> error;        // set: nothing was stored, and why
  std::optional<std::string> artifact_id;  // nullopt for an empty stream
  std::string media_type;                  // of the artifact, when there is one
  std::string sha256;                      // of the bytes spooled
  std::uint64_t size_bytes = 0;
  std::uint64_t dropped_bytes = 0;  // past max_stream_bytes or max_total_bytes
};

struct Job {
  std::string id;
  std::vector<std::string> argv;
  std::unique_ptr<SideProcess> proc;
  // Orders job.send calls (one write to proc's stdin at a time). Never held
  // with `mu`: the pump takes `mu` for every chunk of output, and a send that
  // waited for room in stdin under `mu` would stop the very reads that let
  // the job take its input.
  Mutex send_mu;
  Mutex mu;  // guards the members below
  CondVar cv;
  struct Stream {
    std::string tail;
    std::uint64_t total = 0;
    bool eof = false;
  };
  Stream out GUARDED_BY(mu);
  Stream err GUARDED_BY(mu);
  std::optional<int> status GUARDED_BY(mu);
  bool killed GUARDED_BY(mu) = false;
  // Exited, both streams at end of file, and the spill settled.
  bool done GUARDED_BY(mu) = false;
  // Set with `done` (stdout, stderr).
  std::optional<std::pair<StreamSpill, StreamSpill>> spill GUARDED_BY(mu);
  std::thread pump;
};

class JobTable {
 public:
  JobTable(sys::UniqueFd stop, JobSpillServices spill)
      : stop_(std::move(stop)), spill_(std::move(spill)) {}
  ~JobTable() {
    stopping_.store(true);
    std::uint64_t one = 1;
    (void)sys::writeAll(stop_.get(), &one, sizeof one);
    MutexLock lk(mu_);
    for (auto& [id, job] : jobs_) {
      job->proc->killGroup();
      if (job->pump.joinable()) job->pump.join();
    }
  }
  std::shared_ptr<Job> add(std::vector<std::string> argv, std::unique_ptr<SideProcess> proc) {
    auto job = std::make_shared<Job>();
    job->argv = std::move(argv);
    job->proc = std::move(proc);
    MutexLock lk(mu_);
    job->id = "job-" + std::to_string(++next_);
    jobs_[job->id] = job;
    job->pump = std::thread([this, job] { pump(*job); });
    return job;
  }
  std::shared_ptr<Job> find(const std::string& id) {
    MutexLock lk(mu_);
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second;
  }
  std::vector<std::shared_ptr<Job>> all() {
    MutexLock lk(mu_);
    std::vector<std::shared_ptr<Job>> v;
    for (auto& [id, j] : jobs_) v.push_back(j);
    return v;
  }

 private:
  void pump(Job& job) {
    // Local, so that every spool file is closed when the pump returns.
    std::optional<StreamSpool> spools[2];
    if (spill_.writer) {
      spools[0].emplace();
      spools[1].emplace();
    }
    SidePumpHooks hooks;  // no stdin_data: job.write feeds stdin
    hooks.output = [&](bool is_stdout, std::string_view chunk) {
      {
        MutexLock lk(job.mu);
        Job::Stream& s = is_stdout ? job.out : job.err;
        s.tail.append(chunk);
        s.total += chunk.size();
        if (s.tail.size() > kJobTailBytes) s.tail.erase(0, s.tail.size() - kJobTailBytes);
        job.cv.notifyAll();
      }
      // The disk write is outside job.mu: a poll never waits for it.
      if (auto& spool = spools[is_stdout ? 0 : 1])
        spool->append(spill_, spooled_, chunk.data(), chunk.size());
    };
    hooks.output_ended = [&](bool is_stdout) {
      MutexLock lk(job.mu);
      (is_stdout ? job.out : job.err).eof = true;
      job.cv.notifyAll();
    };
    hooks.exited = [&](int wait_status) {
      MutexLock lk(job.mu);
      job.status = wait_status;
      job.cv.notifyAll();
    };
    hooks.stop_fd = stop_.get();
    const SidePumpOutcome pumped = job.proc->pump(hooks);
    if (pumped.end != SidePumpEnd::kFinished) {
      // The table is going away (or the poll failed): nobody can ask for a
      // spill any more.
      MutexLock lk(job.mu);
      job.out.eof = job.err.eof = true;
      if (!job.status) job.status = SIGKILL;
      job.done = true;
      job.cv.notifyAll();
      return;
    }
    // Terminal: store each stream, then publish the spill with `done`.
    std::pair<StreamSpill, StreamSpill> spill{storeSpill(job.id + ".stdout", spools[0]),
                                              storeSpill(job.id + ".stderr", spools[1])};
    spools[0].reset();
    spools[1].reset();
    MutexLock lk(job.mu);
    job.spill = std::move(spill);
    job.done = true;
    job.cv.notifyAll();
  }

  StreamSpill storeSpill(std::string filename, std::optional<StreamSpool>& spool) {
    StreamSpill r;
    if (!spool) {
      r.error = "no artifact store is configured for job output";
      return r;
    }
    r.size_bytes = spool->written;
    r.dropped_bytes = spool->dropped;
    if (spool->error) {
      r.error = *spool->error;
      return r;
    }
    r.sha256 = spool->hash.finishHex();
    if (spool->written == 0) return r;
    r.media_type = spool->utf8.valid() ? "text/plain; charset=utf-8" : "application/octet-stream";
    artifacts::MeasuredStream stream;
    stream.size_bytes = static_cast<std::int64_t>(spool->written);
    stream.sha256 = r.sha256;
    stream.source = std::make_unique<SpoolSource>(std::move(spool->fd), stopping_);
    auto ref = spill_.writer->create(std::move(stream), std::move(filename), r.media_type,
                                     artifacts::TrustLevel::kExternalUntrusted);
    if (!ref) {
      r.error = "storing the spill failed: " + ref.error().message();
      r.media_type.clear();
      return r;
    }
    r.artifact_id = ref->artifact_id.str();
    r.media_type = ref->media_type;
    return r;
  }

  sys::UniqueFd stop_;
  const JobSpillServices spill_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> spooled_{
      0};  // bytes spooled by every job (JobSpillServices::max_total_bytes)
  Mutex mu_;
  std::map<std::string, std::shared_ptr<Job>> jobs_ GUARDED_BY(mu_);
  std::uint64_t next_ GUARDED_BY(mu_) = 0;
};

// The part of a stream after `cursor`: {data, cursor, dropped}. Cursors are
// byte offsets into the stream; output older than the tail is counted in
// `dropped` (it left the window unread).
Value streamSince(const Job::Stream& s, std::uint64_t cursor) {
  const std::uint64_t start = s.total - s.tail.size();
  std::uint64_t dropped = 0;
  std::string data;
  if (cursor < start) {
    dropped = start - cursor;
    data = s.tail;
  } else if (cursor < s.total) {
    data = s.tail.substr(static_cast<std::size_t>(cursor - start));
  }
  return Value::map({{"data", text(std::move(data))},
                     {"cursor", Value::unsignedInteger(s.total)},
                     {"dropped", Value::unsignedInteger(dropped)}});
}

// One stream's spill: the error string, or {artifact_id (nil for an empty
// stream), media_type (nil likewise), sha256, size_bytes, truncated,
// dropped_bytes}.
Value streamSpillValue(const StreamSpill& s) {
  if (s.error) return Value::string(*s.error);
  return Value::map({{"artifact_id", s.artifact_id ? Value::string(*s.artifact_id) : Value::nil()},
                     {"media_type", s.artifact_id ? Value::string(s.media_type) : Value::nil()},
                     {"sha256", Value::string(s.sha256)},
                     {"size_bytes", Value::unsignedInteger(s.size_bytes)},
                     {"truncated", Value::boolean(s.dropped_bytes > 0)},
                     {"dropped_bytes", Value::unsignedInteger(s.dropped_bytes)}});
}

// Nil until the job is done.
Value jobSpillValue(const Job& job) REQUIRES(job.mu) {
  if (!job.done || !job.spill) return Value::nil();
  return Value::map({{"stdout", streamSpillValue(job.spill->first)},
                     {"stderr", streamSpillValue(job.spill->second)}});
}

Value jobState(const Job& job, std::uint64_t out_cursor, std::uint64_t err_cursor)
    REQUIRES(job.mu) {
  Map m;
  m.emplace_back("job_id", Value::string(job.id));
  m.emplace_back("state", Value::string(!job.status  ? "running"
                                        : job.killed ? "killed"
                                                     : "exited"));
  if (job.status && WIFEXITED(*job.status) && !job.killed)
    m.emplace_back("exit_code", Value::integer(WEXITSTATUS(*job.status)));
  else
    m.emplace_back("exit_code", Value::nil());
  m.emplace_back("pending", Value::boolean(!job.done));
  m.emplace_back("stdout", streamSince(job.out, out_cursor));
  m.emplace_back("stderr", streamSince(job.err, err_cursor));
  m.emplace_back("spill", jobSpillValue(job));
  return Value::map(std::move(m));
}

tl::expected<std::shared_ptr<Job>, Refusal> findJob(JobTable& t, const Value& args) {
  auto id = requiredString(args, "job_id");
  if (!id) return tl::unexpected(id.error());
  auto job = t.find(*id);
  if (!job) return tl::unexpected(Refusal{"job_not_found", "no job is named " + *id});
  return job;
}

wire::Answer jobStart(const SandboxServices& s, JobTable& t, const CallContext& ctx) {
  auto req = parseProcRequest(ctx.args, false);
  if (!req) return req.error();
  req->command.with_stdin = true;
  auto proc = s.env->startSideProcess(s.handle, req->command);
  if (!proc) return refusalFor(proc.error());
  auto job = t.add(req->command.argv, std::move(*proc));
  return Value::map({{"job_id", Value::string(job->id)},
                     {"stdout_cursor", Value::unsignedInteger(0)},
                     {"stderr_cursor", Value::unsignedInteger(0)}});
}

wire::Answer jobPollOrWait(JobTable& t, const CallContext& ctx, bool wait) {
  auto job = findJob(t, ctx.args);
  if (!job) return job.error();
  auto oc = optionalUint(ctx.args, "stdout_cursor", 0);
  if (!oc) return oc.error();
  auto ec = optionalUint(ctx.args, "stderr_cursor", 0);
  if (!ec) return ec.error();
  auto timeout = optionalUint(ctx.args, "timeout_ms", 0);
  if (!timeout) return timeout.error();
  Job& j = **job;
  MutexLock lk(j.mu);
  if (wait) {
    // Until a cursor moves, the job settles, the timeout or the deadline
    // passes, or the call is cancelled (checked on every wake).
    auto until = ctx.deadline - std::chrono::milliseconds(20);
    if (*timeout > 0)
      until = std::min(until, BrokerClock::now() + std::chrono::milliseconds(*timeout));
    while (!(j.out.total > *oc || j.err.total > *ec || j.done) && BrokerClock::now() < until &&
           !ctx.cancel.cancelled()) {
      j.cv.waitUntil(j.mu, std::min(until, BrokerClock::now() + std::chrono::milliseconds(50)));
    }
  }
  return jobState(j, *oc, *ec);
}

wire::Answer jobSend(JobTable& t, const CallContext& ctx, bool last) {
  auto job = findJob(t, ctx.args);
  if (!job) return job.error();
  auto data = optionalData(ctx.args, "data");
  if (!data) return data.error();
  Job& j = **job;
  MutexLock lk(j.send_mu);
  if (!j.proc->stdinOpen()) return Refusal{"job_refused", "the job's input is closed"};
  switch (j.proc->writeStdin(data->value_or(""), ctx.deadline, ctx.cancel.pollFd())) {
    case SideInputEnd::kWritten:
      break;
    case SideInputEnd::kClosed:
      return Refusal{"job_refused", "the job's input is closed"};
    case SideInputEnd::kDeadline:
    case SideInputEnd::kStopped:
      return Refusal{"deadline_exceeded", "the job did not take its input in time"};
  }
  if (last) j.proc->closeStdin();
  return Value::nil();
}

wire::Answer jobKill(JobTable& t, const CallContext& ctx) {
  auto job = findJob(t, ctx.args);
  if (!job) return job.error();
  Job& j = **job;
  {
    MutexLock lk(j.mu);
    if (!j.status) j.killed = true;
  }
  j.proc->killGroup();
  return Value::nil();
}

wire::Answer jobList(JobTable& t) {
  Array out;
  for (auto& j : t.all()) {
    MutexLock lk(j->mu);
    Array argv;
    for (auto& a : j->argv) argv.push_back(text(a));
    out.push_back(Value::map({{"job_id", Value::string(j->id)},
                              {"argv", Value::array(std::move(argv))},
                              {"state", Value::string(!j->status  ? "running"
                                                      : j->killed ? "killed"
                                                                  : "exited")},
                              {"spill", jobSpillValue(*j)}}));
  }
  return Value::array(std::move(out));
}

// ---- net.fetch -----------------------------------------------------------------

bool isHeaderNameByte(unsigned char c) {
  // RFC 9110 tchar.
  return std::isalnum(c) != 0 ||
         std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

wire::Answer netFetch(const NetServices& net, const CallContext& ctx) {
  auto req = parseNetFetchRequest(ctx.args);
  if (!req) return req.error();
  // A missing part of the composition is a deny policy: refused before any
  // lookup, with the guard's own reason code.
  auto policy =
      net.policy && net.resolver && net.classifier ? net.policy : egress::Policy::denyAll();
  std::shared_ptr<egress::Resolver> resolver = net.resolver;
  std::shared_ptr<const egress::AddressClassifier> classifier = net.classifier;
  if (!resolver || !classifier) {
    // Never consulted (denyAll decides before any lookup); the guard wants them non-null.
    resolver = std::make_shared<egress::GetaddrinfoResolver>();
    classifier = std::make_shared<const egress::AddressClassifier>(
        std::make_shared<egress::FixedSelfAddresses>(std::vector<egress::IpAddress>{}));
  }
  egress::OutboundLimits limits = net.limits;
  auto budget = leftUntil(ctx.deadline);
  if (req->timeout.count() > 0) budget = std::min(budget, req->timeout);
  if (budget.count() <= 0) return Refusal{"deadline_exceeded", "no time left for the request"};
  limits.total_timeout = std::min(limits.total_timeout, budget);
  limits.connect_timeout = std::min(limits.connect_timeout, budget);
  // One guard per call: the limits carry this call's budget. The guard is
  // three shared pointers; building it costs nothing next to a request.
  const egress::OutboundGuard guard(std::move(policy), std::move(resolver), std::move(classifier),
                                    limits);
  auto r = guard.fetch(req->request);
  if (!r) return Refusal{r.error().code, r.error().error.message()};
  Array headers;
  for (auto& [k, v] : r->headers) headers.push_back(Value::array({text(k), text(v)}));
  return Value::map({{"status", Value::integer(static_cast<std::int64_t>(r->status))},
                     {"final_url", text(r->final_url)},
                     {"headers", Value::array(std::move(headers))},
                     {"body", text(std::move(r->body))},
                     {"redirects", Value::integer(static_cast<std::int64_t>(
                                       r->hops.empty() ? 0 : r->hops.size() - 1))}});
}

// ---- schedule.* ------------------------------------------------------------------

namespace sched = schedule;

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

tl::expected<sched::ScheduleRequest, Refusal> parseScheduleArgs(const Value& args,
                                                                sched::TimingKind kind) {
  if (args.asMap() == nullptr) return tl::unexpected(badRequest("args must be a map"));
  sched::ScheduleRequest req;
  req.kind = kind;
  auto name = requiredString(args, "name");
  if (!name) return tl::unexpected(name.error());
  req.name = std::move(*name);
  auto requiredUint = [&](std::string_view key) -> tl::expected<std::uint64_t, Refusal> {
    const Value* v = field(args, key);
    if (v == nullptr || !v->asUnsigned())
      return tl::unexpected(
          badRequest("args." + std::string(key) + " must be a non-negative integer"));
    return *v->asUnsigned();
  };
  switch (kind) {
    case sched::TimingKind::kEvery: {
      auto i = requiredUint("interval_s");
      if (!i) return tl::unexpected(i.error());
      req.interval_s = *i;
      break;
    }
    case sched::TimingKind::kAt: {
      auto a = requiredUint("at");
      if (!a) return tl::unexpected(a.error());
      req.at_unix_s = static_cast<std::int64_t>(std::min<std::uint64_t>(*a, 1ull << 62));
      break;
    }
    case sched::TimingKind::kCron: {
      auto e = requiredString(args, "expression");
      if (!e) return tl::unexpected(e.error());
      req.cron = std::move(*e);
      break;
    }
    case sched::TimingKind::kAfter: {
      auto a = requiredUint("after_s");
      if (!a) return tl::unexpected(a.error());
      req.after_s = *a;
      break;
    }
  }
  // Offset and bounds are read for every timing so that the schedule layer
  // refuses them by name beside the wrong one.
  if (const Value* o = field(args, "offset"); o != nullptr && !o->isNil()) {
    if (o->asString() == nullptr) return tl::unexpected(badRequest("args.offset must be a string"));
    req.offset = *o->asString();
  }
  if (const Value* b = field(args, "bounds"); b != nullptr && !b->isNil()) {
    if (b->asMap() == nullptr) return tl::unexpected(badRequest("args.bounds must be a map"));
    sched::Bounds bounds;
    for (const char* key : {"max_fires", "expires_after_s"}) {
      const Value* v = b->find(key);
      if (v == nullptr || v->isNil()) continue;
      if (!v->asUnsigned())
        return tl::unexpected(
            badRequest("args.bounds." + std::string(key) + " must be a non-negative integer"));
      (std::string_view(key) == "max_fires" ? bounds.max_fires : bounds.expires_after_s) =
          *v->asUnsigned();
    }
    req.bounds = bounds;
  }
  if (const Value* w = field(args, "wake"); w != nullptr && !w->isNil()) {
    if (!w->asBool()) return tl::unexpected(badRequest("args.wake must be a boolean"));
    req.wake = *w->asBool();
  }
  auto body = optionalString(args, "body", "");
  if (!body) return tl::unexpected(body.error());
  req.body = std::move(*body);
  return req;
}

wire::Answer scheduleCreate(const SandboxServices& s, sched::TimingKind kind,
                            const CallContext& ctx) {
  auto req = parseScheduleArgs(ctx.args, kind);
  if (!req) return req.error();
  auto record = sched::planSchedule(*req, s.handle.environment_id, scheduleNow(s.schedule),
                                    s.schedule.ceilings);
  if (!record) return invalidSchedule(record.error());
  if (auto r = s.schedule.store->create(*record, s.schedule.ceilings.max_per_creator); !r) {
    if (r.error().code == ErrorCode::kExecutionRejected)
      return Refusal{"invalid_schedule", r.error().context};
    return Refusal{"unavailable", r.error().message()};
  }
  return scheduleValue(*record);
}

wire::Answer scheduleList(const SandboxServices& s) {
  auto rows = s.schedule.store->list(s.handle.environment_id);
  if (!rows) return Refusal{"unavailable", rows.error().message()};
  Array out;
  for (const auto& r : *rows) out.push_back(scheduleValue(r));
  return Value::array(std::move(out));
}

wire::Answer scheduleCancel(const SandboxServices& s, const CallContext& ctx) {
  if (ctx.args.asMap() == nullptr) return badRequest("args must be a map");
  auto name = requiredString(ctx.args, "name");
  if (!name) return name.error();
  auto removed = s.schedule.store->cancel(s.handle.environment_id, *name);
  if (!removed) return Refusal{"unavailable", removed.error().message()};
  if (!*removed) return Refusal{"not_found", "no schedule of this execution is named " + *name};
  return Value::nil();
}

}  // namespace

tl::expected<ProcRequest, Refusal> parseProcRequest(const Value& args, bool allow_stdin) {
  if (args.asMap() == nullptr) return tl::unexpected(badRequest("args must be a map"));
  ProcRequest req;
  const Value* argv = field(args, "argv");
  if (argv == nullptr || argv->asArray() == nullptr || argv->asArray()->empty())
    return tl::unexpected(badRequest("args.argv must be a non-empty list of strings"));
  if (argv->asArray()->size() > 4096)
    return tl::unexpected(badRequest("args.argv has more than 4096 items"));
  std::size_t total = 0;
  for (const auto& a : *argv->asArray()) {
    const std::string* s = a.asString();
    if (s == nullptr)
      return tl::unexpected(badRequest("args.argv must be a non-empty list of strings"));
    if (s->find('\0') != std::string::npos)
      return tl::unexpected(badRequest("args.argv must not contain NUL bytes"));
    total += s->size() + 1;
    req.command.argv.push_back(*s);
  }
  if (total > 65536) return tl::unexpected(badRequest("args.argv is larger than 64 KiB"));
  if (req.command.argv[0].empty())
    return tl::unexpected(badRequest("args.argv[0] must name a program"));
  auto cwd = optionalString(args, "cwd", ".");
  if (!cwd) return tl::unexpected(cwd.error());
  req.command.working_directory = cwd->empty() ? "." : *cwd;
  if (const Value* env = field(args, "env"); env != nullptr && !env->isNil()) {
    if (env->asMap() == nullptr)
      return tl::unexpected(badRequest("args.env must be a map of strings"));
    for (const auto& [k, v] : *env->asMap()) {
      if (!isValidEnvName(k)) return tl::unexpected(badRequest("args.env has an invalid name"));
      if (isTier0Name(k) || isTier2Name(k))
        return tl::unexpected(badRequest("args.env may not set " + k + " (reserved)"));
      const std::string* s = v.asString();
      if (s == nullptr || s->find('\0') != std::string::npos)
        return tl::unexpected(badRequest("args.env." + k + " must be a string without NUL bytes"));
      req.command.env_additions[k] = *s;
    }
  }
  auto in = optionalData(args, "stdin");
  if (!in) return tl::unexpected(in.error());
  if (*in && !allow_stdin)
    return tl::unexpected(badRequest("args.stdin is not taken here (use job.send)"));
  req.stdin_data = std::move(*in);
  auto timeout = optionalUint(args, "timeout_ms", 0);
  if (!timeout) return tl::unexpected(timeout.error());
  req.timeout = std::chrono::milliseconds(std::min<std::uint64_t>(*timeout, 24ull * 3600 * 1000));
  return req;
}

tl::expected<NetFetchRequest, Refusal> parseNetFetchRequest(const Value& args) {
  if (args.asMap() == nullptr) return tl::unexpected(badRequest("args must be a map"));
  NetFetchRequest req;
  auto url = requiredString(args, "url");
  if (!url) return tl::unexpected(url.error());
  if (url->size() > 8192) return tl::unexpected(badRequest("args.url is longer than 8192 bytes"));
  req.request.url = std::move(*url);
  auto method = optionalString(args, "method", "GET");
  if (!method) return tl::unexpected(method.error());
  for (auto& c : *method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
  if (std::find(std::begin(kMethods), std::end(kMethods), *method) == std::end(kMethods))
    return tl::unexpected(
        badRequest("args.method must be one of GET, HEAD, POST, PUT, PATCH, DELETE"));
  req.request.method = std::move(*method);
  if (const Value* h = field(args, "headers"); h != nullptr && !h->isNil()) {
    if (h->asMap() == nullptr)
      return tl::unexpected(badRequest("args.headers must be a map of strings"));
    if (h->asMap()->size() > 100)
      return tl::unexpected(badRequest("args.headers has more than 100 entries"));
    std::size_t total = 0;
    for (const auto& [k, v] : *h->asMap()) {
      if (k.empty() || !std::all_of(k.begin(), k.end(), [](char c) {
            return isHeaderNameByte(static_cast<unsigned char>(c));
          }))
        return tl::unexpected(badRequest("args.headers has an invalid header name"));
      const std::string* sv = v.asString();
      if (sv == nullptr || sv->find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
        return tl::unexpected(
            badRequest("args.headers." + k + " must be a string without CR, LF or NUL"));
      total += k.size() + sv->size();
      req.request.headers.emplace_back(k, *sv);
    }
    if (total > 65536) return tl::unexpected(badRequest("args.headers are larger than 64 KiB"));
  }
  auto body = optionalData(args, "body");
  if (!body) return tl::unexpected(body.error());
  if (*body) {
    if ((*body)->size() > kFsMaxBytes)
      return tl::unexpected(Refusal{"too_large", "args.body is larger than 8 MiB"});
    if (req.request.method == "GET" || req.request.method == "HEAD")
      return tl::unexpected(badRequest("args.body is not sent with " + req.request.method));
    req.request.body = std::move(**body);
  }
  auto timeout = optionalUint(args, "timeout_ms", 0);
  if (!timeout) return tl::unexpected(timeout.error());
  req.timeout = std::chrono::milliseconds(std::min<std::uint64_t>(*timeout, 24ull * 3600 * 1000));
  return req;
}

Result<NetServices> productionNetServices(const airlock::EgressPolicy& egress) {
  auto policy = egress::compilePolicy(egress, "sandbox egress policy");
  if (!policy) return tl::unexpected(policy.error());
  NetServices net;
  net.policy = std::move(*policy);
  net.resolver = std::make_shared<egress::GetaddrinfoResolver>();
  net.classifier = std::make_shared<const egress::AddressClassifier>(
      std::make_shared<egress::InterfaceAddressSource>());
  return net;
}

std::shared_ptr<CapabilityTable> makeSandboxCapabilities(const SandboxServices& services) {
  auto table = std::make_shared<CapabilityTable>();
  const SandboxServices s = services;
  table->add("proc.run", CeilingClass::kSpawn, [s](const CallContext& c) { return procRun(s, c); });
  table->add("fs.read", CeilingClass::kNone, [s](const CallContext& c) { return fsRead(s, c); });
  table->add("fs.write", CeilingClass::kNone, [s](const CallContext& c) { return fsWrite(s, c); });
  table->add("fs.list", CeilingClass::kNone, [s](const CallContext& c) { return fsList(s, c); });
  auto notes = std::make_shared<NotesBoard>();
  // The blackboard is memory under a mutex: never blocks, runs inline.
  table->add(
      "notes.put", CeilingClass::kNote,
      [notes](const CallContext& c) { return notesPut(*notes, c); }, CallPlacement::kInline);
  table->add(
      "notes.get", CeilingClass::kNotes,
      [notes](const CallContext& c) { return notesGet(*notes, c); }, CallPlacement::kInline);
  table->add(
      "notes.list", CeilingClass::kNotes,
      [notes](const CallContext& c) { return notesList(*notes, c); }, CallPlacement::kInline);
  auto jobs = std::make_shared<JobTable>(sys::UniqueFd(::eventfd(0, EFD_CLOEXEC)), s.job_spill);
  table->add("job.start", CeilingClass::kSpawn,
             [s, jobs](const CallContext& c) { return jobStart(s, *jobs, c); });
  table->add("job.poll", CeilingClass::kNone,
             [jobs](const CallContext& c) { return jobPollOrWait(*jobs, c, false); });
  table->add("job.wait", CeilingClass::kNone,
             [jobs](const CallContext& c) { return jobPollOrWait(*jobs, c, true); });
  table->add("job.send", CeilingClass::kSend,
             [jobs](const CallContext& c) { return jobSend(*jobs, c, false); });
  table->add("job.send_last", CeilingClass::kSend,
             [jobs](const CallContext& c) { return jobSend(*jobs, c, true); });
  table->add("job.kill", CeilingClass::kNone,
             [jobs](const CallContext& c) { return jobKill(*jobs, c); });
  table->add("job.list", CeilingClass::kNone,
             [jobs](const CallContext&) { return jobList(*jobs); });
  auto net = std::make_shared<const NetServices>(s.net);
  table->add("net.fetch", CeilingClass::kNone,
             [net](const CallContext& c) { return netFetch(*net, c); });
  if (s.schedule.store) {
    using K = schedule::TimingKind;
    for (auto [name, kind] :
         {std::pair{"schedule.every", K::kEvery}, std::pair{"schedule.at", K::kAt},
          std::pair{"schedule.cron", K::kCron}, std::pair{"schedule.after", K::kAfter}}) {
      const K k = kind;
      table->add(name, CeilingClass::kNone,
                 [s, k](const CallContext& c) { return scheduleCreate(s, k, c); });
    }
    table->add("schedule.list", CeilingClass::kNone,
               [s](const CallContext&) { return scheduleList(s); });
    table->add("schedule.cancel", CeilingClass::kNone,
               [s](const CallContext& c) { return scheduleCancel(s, c); });
  } else {
    table->addModuleRoute("schedule", [](const CallContext& c) -> wire::Answer {
      return Refusal{"unavailable",
                     "capability " + std::string(c.capability) +
                         " needs the metadata database, which this execution has none of"};
    });
  }
  return table;
}

Policy defaultCodeModePolicy() {
  Policy p;
  p.allowed = {"proc.*",     "fs.*",     "notes.*", "job.*",      "net.*",
               "schedule.*", "strand.*", "peer.*",  "workflow.*", "mcp.*"};
  return p;
}

}  // namespace airlock::capability
