#include "airlock/sys/resource_limits.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "airlock/sys/io.h"
#include "airlock/sys/proc_status.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::sys {

Result<std::uint64_t> raiseOpenFileLimit(std::uint64_t want) {
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "getrlimit(RLIMIT_NOFILE)", errno);
  if (now.rlim_cur >= want) return static_cast<std::uint64_t>(now.rlim_cur);
  if (now.rlim_max < want) {
    // Past the hard limit: only a process with CAP_SYS_RESOURCE may, and
    // never past nr_open.
    std::uint64_t nr_open = now.rlim_max;
    if (auto text = readFile(AT_FDCWD, "/proc/sys/fs/nr_open", 64))
      nr_open = std::strtoull(text->c_str(), nullptr, 10);
    const rlimit raised{static_cast<rlim_t>(std::min<std::uint64_t>(want, nr_open)),
                        static_cast<rlim_t>(std::min<std::uint64_t>(want, nr_open))};
    if (raised.rlim_max > now.rlim_max && ::setrlimit(RLIMIT_NOFILE, &raised) == 0)
      return static_cast<std::uint64_t>(raised.rlim_cur);
  }
  const rlimit soft{static_cast<rlim_t>(std::min<std::uint64_t>(want, now.rlim_max)), now.rlim_max};
  if (::setrlimit(RLIMIT_NOFILE, &soft) == 0) return static_cast<std::uint64_t>(soft.rlim_cur);
  return static_cast<std::uint64_t>(now.rlim_cur);
}

Result<std::uint64_t> reserveDescriptorTable(std::uint64_t slots) {
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "getrlimit(RLIMIT_NOFILE)", errno);
  const std::uint64_t want = std::min<std::uint64_t>(slots, now.rlim_cur);
  if (want == 0) return std::uint64_t{0};
  // A descriptor at the highest slot makes the kernel size the table for
  // it. F_DUPFD takes the lowest free slot at or above it, never one in use.
  UniqueFd probe(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!probe.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "open /dev/null", errno);
  const int top = ::fcntl(probe.get(), F_DUPFD_CLOEXEC, static_cast<int>(want - 1));
  if (top < 0 && errno != EMFILE)
    return failErrno(ErrorCode::kExecutionUnavailable,
                     "fcntl(F_DUPFD) to descriptor " + std::to_string(want - 1), errno);
  if (top >= 0) ::close(top);
  auto status = readProcStatus(0);
  if (!status) return want;
  const std::string size = procStatusField(*status, "FDSize");
  if (size.empty()) return want;
  return std::strtoull(size.c_str(), nullptr, 10);
}

}  // namespace airlock::sys
