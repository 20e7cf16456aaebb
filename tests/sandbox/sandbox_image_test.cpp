// What a sandbox sees of its image (sandbox_image.h): the host image's
// entries, an unpacked root's, and a mechanism's set of images.
#include "airlock/sandbox/sandbox_image.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "test_tree.h"

namespace airlock {
namespace {

using workspace::testing::TempDir;

const std::string kDigest = std::string("sha256:") + std::string(64, 'b');

const ImageEntry* entryAt(const SandboxImage& image, const std::string& path) {
  for (const auto& e : image.entries)
    if (e.path == path) return &e;
  return nullptr;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(HostImage, BindsTheImageDirectoriesAndMirrorsTheUsrMergeLinks) {
  auto image = hostImage(kDigest, {"/usr"}, {"/etc/ld.so.cache", "/etc/no-such-entry"});
  ASSERT_TRUE(image) << image.error().message();
  EXPECT_EQ(image->digest, kDigest);
  EXPECT_TRUE(image->env.empty());
  const ImageEntry* usr = entryAt(*image, "/usr");
  ASSERT_NE(usr, nullptr);
  EXPECT_EQ(usr->kind, ImageEntry::Kind::kDirectory);
  EXPECT_EQ(usr->source, "/usr");
  struct stat st {};
  if (::lstat("/bin", &st) == 0 && S_ISLNK(st.st_mode)) {
    const ImageEntry* bin = entryAt(*image, "/bin");
    ASSERT_NE(bin, nullptr);
    EXPECT_EQ(bin->kind, ImageEntry::Kind::kSymlink);
    char text[256] = {};
    ASSERT_GT(::readlink("/bin", text, sizeof text - 1), 0);
    EXPECT_EQ(bin->source, text);
  }
  EXPECT_EQ(entryAt(*image, "/etc/no-such-entry"), nullptr) << "an absent /etc entry is left out";
  if (::access("/etc/ld.so.cache", F_OK) == 0) {
    ASSERT_NE(entryAt(*image, "/etc/ld.so.cache"), nullptr);
    EXPECT_EQ(image->entries.back().path, "/etc/ld.so.cache") << "/etc's entries come last";
  }
}

TEST(HostImage, AMissingImageDirectoryIsNamed) {
  auto image = hostImage(kDigest, {"/no-such-image-dir"}, {});
  ASSERT_FALSE(image);
  EXPECT_EQ(image.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_NE(image.error().context.find("/no-such-image-dir"), std::string::npos);
}

// An unpacked root: its top-level entries but the sandbox's own places,
// then its /etc entries but the generated ones; other file types left out.
TEST(UnpackedImage, TakesTheRootsEntriesButThePlacesEverySandboxMakes) {
  TempDir tree;
  const std::string root = tree.sub("root");
  for (const char* d : {"", "/usr", "/usr/bin", "/opt", "/proc", "/tmp", "/workspace", "/run",
                        "/dev", "/sys", "/etc", "/etc/ssl", "/.airlock"})
    ASSERT_EQ(::mkdir((root + d).c_str(), 0755), 0) << d;
  ASSERT_EQ(::symlink("usr/bin", (root + "/bin").c_str()), 0);
  writeFile(root + "/top-file", "x");
  ASSERT_EQ(::mkfifo((root + "/a-fifo").c_str(), 0644), 0);
  writeFile(root + "/etc/passwd", "image's own passwd\n");
  writeFile(root + "/etc/os-release", "ID=test\n");
  ASSERT_EQ(::symlink("/proc/mounts", (root + "/etc/mtab").c_str()), 0);
  auto image = unpackedImage(kDigest, root, {"PATH=/opt/bin:/usr/bin"});
  ASSERT_TRUE(image) << image.error().message();
  EXPECT_EQ(image->env, std::vector<std::string>{"PATH=/opt/bin:/usr/bin"});
  std::vector<std::string> paths;
  for (const auto& e : image->entries) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/bin", "/opt", "/top-file", "/usr", "/etc/mtab",
                                             "/etc/os-release", "/etc/ssl"}));
  EXPECT_EQ(entryAt(*image, "/bin")->kind, ImageEntry::Kind::kSymlink);
  EXPECT_EQ(entryAt(*image, "/bin")->source, "usr/bin");
  EXPECT_EQ(entryAt(*image, "/usr")->source, root + "/usr");
  EXPECT_EQ(entryAt(*image, "/top-file")->kind, ImageEntry::Kind::kFile);
  EXPECT_EQ(entryAt(*image, "/etc/ssl")->kind, ImageEntry::Kind::kDirectory);
  EXPECT_EQ(entryAt(*image, "/etc/mtab")->source, "/proc/mounts");
}

TEST(UnpackedImage, AMissingRootIsAnError) {
  TempDir tree;
  auto image = unpackedImage(kDigest, tree.sub("absent"), {});
  ASSERT_FALSE(image);
  EXPECT_EQ(image.error().code, ErrorCode::kExecutionUnavailable);
}

// A root under a directory others cannot search is named with its mode;
// made searchable, the same image is fine.
TEST(UnpackedImage, ARootTheSandboxsUserCannotReachIsNamed) {
  TempDir tree;  // mode 0700, as mkdtemp makes it
  const std::string root = tree.sub("store/root");
  ASSERT_EQ(::mkdir(tree.sub("store").c_str(), 0711), 0);
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((root + "/usr").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(tree.path().c_str(), 0700), 0);
  auto image = unpackedImage(kDigest, root, {});
  ASSERT_TRUE(image) << image.error().message();
  auto refused = checkReachableByAnyUser(*image);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_NE(refused.error().message().find(tree.path() + " is mode 0700"), std::string::npos)
      << refused.error().message();
  ASSERT_EQ(::chmod(tree.path().c_str(), 0711), 0);
  EXPECT_TRUE(checkReachableByAnyUser(*image));
}

TEST(MechanismImages, TheHostImageFirstThenTheOthersEachOnce) {
  const std::string other = std::string("sha256:") + std::string(64, 'c');
  auto images = mechanismImages(kDigest, {"/usr"}, {}, {SandboxImage{other, {}, {}}});
  ASSERT_TRUE(images) << images.error().message();
  ASSERT_EQ(images->size(), 2u);
  EXPECT_EQ((*images)[0]->digest, kDigest);
  EXPECT_EQ((*images)[1]->digest, other);

  auto twice = mechanismImages(kDigest, {"/usr"}, {}, {SandboxImage{kDigest, {}, {}}});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ErrorCode::kConfigurationError);
  auto tag = mechanismImages(kDigest, {"/usr"}, {}, {SandboxImage{"python:3.12", {}, {}}});
  ASSERT_FALSE(tag);
  EXPECT_NE(tag.error().context.find("python:3.12"), std::string::npos);
}

}  // namespace
}  // namespace airlock
