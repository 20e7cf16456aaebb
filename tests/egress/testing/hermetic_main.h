// The main() of a test binary whose tests dial: the whole binary runs in a
// network and mount namespace of its own (enterHermeticNetwork), entered
// before any thread exists, with /etc/hosts replaced by `hosts` and an empty
// resolv.conf, so no lookup reaches the machine's resolver. Header-only (it
// runs the binary's gtest suite).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "hermetic_net.h"

namespace airlock::egress::testing {

// Parses gtest's flags, writes `hosts` and an empty resolv.conf into a
// fresh directory under /tmp, enters the namespace and runs every test.
// `hermetic` is set when the namespace is in place; otherwise stderr says
// why, naming `suite` and what is skipped (`skipped`). Returns the suite's
// exit status (1 when no directory could be made).
inline int runTestsInHermeticNetwork(int argc, char** argv, const char* suite,
                                     const std::string& hosts, bool& hermetic,
                                     const char* skipped) {
  ::testing::InitGoogleTest(&argc, argv);
  namespace fs = std::filesystem;
  char dir_template[] = "/tmp/airlock-hermetic-test-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return 1;
  const fs::path dir(dir_template);
  {
    std::ofstream(dir / "hosts") << hosts;
    std::ofstream resolv(dir / "resolv.conf");
  }
  const char* step = nullptr;
  const int err =
      enterHermeticNetwork((dir / "hosts").c_str(), (dir / "resolv.conf").c_str(), &step);
  if (err == 0) {
    hermetic = true;
  } else {
    std::fprintf(stderr, "%s: %s: %s (%s)\n", suite, step, std::strerror(err), skipped);
  }
  const int rc = RUN_ALL_TESTS();
  std::error_code ignored;
  fs::remove_all(dir, ignored);  // the bind mounts die with the namespace
  return rc;
}

}  // namespace airlock::egress::testing
