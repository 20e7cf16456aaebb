// Shared harness for red-team cases that drive the real `airlock` binary
// (code mode and egress live in the CLI): write a program, run the CLI as a
// child (optionally inside a pids cgroup the test owns), watch it from the
// host while it runs, and sweep whatever a crashed CLI left behind.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../sandbox/linux/linux_test_support.h"

namespace airlock::testing::redteam_cli {

using namespace std::chrono_literals;

inline void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

inline std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A value of /proc/<pid>/status ("Threads", "VmHWM", ...), or -1.
inline long statusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// A pids cgroup (v1 "pids" hierarchy or the v2 root) owned by the test, so a
// resource flood is bounded here and never reaches the host's pid_max.
class PidsCgroup {
 public:
  explicit PidsCgroup(long max) {
    for (const char* root : {"/sys/fs/cgroup/pids", "/sys/fs/cgroup"}) {
      if (::access((std::string(root) + "/cgroup.procs").c_str(), W_OK) != 0) continue;
      const std::string dir = std::string(root) + "/redteam-" + std::to_string(::getpid());
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) continue;
      if (::access((dir + "/pids.max").c_str(), W_OK) != 0) {
        ::rmdir(dir.c_str());
        continue;
      }
      writeText(dir + "/pids.max", std::to_string(max));
      path_ = dir;
      break;
    }
  }
  ~PidsCgroup() {
    if (path_.empty()) return;
    for (int i = 0; i < 200 && ::rmdir(path_.c_str()) != 0; ++i) std::this_thread::sleep_for(10ms);
  }
  bool valid() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CliRun {
  int wait_status = 0;
  std::string out;
  std::string err;
  bool signaled() const { return WIFSIGNALED(wait_status); }
  int exitCode() const { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }
};

// Runs `airlock ARGS...`; `cgroup` (may be empty) is joined before exec;
// `watch(pid)` is called every 20 ms while it runs.
inline CliRun runCli(const std::vector<std::string>& args, const std::string& work,
                     const std::string& cgroup = "",
                     const std::function<void(pid_t)>& watch = nullptr) {
  const std::string out_path = work + "/cli.out", err_path = work + "/cli.err";
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!cgroup.empty()) {
      int fd = ::open((cgroup + "/cgroup.procs").c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(120);
      ::close(fd);
    }
    int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    static std::string bin = AIRLOCK_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  CliRun r;
  for (;;) {
    pid_t w = ::waitpid(pid, &r.wait_status, WNOHANG);
    if (w == pid) break;
    if (watch) watch(pid);
    std::this_thread::sleep_for(20ms);
  }
  r.out = readText(out_path);
  r.err = readText(err_path);
  return r;
}

// A later CLI on the same state directory sweeps a sandbox a crashed CLI
// left behind (cgroups, lock, capability directory).
inline void sweep(const std::string& state_dir, const std::string& work) {
  (void)runCli({"run", "--state-dir", state_dir, "--", "/bin/true"}, work);
}

}  // namespace airlock::testing::redteam_cli
