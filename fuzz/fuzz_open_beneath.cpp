// The fd half of resolve(): whatever path passes the lexical
// check, openBeneath() returns only objects under the root, through any
// symlink. The root is a small tree made once per process, full of
// symlinks that point out (absolute to /etc and /proc/self, "../../..",
// a relative link that climbs out from a subdirectory) and in (a chain
// a -> b -> c, a directory link, a link back to the root, a loop, a
// dangling link). Each input is a path; for each accepted one, both
// ResolverKind implementations open it with O_PATH and with
// O_PATH | O_NOFOLLOW, and:
// * every fd returned must name (readlink /proc/self/fd/N) the root or a
//   path under it;
// * both kinds must agree on success or failure, and on success open the
//   same object (dev, ino). resolve.h documents one difference: the walk
//   refuses any symlink on procfs where openat2 refuses only magic links;
//   no path beneath this root reaches procfs, so none applies here.
// The tree is made under $TMPDIR (default /tmp) and removed at exit.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "airlock/core/command_validation.h"
#include "airlock/workspace/resolve.h"

namespace {

std::string g_root;  // real path of the root, no trailing slash
int g_rootfd = -1;

void must(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::abort();
  }
}

void removeRoot() {
  if (g_rootfd >= 0) ::close(g_rootfd);
  std::error_code ec;
  if (!g_root.empty()) std::filesystem::remove_all(std::filesystem::path(g_root).parent_path(), ec);
}

void makeTree() {
  const char* tmp = std::getenv("TMPDIR");
  std::string top = std::string(tmp && *tmp ? tmp : "/tmp") + "/airlock-fuzz-open-beneath-XXXXXX";
  must(::mkdtemp(top.data()) != nullptr, "mkdtemp");
  char real[PATH_MAX];
  must(::realpath(top.c_str(), real) != nullptr, "realpath");
  // A sibling of the root that links point at: reaching it means escaping.
  const std::string outside = std::string(real) + "/outside";
  must(::mkdir(outside.c_str(), 0755) == 0, "mkdir outside");
  g_root = std::string(real) + "/root";
  must(::mkdir(g_root.c_str(), 0755) == 0, "mkdir root");
  g_rootfd = ::open(g_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  must(g_rootfd >= 0, "open root");
  std::atexit(removeRoot);

  const char* dirs[] = {"dir", "dir/sub", "dir/sub/deep", "empty"};
  for (const char* d : dirs) must(::mkdirat(g_rootfd, d, 0755) == 0, d);
  const char* files[] = {"file", "dir/file.txt", "dir/sub/deep/leaf"};
  for (const char* f : files) {
    int fd = ::openat(g_rootfd, f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    must(fd >= 0, f);
    ::close(fd);
  }
  int fd = ::open((outside + "/secret").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  must(fd >= 0, "outside/secret");
  ::close(fd);

  const std::pair<const char*, const char*> links[] = {
      // outward
      {"/etc", "etc"},
      {"/proc/self", "proc"},
      {"/", "slash"},
      {"../../..", "up"},
      {"..", "parent"},
      {"../outside", "sibling"},
      {"../../outside/secret", "dir/up2"},
      {"../../../..", "dir/sub/up3"},
      {"../../../../../../../../../../proc/self/root", "dir/procroot"},
      // inward
      {"b", "a"},
      {"c", "b"},
      {"dir/file.txt", "c"},
      {"dir", "dirlink"},
      {"sub/deep", "dir/deeplink"},
      {"../..", "dir/sub/back"},  // back to the root
      {"../../dirlink/sub", "dir/sub/deep/around"},
      {"dirlink/sub/back/dirlink", "twisty"},
      {"loop2", "loop1"},
      {"loop1", "loop2"},
      {"self", "self"},
      {"missing/target", "dangling"},
      {"dir/sub/back/up", "hidden_up"},  // in, then out
  };
  for (auto [target, name] : links) must(::symlinkat(target, g_rootfd, name) == 0, name);
}

bool underRoot(int fd) {
  char buf[PATH_MAX + 1];
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(proc.c_str(), buf, PATH_MAX);
  if (n < 0) return false;
  std::string_view path(buf, static_cast<std::size_t>(n));
  return path == g_root || (path.size() > g_root.size() &&
                            path.substr(0, g_root.size()) == g_root && path[g_root.size()] == '/');
}

void check(const std::string& rel, int flags) {
  using airlock::workspace::ResolverKind;
  auto a = airlock::workspace::openBeneath(g_rootfd, rel, flags, 0, ResolverKind::kOpenat2);
  auto b = airlock::workspace::openBeneath(g_rootfd, rel, flags, 0, ResolverKind::kNofollowWalk);
  for (auto* r : {&a, &b}) {
    if (*r && !underRoot((*r)->get())) {
      std::fprintf(stderr, "openBeneath(%s, flags=%#x, %s) escaped the root\n", rel.c_str(), flags,
                   r == &a ? "openat2" : "walk");
      std::abort();
    }
  }
  if (a.has_value() != b.has_value()) {
    std::fprintf(stderr, "openBeneath(%s, flags=%#x): openat2 %s, walk %s\n", rel.c_str(), flags,
                 a ? "ok" : a.error().message().c_str(), b ? "ok" : b.error().message().c_str());
    std::abort();
  }
  if (a) {
    struct stat sa {
    }, sb{};
    must(::fstat(a->get(), &sa) == 0 && ::fstat(b->get(), &sb) == 0, "fstat");
    if (sa.st_dev != sb.st_dev || sa.st_ino != sb.st_ino) {
      std::fprintf(stderr, "openBeneath(%s, flags=%#x): kinds opened different objects\n",
                   rel.c_str(), flags);
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  makeTree();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto rel = airlock::checkRelativePath(text);
  if (!rel) return 0;
  check(*rel, O_PATH);
  check(*rel, O_PATH | O_NOFOLLOW);
  return 0;
}
