// Lines of /proc/<pid>/mountinfo (proc(5)): "id parent major:minor root
// mount_point options [optional fields...] - fstype source super_options".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace airlock::sys {

// The fields of one line that mounts are told apart by, as written: octal
// escapes such as "\040" for a space are kept (the caller unescapes what
// it opens).
struct MountinfoEntry {
  std::string mount_point;    // the fifth field
  std::string fstype;         // first after " - ": "cgroup2", "tmpfs", ...
  std::string super_options;  // third after " - ": "rw,memory", ...
};

// Every well-formed line of a mountinfo text, in order; a line without the
// " - " separator, or with too few fields on either side of it, is skipped.
// Fields are separated by runs of spaces.
std::vector<MountinfoEntry> parseMountinfo(std::string_view text);

}  // namespace airlock::sys
