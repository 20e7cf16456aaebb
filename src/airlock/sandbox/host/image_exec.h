// argv[0] resolution for a command's main process, the same in every
// mechanism (spec 000, "sandbox.run_command": argv[0] is resolved on the
// image's PATH, never in the workspace): a name with a slash is executed as
// given; any other name only from the image directories kImagePath, in
// order, whatever PATH the command's environment holds.
//
// For the child between fork/clone and exec: no allocation, no lock, only
// syscalls (execve, write, _exit) and stack buffers. Header-only so the
// static in-sandbox shim (gvisor) compiles it without the host libraries.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace airlock::host {

inline constexpr const char* kImagePath[] = {"/usr/local/bin", "/usr/bin", "/bin"};

// execve of argv[0] resolved as above, with `envp`. Returns only when
// nothing could be executed, with the errno to report: the first error other
// than ENOENT/ENOTDIR, else EACCES when a directory held the name but it was
// not executable, else ENOENT (also for a name too long for a path).
inline int execFromImagePath(char* const argv[], char* const envp[]) noexcept {
  const char* name = argv[0];
  std::size_t name_len = 0;
  bool has_slash = false;
  for (const char* c = name; *c != '\0'; ++c, ++name_len) has_slash |= (*c == '/');
  if (has_slash) {
    ::execve(name, argv, envp);
    return errno;
  }
  char path[4096];
  bool saw_eacces = false;
  for (const char* dir : kImagePath) {
    const std::size_t dir_len = std::strlen(dir);
    if (dir_len + 1 + name_len + 1 > sizeof path) break;
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result): the name and its NUL follow
    std::memcpy(path, dir, dir_len);
    path[dir_len] = '/';
    std::memcpy(path + dir_len + 1, name, name_len + 1);
    ::execve(path, argv, envp);
    if (errno == EACCES)
      saw_eacces = true;
    else if (errno != ENOENT && errno != ENOTDIR)
      return errno;
  }
  return saw_eacces ? EACCES : ENOENT;
}

// The text of an exec errno without strerror (which may allocate).
inline const char* execErrorText(int err) noexcept {
  switch (err) {
    case ENOENT:
      return "No such file or directory";
    case EACCES:
      return "Permission denied";
    case ENOEXEC:
      return "Exec format error";
    case ENOTDIR:
      return "Not a directory";
    case E2BIG:
      return "Argument list too long";
    case ENOMEM:
      return "Out of memory";
    case ELOOP:
      return "Too many levels of symbolic links";
    case ETXTBSY:
      return "Text file busy";
    case EPERM:
      return "Operation not permitted";
    case ENAMETOOLONG:
      return "File name too long";
    default:
      return "exec failed";
  }
}

// execFromImagePath, and when it returns: "airlock: cannot execute '<argv0>':
// <why>" on fd 2 and exit 127 (not found) or 126 (found, not executable),
// the shell's codes.
[[noreturn]] inline void execFromImagePathOrExit(char* const argv[], char* const envp[]) noexcept {
  const int err = execFromImagePath(argv, envp);
  const char* parts[] = {"airlock: cannot execute '", argv[0], "': ", execErrorText(err), "\n"};
  for (const char* s : parts) {
    std::size_t left = std::strlen(s);
    while (left > 0) {
      const ssize_t n = ::write(2, s, left);
      if (n <= 0) break;  // stderr gone: the exit code still tells
      s += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  ::_exit(err == ENOENT ? 127 : 126);
}

}  // namespace airlock::host
