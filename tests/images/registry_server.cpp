#include "registry_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"
#include "test_tree.h"

namespace airlock::images::testing {
namespace {

std::string registryBinary() {
  const char* env = std::getenv("AIRLOCK_DOCKER_REGISTRY");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/docker-registry";
}

// A loopback port nothing listens on right now.
std::uint16_t freePort() {
  sys::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return 0;
  socklen_t len = sizeof sa;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  return ntohs(sa.sin_port);
}

// fork + exec with a fixed environment, stdout to `out_fd` and stderr to
// `err_fd` (-1: the same as stdout; /dev/null when that is -1 too).
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int out_fd,
            bool die_with_parent, int err_fd = -1) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child: only syscalls from here on.
  if (die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
  }
  const int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) ::dup2(null, 0);
  const int out = out_fd >= 0 ? out_fd : null;
  const int err = err_fd >= 0 ? err_fd : out;
  if (out >= 0) ::dup2(out, 1);
  if (err >= 0) ::dup2(err, 2);
  ::execve(args[0], args.data(), envp.data());
  ::_exit(127);
}

int waitExit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int httpStatus(const std::string& ip, std::uint16_t port, const std::string& path) {
  sys::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (!fd.valid() || ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1 ||
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return 0;
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + ip + "\r\n\r\n";
  if (!sys::sendAll(fd.get(), req.data(), req.size())) return 0;
  std::string head;
  char buf[512];
  while (head.size() < 12) {
    pollfd p{fd.get(), POLLIN, 0};
    if (sys::pollSome(&p, 1, 5000) <= 0) return 0;
    const ssize_t n = sys::readSome(fd.get(), buf, sizeof buf);
    if (n <= 0) return 0;
    head.append(buf, static_cast<std::size_t>(n));
  }
  // "HTTP/1.1 200 OK"
  if (head.rfind("HTTP/1.", 0) != 0) return 0;
  return std::atoi(head.substr(9, 3).c_str());
}

Result<void> RegistryServer::start() {
  if (::access(registryBinary().c_str(), X_OK) != 0)
    return fail(ErrorCode::kConfigurationError,
                registryBinary() +
                    " not found (run scripts/bootstrap: Debian's docker-registry, "
                    "or set AIRLOCK_DOCKER_REGISTRY)");
  char tmpl[] = "/tmp/airlock-registry-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr)
    return failErrno(ErrorCode::kExecutionUnavailable, "mkdtemp", errno);
  dir_ = tmpl;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const std::uint16_t port = freePort();
    if (port == 0) return fail(ErrorCode::kExecutionUnavailable, "no free loopback port");
    bool taken = false;
    auto r = startOnce(port, &taken);
    if (r || !taken) return r;
  }
  return fail(ErrorCode::kExecutionUnavailable,
              "docker-registry: every port tried was taken; see " + dir_ + "/registry.log");
}

Result<void> RegistryServer::startOnce(std::uint16_t port, bool* port_taken) {
  const std::string config = dir_ + "/config.yml";
  const std::string log = dir_ + "/registry.log";
  {
    std::ofstream out(config, std::ios::trunc);
    out << "version: 0.1\n"
           "log:\n"
           "  level: info\n"
           "  accesslog:\n"
           "    disabled: true\n"
           "storage:\n"
           "  filesystem:\n"
           "    rootdirectory: "
        << dir_
        << "/storage\n"
           "  delete:\n"
           "    enabled: true\n"
           "  maintenance:\n"
           "    uploadpurging:\n"
           "      enabled: false\n"
           "http:\n"
           "  addr: 127.0.0.1:"
        << port << "\n";
    if (!out) return fail(ErrorCode::kExecutionUnavailable, "cannot write " + config);
  }
  sys::UniqueFd log_fd(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!log_fd.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "open " + log, errno);
  pid_ = spawn({registryBinary(), "serve", config}, {"PATH=/usr/bin:/bin", "HOME=" + dir_},
               log_fd.get(), true);
  if (pid_ < 0) return failErrno(ErrorCode::kExecutionUnavailable, "fork", errno);
  port_ = port;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (httpStatus("127.0.0.1", port, "/v2/") != 200) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      const std::string text = readWhole(log);
      *port_taken = text.find("address already in use") != std::string::npos;
      return fail(ErrorCode::kExecutionUnavailable,
                  "docker-registry exited at start; see " + log + ": " + text.substr(0, 2000));
    }
    if (std::chrono::steady_clock::now() > deadline)
      return fail(ErrorCode::kExecutionUnavailable,
                  "docker-registry did not answer GET /v2/ in 30 s; see " + log);
    // Polling for readiness (bounded by the deadline), not synchronization.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

void RegistryServer::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    waitExit(pid_);
    pid_ = -1;
  }
  if (!dir_.empty()) {
    const int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      workspace::testing::removeContents(fd);
      ::close(fd);
    }
    ::rmdir(dir_.c_str());
    dir_.clear();
  }
}

namespace {

std::string readFromStart(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  off_t offset = 0;
  while ((n = sys::preadSome(fd, buf, sizeof buf, offset)) > 0) {
    text.append(buf, static_cast<std::size_t>(n));
    offset += n;
  }
  return text;
}

sys::UniqueFd anonymousFile() {
  char tmpl[] = "/tmp/airlock-tool-out-XXXXXX";
  sys::UniqueFd fd(::mkostemp(tmpl, O_CLOEXEC));
  if (fd.valid()) ::unlink(tmpl);
  return fd;
}

}  // namespace

ToolRun runTool(const std::vector<std::string>& argv, const std::string& home) {
  ToolRun run;
  sys::UniqueFd out = anonymousFile();
  sys::UniqueFd err = anonymousFile();
  if (!out.valid() || !err.valid()) return run;
  const pid_t pid =
      spawn(argv, {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home, "XDG_RUNTIME_DIR=" + home},
            out.get(), true, err.get());
  if (pid < 0) return run;
  run.exit_code = waitExit(pid);
  run.output = readFromStart(out.get());
  run.errors = readFromStart(err.get());
  return run;
}

}  // namespace airlock::images::testing
