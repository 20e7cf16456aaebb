// Hermetic temporary trees for the workspace tests: a directory made with
// mkdtemp under /tmp, removed afterwards without following symlinks and
// without path strings (so trees deeper than PATH_MAX are removed too).
#pragma once

#include <sys/stat.h>

#include <string>
#include <string_view>

#include "airlock/sys/unique_fd.h"

namespace airlock::workspace::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }  // O_RDONLY | O_DIRECTORY
  std::string sub(std::string_view rel) const { return path_ + "/" + std::string(rel); }

 private:
  std::string path_;
  sys::UniqueFd fd_;
};

// Helpers that abort the current test (via ADD_FAILURE + return) are awkward
// across functions, so these return false and the caller ASSERTs.
bool writeFileAt(int dirfd, const std::string& rel, std::string_view bytes, mode_t mode = 0644);
bool readFileAt(int dirfd, const std::string& rel, std::string* out);
bool mkdirs(int dirfd, const std::string& rel);  // mkdir -p, relative to dirfd
bool symlinkAt(int dirfd, const std::string& target, const std::string& rel);

// Removes everything under dirfd, fd-relative, holding at most two fds
// whatever the depth (children of a subdirectory are moved up first).
bool removeContents(int dirfd);

// Where an fd really points, from /proc/self/fd.
std::string fdPath(int fd);

std::string sha256Hex(std::string_view bytes);

}  // namespace airlock::workspace::testing
