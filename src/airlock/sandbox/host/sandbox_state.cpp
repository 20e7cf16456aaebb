#include "airlock/sandbox/host/sandbox_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "airlock/sys/io.h"

namespace airlock::host {
namespace {

constexpr std::string_view kRecordHeader = "airlock-sandbox-state v1\n";
constexpr std::string_view kLockSuffix = ".lock";

bool safeField(const std::string& s) {
  return s.find('\n') == std::string::npos;
}

bool contains(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::vector<std::string> entriesOf(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

bool stateFileExists(const std::string& dir, const std::string& id) {
  return ::access((dir + "/" + id + std::string(kLockSuffix)).c_str(), F_OK) == 0;
}

// A record's cgroup, only when it is one of this service's (the file is
// read as untrusted bytes).
std::string cgroupOfRecord(const std::string& text, const OrphanSweep& sweep,
                           const std::string& id) {
  auto record = decodeStateRecord(text);
  if (!record || record->environment_id != id) return {};
  const std::string& name = record->cgroup_name;
  if (name.rfind(sweep.cgroup_prefix, 0) != 0 || name.size() == sweep.cgroup_prefix.size() ||
      name.find('/') != std::string::npos)
    return {};
  return name;
}

// Step 1 for one state file: true when its owner is alive (or it could not
// be told), so the sandbox is left alone.
bool sweepStateFile(const OrphanSweep& sweep, const std::string& id) {
  const std::string path = sweep.dir + "/" + id + std::string(kLockSuffix);
  auto fd = sys::openAt(AT_FDCWD, path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (!fd) return fd.error().sys_errno != ENOENT;
  if (::flock(fd->get(), LOCK_EX | LOCK_NB) != 0) return true;  // its owner is alive
  // Still the file we locked? (Its owner may have destroyed the sandbox and
  // unlinked it while we opened it.)
  struct stat by_path {};
  struct stat by_fd {};
  if (::stat(path.c_str(), &by_path) != 0 || ::fstat(fd->get(), &by_fd) != 0 ||
      by_path.st_ino != by_fd.st_ino || by_path.st_dev != by_fd.st_dev)
    return false;
  char buf[1024];
  const ssize_t n = sys::readFull(fd->get(), buf, sizeof buf);
  const std::string text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  if (const std::string cgroup = cgroupOfRecord(text, sweep, id);
      !cgroup.empty() && sweep.cgroups != nullptr)
    killAndRemove(*sweep.cgroups->attach(cgroup));
  if (sweep.remove_state) sweep.remove_state(id);
  ::unlink(path.c_str());
  return false;
}

}  // namespace

std::string encodeStateRecord(const SandboxStateRecord& record) {
  return std::string(kRecordHeader) + "id " + record.environment_id + "\ncgroup " +
         record.cgroup_name + "\n";
}

std::optional<SandboxStateRecord> decodeStateRecord(std::string_view text) {
  if (text.substr(0, kRecordHeader.size()) != kRecordHeader) return std::nullopt;
  text.remove_prefix(kRecordHeader.size());
  auto line = [&](std::string_view key) -> std::optional<std::string> {
    if (text.substr(0, key.size()) != key) return std::nullopt;
    const std::size_t eol = text.find('\n');
    if (eol == std::string_view::npos) return std::nullopt;
    std::string value(text.substr(key.size(), eol - key.size()));
    text.remove_prefix(eol + 1);
    return value;
  };
  auto id = line("id ");
  if (!id || id->empty()) return std::nullopt;
  auto cgroup = line("cgroup ");
  if (!cgroup || !text.empty()) return std::nullopt;
  return SandboxStateRecord{std::move(*id), std::move(*cgroup)};
}

SandboxStateFile& SandboxStateFile::operator=(SandboxStateFile&& other) noexcept {
  if (this != &other) {
    remove();
    fd_ = std::move(other.fd_);
    path_ = std::move(other.path_);
  }
  return *this;
}

Result<SandboxStateFile> SandboxStateFile::create(const std::string& dir,
                                                  const SandboxStateRecord& record) {
  if (record.environment_id.empty() || record.environment_id.find('/') != std::string::npos ||
      !safeField(record.environment_id) || !safeField(record.cgroup_name))
    return fail(ErrorCode::kExecutionUnavailable,
                "a sandbox state record needs an id without '/' and fields without newlines");
  SandboxStateFile file;
  const std::string path = dir + "/" + record.environment_id + std::string(kLockSuffix);
  auto fd = sys::openAt(AT_FDCWD, dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (!fd)
    return failErrno(ErrorCode::kExecutionUnavailable, "create a state file in " + dir,
                     fd.error().sys_errno);
  const std::string text = encodeStateRecord(record);
  if (!sys::writeAll(fd->get(), text.data(), text.size()))
    return failErrno(ErrorCode::kExecutionUnavailable, "write the state file " + path, errno);
  if (::flock(fd->get(), LOCK_EX | LOCK_NB) != 0 ||
      ::linkat(fd->get(), "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "lock " + path, errno);
  file.fd_ = std::move(*fd);
  file.path_ = path;
  return file;
}

void SandboxStateFile::remove() noexcept {
  if (!fd_.valid()) return;
  ::unlink(path_.c_str());
  fd_.reset();
}

void killAndRemove(Cgroup& cgroup) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    (void)cgroup.killAll();
    auto r = cgroup.remove();
    if (r || r.error().sys_errno != EBUSY || std::chrono::steady_clock::now() >= deadline) return;
    ::usleep(1000);
  }
}

void sweepOrphans(const OrphanSweep& sweep) {
  const std::vector<std::string> names = entriesOf(sweep.dir);
  std::vector<std::string> alive = sweep.live;
  for (const auto& name : names) {
    if (name.size() <= kLockSuffix.size() ||
        name.compare(name.size() - kLockSuffix.size(), kLockSuffix.size(), kLockSuffix) != 0)
      continue;
    const std::string id = name.substr(0, name.size() - kLockSuffix.size());
    if (contains(alive, id)) continue;
    if (sweepStateFile(sweep, id)) alive.push_back(id);
  }
  for (const auto& name : names) {
    if (name.find('.') != std::string::npos || contains(alive, name)) continue;
    if (stateFileExists(sweep.dir, name)) continue;  // just created by a peer
    if (sweep.remove_state) sweep.remove_state(name);
  }
  if (sweep.cgroups == nullptr) return;
  for (const auto& name : sweep.cgroups->list(sweep.cgroup_prefix)) {
    const std::string id = name.substr(sweep.cgroup_prefix.size());
    if (contains(alive, id) || stateFileExists(sweep.dir, id)) continue;
    killAndRemove(*sweep.cgroups->attach(name));
  }
}

}  // namespace airlock::host
