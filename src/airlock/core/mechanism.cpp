#include "airlock/core/mechanism.h"

#include <array>

namespace airlock {
namespace {

constexpr std::array<MechanismTraits, 4> kTable = {{
    {Mechanism::kLinux, "linux", false, true},
    {Mechanism::kGvisor, "gvisor", true, false},
    {Mechanism::kMicrovm, "microvm", true, false},
    {Mechanism::kFake, "fake", false, true},
}};
constexpr std::array<Mechanism, kTable.size()> kIds = {kTable[0].id, kTable[1].id, kTable[2].id,
                                                       kTable[3].id};

}  // namespace

std::span<const MechanismTraits> mechanismTable() noexcept {
  return kTable;
}
std::span<const Mechanism> allMechanisms() noexcept {
  return kIds;
}
const MechanismTraits& traitsOf(Mechanism m) noexcept {
  for (const auto& t : kTable)
    if (t.id == m) return t;
  return kTable[0];  // unreachable: the table lists every enumerator
}
std::string_view mechanismName(Mechanism m) noexcept {
  return traitsOf(m).name;
}
bool isolatesKernel(Mechanism m) noexcept {
  return traitsOf(m).isolates_kernel;
}
bool developmentOnly(Mechanism m) noexcept {
  return traitsOf(m).development_only;
}
std::optional<Mechanism> mechanismNamed(std::string_view name) noexcept {
  for (const auto& t : kTable)
    if (t.name == name) return t.id;
  return std::nullopt;
}
std::string mechanismNameList() {
  std::string out;
  for (const auto& t : kTable) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

}  // namespace airlock
