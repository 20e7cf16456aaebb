// The service's start-up resource settings: the open-file limit and the
// descriptor table reserved once, before the service's threads need it.
#include "airlock/sys/resource_limits.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace airlock::sys {
namespace {

// "FDSize" of /proc/self/status: the slots of the descriptor table.
std::uint64_t tableSlots() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("FDSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10);
  return 0;
}

int openDescriptors() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (d != nullptr && ::readdir(d) != nullptr) ++n;
  if (d != nullptr) ::closedir(d);
  return n;
}

// Runs `body` in a child process (which may change its own limits) and
// returns its exit status: 0 when every check in it held.
template <class F>
int inChild(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = -1;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(ReserveDescriptorTable, GrowsTheTableOnceAndLeavesNoDescriptorOpen) {
  const int code = inChild([] {
    const rlimit lim{8192, 8192};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 1;
    if (tableSlots() >= 8192) return 2;  // nothing to prove: already that large
    const int before = openDescriptors();
    auto slots = reserveDescriptorTable(8192);
    if (!slots) return 3;
    if (*slots < 8192 || tableSlots() < 8192) return 4;
    if (openDescriptors() != before) return 5;
    return 0;
  });
  EXPECT_EQ(code, 0) << "1 setrlimit, 2 table already large, 3 error, 4 table not grown, "
                        "5 a descriptor left open";
}

TEST(ReserveDescriptorTable, NeverPassesTheSoftLimit) {
  const int code = inChild([] {
    const rlimit lim{1024, 1024};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 1;
    auto slots = reserveDescriptorTable(std::uint64_t{1} << 30);
    if (!slots) return 2;
    if (tableSlots() > 1024) return 3;
    return 0;
  });
  EXPECT_EQ(code, 0) << "1 setrlimit, 2 error, 3 the table passed the soft limit";
}

// A descriptor already open at the top slot is never replaced.
TEST(ReserveDescriptorTable, KeepsADescriptorThatHoldsTheTopSlot) {
  const int code = inChild([] {
    const rlimit lim{2048, 2048};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 1;
    int p[2];
    if (::pipe(p) != 0 || ::dup2(p[1], 2047) != 2047) return 2;
    if (!reserveDescriptorTable(2048)) return 3;
    if (::write(2047, "x", 1) != 1) return 4;
    char c = 0;
    if (::read(p[0], &c, 1) != 1 || c != 'x') return 5;
    return 0;
  });
  EXPECT_EQ(code, 0) << "1 setrlimit, 2 pipe, 3 error, 4/5 the descriptor at the top was replaced";
}

}  // namespace
}  // namespace airlock::sys
