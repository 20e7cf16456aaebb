// The sandbox mechanisms, once for every front end and setting (spec 000,
// the SandboxMechanism setting): their names, which of them isolate the
// kernel, and which are for development only. `airlock run`, `airlock mcp`,
// `airlock serve` and the settings file all read this table; the adapters
// that build a mechanism live on the execution side (execution/adapters.h).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace airlock {

// linux: the shared-kernel jail (the spec's development fallback, in the
// place of its "docker"); gvisor: a user-space kernel (runsc); microvm: a
// virtual machine per sandbox (not built yet); fake: executes nothing, for
// tests and demos.
enum class Mechanism { kLinux, kGvisor, kMicrovm, kFake };

struct MechanismTraits {
  Mechanism id;
  std::string_view name;  // as written in settings and flags
  bool isolates_kernel;   // gvisor, microvm
  // Never behind a production deployment: the kernel boundary is shared
  // (linux) or there is none (fake). Building one takes a
  // DevelopmentMechanismsAllowed token (execution/adapters.h).
  bool development_only;
};

// Every mechanism, in a fixed order, so that checks and tests iterate the
// complement of an allowed set instead of naming values (a mechanism added
// later inherits every refusal).
std::span<const MechanismTraits> mechanismTable() noexcept;
std::span<const Mechanism> allMechanisms() noexcept;
const MechanismTraits& traitsOf(Mechanism m) noexcept;
std::string_view mechanismName(Mechanism m) noexcept;
bool isolatesKernel(Mechanism m) noexcept;
bool developmentOnly(Mechanism m) noexcept;
// The mechanism of that name, or nullopt (names are exact, lower case).
std::optional<Mechanism> mechanismNamed(std::string_view name) noexcept;
// "linux, gvisor, microvm, fake": for messages that list the choices.
std::string mechanismNameList();

}  // namespace airlock
