#include "test_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace airlock::workspace::testing {

TempDir::TempDir() {
  char tmpl[] = "/tmp/airlock-ws-test-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
  fd_ = sys::UniqueFd(::open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd_.valid()) throw std::runtime_error("open temp dir failed");
}

TempDir::~TempDir() {
  removeContents(fd_.get());
  fd_.reset();
  ::rmdir(path_.c_str());
}

namespace {

bool listNames(int dirfd, std::vector<std::string>* names) {
  int dup = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return false;
  DIR* dir = ::fdopendir(dup);
  if (dir == nullptr) {
    ::close(dup);
    return false;
  }
  names->clear();
  while (struct dirent* ent = ::readdir(dir)) {
    if (std::strcmp(ent->d_name, ".") == 0 || std::strcmp(ent->d_name, "..") == 0) continue;
    names->emplace_back(ent->d_name);
  }
  ::closedir(dir);
  return true;
}

}  // namespace

bool removeContents(int dirfd) {
  unsigned long counter = 0;
  std::vector<std::string> names;
  for (;;) {
    if (!listNames(dirfd, &names)) return false;
    if (names.empty()) return true;
    for (const auto& name : names) {
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISDIR(st.st_mode)) {
        ::unlinkat(dirfd, name.c_str(), 0);
        continue;
      }
      int child = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) return false;
      ::fchmod(child, 0700);
      std::vector<std::string> inner;
      if (!listNames(child, &inner)) {
        ::close(child);
        return false;
      }
      for (const auto& in : inner) {
        std::string moved = ".rm-" + std::to_string(counter++);
        ::renameat(child, in.c_str(), dirfd, moved.c_str());
      }
      ::close(child);
      ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
    }
  }
}

bool writeFileAt(int dirfd, const std::string& rel, std::string_view bytes, mode_t mode) {
  int fd =
      ::openat(dirfd, rel.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return false;
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  return ok;
}

bool readFileAt(int dirfd, const std::string& rel, std::string* out) {
  int fd = ::openat(dirfd, rel.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  out->clear();
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out->append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return n == 0;
}

bool mkdirs(int dirfd, const std::string& rel) {
  std::size_t pos = 0;
  while (pos <= rel.size()) {
    std::size_t slash = rel.find('/', pos);
    if (slash == std::string::npos) slash = rel.size();
    std::string prefix = rel.substr(0, slash);
    if (::mkdirat(dirfd, prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
    pos = slash + 1;
  }
  return true;
}

bool symlinkAt(int dirfd, const std::string& target, const std::string& rel) {
  return ::symlinkat(target.c_str(), dirfd, rel.c_str()) == 0;
}

std::string fdPath(int fd) {
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  char buf[8192];
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n < 0) return {};
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

}  // namespace airlock::workspace::testing
