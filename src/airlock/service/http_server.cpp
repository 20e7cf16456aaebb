#include "airlock/service/http_server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/as_tuple.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <vector>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <variant>

#include "airlock/core/json.h"

namespace airlock::service {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto kNoThrow = asio::experimental::as_tuple(asio::use_awaitable);

void logLine(const nlohmann::json& fields) {
  nlohmann::json line = {{"time", formatTimestamp(std::chrono::time_point_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now()))}};
  line.update(fields);
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  static std::mutex mu;
  std::lock_guard lk(mu);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

class BeastServer final : public HttpServer {
 public:
  BeastServer(const Settings& settings, Api& api, ExecutionEnvironment& env)
      : settings_(settings),
        api_(api),
        env_(env),
        pool_(static_cast<std::size_t>(settings.max_concurrent_executions)),
        acceptor_(ioc_),
        signals_(ioc_, SIGINT, SIGTERM),
        reaper_timer_(ioc_),
        schedule_timer_(ioc_) {}

  Result<void> bind() {
    const std::string& listen = settings_.listen;
    const auto colon = listen.rfind(':');
    std::string host = listen.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    beast::error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec) return fail(ErrorCode::kConfigurationError, "listen \"" + listen + "\": " + ec.message());
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(std::stoi(listen.substr(colon + 1))));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return fail(ErrorCode::kExecutionUnavailable, "cannot listen on " + listen + ": " + ec.message());
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
    logLine({{"level", "info"}, {"event", "listening"}, {"address", settings_.listen}, {"port", port()}});
    ioc_.run();
    // Shutdown: running commands ended with SERVICE_SHUTDOWN and their
    // responses went out (beginStop waited for them); now every environment
    // is destroyed.
    env_.shutdown();
    pool_.join();
    background_.join();
    api_.destroyAll();
    logLine({{"level", "info"}, {"event", "stopped"}});
  }

  void stop() override { asio::post(ioc_, [this] { beginStop(); }); }

 private:
  void beginStop() {
    if (stopping_.exchange(true)) return;
    beast::error_code ec;
    acceptor_.close(ec);
    signals_.cancel(ec);
    reaper_timer_.cancel();
    schedule_timer_.cancel();
    // Running commands end now (SERVICE_SHUTDOWN); the loop stops once the
    // last in-flight response is written (see session()).
    env_.shutdown();
    if (inflight_ == 0) ioc_.stop();
  }

  asio::awaitable<void> accept() {
    while (!stopping_) {
      auto [ec, socket] = co_await acceptor_.async_accept(kNoThrow);
      if (ec) {
        if (stopping_) co_return;
        continue;
      }
      asio::co_spawn(ioc_, session(beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }

  asio::awaitable<void> reaper() {
    while (!stopping_) {
      reaper_timer_.expires_after(settings_.reaper_interval);
      auto [ec] = co_await reaper_timer_.async_wait(kNoThrow);
      if (ec || stopping_) co_return;
      const int n = co_await asio::co_spawn(background_, [this]() -> asio::awaitable<int> { co_return api_.reap(); },
                                            asio::use_awaitable);
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
      auto fired = co_await asio::co_spawn(
          background_, [this]() -> asio::awaitable<Result<std::size_t>> { co_return api_.fireSchedules(); },
          asio::use_awaitable);
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

  template <class Body>
  asio::awaitable<bool> send(beast::tcp_stream& stream, http::response<Body>& response) {
    stream.expires_after(settings_.request_timeout);
    auto [ec, n] = co_await http::async_write(stream, response, kNoThrow);
    co_return !ec;
  }

  // One streaming execute: the handler runs on the pool and hands NDJSON
  // lines through a channel; the first line sends a chunked 200 header, each
  // line is a chunk, and the end is the last chunk. A request refused before
  // anything streamed gets an ordinary response. If the client goes away the
  // command is cancelled. Returns (status, whether the exchange completed).
  struct StreamLine {
    std::string text;
  };
  struct StreamEnd {
    HttpResponse response;
  };
  using StreamEvent = std::variant<StreamLine, StreamEnd>;
  using Channel = asio::experimental::concurrent_channel<void(beast::error_code, StreamEvent)>;

  asio::awaitable<std::pair<int, bool>> streamExchange(beast::tcp_stream& stream, const HttpRequest& req,
                                                       unsigned version, bool keep_alive) {
    auto token = CancelToken::create();
    if (!token) co_return std::pair{503, false};
    auto cancel = std::make_shared<CancelToken>(std::move(*token));
    // While the command runs silently, a write never fails: watch the socket
    // for the client's end-of-stream and cancel the command then.
    asio::co_spawn(
        ioc_,
        [sock = &stream.socket(), cancel]() -> asio::awaitable<void> {
          auto [ec] = co_await sock->async_wait(tcp::socket::wait_read, kNoThrow);
          if (ec) co_return;  // cancelled: the exchange ended first
          char byte;
          const ssize_t n = ::recv(sock->native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) cancel->cancel();
        },
        asio::detached);
    auto outcome = co_await streamLines(stream, req, version, keep_alive, cancel);
    beast::error_code ignored;
    stream.socket().cancel(ignored);  // ends the watcher
    co_return outcome;
  }

  asio::awaitable<std::pair<int, bool>> streamLines(beast::tcp_stream& stream, const HttpRequest& req,
                                                    unsigned version, bool keep_alive,
                                                    std::shared_ptr<CancelToken> cancel) {
    auto channel = std::make_shared<Channel>(ioc_, 64);
    asio::post(pool_, [this, channel, cancel, req] {
      bool gone = false;
      auto push = [&](StreamEvent event) {
        if (gone) return;
        try {
          channel->async_send(beast::error_code{}, std::move(event), asio::use_future).get();
        } catch (const std::exception&) {
          gone = true;  // the session closed the channel: the client is gone
          cancel->cancel();
        }
      };
      HttpResponse end = api_.handleStreaming(
          req, [&](std::string line) { push(StreamLine{std::move(line) + "\n"}); }, cancel.get());
      push(StreamEnd{std::move(end)});
    });

    bool header_sent = false;
    bool ok = true;
    int status = 200;
    http::response<http::empty_body> head{http::status::ok, version};
    head.set(http::field::content_type, "application/x-ndjson");
    head.chunked(true);
    head.keep_alive(keep_alive);
    http::response_serializer<http::empty_body> serializer{head};
    for (;;) {
      auto [ec, event] = co_await channel->async_receive(kNoThrow);
      if (ec) break;
      if (auto* line = std::get_if<StreamLine>(&event)) {
        if (!ok) continue;  // draining after a failed write
        if (!header_sent) {
          auto [werr, n] = co_await http::async_write_header(stream, serializer, kNoThrow);
          header_sent = true;
          if (werr) ok = false;
        }
        if (ok) {
          auto [werr, n] = co_await asio::async_write(stream, http::make_chunk(asio::buffer(line->text)), kNoThrow);
          if (werr) ok = false;
        }
        if (!ok) {
          cancel->cancel();
          channel->close();
          co_return std::pair{499, false};
        }
        continue;
      }
      HttpResponse& end = std::get<StreamEnd>(event).response;
      if (header_sent) {
        auto [werr, n] = co_await asio::async_write(stream, http::make_chunk_last(), kNoThrow);
        co_return std::pair{200, !werr};
      }
      status = end.status;
      http::response<http::string_body> res{static_cast<http::status>(end.status), version};
      if (!end.content_type.empty()) res.set(http::field::content_type, end.content_type);
      res.keep_alive(keep_alive);
      res.body() = std::move(end.body);
      res.prepare_payload();
      const bool sent = co_await send(stream, res);
      co_return std::pair{status, sent};
    }
    co_return std::pair{status, false};
  }

  asio::awaitable<void> session(beast::tcp_stream stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(settings_.max_header_bytes));
      parser.body_limit(static_cast<std::uint64_t>(settings_.max_body_bytes));
      stream.expires_after(settings_.request_timeout);
      auto [ec, n] = co_await http::async_read(stream, buffer, parser, kNoThrow);
      if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
          ec == asio::error::connection_reset || stopping_)
        break;
      if (ec) {
        HttpResponse err = ec == http::error::body_limit     ? errorResponse(413, "payload_too_large",
                                                                             "the request body is larger than " +
                                                                                 std::to_string(settings_.max_body_bytes) +
                                                                                 " bytes")
                           : ec == http::error::header_limit ? errorResponse(431, "bad_request",
                                                                             "the request headers are too large")
                                                             : errorResponse(400, "bad_request",
                                                                             "malformed HTTP request");
        http::response<http::string_body> res{static_cast<http::status>(err.status), 11};
        res.set(http::field::content_type, err.content_type);
        res.set(http::field::connection, "close");
        res.body() = std::move(err.body);
        res.prepare_payload();
        co_await send(stream, res);
        break;
      }
      auto request = parser.release();
      HttpRequest req;
      req.method = std::string(request.method_string());
      req.target = std::string(request.target());
      if (auto it = request.find(http::field::authorization); it != request.end())
        req.authorization = std::string(it->value());
      req.body = std::move(request.body());
      const bool keep_alive = request.keep_alive();

      const auto started = std::chrono::steady_clock::now();
      stream.expires_never();  // an execute runs as long as its own timeout
      if (api_.wantsStream(req)) {
        ++inflight_;
        const auto [status, sent] = co_await streamExchange(stream, req, request.version(), keep_alive);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        const std::string route = routeLabel(std::string_view(req.target).substr(0, req.target.find('?')));
        api_.metrics().request(route, status, seconds);
        logLine({{"level", status >= 500 ? "error" : "info"}, {"event", "request"}, {"method", req.method},
                 {"route", route}, {"stream", true}, {"status", status},
                 {"ms", static_cast<std::int64_t>(seconds * 1000)}});
        if (--inflight_ == 0 && stopping_) ioc_.stop();
        if (!sent || !keep_alive || stopping_) break;
        continue;
      }
      ++inflight_;  // only touched on the loop's thread
      HttpResponse out = co_await asio::co_spawn(
          pool_, [this, &req]() -> asio::awaitable<HttpResponse> { co_return api_.handle(req); },
          asio::use_awaitable);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const std::string route = routeLabel(std::string_view(req.target).substr(0, req.target.find('?')));
      api_.metrics().request(route, out.status, seconds);
      logLine({{"level", out.status >= 500 ? "error" : "info"},
               {"event", "request"},
               {"method", req.method},
               {"route", route},
               {"status", out.status},
               {"ms", static_cast<std::int64_t>(seconds * 1000)}});

      http::response<http::string_body> res{static_cast<http::status>(out.status), request.version()};
      if (!out.content_type.empty()) res.set(http::field::content_type, out.content_type);
      for (const auto& [k, v] : out.headers) res.set(k, v);
      res.keep_alive(keep_alive && !stopping_);
      res.body() = std::move(out.body);
      res.prepare_payload();
      const bool sent = co_await send(stream, res);
      if (--inflight_ == 0 && stopping_) ioc_.stop();
      if (!sent || !res.keep_alive()) break;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  const Settings& settings_;
  Api& api_;
  ExecutionEnvironment& env_;
  asio::io_context ioc_;
  asio::thread_pool pool_;
  // The reaper and the schedule fire loop: a thread of their own, so that
  // requests filling pool_ (long executes) do not hold them up.
  asio::thread_pool background_{1};
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer reaper_timer_;
  asio::steady_timer schedule_timer_;
  std::atomic<bool> stopping_{false};
  int inflight_ = 0;
};

}  // namespace

std::string routeLabel(std::string_view path) {
  // The route's template (api.h), with ids and names as {id} / {name}; any
  // path that is no route is "other", so that a client cannot mint label
  // values (metric series) by inventing paths.
  std::vector<std::string_view> seg;
  for (std::size_t i = 0; i < path.size();) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) seg.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  const std::size_t n = seg.size();
  auto is = [&](std::size_t k, std::string_view v) { return k < n && seg[k] == v; };
  if (n == 1 && (is(0, "healthz") || is(0, "metrics"))) return "/" + std::string(seg[0]);
  if (!is(0, "v1") || n < 2) return "other";
  if (is(1, "environments")) {
    if (n == 2) return "/v1/environments";
    if (n == 3) return "/v1/environments/{id}";
    static constexpr std::string_view kOps[] = {"execute", "files",     "list", "provenance",
                                                "artifacts", "code", "schedules"};
    for (std::string_view op : kOps) {
      if (n == 4 && is(3, op)) return "/v1/environments/{id}/" + std::string(op);
    }
    if (n == 5 && is(3, "schedules")) return "/v1/environments/{id}/schedules/{name}";
    return "other";
  }
  if (is(1, "runs") && n == 4 && is(3, "lease")) return "/v1/runs/{id}/lease";
  if (is(1, "artifacts")) {
    if (n == 2) return "/v1/artifacts";
    if (n == 3) return "/v1/artifacts/{id}";
    if (n == 4 && is(3, "content")) return "/v1/artifacts/{id}/content";
    return "other";
  }
  if (is(1, "tools")) {
    if (n == 2) return "/v1/tools";
    if (n == 3) return "/v1/tools/{name}";
    return "other";
  }
  if (is(1, "schedule-fires")) {
    if (n == 2) return "/v1/schedule-fires";
    if (n == 3 && is(2, "ack")) return "/v1/schedule-fires/ack";
  }
  return "other";
}

Result<std::unique_ptr<HttpServer>> HttpServer::create(const Settings& settings, Api& api,
                                                       ExecutionEnvironment& env) {
  auto server = std::make_unique<BeastServer>(settings, api, env);
  if (auto r = server->bind(); !r) return tl::unexpected(r.error());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace airlock::service
