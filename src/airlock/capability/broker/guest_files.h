// The guest library a sandbox's programs use to reach the capability channel
// (spec 001; docs/capabilities.md "Guest libraries"): the
// Python package airlock_cap and the `cap` command-line client. Compiled into
// the service from guest/ and written into each sandbox's capability
// directory, which the sandbox sees read-only at /run/airlock:
//   /run/airlock/python/airlock_cap/{__init__,wire,boot}.py   (PYTHONPATH)
//   /run/airlock/bin/cap                                      (executable)
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "airlock/core/error.h"

namespace airlock::capability {

struct GuestFile {
  std::string_view path;  // relative to the capability directory
  std::string_view contents;
  bool executable;
};

std::span<const GuestFile> guestFiles() noexcept;

// Inside the sandbox.
inline constexpr std::string_view kGuestPythonPath = "/run/airlock/python";
inline constexpr std::string_view kGuestCapCommand = "/run/airlock/bin/cap";
inline constexpr std::string_view kSocketInSandbox = "/run/airlock/cap.sock";
inline constexpr std::string_view kTokenFileInSandbox = "/run/airlock/token";

// Writes a file into the capability directory (an O_PATH directory fd),
// creating missing parent directories (0755); the file is replaced
// atomically (temporary name, then rename) with `mode`. Paths are relative
// and must not contain "..". Errors: ExecutionUnavailable.
Result<void> writeCapabilityFile(int capability_dir, std::string_view path,
                                 std::string_view contents, unsigned mode);

// Writes every guest file (0644; 0755 for executables).
Result<void> installGuestFiles(int capability_dir);

}  // namespace airlock::capability
