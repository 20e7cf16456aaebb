// What a mechanism persists of each live sandbox, and the crash-recovery
// sweep that finds what a killed service left (spec 000, "Destroy":
// nothing of a sandbox outlives it, not even its service).
//
// Each live sandbox has one state file, <dir>/<environment id>.lock, held
// with flock(LOCK_EX) by the service for the sandbox's whole life. It is
// created unnamed (O_TMPFILE), its record written, locked, and only then
// linked into place, so a sweeper in another process never sees an unlocked
// state file of a live sandbox, nor a partial record. The record names the
// sandbox and its cgroup. Teardown removes the file last, after everything
// else of the sandbox is gone.
//
// The sweep (one per adapter start) treats as a killed service's leftovers:
//   1. every state file whose lock it can take (its owner is gone) and that
//      is still the file it locked (st_dev and st_ino of the path and the
//      fd agree): the cgroup of its record is killed and removed (retrying
//      a busy cgroup), the mechanism's other state removed, the file
//      unlinked;
//   2. every other entry of <dir> (no dot in its name) with no state file:
//      the mechanism's state of a sandbox whose provision crashed before its
//      state file was linked;
//   3. every cgroup named <prefix><id> with no state file: killed and
//      removed.
// Sandboxes of `live` (the sweeping process's own) are never touched.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/sandbox/host/cgroup.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::host {

struct SandboxStateRecord {
  std::string environment_id;
  std::string cgroup_name;  // a name the CgroupDriver attaches to; empty: none
};

// "airlock-sandbox-state v1\nid <id>\ncgroup <name>\n".
std::string encodeStateRecord(const SandboxStateRecord& record);
// Nullopt for anything else (an empty file, another version, a field with a
// newline); untrusted bytes.
std::optional<SandboxStateRecord> decodeStateRecord(std::string_view text);

// The held state file of one live sandbox. Move-only; the destructor
// removes it (unlink, then unlock), as remove() does.
class SandboxStateFile {
 public:
  SandboxStateFile() = default;
  SandboxStateFile(SandboxStateFile&& other) noexcept = default;
  SandboxStateFile& operator=(SandboxStateFile&& other) noexcept;
  SandboxStateFile(const SandboxStateFile&) = delete;
  SandboxStateFile& operator=(const SandboxStateFile&) = delete;
  ~SandboxStateFile() { remove(); }

  // Creates <dir>/<record.environment_id>.lock as described above.
  // ExecutionUnavailable (with errno) when the directory cannot hold it or
  // the name exists.
  static Result<SandboxStateFile> create(const std::string& dir, const SandboxStateRecord& record);

  void remove() noexcept;
  bool held() const noexcept { return fd_.valid(); }
  const std::string& path() const noexcept { return path_; }

 private:
  sys::UniqueFd fd_;
  std::string path_;
};

// Kills what is left in `cgroup` and removes it. A cgroup whose processes
// were just killed stays busy (EBUSY) until the kernel has finished them,
// and an orphan's init must first be reaped by whoever inherited it: retry
// for up to two seconds, killing again each time, before giving up (the
// next sweep tries again).
void killAndRemove(Cgroup& cgroup) noexcept;

struct OrphanSweep {
  std::string dir;                // where the state files are
  CgroupDriver* cgroups;          // the adapter's driver (borrowed)
  std::string cgroup_prefix;      // the names of the cgroups this service creates
  std::vector<std::string> live;  // environment ids of the sweeper's own sandboxes
  // Removes a sandbox's state besides its cgroup and state file (its
  // directories, mounts): called with the environment id of steps 1 and 2.
  std::function<void(const std::string& environment_id)> remove_state;
};

// The sweep described above. What cannot be removed now stays for the next
// sweep; nothing here fails.
void sweepOrphans(const OrphanSweep& sweep);

}  // namespace airlock::host
