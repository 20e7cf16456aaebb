// The layer unpacker (src/airlock/images/layer_unpack.h) on arbitrary
// bytes: an image layer is untrusted input from a registry or an archive.
// Each input is applied as a layer onto a fresh, empty root beside a
// sibling directory `outside` that holds one file and a symlink aimed at
// it from the root's level (so a layer entry that followed a link or
// climbed with ".." would land there). For every input, accepted or not:
// * the call returns (no crash, no throw), and a refusal is an error with
//   a message;
// * nothing outside the root changed: `outside` still holds exactly its
//   one file, with its bytes;
// * nothing under the root is a device node, FIFO or socket, and no
//   regular file or directory keeps a setuid or setgid bit;
// * the caps hold: at most kMaxEntries names and kMaxBytes file bytes.
// The tree is made under $TMPDIR (default /tmp) and removed at exit.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "airlock/images/layer_unpack.h"

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMaxEntries = 256;
constexpr std::int64_t kMaxBytes = 1 << 20;
constexpr const char* kOutsideBytes = "outside\n";

std::string g_top;  // real path: <top>/root and <top>/outside

void must(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::abort();
  }
}

void removeTop() {
  std::error_code ec;
  if (!g_top.empty()) fs::remove_all(g_top, ec);
}

void makeTop() {
  const char* tmp = std::getenv("TMPDIR");
  std::string top = std::string(tmp && *tmp ? tmp : "/tmp") + "/airlock-fuzz-layer-XXXXXX";
  must(::mkdtemp(top.data()) != nullptr, "mkdtemp");
  char real[PATH_MAX];
  must(::realpath(top.c_str(), real) != nullptr, "realpath");
  g_top = real;
  must(::mkdir((g_top + "/outside").c_str(), 0755) == 0, "mkdir outside");
  std::ofstream(g_top + "/outside/file") << kOutsideBytes;
  must(std::atexit(removeTop) == 0, "atexit");
}

void checkOutsideUnchanged() {
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(g_top + "/outside")) {
    (void)e;
    ++entries;
  }
  if (entries != 1) std::abort();
  std::ifstream in(g_top + "/outside/file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes != kOutsideBytes) std::abort();
  struct stat st {};
  if (::lstat((g_top + "/outside/file").c_str(), &st) != 0 || !S_ISREG(st.st_mode)) std::abort();
}

void checkRoot(const std::string& root) {
  std::int64_t names = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    ++names;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) std::abort();
    const mode_t type = st.st_mode & S_IFMT;
    if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK) std::abort();
    if (type != S_IFLNK && (st.st_mode & (S_ISUID | S_ISGID)) != 0) std::abort();
    // Never descend through a symlink (recursive_directory_iterator does
    // not follow them by default); a directory the walker cannot read is
    // made readable so that it can be checked and removed.
    if (type == S_IFDIR && (st.st_mode & 0700) != 0700) (void)::chmod(it->path().c_str(), 0755);
  }
  if (names > kMaxEntries + 1) std::abort();  // + "up", made here
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (g_top.empty()) makeTop();
  const std::string root = g_top + "/root";
  std::error_code ec;
  fs::remove_all(root, ec);
  must(::mkdir(root.c_str(), 0755) == 0, "mkdir root");
  // A symlink at the root's level pointing out, as a layer might hope to
  // find: "up" -> ../outside.
  must(::symlink("../outside", (root + "/up").c_str()) == 0, "symlink");

  const int layer = ::memfd_create("layer", MFD_CLOEXEC);
  must(layer >= 0, "memfd_create");
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(layer, data + done, size - done);
    must(n > 0, "write");
    done += static_cast<std::size_t>(n);
  }
  must(::lseek(layer, 0, SEEK_SET) == 0, "lseek");
  const int rootfd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  must(rootfd >= 0, "open root");

  airlock::images::UnpackLimits limits;
  limits.max_entries = kMaxEntries;
  limits.max_bytes = kMaxBytes;
  airlock::images::UnpackTally tally;
  auto applied = airlock::images::applyLayer(rootfd, layer, limits, tally);
  ::close(rootfd);
  ::close(layer);
  if (!applied && applied.error().context.empty()) std::abort();
  if (tally.entries > kMaxEntries || tally.bytes > kMaxBytes) std::abort();

  checkOutsideUnchanged();
  checkRoot(root);
  fs::remove_all(root, ec);
  return 0;
}
