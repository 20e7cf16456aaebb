// Test support: `airlock serve` as a child process, and an HTTP client
// (libcurl) for it. The child listens on 127.0.0.1 port 0; its port is read
// from the "listening" log line on its stderr. Everything it logs is kept
// for assertions. The destructor stops a child that still runs: SIGTERM,
// so that it destroys its sandboxes (a runsc sandbox outlives a killed
// service), and SIGKILL if it has not stopped within 60 s.
#pragma once

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace airlock::testing {

struct HttpReply {
  long status = 0;  // 0: no response (connection failed)
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

class ServeProcess {
 public:
  // env: the child's whole environment (nothing is inherited); args: after
  // `serve` (e.g. {"--config", path}).
  explicit ServeProcess(std::vector<std::string> env, std::string binary = AIRLOCK_BINARY,
                        std::vector<std::string> args = {}) {
    int err_pipe[2];
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string serve = "serve";
    std::vector<char*> argv = {binary.data(), serve.data()};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), envp.data()) != 0)
      pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(err_pipe[1]);
    err_fd_ = err_pipe[0];
    // stderr is drained all the time, by a thread of its own: a service whose
    // log pipe filled up would block in write(2) and stop answering (a test
    // that polls an endpoint in a loop writes a request line per poll).
    drainer_ = std::thread([this] { drain(); });
    // Wait for the listening line (or the child's exit).
    std::unique_lock lock(mu_);
    logged_.wait_for(lock, std::chrono::seconds(60), [this] { return port_ != 0 || log_closed_; });
  }
  ~ServeProcess() {
    if (pid_ > 0 && !signalAndWaitFor(SIGTERM, std::chrono::seconds(60))) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (drainer_.joinable()) drainer_.join();
    if (err_fd_ >= 0) ::close(err_fd_);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const {
    std::lock_guard lock(mu_);
    return port_;
  }
  pid_t pid() const { return pid_; }
  // Everything the child wrote to stderr so far.
  std::string log() const {
    std::lock_guard lock(mu_);
    return log_;
  }

  // Sends `sig` and waits up to `limit` for the exit: the wait status, or
  // nullopt when the child still runs then (it is left to the destructor).
  std::optional<int> signalAndWaitFor(int sig, std::chrono::milliseconds limit) {
    if (pid_ <= 0) return std::nullopt;
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    ::kill(pid_, sig);
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(limit.count()));
      ::close(pidfd);
      if (ready <= 0) return std::nullopt;
    }
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return std::nullopt;
    pid_ = -1;
    if (drainer_.joinable()) drainer_.join();
    return status;
  }

  // Sends `sig` and waits for the exit; returns the wait status.
  int signalAndWait(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    // The log is complete once every holder of the pipe has closed it.
    if (drainer_.joinable()) drainer_.join();
    return status;
  }

  HttpReply request(const std::string& method, const std::string& path,
                    const std::string& body = "", const std::string& token = "",
                    long timeout_seconds = 120) const {
    HttpReply reply;
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return reply;
    const std::string url = "http://127.0.0.1:" + std::to_string(port()) + path;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // several threads use the client at once
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_seconds);
    struct curl_slist* headers = nullptr;
    if (!token.empty())
      headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    if (!body.empty() || method == "POST" || method == "PUT") {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    }
    curl_easy_setopt(
        curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t s, size_t n, void* out) {
          static_cast<std::string*>(out)->append(p, s * n);
          return s * n;
        });
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
    if (curl_easy_perform(curl) == CURLE_OK)
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return reply;
  }

 private:
  // Appends stderr to log_ until end of file; finds the listening port.
  void drain() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(err_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard lock(mu_);
      if (n <= 0) {
        log_closed_ = true;
        logged_.notify_all();
        return;
      }
      log_.append(buf, static_cast<std::size_t>(n));
      if (port_ == 0) {
        for (std::size_t start = 0, nl; (nl = log_.find('\n', start)) != std::string::npos;
             start = nl + 1) {
          auto line = nlohmann::json::parse(log_.substr(start, nl - start), nullptr, false);
          if (line.is_object() && line.value("event", "") == "listening")
            port_ = line.value("port", 0);
        }
      }
      logged_.notify_all();
    }
  }

  pid_t pid_ = -1;
  int err_fd_ = -1;
  mutable std::mutex mu_;  // guards port_, log_, log_closed_
  std::condition_variable logged_;
  int port_ = 0;
  std::string log_;
  bool log_closed_ = false;
  std::thread drainer_;
};

}  // namespace airlock::testing
