// A scripted HTTP/1.1 server on a loopback address for the registry client
// tests: one connection at a time (or, kConcurrent, each on its own thread,
// so that a handler may wait for another request), one request per
// connection (every response says Connection: close), GET only. Each request is recorded
// before its response is written, so a client that has its answer can
// already see the record. The handler runs on the server's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "airlock/sys/unique_fd.h"

namespace airlock::images::testing {

struct HttpRequest {
  std::string method;
  std::string path;                                          // the target before '?'
  std::string query;                                         // after '?', "" if none
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  // The first header named `name` (lower case), "" if none.
  std::string header(const std::string& name) const;
  bool hasHeader(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Content-Length to announce; -1: body.size(). A larger value with a
  // shorter body makes the server close mid-body (a cut transfer).
  long long content_length = -1;
};

class HttpTestServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  enum class Mode { kOneAtATime, kConcurrent };

  // Listens on ip:0 (a 127.0.0.0/8 address) and serves until destroyed.
  // ok() is false when the socket could not be set up. kConcurrent: the
  // destructor waits for every handler to return.
  HttpTestServer(const std::string& ip, Handler handler, Mode mode = Mode::kOneAtATime);
  ~HttpTestServer();
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  bool ok() const { return listener_.valid(); }
  std::uint16_t port() const { return port_; }
  // "ip:port" and "http://ip:port".
  std::string authority() const;
  std::string origin() const { return "http://" + authority(); }
  std::vector<HttpRequest> requests() const;

 private:
  void serve();
  void handle(int fd);

  std::string ip_;
  Handler handler_;
  Mode mode_;
  std::vector<std::thread> connections_;  // kConcurrent: the serving thread's only
  sys::UniqueFd listener_;
  sys::UniqueFd stop_read_, stop_write_;
  std::uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::vector<HttpRequest> requests_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace airlock::images::testing
