// Red-team regression: files_changed cannot be fooled by metadata games
// (red-team case B45: same size + restored mtime, rename over, symlink retarget of
// equal length, file replaced by a directory, writes through mmap and
// /proc/self/mem, hole punching) and reports pathological names losslessly,
// once each (B08).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "../sandbox/linux/linux_test_support.h"

namespace airlock::testing {
namespace {

class RedteamFilesChangedTest : public SandboxTest {
 protected:
  static std::map<std::string, FileChange> byPath(const ExecutionResult& r) {
    std::map<std::string, FileChange> m;
    for (const auto& f : r.files_changed) {
      EXPECT_TRUE(m.emplace(f.path, f).second) << "listed twice: " << f.path;
    }
    return m;
  }
};

// The first command creates the files (so their hashes are known); the second
// changes content while keeping size, mtime and inode where it can.
TEST_F(RedteamFilesChangedTest, B45_ContentChangesHiddenBehindMetadataAreReported) {
  auto setup = run(
      shell("printf AAAA > a.txt; printf BBBB > b.txt; printf CCCC > b2.txt; touch -d @1000000 "
            "b.txt b2.txt; "
            "ln -s target1 s; printf CCCC > c; head -c 8192 /dev/urandom > m.bin; "
            "head -c 8192 /dev/urandom > p.bin; head -c 8192 /dev/urandom > h.bin; echo setup"));
  ASSERT_EQ(setup.stdout_data, "setup\n") << setup.stderr_data;

  ExecutionCommand c;
  c.argv = {"python3", "-c", R"PY(
import ctypes, mmap, os, subprocess
# same length, original mtime restored
st = os.stat("a.txt")
open("a.txt", "wb").write(b"ZZZZ")
os.utime("a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
# rename a same-size, same-mtime file over another
os.rename("b2.txt", "b.txt")
# symlink retargeted to a string of the same length
os.unlink("s"); os.symlink("target2", "s")
# file replaced by a directory
os.unlink("c"); os.mkdir("c"); open("c/inner", "w").write("x")
# write through a shared mapping, then restore mtime
st = os.stat("m.bin")
with open("m.bin", "r+b") as f:
    m = mmap.mmap(f.fileno(), 0); m[0:4] = b"HACK"; m.flush(); m.close()
os.utime("m.bin", ns=(st.st_atime_ns, st.st_mtime_ns))
# write through /proc/self/mem into a shared mapping
fd = os.open("p.bin", os.O_RDWR)
m2 = mmap.mmap(fd, 0)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m2))
mem = os.open("/proc/self/mem", os.O_RDWR); os.pwrite(mem, b"PWND", addr); os.close(mem)
# punch a hole: same size, different bytes
libc = ctypes.CDLL(None, use_errno=True)
hfd = os.open("h.bin", os.O_RDWR)
assert libc.fallocate(hfd, 3, ctypes.c_long(0), ctypes.c_long(4096)) == 0
print("changed", flush=True)
os._exit(0)
)PY"};
  c.timeout_seconds = 60;
  c.maximum_output_bytes = 1 << 16;
  auto r = run(c);
  ASSERT_EQ(r.stdout_data, "changed\n") << r.stderr_data;
  auto m = byPath(r);
  for (const char* path : {"a.txt", "b.txt", "s", "m.bin", "p.bin", "h.bin"}) {
    ASSERT_TRUE(m.count(path)) << path << " changed but files_changed does not list it";
    EXPECT_EQ(m[path].change, ChangeKind::kModified) << path;
  }
  ASSERT_TRUE(m.count("b2.txt"));
  EXPECT_EQ(m["b2.txt"].change, ChangeKind::kDeleted);
  ASSERT_TRUE(m.count("c"));
  EXPECT_EQ(m["c"].change, ChangeKind::kDeleted);  // documented: directories are not listed
  ASSERT_TRUE(m.count("c/inner"));
  EXPECT_EQ(m["c/inner"].change, ChangeKind::kCreated);

  // The reported hash is of the new content: re-read it in the sandbox.
  auto sums = run(shell("sha256sum a.txt m.bin | cut -d' ' -f1"));
  EXPECT_EQ(sums.stdout_data, *m["a.txt"].sha256 + "\n" + *m["m.bin"].sha256 + "\n");
}

// B08: names with newlines, invalid UTF-8, control characters and maximum
// length each appear exactly once, byte for byte.
TEST_F(RedteamFilesChangedTest, B08_PathologicalNamesAreListedOnceAndLosslessly) {
  ExecutionCommand c;
  c.argv = {"python3", "-c", R"PY(
import os
names = [b"a\nb", b"a\rb", b"\xff\xfe.txt", b"\xed\xa0\x80", b"t\tab", b"-rf", b"   ", b"..data",
         b"\\", b"x" * 255, "\u20ac".encode() * 85, b"\x1b[31mred"]
for n in names:
    with open(n, "wb") as f:
        f.write(b"1")
print(len(names))
)PY"};
  c.timeout_seconds = 30;
  c.maximum_output_bytes = 4096;
  auto r = run(c);
  ASSERT_EQ(r.stdout_data, "12\n") << r.stderr_data;
  auto m = byPath(r);
  EXPECT_EQ(m.size(), 12u);
  for (const std::string& name :
       {std::string("a\nb"), std::string("a\rb"), std::string("\xff\xfe.txt"),
        std::string("\xed\xa0\x80"), std::string("t\tab"), std::string("-rf"), std::string("   "),
        std::string("..data"), std::string("\\"), std::string(255, 'x'),
        std::string("\x1b[31mred")}) {
    EXPECT_TRUE(m.count(name)) << "missing: " << name;
  }
  EXPECT_EQ(m.count("a"), 0u) << "a\\nb was split";
  EXPECT_EQ(m.count("b"), 0u) << "a\\nb was split";
}

}  // namespace
}  // namespace airlock::testing
