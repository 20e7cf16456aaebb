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
#include "airlock/port/capability_channel.h"

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

// Writes every guest file through the sandbox's capability channel
// (CapabilityChannel::writeFile: the service's, 0644; 0755 for
// executables). Errors: ExecutionUnavailable.
Result<void> installGuestFiles(CapabilityChannel& channel);

}  // namespace airlock::capability
