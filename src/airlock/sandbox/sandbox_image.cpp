#include "airlock/sandbox/sandbox_image.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "airlock/core/encoding.h"
#include "airlock/sandbox/mechanism_options.h"
#include "airlock/sandbox/sandbox_baseline.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock {
namespace {

// The link text of `path`, or nullopt.
std::optional<std::string> linkText(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

// The entry for host path `host` at sandbox path `path`, by what it is
// (not following a final link); nullopt for anything else or an absent one.
std::optional<ImageEntry> entryFor(const std::string& host, const std::string& path) {
  struct stat st {};
  if (::lstat(host.c_str(), &st) != 0) return std::nullopt;
  if (S_ISDIR(st.st_mode)) return ImageEntry{ImageEntry::Kind::kDirectory, path, host};
  if (S_ISREG(st.st_mode)) return ImageEntry{ImageEntry::Kind::kFile, path, host};
  if (S_ISLNK(st.st_mode)) {
    auto text = linkText(host);
    if (text) return ImageEntry{ImageEntry::Kind::kSymlink, path, *text};
  }
  return std::nullopt;
}

// The names in a directory, sorted; ExecutionUnavailable when it cannot be
// read.
Result<std::vector<std::string>> namesIn(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return failErrno(ErrorCode::kExecutionUnavailable, "read image " + dir, errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// A stat manifest of the tree under `path` (path, mode, size, mtime), in
// name order, at most 32 levels down.
void manifestTree(sys::Sha256& h, const std::string& path, int depth) {
  if (depth > 32) return;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    const std::string p = path + "/" + n;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    h.update(p + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
             std::to_string(st.st_mtim.tv_sec) + "\n");
    if (S_ISDIR(st.st_mode)) manifestTree(h, p, depth + 1);
  }
}

// "name version architecture" of every package in a dpkg status file,
// sorted.
std::vector<std::string> dpkgPackages(const std::string& status) {
  std::vector<std::string> pkgs;
  std::string pkg, ver, arch;
  std::size_t pos = 0;
  while (pos <= status.size()) {
    std::size_t eol = status.find('\n', pos);
    if (eol == std::string::npos) eol = status.size();
    std::string_view line(status.data() + pos, eol - pos);
    if (line.empty()) {
      if (!pkg.empty()) pkgs.push_back(pkg + " " + ver + " " + arch);
      pkg.clear(), ver.clear(), arch.clear();
    } else if (line.rfind("Package: ", 0) == 0) {
      pkg = line.substr(9);
    } else if (line.rfind("Version: ", 0) == 0) {
      ver = line.substr(9);
    } else if (line.rfind("Architecture: ", 0) == 0) {
      arch = line.substr(14);
    }
    pos = eol + 1;
  }
  if (!pkg.empty()) pkgs.push_back(pkg + " " + ver + " " + arch);
  std::sort(pkgs.begin(), pkgs.end());
  return pkgs;
}

}  // namespace

const std::vector<std::string>& sandboxOwnedPaths() {
  static const std::vector<std::string> kOwned = {"/proc",      "/dev", "/sys", "/tmp",
                                                  "/workspace", "/run", "/etc", "/.airlock"};
  return kOwned;
}

Result<SandboxImage> hostImage(std::string digest, const std::vector<std::string>& image_dirs,
                               const std::vector<std::string>& image_etc) {
  SandboxImage image;
  image.digest = std::move(digest);
  for (const auto& dir : image_dirs) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return fail(ErrorCode::kExecutionUnavailable, "image directory " + dir + " is missing");
    image.entries.push_back({ImageEntry::Kind::kDirectory, dir, dir});
  }
  // The usr-merge links (/bin -> usr/bin ...) as the host has them, or the
  // directories where it has not merged.
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"})
    if (auto e = entryFor(top, top); e && e->kind != ImageEntry::Kind::kFile)
      image.entries.push_back(std::move(*e));
  for (const auto& path : image_etc) {
    // A link is followed here (the host's /etc/ssl/certs may be one): what
    // is bound is what it names.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode))
      image.entries.push_back({ImageEntry::Kind::kDirectory, path, path});
    else if (S_ISREG(st.st_mode))
      image.entries.push_back({ImageEntry::Kind::kFile, path, path});
  }
  return image;
}

Result<SandboxImage> unpackedImage(std::string digest, const std::string& root_dir,
                                   std::vector<std::string> env) {
  SandboxImage image;
  image.digest = std::move(digest);
  image.env = std::move(env);
  auto top = namesIn(root_dir);
  if (!top) return tl::unexpected(top.error());
  const auto& owned = sandboxOwnedPaths();
  for (const auto& name : *top) {
    const std::string path = "/" + name;
    if (std::find(owned.begin(), owned.end(), path) != owned.end()) continue;
    if (auto e = entryFor(root_dir + path, path)) image.entries.push_back(std::move(*e));
  }
  std::set<std::string> generated;
  for (const auto& g : generatedEtcEntries(0, 0)) generated.insert(g.path);
  struct stat st {};
  if (::lstat((root_dir + "/etc").c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    auto etc = namesIn(root_dir + "/etc");
    if (!etc) return tl::unexpected(etc.error());
    for (const auto& name : *etc) {
      const std::string path = "/etc/" + name;
      if (generated.count(path)) continue;
      if (auto e = entryFor(root_dir + path, path)) image.entries.push_back(std::move(*e));
    }
  }
  return image;
}

Result<void> checkSearchableByAll(const std::string& path, std::set<std::string>* checked) {
  std::set<std::string> local;
  if (checked == nullptr) checked = &local;
  for (std::string dir = path; !dir.empty(); dir = dir.substr(0, dir.rfind('/'))) {
    if (!checked->insert(dir).second) break;
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if ((st.st_mode & S_IXOTH) == 0) {
      char mode[8];
      (void)std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return fail(ErrorCode::kExecutionUnavailable,
                  path + " cannot be reached by the sandbox's user: " + dir + " is mode " + mode +
                      " (every directory above it must be searchable by all, o+x)");
    }
  }
  return {};
}

Result<void> checkReachableByAnyUser(const SandboxImage& image) {
  std::set<std::string> checked;
  for (const auto& e : image.entries) {
    if (e.kind == ImageEntry::Kind::kSymlink) continue;
    if (auto r = checkSearchableByAll(e.source.substr(0, e.source.rfind('/')), &checked); !r) {
      Error error = r.error();
      error.context = "image " + image.digest + ": " + error.context;
      return tl::unexpected(error);
    }
  }
  return {};
}

Result<std::string> computeHostImageDigest(const std::vector<std::string>& image_dirs,
                                           const std::vector<std::string>& image_etc) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::string key;
  for (const auto& d : image_dirs) key += "dir " + d + "\n";
  for (const auto& e : image_etc) key += "etc " + e + "\n";
  std::lock_guard lk(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;

  sys::Sha256 h;
  h.update("airlock-image-manifest v1\n");
  h.update(key);
  // Packaged content: the dpkg database names every installed package and
  // version; files under /usr come from exactly those.
  if (auto status = sys::readFile(AT_FDCWD, "/var/lib/dpkg/status", 256u << 20))
    for (const auto& p : dpkgPackages(*status)) h.update("pkg " + p + "\n");
  // Unpackaged content: /usr/local by stat manifest.
  manifestTree(h, "/usr/local", 0);
  std::string digest = "sha256:" + h.finishHex();
  cache[key] = digest;
  return digest;
}

Result<std::string> computeImageDigest(const MechanismOptions& options) {
  return computeHostImageDigest(options.image_dirs, options.image_etc);
}

Result<std::vector<std::shared_ptr<const SandboxImage>>> mechanismImages(
    std::string host_digest, const std::vector<std::string>& image_dirs,
    const std::vector<std::string>& image_etc, const std::vector<SandboxImage>& others) {
  auto host = hostImage(std::move(host_digest), image_dirs, image_etc);
  if (!host) return tl::unexpected(host.error());
  std::vector<std::shared_ptr<const SandboxImage>> out;
  out.push_back(std::make_shared<const SandboxImage>(std::move(*host)));
  for (const auto& image : others) {
    const bool digest = image.digest.size() == 71 && image.digest.rfind("sha256:", 0) == 0 &&
                        isLowerHex(std::string_view(image.digest).substr(7));
    if (!digest)
      return fail(ErrorCode::kConfigurationError,
                  "image '" + image.digest + "' is not named by a sha256 digest");
    for (const auto& seen : out)
      if (seen->digest == image.digest)
        return fail(ErrorCode::kConfigurationError, "image " + image.digest + " is there twice");
    out.push_back(std::make_shared<const SandboxImage>(image));
  }
  return out;
}

Result<std::vector<std::shared_ptr<const SandboxImage>>> mechanismImages(
    Result<std::string> host_digest, const MechanismOptions& options) {
  if (!host_digest) return tl::unexpected(host_digest.error());
  return mechanismImages(std::move(*host_digest), options.image_dirs, options.image_etc,
                         options.images);
}

}  // namespace airlock
