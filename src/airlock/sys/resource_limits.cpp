#include "airlock/sys/resource_limits.h"

#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "airlock/sys/io.h"

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

}  // namespace airlock::sys
