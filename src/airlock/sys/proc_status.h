// Fields of /proc/<pid>/status (proc(5)): "Name:\tvalue" lines.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace airlock::sys {

// The value of field `name` in the text of a status file, leading blanks
// removed; "" when the field is missing.
std::string procStatusField(std::string_view status, std::string_view name);

// /proc/<pid>/status of a process (`pid` 0: this one), or nullopt when it
// cannot be read (the process is gone).
std::optional<std::string> readProcStatus(pid_t pid);

}  // namespace airlock::sys
