#include "http_test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>

#include "airlock/sys/io.h"

namespace airlock::images::testing {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string reasonFor(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 307:
      return "Temporary Redirect";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 500:
      return "Internal Server Error";
    default:
      return "Status";
  }
}

}  // namespace

std::string HttpRequest::header(const std::string& name) const {
  for (const auto& [n, v] : headers)
    if (n == name) return v;
  return "";
}

bool HttpRequest::hasHeader(const std::string& name) const {
  for (const auto& h : headers)
    if (h.first == name) return true;
  return false;
}

HttpTestServer::HttpTestServer(const std::string& ip, Handler handler, Mode mode)
    : ip_(ip), handler_(std::move(handler)), mode_(mode) {
  sys::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (!fd.valid() || ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1 ||
      ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(fd.get(), 16) != 0)
    return;
  socklen_t len = sizeof sa;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) return;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return;
  stop_read_.reset(pipe_fds[0]);
  stop_write_.reset(pipe_fds[1]);
  port_ = ntohs(sa.sin_port);
  listener_ = std::move(fd);
  thread_ = std::thread([this] { serve(); });
}

HttpTestServer::~HttpTestServer() {
  if (thread_.joinable()) {
    const char b = 'x';
    (void)sys::writeAll(stop_write_.get(), &b, 1);
    thread_.join();
  }
  for (auto& t : connections_) t.join();
}

std::string HttpTestServer::authority() const {
  return ip_ + ":" + std::to_string(port_);
}

std::vector<HttpRequest> HttpTestServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void HttpTestServer::serve() {
  while (true) {
    pollfd p[2] = {{listener_.get(), POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
    if (sys::pollSome(p, 2, -1) < 0) return;
    if (p[1].revents != 0) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    sys::UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    if (mode_ == Mode::kOneAtATime) {
      handle(conn.get());
    } else {
      connections_.emplace_back([this, fd = std::move(conn)] { handle(fd.get()); });
    }
  }
}

void HttpTestServer::handle(int fd) {
  std::string head;
  char buf[4096];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
    pollfd p{fd, POLLIN, 0};
    if (sys::pollSome(&p, 1, 10000) <= 0) return;  // a client that sends nothing
    const ssize_t n = sys::readSome(fd, buf, sizeof buf);
    if (n <= 0) return;
    head.append(buf, static_cast<std::size_t>(n));
  }
  HttpRequest req;
  std::size_t line_end = head.find("\r\n");
  const std::string first = head.substr(0, line_end);
  const std::size_t sp1 = first.find(' ');
  const std::size_t sp2 = first.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) return;
  req.method = first.substr(0, sp1);
  const std::string target = first.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::size_t q = target.find('?');
  req.path = target.substr(0, q);
  if (q != std::string::npos) req.query = target.substr(q + 1);
  std::size_t pos = line_end + 2;
  while (pos < head.size()) {
    const std::size_t end = head.find("\r\n", pos);
    if (end == std::string::npos || end == pos) break;
    const std::string line = head.substr(pos, end - pos);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      req.headers.emplace_back(lower(line.substr(0, colon)), value);
    }
    pos = end + 2;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(req);
  }
  const HttpResponse resp = handler_(req);
  const long long length =
      resp.content_length >= 0 ? resp.content_length : static_cast<long long>(resp.body.size());
  std::string out = "HTTP/1.1 " + std::to_string(resp.status) + " " + reasonFor(resp.status) +
                    "\r\nContent-Length: " + std::to_string(length) + "\r\nConnection: close\r\n";
  for (const auto& [n, v] : resp.headers) out += n + ": " + v + "\r\n";
  out += "\r\n" + resp.body;
  (void)sys::sendAll(fd, out.data(), out.size());
}

}  // namespace airlock::images::testing
