#include "airlock/service/http_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "airlock/core/json.h"
#include "airlock/sys/resource_limits.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::service {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto kNoThrow = asio::experimental::as_tuple(asio::use_awaitable);
constexpr std::uint64_t kWantedOpenFiles = 65536;
constexpr int kExecutionNice = 10;
constexpr int kLoopNice = -10;
// readHead's answer for a head with a folded header (no parser error has it).
const beast::error_code kFoldedHead = make_error_code(boost::system::errc::protocol_error);

// Threads that pump a command's output run at a lower CPU priority than the
// loop and the request pool: on a loaded machine a hundred commands writing
// as fast as they can still leave the loop the time to accept and answer
// (/healthz, provisioning, listing). Idempotent per thread.
void yieldToTheLoop() {
  thread_local bool lowered = false;
  if (lowered) return;
  lowered = true;
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kExecutionNice);
}

// The loop accepts, reads and answers for everyone, so it runs ahead of
// everything else on the machine: SCHED_RR at the lowest real-time
// priority where the service may (CAP_SYS_NICE), else nice -10. Nice alone
// is not enough: on a two-core machine with a hundred busy sandboxes, the
// fair scheduler left the runnable loop waiting up to 270 ms for a core
// (the sandboxes, their runsc processes and the service's own threads all
// take their turn first), and /healthz with it. SCHED_RESET_ON_FORK: a
// thread or process started from the loop's thread is an ordinary one.
// The loop only waits for events and does bounded work per event; should
// it ever spin, the kernel's real-time throttling still leaves the other
// tasks on that core a share. Returns what took effect, for the log.
const char* raiseLoopPriority() {
  sched_param param{};
  param.sched_priority = 1;
  if (::pthread_setschedparam(::pthread_self(), SCHED_RR | SCHED_RESET_ON_FORK, &param) == 0)
    return "SCHED_RR 1";
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kLoopNice) == 0) return "nice -10";
  return "normal";
}

// Back to an ordinary thread once the loop has stopped: the shutdown that
// follows (every sandbox destroyed) is no more urgent than anything else.
void restoreLoopPriority() {
  sched_param param{};
  (void)::pthread_setschedparam(::pthread_self(), SCHED_OTHER, &param);
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 0);
}

void logLine(const nlohmann::json& fields) {
  nlohmann::json line = {
      {"time", formatTimestamp(std::chrono::time_point_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now()))}};
  line.update(fields);
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  static std::mutex mu;
  std::lock_guard lk(mu);
  (void)std::fwrite(text.data(), 1, text.size(), stderr);
  (void)std::fflush(stderr);
}

// One accepted connection, touched only on the loop's thread. While it waits
// for (or is reading) its next request it sits on an idle list, oldest
// first, and may be closed to make room for a new connection.
struct Connection {
  explicit Connection(tcp::socket socket) : stream(std::move(socket)) {}
  beast::tcp_stream stream;
  bool authenticated = false;  // a request of it carried the service token
  bool counted = true;         // still counted against the connection bounds
  std::optional<std::list<Connection*>::iterator> idle;
};

// NDJSON lines of one streaming execute, from the executing thread to the
// session. push() never blocks: the command's supervisor must not wait on a
// client, whatever the client does. What is queued is bounded by the
// command's output cap (the sink only ever sees bytes that also land in the
// result), so a client that reads slowly costs memory up to that cap and no
// more; the command still ends at its timeout or cap.
struct StreamLine {
  std::string text;
};
struct StreamEnd {
  HttpResponse response;
};
using StreamEvent = std::variant<StreamLine, StreamEnd>;

//
// The executing thread wakes the session through an eventfd, never through
// the loop's own queue: posting to the io_context takes its scheduler lock,
// and an executing thread (a hundred of them, at a lower priority than the
// loop, on cores shared with the sandboxes) preempted while holding that
// lock stalls the loop, and with it /healthz and every other connection, for
// as long as that thread waits for a core. An eventfd write takes no lock
// the loop can wait on.
class StreamQueue {
 public:
  explicit StreamQueue(asio::io_context& ioc) : wake_(ioc) {
    const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd >= 0) wake_.assign(fd);
  }
  bool valid() const { return wake_.is_open(); }

  // Any thread. Dropped once the session has stopped reading. Lines the
  // session has written are freed here, on the pushing thread.
  void push(StreamEvent event) {
    std::deque<StreamEvent> spent;
    {
      std::lock_guard lk(mu_);
      if (closed_) return;
      spent = std::exchange(spent_, {});
      events_.push_back(std::move(event));
      // One wake-up in flight at a time: the session takes everything
      // queued when it runs, so a fast command costs the loop one wake-up
      // per write, not one per chunk.
      if (wake_pending_) return;
      wake_pending_ = true;
    }
    // The descriptor stays open while any thread holds the queue (the
    // session and the executing thread share it).
    const std::uint64_t one = 1;
    (void)!::write(wake_.native_handle(), &one, sizeof one);
  }
  // The loop's thread: what arrived so far, or an empty deque.
  std::deque<StreamEvent> take() {
    std::lock_guard lk(mu_);
    wake_pending_ = false;
    return std::exchange(events_, {});
  }
  // The loop's thread: until push() is called after the last take() (at
  // once if it already was: the eventfd is then readable). The wake-up is
  // drained before the next take(), so a push after it wakes the next wait.
  asio::awaitable<void> wait() {
    (void)co_await wake_.async_wait(asio::posix::stream_descriptor::wait_read, kNoThrow);
    std::uint64_t count;
    (void)!::read(wake_.native_handle(), &count, sizeof count);
  }
  // The loop's thread: lines it has written, handed back to be freed by the
  // pushing thread. Their memory came from that thread's malloc arena;
  // freeing it on the loop would take the arena's lock, which a preempted
  // executing thread may hold.
  void recycle(std::deque<StreamEvent>&& written) {
    std::lock_guard lk(mu_);
    if (spent_.empty()) {
      spent_ = std::move(written);
    } else {
      for (auto& e : written) spent_.push_back(std::move(e));
    }
  }
  void close() {
    std::lock_guard lk(mu_);
    closed_ = true;
    events_.clear();
  }

 private:
  std::mutex mu_;
  std::deque<StreamEvent> events_;
  std::deque<StreamEvent> spent_;
  bool closed_ = false;
  bool wake_pending_ = false;
  asio::posix::stream_descriptor wake_;
};

class BeastServer final : public HttpServer {
 public:
  BeastServer(const Settings& settings, RequestHandler& api, ExecutionEnvironment& env)
      : settings_(settings),
        api_(api),
        env_(env),
        exec_pool_(static_cast<std::size_t>(settings.max_concurrent_executions)),
        acceptor_(ioc_),
        signals_(ioc_, SIGINT, SIGTERM),
        reaper_timer_(ioc_),
        schedule_timer_(ioc_),
        accept_timer_(ioc_),
        shutdown_timer_(ioc_) {}

  Result<void> bind() {
    const std::string& listen = settings_.listen;
    const auto colon = listen.rfind(':');
    std::string host = listen.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    beast::error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec)
      return fail(ErrorCode::kConfigurationError, "listen \"" + listen + "\": " + ec.message());
    const tcp::endpoint endpoint(address,
                                 static_cast<unsigned short>(std::stoi(listen.substr(colon + 1))));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return fail(ErrorCode::kExecutionUnavailable,
                  "cannot listen on " + listen + ": " + ec.message());
    return {};
  }

  std::uint16_t port() const override { return acceptor_.local_endpoint().port(); }

  void run() override {
    asio::co_spawn(ioc_, accept(), asio::detached);
    asio::co_spawn(ioc_, reaper(), asio::detached);
    asio::co_spawn(ioc_, scheduler(), asio::detached);
    signals_.async_wait([this](const beast::error_code& ec, int) {
      if (!ec) beginStop();
    });
    const char* scheduling = raiseLoopPriority();
    logLine({{"level", "info"},
             {"event", "listening"},
             {"address", settings_.listen},
             {"port", port()},
             {"loop_scheduling", scheduling}});
    ioc_.run();
    restoreLoopPriority();
    // Shutdown: running commands ended with SERVICE_SHUTDOWN and their
    // responses went out (beginStop waited for them); now every environment
    // is destroyed.
    env_.shutdown();
    pool_.join();
    exec_pool_.join();
    background_.join();
    api_.destroyAll();
    logLine({{"level", "info"}, {"event", "stopped"}});
  }

  void stop() override {
    asio::post(ioc_, [this] { beginStop(); });
  }

 private:
  // How long a stopping service waits for responses still being written
  // (a streamed result to a client that reads slowly) before it closes them.
  static constexpr auto kStopGrace = std::chrono::seconds(5);
  // How long accept waits when the process is out of descriptors and no idle
  // connection can be closed to free one.
  static constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);
  // How often a streaming execute looks for its client's hang-up.
  static constexpr auto kHangupPoll = std::chrono::milliseconds(100);
  // The most of a stream written under one request_timeout deadline: a
  // client that keeps reading is never taken for gone because a fast
  // command queued megabytes at once.
  static constexpr std::size_t kStreamWriteBytes = 256 * 1024;

  void beginStop() {
    if (stopping_.exchange(true)) return;
    beast::error_code ec;
    acceptor_.close(ec);
    signals_.cancel(ec);
    reaper_timer_.cancel();
    schedule_timer_.cancel();
    accept_timer_.cancel();
    // Connections waiting for a request are closed now; running commands end
    // now (SERVICE_SHUTDOWN) and the loop stops once the last in-flight
    // response is written (see session()), or at the grace's end.
    while (closeIdle(idle_unauthenticated_) || closeIdle(idle_authenticated_)) {
    }
    env_.shutdown();
    shutdown_timer_.expires_after(kStopGrace);
    shutdown_timer_.async_wait([this](const beast::error_code& err) {
      if (err) return;
      for (Connection* c : std::vector<Connection*>(open_.begin(), open_.end()))
        closeConnection(*c);
    });
    if (inflight_ == 0) ioc_.stop();
  }

  // ---- connection bounds (the loop's thread only)

  std::list<Connection*>& idleList(Connection& c) {
    return c.authenticated ? idle_authenticated_ : idle_unauthenticated_;
  }
  void markIdle(Connection& c) {
    if (c.counted && !c.idle) c.idle = idleList(c).insert(idleList(c).end(), &c);
  }
  void markBusy(Connection& c) {
    if (c.idle) idleList(c).erase(*c.idle);
    c.idle.reset();
  }
  void markAuthenticated(Connection& c) {
    if (c.authenticated || !c.counted) return;
    markBusy(c);
    c.authenticated = true;
    --unauthenticated_;
  }
  // Stops counting `c` (idempotent); the session ends on its own.
  void forget(Connection& c) {
    if (!c.counted) return;
    markBusy(c);
    c.counted = false;
    open_.erase(&c);
    --connections_;
    if (!c.authenticated) --unauthenticated_;
  }
  void closeConnection(Connection& c) {
    forget(c);
    c.stream.close();  // a pending read or write completes with an error
  }
  // Closes the connection of `list` idle longest; false when there is none.
  bool closeIdle(std::list<Connection*>& list) {
    if (list.empty()) return false;
    closeConnection(*list.front());
    return true;
  }
  // Makes room for one more connection, closing idle ones past the bounds.
  // False when the new connection must be refused (nothing could be closed).
  bool admit(Connection& c) {
    ++connections_;
    ++unauthenticated_;
    open_.insert(&c);
    if (unauthenticated_ > settings_.max_unauthenticated_connections)
      closeIdle(idle_unauthenticated_);
    if (connections_ > settings_.max_connections && !closeIdle(idle_unauthenticated_))
      closeIdle(idle_authenticated_);
    return unauthenticated_ <= settings_.max_unauthenticated_connections &&
           connections_ <= settings_.max_connections;
  }

  asio::awaitable<void> accept() {
    while (!stopping_) {
      auto [ec, socket] = co_await acceptor_.async_accept(kNoThrow);
      if (stopping_) co_return;
      if (ec == asio::error::no_descriptors ||
          ec == boost::system::errc::too_many_files_open_in_system) {
        // Out of descriptors: free one by closing the connection idle
        // longest; with none to close, wait instead of spinning on accept.
        if (!closeIdle(idle_unauthenticated_) && !closeIdle(idle_authenticated_)) {
          accept_timer_.expires_after(kAcceptBackoff);
          co_await accept_timer_.async_wait(kNoThrow);
        }
        continue;
      }
      if (ec) continue;
      auto conn = std::make_shared<Connection>(std::move(socket));
      if (!admit(*conn)) {
        closeConnection(*conn);
        continue;
      }
      markIdle(*conn);  // from now on, in the order connections arrived
      asio::co_spawn(ioc_, session(std::move(conn)), asio::detached);
    }
  }

  // Runs `work` on `pool` and resumes on the loop with what it returns. The
  // worker never takes the loop's scheduler lock: resuming through
  // co_spawn's completion would post to the io_context from the worker, and
  // a worker preempted while holding that lock (a hundred of them, at a
  // lower priority, on cores full of sandboxes) stalled the loop, and
  // /healthz with it, for as long as it waited for a core. Instead the
  // worker leaves its result in shared state and writes an eventfd that the
  // loop's reactor watches. An exception from `work` is rethrown here.
  template <class Pool, class F>
  auto offLoop(Pool& pool, F work) -> asio::awaitable<std::invoke_result_t<F&>> {
    using T = std::invoke_result_t<F&>;
    struct Slot {
      std::optional<T> result;
      std::exception_ptr error;
      std::atomic<bool> done{false};
      sys::UniqueFd wake;
    };
    auto slot = std::make_shared<Slot>();
    slot->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    // The loop watches its own descriptor of the eventfd, so the slot (and
    // the worker's descriptor) may go on either thread.
    const int watched = slot->wake.valid() ? ::fcntl(slot->wake.get(), F_DUPFD_CLOEXEC, 0) : -1;
    if (watched < 0) {
      // No descriptor to spare: resume through the io_context after all.
      co_return co_await asio::co_spawn(
          pool, [&]() -> asio::awaitable<T> { co_return work(); }, asio::use_awaitable);
    }
    asio::posix::stream_descriptor wake(ioc_, watched);
    asio::post(pool, [slot, work = std::move(work)]() mutable {
      try {
        slot->result.emplace(work());
      } catch (...) {
        slot->error = std::current_exception();
      }
      slot->done.store(true, std::memory_order_release);
      const std::uint64_t one = 1;
      (void)!::write(slot->wake.get(), &one, sizeof one);
    });
    while (!slot->done.load(std::memory_order_acquire))
      co_await wake.async_wait(asio::posix::stream_descriptor::wait_read, kNoThrow);
    if (slot->error) std::rethrow_exception(slot->error);
    co_return std::move(*slot->result);
  }

  asio::awaitable<void> reaper() {
    while (!stopping_) {
      reaper_timer_.expires_after(settings_.reaper_interval);
      auto [ec] = co_await reaper_timer_.async_wait(kNoThrow);
      if (ec || stopping_) co_return;
      const int n = co_await offLoop(background_, [this] { return api_.reap(); });
      if (n > 0) logLine({{"level", "info"}, {"event", "reaped"}, {"environments", n}});
    }
  }

  // Code-mode schedules: every schedule_fire_interval, due occurrences move
  // into the fire outbox (on the pool: the store may block on its database).
  asio::awaitable<void> scheduler() {
    // A failure that repeats every tick (a full outbox, a database down) is
    // logged when it starts or changes, and then once a minute.
    std::string last_error;
    auto last_logged = std::chrono::steady_clock::time_point{};
    while (!stopping_) {
      schedule_timer_.expires_after(settings_.schedule_fire_interval);
      auto [ec] = co_await schedule_timer_.async_wait(kNoThrow);
      if (ec || stopping_) co_return;
      auto fired = co_await offLoop(background_, [this] { return api_.fireSchedules(); });
      if (!fired) {
        const std::string message = fired.error().message();
        const auto now = std::chrono::steady_clock::now();
        if (message != last_error || now - last_logged >= std::chrono::minutes(1)) {
          logLine({{"level", "error"}, {"event", "schedule_fire_failed"}, {"error", message}});
          last_error = message;
          last_logged = now;
        }
        continue;
      }
      last_error.clear();
      if (*fired > 0) logLine({{"level", "info"}, {"event", "schedules_fired"}, {"fires", *fired}});
    }
  }

  // Writes a response piece by piece, each piece under request_timeout: a
  // large body to a client that keeps reading is never cut off.
  template <class Body>
  asio::awaitable<bool> send(beast::tcp_stream& stream, http::response<Body>& response) {
    http::response_serializer<Body> serializer{response};
    serializer.limit(kStreamWriteBytes);
    while (!serializer.is_done()) {
      stream.expires_after(settings_.request_timeout);
      auto [ec, n] = co_await http::async_write_some(stream, serializer, kNoThrow);
      if (ec) co_return false;
    }
    co_return true;
  }

  // A response whose body is a source (HttpResponse::body_source): a
  // chunked head, then one chunk per read, each read on the worker pool (a
  // source reads files) and written under its own deadline before the next
  // read. A read error after the head closes the connection without the
  // last chunk.
  asio::awaitable<bool> sendSourced(beast::tcp_stream& stream, HttpResponse& out, unsigned version,
                                    bool keep_alive) {
    http::response<http::empty_body> head{static_cast<http::status>(out.status), version};
    if (!out.content_type.empty()) head.set(http::field::content_type, out.content_type);
    for (const auto& [k, v] : out.headers) head.set(k, v);
    head.chunked(true);
    head.keep_alive(keep_alive);
    http::response_serializer<http::empty_body> serializer{head};
    stream.expires_after(settings_.request_timeout);
    auto [herr, hn] = co_await http::async_write_header(stream, serializer, kNoThrow);
    if (herr) co_return false;
    auto buffer = std::make_shared<std::string>(kStreamWriteBytes, '\0');
    std::shared_ptr<sys::ByteSource> source = out.body_source;
    auto read_once = [source, buffer] { return source->read(buffer->data(), buffer->size()); };
    for (;;) {
      Result<std::size_t> got = co_await offLoop(pool_, read_once);
      if (!got) {
        logLine({{"level", "warn"}, {"event", "response_cut"}, {"error", got.error().message()}});
        co_return false;
      }
      stream.expires_after(settings_.request_timeout);
      if (*got == 0) {
        auto [werr, n] = co_await asio::async_write(stream, http::make_chunk_last(), kNoThrow);
        co_return !werr && keep_alive;
      }
      auto [werr, n] = co_await asio::async_write(
          stream, http::make_chunk(asio::buffer(buffer->data(), *got)), kNoThrow);
      if (werr) {
        logLine({{"level", "warn"}, {"event", "response_cut"}, {"error", werr.message()}});
        co_return false;
      }
    }
  }

  asio::awaitable<bool> sendResponse(beast::tcp_stream& stream, HttpResponse& out, unsigned version,
                                     bool keep_alive) {
    if (out.body_source) co_return co_await sendSourced(stream, out, version, keep_alive);
    http::response<http::string_body> res{static_cast<http::status>(out.status), version};
    if (!out.content_type.empty()) res.set(http::field::content_type, out.content_type);
    for (const auto& [k, v] : out.headers) res.set(k, v);
    res.keep_alive(keep_alive);
    res.body() = std::move(out.body);
    res.prepare_payload();
    co_return co_await send(stream, res) && keep_alive;
  }

  // One streaming execute: the handler runs on an execution thread and
  // hands NDJSON lines through a StreamQueue; the first lines send a chunked
  // 200 header, the lines queued since the last write go out as one chunk,
  // and the end is the last chunk. A request refused before anything
  // streamed gets an ordinary response. A client that goes away (its end of
  // the stream, a failed write, or no write taken within request_timeout)
  // cancels the command. Returns (status, whether the exchange completed).
  asio::awaitable<std::pair<int, bool>> streamExchange(beast::tcp_stream& stream,
                                                       const HttpRequest& req, unsigned version,
                                                       bool keep_alive) {
    auto token = CancelToken::create();
    if (!token) {
      --executions_;
      co_return std::pair{503, false};
    }
    auto cancel = std::make_shared<CancelToken>(std::move(*token));
    auto queue = std::make_shared<StreamQueue>(ioc_);
    if (!queue->valid()) {
      --executions_;
      co_return std::pair{503, false};
    }
    // While the command runs silently, a write never fails: watch the socket
    // for the client's hang-up (POLLRDHUP: seen even behind bytes it sent
    // after its request) and cancel the command then. The watcher touches
    // the descriptor only while `watching` holds, which the exchange clears
    // (both on the loop's thread) before the connection can close.
    auto watching = std::make_shared<bool>(true);
    asio::co_spawn(
        ioc_,
        [this, fd = stream.socket().native_handle(), cancel, watching]() -> asio::awaitable<void> {
          asio::steady_timer timer(ioc_);
          while (*watching) {
            timer.expires_after(kHangupPoll);
            co_await timer.async_wait(kNoThrow);
            if (!*watching) co_return;
            pollfd p{fd, POLLRDHUP, 0};
            if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
              cancel->cancel();
              co_return;
            }
          }
        },
        asio::detached);
    asio::post(exec_pool_, [this, queue, cancel, req] {
      yieldToTheLoop();
      HttpResponse end = api_.handleStreaming(
          req, [&](std::string line) { queue->push(StreamLine{std::move(line) + "\n"}); },
          cancel.get());
      --executions_;  // the command has ended; its answer may still be in the queue
      queue->push(StreamEnd{std::move(end)});
    });
    auto outcome = co_await streamLines(stream, version, keep_alive, *queue);
    *watching = false;
    if (!outcome.second) {
      queue->close();
      cancel->cancel();
    }
    co_return outcome;
  }

  asio::awaitable<std::pair<int, bool>> streamLines(beast::tcp_stream& stream, unsigned version,
                                                    bool keep_alive, StreamQueue& queue) {
    bool header_sent = false;
    http::response<http::empty_body> head{http::status::ok, version};
    head.set(http::field::content_type, "application/x-ndjson");
    head.chunked(true);
    head.keep_alive(keep_alive);
    http::response_serializer<http::empty_body> serializer{head};
    for (;;) {
      auto events = queue.take();
      if (events.empty()) {
        co_await queue.wait();
        continue;
      }
      // The lines go out as chunks of at most kStreamWriteBytes (a longer
      // line alone), written from where they lie (no copy on the loop's
      // thread), each under its own deadline.
      std::vector<std::vector<asio::const_buffer>> chunks;
      std::size_t in_last = 0;
      std::optional<HttpResponse> end;
      for (auto& event : events) {
        if (auto* line = std::get_if<StreamLine>(&event)) {
          if (chunks.empty() || in_last + line->text.size() > kStreamWriteBytes) {
            chunks.emplace_back();
            in_last = 0;
          }
          chunks.back().push_back(asio::buffer(line->text));
          in_last += line->text.size();
        } else {
          end = std::move(std::get<StreamEnd>(event).response);
        }
      }
      for (const auto& chunk : chunks) {
        stream.expires_after(settings_.request_timeout);
        if (!header_sent) {
          header_sent = true;
          auto [werr, n] = co_await http::async_write_header(stream, serializer, kNoThrow);
          if (werr) co_return std::pair{499, false};
        }
        auto [werr, n] = co_await asio::async_write(stream, http::make_chunk(chunk), kNoThrow);
        if (werr) co_return std::pair{499, false};
      }
      if (!end) {
        queue.recycle(std::move(events));
        continue;
      }
      if (header_sent) {
        stream.expires_after(settings_.request_timeout);
        auto [werr, n] = co_await asio::async_write(stream, http::make_chunk_last(), kNoThrow);
        co_return std::pair{200, !werr};
      }
      const int status = end->status;
      const bool sent = co_await sendResponse(stream, *end, version, keep_alive);
      co_return std::pair{status, sent || !keep_alive};
    }
  }

  // Reads until `buffer` holds a whole request head (the parser then reads
  // it from there), to see the head's raw bytes: a header folded over lines
  // (obs-fold) would be unfolded by the parser, and a folded Authorization
  // must never authenticate, so a folded head is refused (RFC 9112 5.2).
  asio::awaitable<beast::error_code> readHead(beast::tcp_stream& stream,
                                              beast::flat_buffer& buffer) {
    for (;;) {
      const auto data = buffer.data();
      const std::string_view bytes(static_cast<const char*>(data.data()), data.size());
      if (const auto end = bytes.find("\r\n\r\n"); end != std::string_view::npos) {
        const std::string_view head = bytes.substr(0, end + 2);
        if (head.find("\r\n ") != std::string_view::npos ||
            head.find("\r\n\t") != std::string_view::npos)
          co_return kFoldedHead;
        co_return beast::error_code{};
      }
      if (bytes.size() > static_cast<std::size_t>(settings_.max_header_bytes))
        co_return make_error_code(http::error::header_limit);
      auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), kNoThrow);
      if (ec)
        co_return ec == asio::error::eof&& bytes.empty()
            ? make_error_code(http::error::end_of_stream)
            : ec;
      buffer.commit(n);
    }
  }

  // A request the parser refused: its answer, and the connection closes.
  static HttpResponse refusalFor(const beast::error_code& ec, std::int64_t max_body_bytes) {
    if (ec == http::error::body_limit)
      return errorResponse(
          413, "payload_too_large",
          "the request body is larger than " + std::to_string(max_body_bytes) + " bytes");
    if (ec == http::error::header_limit)
      return errorResponse(431, "bad_request", "the request headers are too large");
    if (ec == kFoldedHead)
      return errorResponse(400, "bad_request",
                           "malformed HTTP request: a header is folded over lines (obs-fold)");
    return errorResponse(400, "bad_request", "malformed HTTP request");
  }

  void logRequest(const HttpRequest& req, int status, std::chrono::steady_clock::time_point started,
                  bool streamed) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const std::string route =
        api_.routeLabel(std::string_view(req.target).substr(0, req.target.find('?')));
    api_.metrics().request(route, status, seconds);
    nlohmann::json line = {{"level", status >= 500 ? "error" : "info"},
                           {"event", "request"},
                           {"method", req.method},
                           {"route", route}};
    if (streamed) line["stream"] = true;
    line["status"] = status;
    line["ms"] = static_cast<std::int64_t>(seconds * 1000);
    logLine(line);
  }

  // Answers one parsed request; returns whether the connection stays open.
  asio::awaitable<bool> exchange(Connection& conn, const HttpRequest& req, unsigned version,
                                 bool keep_alive) {
    const auto started = std::chrono::steady_clock::now();
    conn.stream.expires_never();  // an execute runs as long as its own timeout
    const bool long_running = api_.runsCommand(req);
    // A slot is held while the command runs, not while its answer is
    // written to a client that may not read it.
    if (long_running && executions_.fetch_add(1) >= settings_.max_concurrent_executions) {
      --executions_;
      HttpResponse busy = errorResponse(503, "execution_unavailable",
                                        std::to_string(settings_.max_concurrent_executions) +
                                            " commands are running, the most this service runs at "
                                            "once (max_concurrent_executions); try again");
      logRequest(req, busy.status, started, false);
      co_return co_await sendResponse(conn.stream, busy, version, keep_alive && !stopping_);
    }
    ++inflight_;
    bool open = false;
    if (api_.wantsStream(req)) {
      const auto [status, sent] = co_await streamExchange(conn.stream, req, version, keep_alive);
      logRequest(req, status, started, true);
      open = sent && keep_alive && !stopping_;
    } else if (api_.needsNoToken(req)) {
      // Answered on the loop's thread: a health probe never waits for a
      // worker.
      HttpResponse out = api_.handle(req);
      logRequest(req, out.status, started, false);
      open = co_await sendResponse(conn.stream, out, version, keep_alive && !stopping_);
    } else {
      auto handle = [this, &req, long_running] {
        if (long_running) yieldToTheLoop();
        HttpResponse answer = api_.handle(req);
        if (long_running) --executions_;
        return answer;
      };
      // (Two statements: GCC miscompiles a co_await in either arm of ?:.)
      HttpResponse out;
      if (long_running) {
        out = co_await offLoop(exec_pool_, handle);
      } else {
        out = co_await offLoop(pool_, handle);
      }
      logRequest(req, out.status, started, false);
      open = co_await sendResponse(conn.stream, out, version, keep_alive && !stopping_);
    }
    if (--inflight_ == 0 && stopping_) ioc_.stop();
    co_return open;
  }

  asio::awaitable<void> session(std::shared_ptr<Connection> conn) {
    beast::tcp_stream& stream = conn->stream;
    beast::flat_buffer buffer;
    while (conn->counted && !stopping_) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(settings_.max_header_bytes));
      parser.body_limit(static_cast<std::uint64_t>(settings_.max_body_bytes));
      stream.expires_after(
          conn->authenticated
              ? settings_.request_timeout
              : std::min(settings_.request_timeout, settings_.unauthenticated_request_timeout));
      markIdle(*conn);
      beast::error_code ec = co_await readHead(stream, buffer);
      if (!ec)
        std::tie(ec, std::ignore) =
            co_await http::async_read_header(stream, buffer, parser, kNoThrow);
      // The token counts only from the head: a chunked body's trailer
      // fields, which the parser adds to the same fields, never
      // authenticate.
      std::string authorization;
      if (!ec) {
        if (auto it = parser.get().find(http::field::authorization); it != parser.get().end())
          authorization = std::string(it->value());
        HttpRequest head;
        head.authorization = authorization;
        // From a head with the token on, the request is in progress: its
        // body is never cut off to make room for another connection.
        if (api_.authorized(head)) {
          markAuthenticated(*conn);
          markBusy(*conn);
        }
      }
      if (!ec && !parser.is_done())
        std::tie(ec, std::ignore) = co_await http::async_read(stream, buffer, parser, kNoThrow);
      markBusy(*conn);
      if (!conn->counted || stopping_ || ec == http::error::end_of_stream ||
          ec == beast::error::timeout || ec == asio::error::eof ||
          ec == asio::error::connection_reset || ec == asio::error::operation_aborted)
        break;
      if (ec) {
        HttpResponse refused = refusalFor(ec, settings_.max_body_bytes);
        co_await sendResponse(stream, refused, 11, false);
        break;
      }
      auto request = parser.release();
      HttpRequest req;
      req.method = std::string(request.method_string());
      req.target = std::string(request.target());
      req.authorization = std::move(authorization);
      if (auto te = request.find(http::field::transfer_encoding);
          te != request.end() && !beast::iequals(te->value(), "chunked")) {
        // Only "chunked" is decoded; any other coding (gzip, chunked) would
        // hand the handler bytes it cannot read (RFC 9112: 501).
        HttpResponse refused = errorResponse(501, "bad_request",
                                             "Transfer-Encoding \"" + std::string(te->value()) +
                                                 "\" is not supported (only chunked)");
        co_await sendResponse(stream, refused, request.version(), false);
        break;
      }
      req.body = std::move(request.body());
      if (!api_.authorized(req) && !api_.needsNoToken(req)) {
        // Answered at once, on the loop, and the connection closes: a
        // client without the token never takes an execution slot, a
        // worker, or a connection that pipelines refusals it never reads.
        const auto started = std::chrono::steady_clock::now();
        HttpResponse refused = api_.handle(req);
        logRequest(req, refused.status, started, false);
        co_await sendResponse(stream, refused, request.version(), false);
        break;
      }
      if (!co_await exchange(*conn, req, request.version(), request.keep_alive())) break;
    }
    forget(*conn);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  const Settings& settings_;
  RequestHandler& api_;
  ExecutionEnvironment& env_;
  asio::io_context ioc_;
  // Requests that answer promptly (provision, files, listing, health).
  asio::thread_pool pool_{16};
  // Requests that run a command or program (RequestHandler::runsCommand): at most
  // max_concurrent_executions at once, each on a thread of its own, so they
  // never hold up pool_.
  asio::thread_pool exec_pool_;
  // The reaper and the schedule fire loop: a thread of their own, so that
  // requests filling the pools do not hold them up.
  asio::thread_pool background_{1};
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer reaper_timer_;
  asio::steady_timer schedule_timer_;
  asio::steady_timer accept_timer_;
  asio::steady_timer shutdown_timer_;
  std::atomic<bool> stopping_{false};
  // The loop's thread only.
  int inflight_ = 0;
  std::atomic<std::int64_t> executions_{0};  // running commands (any thread)
  std::int64_t connections_ = 0;
  std::int64_t unauthenticated_ = 0;
  std::list<Connection*> idle_unauthenticated_;
  std::list<Connection*> idle_authenticated_;
  std::unordered_set<Connection*> open_;
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::create(const Settings& settings,
                                                       RequestHandler& api,
                                                       ExecutionEnvironment& env) {
  // Connections, sandboxes and their pipes all hold descriptors: start with
  // as many as the process may have, never fewer than the connection bounds
  // need, in a table sized once, now (a table that grows under load stalls
  // every thread that opens a descriptor, the loop's accept() included).
  if (auto limit = sys::raiseOpenFileLimit(kWantedOpenFiles); limit) {
    if (*limit < static_cast<std::uint64_t>(settings.max_connections) + 256)
      logLine({{"level", "warning"},
               {"event", "file_limit_low"},
               {"open_files", *limit},
               {"max_connections", settings.max_connections}});
    if (auto reserved = sys::reserveDescriptorTable(*limit); !reserved)
      logLine({{"level", "warning"},
               {"event", "descriptor_table_not_reserved"},
               {"error", reserved.error().message()}});
  }
  auto server = std::make_unique<BeastServer>(settings, api, env);
  if (auto r = server->bind(); !r) return tl::unexpected(r.error());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace airlock::service
