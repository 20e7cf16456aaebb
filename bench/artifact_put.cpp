// Artifact put throughput: FilesystemArtifactStore::put of a
// 1 GiB stream against the peer that does the same hashing with nothing
// else, `sha256sum` of the same 1 GiB in a file, in the same run. put hashes
// while it writes (SHA-256 through OpenSSL EVP), so SHA-256 speed should be
// the limit: target ratio put / sha256sum <= 1.3.
//
// The stream is generated, not held in memory: one 1 MiB block of random
// bytes repeated (the source only copies it into the store's buffer). The
// same bytes are written once to a file for sha256sum (untimed; its digest
// is the metadata's sha256, which put verifies). The store (SQLite metadata,
// as `airlock serve` and `airlock run --export` open it) lives in a fresh
// directory under $TMPDIR (default /tmp), removed at the end.
// Each round, alternating which side goes first, measures:
//   put        put(stream, metadata) end to end: stream, hash, write, fsync
//              of the object, link into place, metadata row
//   sha256sum  `sha256sum FILE` (the file is in the page cache)
//   write      for reference: the same bytes write(2)n to a new file in the
//              store's filesystem plus fsync, no hashing
// Prints the medians over the rounds and the ratio put / sha256sum.
// Usage: bench_artifact_put [rounds=3] [mib=1024]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/sqlite_repository.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

extern char** environ;

namespace {
using Clock = std::chrono::steady_clock;
using namespace airlock;

constexpr std::size_t kBlockBytes = std::size_t{1} << 20;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_artifact_put: %s\n", what.c_str());
  std::exit(1);
}

// `total` bytes: `block` repeated.
class RepeatingSource final : public artifacts::ByteSource {
 public:
  RepeatingSource(const std::string& block, std::int64_t total) : block_(block), left_(total) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override {
    std::size_t n = std::min<std::size_t>(size, static_cast<std::size_t>(left_));
    std::size_t done = 0;
    while (done < n) {
      const std::size_t chunk = std::min(n - done, block_.size() - offset_);
      std::memcpy(buffer + done, block_.data() + offset_, chunk);
      done += chunk;
      offset_ = (offset_ + chunk) % block_.size();
    }
    left_ -= static_cast<std::int64_t>(n);
    return n;
  }

 private:
  const std::string& block_;
  std::int64_t left_;
  std::size_t offset_ = 0;
};

// Writes `total` bytes of the block to path (fsynced); returns their SHA-256.
std::string writeFile(const std::string& path, const std::string& block, std::int64_t total,
                      bool hash) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die("create " + path + ": " + std::strerror(errno));
  sys::Sha256 sha;
  for (std::int64_t left = total; left > 0; left -= static_cast<std::int64_t>(block.size())) {
    const std::size_t n = std::min<std::size_t>(block.size(), static_cast<std::size_t>(left));
    if (hash) sha.update(block.data(), n);
    if (!sys::writeAll(fd, block.data(), n)) die("write " + path + ": " + std::strerror(errno));
  }
  if (::fsync(fd) != 0) die("fsync " + path);
  ::close(fd);
  return hash ? sha.finishHex() : std::string();
}

// Runs `sha256sum path` with stdout to /dev/null; exits on failure.
void runSha256sum(const std::string& path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::string prog = "sha256sum", arg = path;
  char* argv[] = {prog.data(), arg.data(), nullptr};
  pid_t pid = -1;
  if (::posix_spawnp(&pid, "sha256sum", &actions, nullptr, argv, environ) != 0)
    die("spawn sha256sum");
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    die("sha256sum failed");
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const std::int64_t mib = argc > 2 ? std::atoll(argv[2]) : 1024;
  if (rounds < 1 || mib < 1) die("usage: bench_artifact_put [rounds=3] [mib=1024]");
  const std::int64_t total = mib << 20;

  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/airlock-bench-artifact-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) die("mkdtemp: " + std::string(std::strerror(errno)));
  const std::filesystem::path dir = pattern;
  const std::string store_dir = (dir / "store").string();
  std::filesystem::create_directories(store_dir);

  std::string block(kBlockBytes, '\0');
  std::mt19937_64 rng(20261130);
  for (std::size_t i = 0; i < block.size(); i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(block.data() + i, &v, 8);
  }
  const std::string file = (dir / "input.bin").string();
  const std::string digest = writeFile(file, block, total, /*hash=*/true);

  auto repository = artifacts::SqliteArtifactRepository::open(store_dir + "/metadata.db");
  if (!repository) die(repository.error().message());
  std::shared_ptr<artifacts::ArtifactRepository> shared = std::move(*repository);
  const int store_fd = ::open(store_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (store_fd < 0) die("open store");
  artifacts::FilesystemStoreOptions options;
  options.max_artifact_bytes = total;
  auto store = artifacts::FilesystemArtifactStore::create(sys::UniqueFd(store_fd), shared, options);
  if (!store) die(store.error().message());
  auto tenant = artifacts::TenantId::parse("bench");
  if (!tenant) die(tenant.error().message());

  auto timePut = [&]() -> double {
    const Timestamp now =
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
    artifacts::ArtifactMetadata m{*tenant,
                                  std::string("bench"),
                                  artifacts::ArtifactOrigin::kSandboxExport,
                                  "input.bin",
                                  "application/octet-stream",
                                  total,
                                  digest,
                                  artifacts::TrustLevel::kExternalUntrusted,
                                  now,
                                  now + std::chrono::hours(1)};
    RepeatingSource source(block, total);
    const auto t0 = Clock::now();
    auto ref = (*store)->put(source, m);
    const double s = secondsSince(t0);
    if (!ref) die("put: " + ref.error().message());
    if (ref->sha256 != digest || ref->size_bytes != total)
      die("put returned another digest or size");
    if (auto removed = (*store)->remove(ref->artifact_id); !removed || !*removed) die("remove");
    return s;
  };
  auto timeSha256sum = [&]() -> double {
    const auto t0 = Clock::now();
    runSha256sum(file);
    return secondsSince(t0);
  };
  auto timeWrite = [&]() -> double {
    const std::string path = store_dir + "/plain-write.bin";
    const auto t0 = Clock::now();
    writeFile(path, block, total, /*hash=*/false);
    const double s = secondsSince(t0);
    std::filesystem::remove(path);
    return s;
  };

  // Warm-up (untimed): page cache for the input, the store's directories.
  runSha256sum(file);
  (void)timePut();

  std::vector<double> put, sum, write;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      put.push_back(timePut());
      sum.push_back(timeSha256sum());
    } else {
      sum.push_back(timeSha256sum());
      put.push_back(timePut());
    }
    write.push_back(timeWrite());
    std::printf("round %d: put %.3f s, sha256sum %.3f s, write+fsync %.3f s\n", r + 1, put.back(),
                sum.back(), write.back());
  }
  const double mp = median(put), ms = median(sum), mw = median(write);
  const double mibs = static_cast<double>(mib);
  std::printf("bytes: %lld MiB, rounds: %d (medians)\n", static_cast<long long>(mib), rounds);
  std::printf("put          %.3f s  (%.0f MiB/s)\n", mp, mibs / mp);
  std::printf("sha256sum    %.3f s  (%.0f MiB/s)\n", ms, mibs / ms);
  std::printf("write+fsync  %.3f s  (%.0f MiB/s, reference: no hashing)\n", mw, mibs / mw);
  std::printf("ratio put / sha256sum: %.2f (target <= 1.3)\n", mp / ms);

  store->reset();
  shared.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
