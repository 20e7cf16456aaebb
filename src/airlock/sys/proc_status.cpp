#include "airlock/sys/proc_status.h"

#include <fcntl.h>

#include "airlock/sys/io.h"

namespace airlock::sys {

std::string procStatusField(std::string_view status, std::string_view name) {
  std::size_t at = 0;
  while (at < status.size()) {
    std::size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    const std::string_view line = status.substr(at, end - at);
    if (line.size() > name.size() && line.substr(0, name.size()) == name &&
        line[name.size()] == ':') {
      std::string_view value = line.substr(name.size() + 1);
      const std::size_t first = value.find_first_not_of(" \t");
      return first == std::string_view::npos ? std::string() : std::string(value.substr(first));
    }
    at = end + 1;
  }
  return "";
}

std::optional<std::string> readProcStatus(pid_t pid) {
  const std::string path =
      pid == 0 ? std::string("/proc/self/status") : "/proc/" + std::to_string(pid) + "/status";
  auto text = readFile(AT_FDCWD, path.c_str(), 1 << 16);
  if (!text) return std::nullopt;
  return std::move(*text);
}

}  // namespace airlock::sys
