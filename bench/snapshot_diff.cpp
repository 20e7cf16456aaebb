// files_changed on a large workspace: the cost of takeSnapshot +
// diffSnapshots on a tree of 100,000 files after 140 changes (100 rewritten,
// half of them at the same size, 20 created, 20 deleted), against the peer
// that answers the same question for a git checkout: `git status
// --porcelain` on the same tree after the same changes.
//
// The tree lives in a fresh directory under $TMPDIR (default /tmp) and is
// removed at the end. git's directory is a sibling of the tree
// (--git-dir/--work-tree), so both sides look at exactly the same 100,000
// files (a .git inside the tree would be walked by takeSnapshot too). Each round restores the tree
// to its base state, refreshes git's index (untimed) and takes a fresh `before` snapshot, then
// applies the changes and measures, alternating which side goes first:
//   airlock  takeSnapshot(after) + diffSnapshots(before, after, root, 1000)
//   git 1st  git -c core.untrackedCache=false status --porcelain (first run
//            after the changes: the index's stat data is stale for the
//            changed files, which git re-reads and hashes)
//   git 2nd  the same command again (index refreshed by the first run)
// Prints the medians over the rounds and the ratios.
// Usage: bench_snapshot_diff [rounds=5] [dirs=1000] [files_per_dir=100]
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "airlock/workspace/snapshot.h"

extern char** environ;

namespace {
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_snapshot_diff: %s\n", what.c_str());
  std::exit(1);
}

std::string dirName(int d) {
  char b[16];
  std::snprintf(b, sizeof b, "d%04d", d);
  return b;
}
std::string fileName(int d, int f) {
  char b[32];
  std::snprintf(b, sizeof b, "d%04d/f%02d.txt", d, f);
  return b;
}
std::string baseContent(int d, int f) {
  return "airlock snapshot bench " + dirName(d) + " file " + std::to_string(f) + " base\n";
}

void writeFile(int rootfd, const std::string& rel, const std::string& content) {
  int fd = ::openat(rootfd, rel.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("open " + rel + ": " + std::strerror(errno));
  if (::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size()))
    die("write " + rel);
  ::close(fd);
}

// Runs git with `args` in `dir`, stdout drained; returns (seconds, lines).
std::pair<double, long> runGit(const std::string& top, std::vector<std::string> args) {
  std::vector<std::string> full = {"git", "--git-dir=" + top + "/git",
                                   "--work-tree=" + top + "/tree"};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) die("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  const auto t0 = Clock::now();
  pid_t pid;
  if (posix_spawnp(&pid, "git", &fa, nullptr, argv.data(), environ) != 0) die("spawn git");
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  long lines = 0;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) lines += std::count(buf, buf + n, '\n');
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double s = secondsSince(t0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("git " + args.front() + " failed");
  return {s, lines};
}

struct Changes {
  std::vector<std::pair<int, int>> modified, deleted;
  std::vector<std::string> created;
};

// Round r's change set: 100 modified (file index < 50), 20 deleted (file
// index >= 50), 20 created (new names); the three sets are disjoint.
Changes changesFor(int r, int dirs, int files) {
  Changes c;
  for (int k = 0; k < 100; ++k)
    c.modified.push_back({(k * dirs / 100 + r) % dirs, (k + r) % std::min(50, files / 2)});
  for (int k = 0; k < 20; ++k) {
    c.deleted.push_back(
        {(k * dirs / 20 + 3 + r) % dirs, files / 2 + (k + r) % (files - files / 2)});
    c.created.push_back(dirName((k * dirs / 20 + 7 + r) % dirs) + "/new_" + std::to_string(k) +
                        ".txt");
  }
  return c;
}

void applyChanges(int rootfd, const Changes& c, int r) {
  for (std::size_t k = 0; k < c.modified.size(); ++k) {
    auto [d, f] = c.modified[k];
    std::string content = baseContent(d, f);
    if (k % 2 == 0) {
      content[content.size() - 2] = static_cast<char>('A' + r % 26);  // same size, different bytes
    } else {
      content += "modified in round " + std::to_string(r) + "\n";
    }
    writeFile(rootfd, fileName(d, f), content);
  }
  for (auto [d, f] : c.deleted)
    if (::unlinkat(rootfd, fileName(d, f).c_str(), 0) != 0) die("unlink");
  for (auto& name : c.created) writeFile(rootfd, name, "created by the bench\n");
}

void undoChanges(int rootfd, const Changes& c) {
  for (auto [d, f] : c.modified) writeFile(rootfd, fileName(d, f), baseContent(d, f));
  for (auto [d, f] : c.deleted) writeFile(rootfd, fileName(d, f), baseContent(d, f));
  for (auto& name : c.created)
    if (::unlinkat(rootfd, name.c_str(), 0) != 0) die("unlink created");
}

airlock::workspace::Snapshot snapshot(int rootfd) {
  auto s = airlock::workspace::takeSnapshot(rootfd);
  if (!s) die("takeSnapshot: " + s.error().message());
  return std::move(*s);
}
}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int dirs = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int files = argc > 3 ? std::atoi(argv[3]) : 100;
  if (rounds < 1 || dirs < 100 || files < 4)
    die("usage: bench_snapshot_diff [rounds>=1] [dirs>=100] [files_per_dir>=4]");

  ::setenv("GIT_AUTHOR_NAME", "bench", 1);
  ::setenv("GIT_AUTHOR_EMAIL", "bench@example.invalid", 1);
  ::setenv("GIT_COMMITTER_NAME", "bench", 1);
  ::setenv("GIT_COMMITTER_EMAIL", "bench@example.invalid", 1);
  ::setenv("GIT_CONFIG_NOSYSTEM", "1", 1);  // no host or user config changes what git does
  ::setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);

  const char* tmp = std::getenv("TMPDIR");
  std::string top = std::string(tmp && *tmp ? tmp : "/tmp") + "/airlock-bench-snapshot-XXXXXX";
  if (!::mkdtemp(top.data())) die("mkdtemp");
  const std::string root_path = top + "/tree";
  if (::mkdir(root_path.c_str(), 0755) != 0) die("mkdir tree");
  int rootfd = ::open(root_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) die("open root");

  auto t0 = Clock::now();
  for (int d = 0; d < dirs; ++d) {
    if (::mkdirat(rootfd, dirName(d).c_str(), 0755) != 0) die("mkdir");
    for (int f = 0; f < files; ++f) writeFile(rootfd, fileName(d, f), baseContent(d, f));
  }
  const long total_files = static_cast<long>(dirs) * files;
  std::printf("tree: %s, %d dirs x %d files = %ld files, written in %.2f s\n", root_path.c_str(),
              dirs, files, total_files, secondsSince(t0));
  t0 = Clock::now();
  runGit(top, {"init", "-q"});
  runGit(top, {"add", "-A"});
  runGit(top, {"commit", "-qm", "base"});
  std::printf("git init + add + commit: %.2f s\n", secondsSince(t0));

  // (1) Baseline: the first walk of the tree after it was written.
  t0 = Clock::now();
  auto first = snapshot(rootfd);
  const double baseline = secondsSince(t0);
  if (static_cast<long>(first.size()) != total_files)
    die("baseline snapshot listed " + std::to_string(first.size()) + " files");
  std::printf("baseline takeSnapshot (first walk): %.3f s, %zu entries\n", baseline, first.size());

  std::vector<double> before_s, airlock_s, git_first_s, git_second_s;
  const std::vector<std::string> status = {"-c", "core.untrackedCache=false", "status",
                                           "--porcelain"};
  for (int r = 0; r < rounds; ++r) {
    const Changes c = changesFor(r, dirs, files);
    runGit(top, {"status", "--porcelain"});  // refresh the index: git starts clean
    t0 = Clock::now();
    auto before = snapshot(rootfd);
    before_s.push_back(secondsSince(t0));
    applyChanges(rootfd, c, r);

    auto measureAirlock = [&] {
      const auto t = Clock::now();
      auto after = snapshot(rootfd);
      auto diff = airlock::workspace::diffSnapshots(before, after, rootfd, 1000);
      airlock_s.push_back(secondsSince(t));
      if (!diff) die("diffSnapshots: " + diff.error().message());
      long m = 0, cr = 0, del = 0;
      for (auto& ch : diff->changes) {
        (ch.change == airlock::ChangeKind::kModified  ? m
         : ch.change == airlock::ChangeKind::kCreated ? cr
                                                      : del)++;
      }
      if (diff->truncated || m != 100 || cr != 20 || del != 20)
        die("round " + std::to_string(r) + ": diff found " + std::to_string(m) + " modified, " +
            std::to_string(cr) + " created, " + std::to_string(del) + " deleted");
      std::printf(
          "round %d: airlock %.3f s, diff found %zu changes (%ld modified, %ld created, %ld "
          "deleted)\n",
          r, airlock_s.back(), diff->changes.size(), m, cr, del);
    };
    auto measureGit = [&] {
      auto [s1, l1] = runGit(top, status);
      auto [s2, l2] = runGit(top, status);
      if (l1 != 140 || l2 != 140)
        die("git status listed " + std::to_string(l1) + " / " + std::to_string(l2));
      git_first_s.push_back(s1);
      git_second_s.push_back(s2);
      std::printf("round %d: git 1st %.3f s, git 2nd %.3f s, %ld lines\n", r, s1, s2, l1);
    };
    if (r % 2 == 0) {
      measureAirlock();
      measureGit();
    } else {
      measureGit();
      measureAirlock();
    }
    undoChanges(rootfd, c);
  }

  const double a = median(airlock_s), g1 = median(git_first_s), g2 = median(git_second_s);
  std::printf("\nmedians over %d rounds (%ld files, 140 changes):\n", rounds, total_files);
  std::printf("  baseline takeSnapshot (first walk)      %.3f s\n", baseline);
  std::printf("  takeSnapshot (before, warm)             %.3f s\n", median(before_s));
  std::printf("  airlock takeSnapshot + diffSnapshots    %.3f s\n", a);
  std::printf("  git status --porcelain, 1st after edit  %.3f s\n", g1);
  std::printf("  git status --porcelain, 2nd (warm)      %.3f s\n", g2);
  std::printf("  ratio airlock / git 1st                 %.2fx\n", a / g1);
  std::printf("  ratio airlock / git 2nd                 %.2fx\n", a / g2);
  std::printf("  diff found exactly 140 changes in every round\n");

  ::close(rootfd);
  std::error_code ec;
  std::filesystem::remove_all(top, ec);
  if (ec) die("remove " + top + ": " + ec.message());
  return 0;
}
