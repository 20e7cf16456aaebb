#include "airlock/capability/broker/guest_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::capability {

Result<void> writeCapabilityFile(int capability_dir, std::string_view path,
                                 std::string_view contents, unsigned mode) {
  const std::string p(path);
  if (p.empty() || p[0] == '/' || p.find("..") != std::string::npos)
    return fail(ErrorCode::kExecutionUnavailable, "bad capability file path " + p);
  // Parent directories, one component at a time, never following symlinks.
  sys::UniqueFd dir(::fcntl(capability_dir, F_DUPFD_CLOEXEC, 3));
  std::size_t start = 0;
  for (std::size_t slash = p.find('/'); slash != std::string::npos; slash = p.find('/', start)) {
    const std::string part = p.substr(start, slash - start);
    if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      return failErrno(ErrorCode::kExecutionUnavailable, "mkdir " + part, errno);
    sys::UniqueFd next(
        ::openat(dir.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "open " + part, errno);
    dir = std::move(next);
    start = slash + 1;
  }
  const std::string name = p.substr(start);
  const std::string tmp = name + ".new";
  ::unlinkat(dir.get(), tmp.c_str(), 0);
  sys::UniqueFd fd(
      ::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "create " + p, errno);
  if (!sys::writeAll(fd.get(), contents.data(), contents.size()) || ::fchmod(fd.get(), mode) != 0 ||
      ::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "write " + p, errno);
  return {};
}

Result<void> installGuestFiles(int capability_dir) {
  for (const auto& f : guestFiles()) {
    if (auto r =
            writeCapabilityFile(capability_dir, f.path, f.contents, f.executable ? 0755 : 0644);
        !r)
      return r;
  }
  return {};
}

}  // namespace airlock::capability
