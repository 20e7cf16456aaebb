#include "airlock/sys/mountinfo.h"

#include <algorithm>

namespace airlock::sys {
namespace {

std::vector<std::string_view> fields(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(' ', at), text.size());
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace

std::vector<MountinfoEntry> parseMountinfo(std::string_view text) {
  std::vector<MountinfoEntry> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    const std::size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const auto before = fields(line.substr(0, dash));
    const auto after = fields(line.substr(dash + 3));
    if (before.size() < 5 || after.size() < 3) continue;
    out.push_back(
        MountinfoEntry{std::string(before[4]), std::string(after[0]), std::string(after[2])});
  }
  return out;
}

}  // namespace airlock::sys
