// Where a sandbox's cgroup can be on this machine, for tests that look for
// what a mechanism left behind: every directory one or two levels below
// /sys/fs/cgroup (a v2 cgroup, or a v1 hierarchy and its top-level cgroups)
// and every directory below a v1 hierarchy's sandbox parent
// (<hierarchy>/airlock/<name>; see kSandboxCgroupParent in
// src/airlock/sandbox/host/cgroup.h). The sandbox parent itself is listed
// too: it goes with the last driver that holds it.
#pragma once

#include <dirent.h>

#include <string>
#include <vector>

namespace airlock::testing {

inline std::vector<std::string> subdirectories(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (e->d_type == DT_DIR && name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
  }
  return out;
}

// Full paths; a path's last component is the cgroup's name.
inline std::vector<std::string> sandboxCgroupCandidates() {
  constexpr const char* kParent = "airlock";
  std::vector<std::string> out;
  for (const auto& top : subdirectories("/sys/fs/cgroup")) {
    const std::string base = "/sys/fs/cgroup/" + top;
    out.push_back(base);
    for (const auto& child : subdirectories(base)) {
      out.push_back(base + "/" + child);
      if (child == kParent)
        for (const auto& sandbox : subdirectories(base + "/" + child))
          out.push_back(base + "/" + child + "/" + sandbox);
    }
  }
  return out;
}

inline std::string baseName(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

}  // namespace airlock::testing
