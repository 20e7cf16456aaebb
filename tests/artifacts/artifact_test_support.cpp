#include "artifact_test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "airlock/sys/sha256.h"

namespace airlock::artifacts::testing {

TenantId tenant(const std::string& name) {
  return TenantId::parse(name).value();
}

Timestamp at(std::int64_t unix_ms) {
  return Timestamp(std::chrono::milliseconds(unix_ms));
}

ArtifactMetadata metadataFor(const std::string& bytes, const TenantId& tenant_id,
                             Timestamp created) {
  return ArtifactMetadata{tenant_id,
                          std::string("run-1"),
                          ArtifactOrigin::kSandboxExport,
                          "report.txt",
                          "text/plain",
                          static_cast<std::int64_t>(bytes.size()),
                          sys::sha256Hex(bytes),
                          TrustLevel::kExternalUntrusted,
                          created,
                          created + std::chrono::hours(24 * 30)};
}

std::string randomBytes(std::size_t size, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(gen() & 0xff);
  return out;
}

Result<std::size_t> CountingSource::read(char* buffer, std::size_t size) {
  ++reads_;
  if (fail_after_ && offset_ >= *fail_after_)
    return fail(ErrorCode::kExecutionUnavailable, "producer cancelled");
  std::size_t n = std::min({size, chunk_, bytes_.size() - offset_});
  std::memcpy(buffer, bytes_.data() + offset_, n);
  offset_ += n;
  return n;
}

namespace {
void walk(int dirfd, const std::string& prefix, std::map<std::string, std::string>& out) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = ::fdopendir(fd);
  if (!dir) return;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  for (const auto& name : names) {
    const std::string path = prefix.empty() ? name : prefix + "/" + name;
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      out[path] = "d";
      int sub = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        walk(sub, path, out);
        ::close(sub);
      }
    } else if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = ::readlinkat(dirfd, name.c_str(), target, sizeof target);
      out[path] = "l:" + std::string(target, n > 0 ? static_cast<std::size_t>(n) : 0);
    } else {
      int f = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      sys::Sha256 h;
      char buf[65536];
      ssize_t n;
      while (f >= 0 && (n = ::read(f, buf, sizeof buf)) > 0) h.update(buf, static_cast<size_t>(n));
      if (f >= 0) ::close(f);
      out[path] = "f:" + h.finishHex();
    }
  }
  ::closedir(dir);
}
}  // namespace

std::map<std::string, std::string> treeOf(int dirfd) {
  std::map<std::string, std::string> out;
  walk(dirfd, "", out);
  return out;
}

}  // namespace airlock::artifacts::testing
