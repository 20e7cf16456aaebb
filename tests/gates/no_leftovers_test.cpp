// Runs after every test that starts sandboxes (CTest fixture cleanup) and
// asserts that nothing is left behind: no airlock cgroup, no mount naming
// airlock, no sandbox init process, no runsc process of Airlock's.
#include <dirent.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "../support/sandbox_cgroups.h"

namespace {

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

TEST(NoLeftovers, NoAirlockCgroupRemains) {
  std::vector<std::string> found;
  for (const auto& dir : airlock::testing::sandboxCgroupCandidates())
    if (airlock::testing::baseName(dir).find("airlock") != std::string::npos) found.push_back(dir);
  EXPECT_TRUE(found.empty()) << "leaked cgroup: " << found.front();
}

TEST(NoLeftovers, NoAirlockMountRemains) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) EXPECT_EQ(line.find("airlock"), std::string::npos) << line;
}

TEST(NoLeftovers, NoSandboxInitProcessRemains) {
  for (const auto& pid : entries("/proc")) {
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm("/proc/" + pid + "/comm");
    std::string name;
    std::getline(comm, name);
    EXPECT_NE(name, "airlock-init") << "pid " << pid;
  }
}

// The gvisor mechanism (src/airlock/sandbox/oci): no runsc sandbox, gofer
// or runsc command of Airlock's is left. Airlock runs runsc with a private
// --root under its state directory, whose path names airlock.
TEST(NoLeftovers, NoRunscProcessOfAirlockRemains) {
  for (const auto& pid : entries("/proc")) {
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + pid + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.rfind("runsc", 0) != 0 && cmdline.find("/runsc") == std::string::npos) continue;
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    const auto root = cmdline.find("--root");
    if (root == std::string::npos) continue;
    const auto end = cmdline.find(' ', root + 7);
    const std::string value =
        cmdline.substr(root, end == std::string::npos ? std::string::npos : end - root);
    EXPECT_EQ(value.find("airlock"), std::string::npos) << "pid " << pid << ": " << cmdline;
  }
}

}  // namespace
