// Red-team regression: the service's own reads and writes in a workspace
// never follow a link a command planted (red-team cases B01 symlink where the host
// side writes, B02 metadata operations, B03 a link swapped in during a call,
// B04 upload into a symlinked directory, B05 reading an output file that is
// a symlink, B10 hard links across the boundary, B11 code loaded from the
// sandbox root).
//
// A host canary directory is made under /tmp on the host; a command plants
// links to it (absolute and ../ relative) in its workspace; then the
// WorkspaceHandle API is used on those names. The canary must not change,
// nothing may appear beside it, and no host byte may come back.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "../sandbox/linux/linux_test_support.h"

namespace airlock::testing {
namespace {

constexpr const char* kCanaryText = "host canary bytes 5be1\n";

class RedteamWorkspaceLinkTest : public SandboxTest {
 protected:
  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
    char tmpl[] = "/tmp/airlock-rt-canary-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    canary_dir_ = tmpl;
    canary_file_ = canary_dir_ + "/canary";
    std::ofstream(canary_file_) << kCanaryText;
    ASSERT_EQ(::stat(canary_file_.c_str(), &before_), 0);
    SandboxTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto ws = env_->workspace(handle_);
    ASSERT_TRUE(ws) << ws.error().message();
    ws_ = *ws;
  }
  void TearDown() override {
    SandboxTest::TearDown();
    if (!canary_dir_.empty()) {
      // The canary itself is untouched and nothing new appeared beside it.
      struct stat after {};
      EXPECT_EQ(::stat(canary_file_.c_str(), &after), 0);
      EXPECT_EQ(after.st_ino, before_.st_ino);
      EXPECT_EQ(after.st_size, before_.st_size);
      EXPECT_EQ(after.st_uid, before_.st_uid);
      EXPECT_EQ(after.st_mode, before_.st_mode);
      EXPECT_EQ(after.st_mtim.tv_sec, before_.st_mtim.tv_sec);
      EXPECT_EQ(after.st_mtim.tv_nsec, before_.st_mtim.tv_nsec);
      std::ifstream in(canary_file_);
      std::stringstream text;
      text << in.rdbuf();
      EXPECT_EQ(text.str(), kCanaryText);
      std::size_t entries = 0;
      for (const auto& e : std::filesystem::directory_iterator(canary_dir_)) {
        ++entries;
        EXPECT_EQ(e.path().filename(), "canary")
            << "the service wrote beside the canary: " << e.path();
      }
      EXPECT_EQ(entries, 1u);
      std::error_code ec;
      std::filesystem::remove_all(canary_dir_, ec);
    }
  }
  ExecutionResult run(const std::string& script) {
    auto r = env_->execute(handle_, shell(script));
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : ExecutionResult{};
  }
  // Plants links to the host canary: absolute, and relative with enough ../
  // to leave any workspace.
  void plant() {
    const std::string up = "../../../../../../../../..";
    auto r = run("ln -s " + canary_file_ + " abs_file && ln -s " + up + canary_file_ +
                 " rel_file && "
                 "ln -s " +
                 canary_dir_ + " abs_dir && ln -s " + up + canary_dir_ +
                 " rel_dir && "
                 "mkdir -p out && ln -s /proc/self/environ out/report.txt && ln -s loop loop && "
                 "ln -s /etc/hostname result.json && echo planted");
    ASSERT_EQ(r.stdout_data, "planted\n") << r.stderr_data;
  }

  std::string canary_dir_, canary_file_;
  struct stat before_ {};
  std::shared_ptr<WorkspaceHandle> ws_;
};

// B01: a write to a name that is a planted link replaces the link with a
// regular file in the workspace; it never writes through it.
TEST_F(RedteamWorkspaceLinkTest, B01_WriteOverAPlantedLinkReplacesTheLink) {
  plant();
  for (const char* name : {"abs_file", "rel_file"}) {
    auto w = ws_->write(name, "written by the service\n");
    if (w) {
      auto check = run(std::string("test -L ") + name + " && echo link || cat " + name);
      EXPECT_EQ(check.stdout_data, "written by the service\n") << name;
    } else {
      EXPECT_EQ(w.error().code, ErrorCode::kWorkspaceEscape) << name << ": " << w.error().message();
    }
  }
}

// B04: writes, mkdirs and listings through a linked directory are refused.
TEST_F(RedteamWorkspaceLinkTest, B04_NothingIsCreatedThroughALinkedDirectory) {
  plant();
  for (const char* dir : {"abs_dir", "rel_dir"}) {
    const std::string d = dir;
    auto w = ws_->write(d + "/f.txt", "x");
    ASSERT_FALSE(w) << d << "/f.txt was written";
    EXPECT_EQ(w.error().code, ErrorCode::kWorkspaceEscape) << w.error().message();
    auto m = ws_->mkdir(d + "/newdir");
    ASSERT_FALSE(m) << d << "/newdir was created";
    EXPECT_EQ(m.error().code, ErrorCode::kWorkspaceEscape) << m.error().message();
    auto l = ws_->listdir(d);
    ASSERT_FALSE(l) << d << " was listed";
    EXPECT_EQ(l.error().code, ErrorCode::kWorkspaceEscape) << l.error().message();
  }
}

// B05: reading a planted link returns an error, never the target's bytes.
TEST_F(RedteamWorkspaceLinkTest, B05_ReadingAPlantedLinkReturnsNoHostBytes) {
  plant();
  for (const char* name : {"abs_file", "rel_file", "abs_dir/canary", "rel_dir/canary",
                           "out/report.txt", "result.json", "loop"}) {
    auto r = ws_->read(name);
    ASSERT_FALSE(r) << name << " was read: " << *r;
    EXPECT_EQ(r.error().code, ErrorCode::kWorkspaceEscape) << name << ": " << r.error().message();
  }
  // A listing shows the links as links.
  auto l = ws_->listdir(".");
  ASSERT_TRUE(l) << l.error().message();
  for (const auto& e : *l) {
    if (e.name == "abs_file" || e.name == "rel_dir" || e.name == "loop") {
      EXPECT_EQ(e.type, WorkspaceEntry::Type::kSymlink) << e.name;
    }
  }
}

// B05, B10: files_changed reports a planted link by its target string only,
// and hard links to image or /tmp files cannot be made in the workspace.
TEST_F(RedteamWorkspaceLinkTest, B10_FilesChangedHashesLinkTextAndHardLinksCannotCross) {
  auto r = run("ln -s " + canary_file_ +
               " abs_file; "
               "ln /usr/bin/python3 h1 2>/dev/null && echo linked-image; "
               "echo x > /tmp/t; ln /tmp/t h2 2>/dev/null && echo linked-tmp; echo done");
  EXPECT_EQ(r.stdout_data, "done\n") << "a hard link crossed into the workspace";
  bool seen = false;
  for (const auto& f : r.files_changed) {
    if (f.path != "abs_file") continue;
    seen = true;
    EXPECT_EQ(f.size_bytes, static_cast<std::int64_t>(canary_file_.size()));
    // sha256 of the link text, not of the canary's bytes.
    auto text_hash = run("printf %s '" + canary_file_ + "' | sha256sum | cut -d' ' -f1");
    ASSERT_TRUE(f.sha256.has_value());
    EXPECT_EQ(*f.sha256 + "\n", text_hash.stdout_data);
  }
  EXPECT_TRUE(seen);
}

// B02: nothing the service does to workspace metadata follows a planted
// link: placing files (copy-in sets owner and mode on what it creates),
// writing, making directories, listing, provenance and the snapshot of a
// command. The canary file's owner, mode and times are checked in TearDown;
// its directory's are checked here.
TEST_F(RedteamWorkspaceLinkTest, B02_MetadataOperationsNeverFollowAPlantedLink) {
  struct stat dir_before {};
  ASSERT_EQ(::stat(canary_dir_.c_str(), &dir_before), 0);
  plant();
  for (const char* name : {"abs_file", "rel_file"}) {
    (void)ws_->placeFile(name, "placed\n");
    (void)ws_->provenance(name);
  }
  for (const char* dir : {"abs_dir", "rel_dir"}) {
    const std::string d = dir;
    EXPECT_FALSE(ws_->placeFile(d + "/placed", "x")) << d;
    EXPECT_FALSE(ws_->mkdir(d + "/made")) << d;
    EXPECT_FALSE(ws_->write(d + "/canary", "x")) << d;
  }
  EXPECT_TRUE(ws_->listdir("."));
  auto r = run("chmod 777 abs_dir rel_dir 2>/dev/null; touch -h abs_file; echo ran");
  EXPECT_EQ(r.stdout_data, "ran\n") << r.stderr_data;
  struct stat dir_after {};
  ASSERT_EQ(::stat(canary_dir_.c_str(), &dir_after), 0);
  EXPECT_EQ(dir_after.st_mode, dir_before.st_mode);
  EXPECT_EQ(dir_after.st_uid, dir_before.st_uid);
  EXPECT_EQ(dir_after.st_gid, dir_before.st_gid);
  EXPECT_EQ(dir_after.st_mtim.tv_sec, dir_before.st_mtim.tv_sec);
  EXPECT_EQ(dir_after.st_mtim.tv_nsec, dir_before.st_mtim.tv_nsec);
}

// B03: while a command keeps exchanging a real directory `data` with a link
// to `/` (renameat2 RENAME_EXCHANGE in a tight loop), thousands of reads,
// listings and writes through `data/` return workspace content or an error,
// never host bytes, and create nothing on the host.
TEST_F(RedteamWorkspaceLinkTest, B03_SymlinkExchangeRaceNeverReachesTheHost) {
  // The workspace's own copy of the canary path, with different bytes.
  const std::string inner = "data" + canary_file_;
  auto setup = run("mkdir -p data" + canary_dir_ + " && printf inside > " + inner +
                   " && echo secret > data/secret.txt && ln -s / swap && echo ok");
  ASSERT_EQ(setup.stdout_data, "ok\n") << setup.stderr_data;
  std::atomic<bool> swapper_done{false};
  std::optional<ExecutionResult> swapper;
  std::thread t([&] {
    auto c = shell(
        "exec python3 -c 'import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "open(\"started\", \"w\").close()\n"
        "n = 0\n"
        "while True:\n"
        "    libc.syscall(316, -100, b\"data\", -100, b\"swap\", 2)\n"
        "    n += 1\n"
        "    if n % 256 == 0 and os.path.exists(\"stop\"):\n"
        "        break\n"
        "print(n)'",
        120);
    auto r = env_->execute(handle_, c);
    if (r) swapper = *r;
    swapper_done = true;
  });
  // Wait for the swapper to run (a condition, bounded by its own timeout).
  while (!swapper_done && !ws_->read("started")) std::this_thread::yield();
  int escaped = 0, contained = 0;
  for (int i = 0; i < 2500 && !swapper_done; ++i) {
    if (auto r = ws_->read(inner)) {
      ++contained;
      if (*r != "inside") ++escaped;
    }
    if (auto r = ws_->read("data/secret.txt"); r && *r != "secret\n") ++escaped;
    if (auto l = ws_->listdir("data")) {
      for (const auto& e : *l)
        if (e.name != "secret.txt" && e.name != "tmp" && e.name != "x") ++escaped;
    }
    (void)ws_->write("data" + canary_dir_ + "/x", "x");
    (void)ws_->write("data/x", "x");
  }
  EXPECT_TRUE(ws_->write("stop", ""));
  t.join();
  ASSERT_TRUE(swapper.has_value()) << "the swapper command failed";
  EXPECT_EQ(swapper->exit_code, 0) << swapper->stderr_data;
  EXPECT_GT(std::atol(swapper->stdout_data.c_str()), 1000) << "the race never ran";
  EXPECT_EQ(escaped, 0) << "a call through data/ reached the host";
  std::printf("B03: %d reads returned workspace bytes during %ld exchanges\n", contained,
              std::atol(swapper->stdout_data.c_str()));
}

// B11: the service never loads code from a sandbox's root. It never calls
// the name-service functions that dlopen libnss_* (so it reports numeric
// ids), checked on the binary's imports; and a command that plants its own
// libnss_files.so.2 and nsswitch.conf, and files with unusual owners, sees
// no marker appear on the host while the service lists, reads and snapshots.
TEST_F(RedteamWorkspaceLinkTest, B11_NoCodeFromTheSandboxRootRunsInTheService) {
  FILE* nm = ::popen("nm -D --undefined-only " AIRLOCK_BINARY " 2>&1", "r");
  ASSERT_NE(nm, nullptr);
  std::string imports;
  char line[512];
  while (std::fgets(line, sizeof line, nm) != nullptr) imports += line;
  ASSERT_EQ(::pclose(nm), 0) << imports;
  ASSERT_NE(imports.find("read"), std::string::npos) << "nm listed nothing: " << imports;
  for (const char* fn : {"getpwnam", "getpwuid", "getgrnam", "getgrgid", "getpwent", "getgrent",
                         "initgroups", "getgrouplist", "getspnam"}) {
    EXPECT_EQ(imports.find(std::string(" ") + fn), std::string::npos)
        << "the binary imports " << fn;
  }
  const std::string marker = canary_dir_ + "/nss-pwned";
  auto r =
      run("mkdir -p lib etc && printf '#include <stdio.h>\\n"
          "__attribute__((constructor)) static void p(void) { FILE* f = fopen(\"" +
          marker +
          "\", \"w\"); if (f) fclose(f); }\\n' > nss.c && "
          "gcc -shared -fPIC -o lib/libnss_files.so.2 nss.c && cp lib/libnss_files.so.2 "
          "lib/libnss_dns.so.2 && "
          "printf 'passwd: files\\ngroup: files\\nhosts: dns\\n' > etc/nsswitch.conf && "
          "echo planted");
  ASSERT_EQ(r.stdout_data, "planted\n") << r.stderr_data;
  EXPECT_TRUE(ws_->listdir("lib"));
  EXPECT_TRUE(ws_->read("etc/nsswitch.conf"));
  EXPECT_TRUE(ws_->provenance("lib/libnss_files.so.2"));
  auto again = run("ls -ln lib > /dev/null; echo done");
  EXPECT_EQ(again.stdout_data, "done\n");
  EXPECT_FALSE(std::filesystem::exists(marker)) << "code from the sandbox ran on the host";
}

}  // namespace
}  // namespace airlock::testing

namespace airlock::testing {
namespace {

// B01, B02 for remove, rename and stat: a planted link is removed, moved or
// reported as the link itself, and a path through a linked directory is
// refused, so the canary and its directory are never removed, moved,
// replaced or written beside (TearDown checks them).
TEST_F(RedteamWorkspaceLinkTest, B02_RemoveRenameAndStatActOnThePlantedLinkItself) {
  plant();
  for (const char* dir : {"abs_dir", "rel_dir"}) {
    const std::string d = dir;
    auto removed = ws_->remove(d + "/canary", false);
    ASSERT_FALSE(removed) << d << "/canary was removed";
    EXPECT_EQ(removed.error().code, ErrorCode::kWorkspaceEscape) << removed.error().message();
    auto out_of = ws_->rename(d + "/canary", "stolen", true);
    ASSERT_FALSE(out_of) << d << "/canary was moved in";
    EXPECT_EQ(out_of.error().code, ErrorCode::kWorkspaceEscape) << out_of.error().message();
    ASSERT_TRUE(ws_->write("mine.txt", "mine"));
    auto onto = ws_->rename("mine.txt", d + "/canary", true);
    ASSERT_FALSE(onto) << "a workspace file replaced " << d << "/canary";
    EXPECT_EQ(onto.error().code, ErrorCode::kWorkspaceEscape) << onto.error().message();
    EXPECT_FALSE(ws_->rename("mine.txt", d + "/beside", false)) << d;
    auto st = ws_->stat(d + "/canary");
    ASSERT_FALSE(st) << d << "/canary was stated";
    EXPECT_EQ(st.error().code, ErrorCode::kWorkspaceEscape);
  }
  auto link = ws_->stat("abs_file");
  ASSERT_TRUE(link) << link.error().message();
  EXPECT_EQ(link->type, WorkspaceEntry::Type::kSymlink);
  EXPECT_EQ(link->size_bytes, static_cast<std::int64_t>(canary_file_.size()));
  ASSERT_TRUE(ws_->rename("rel_file", "moved_link", false));
  EXPECT_EQ(ws_->stat("moved_link")->type, WorkspaceEntry::Type::kSymlink);
  ASSERT_TRUE(ws_->remove("abs_file", false));
  ASSERT_TRUE(ws_->remove("abs_dir", true)) << "a link to a directory goes as a link";
  ASSERT_TRUE(ws_->remove("rel_dir", true));
  auto r = run("test -e abs_file || test -e abs_dir || test -e rel_dir || echo gone");
  EXPECT_EQ(r.stdout_data, "gone\n") << r.stderr_data;
}

}  // namespace
}  // namespace airlock::testing
