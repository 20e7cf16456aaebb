// copyInArchive (red-team case B07): tar and zip archives built
// here with libarchive's writer. Good members are extracted through the
// handle; every bad member kind is refused with an error naming it, and the
// check pass runs first, so the workspace is left empty.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "airlock/workspace/local_workspace.h"
#include "test_tree.h"

namespace airlock::workspace {
namespace {

using testing::TempDir;

struct Member {
  enum Kind { kFile, kDir, kSymlink, kHardlink, kCharDevice, kFifo } kind = kFile;
  std::string name;
  std::string data;    // kFile
  std::string target;  // kSymlink, kHardlink
};

Member file(std::string name, std::string data) {
  return {Member::kFile, std::move(name), std::move(data), {}};
}
Member dir(std::string name) {
  return {Member::kDir, std::move(name), {}, {}};
}

enum class Format { kTar, kTarGz, kZip };

// Writes `members` to `path` with libarchive's writer; false on any error.
bool writeArchive(const std::string& path, Format format, const std::vector<Member>& members) {
  struct archive* a = archive_write_new();
  if (format == Format::kZip) {
    archive_write_set_format_zip(a);
  } else {
    archive_write_set_format_pax_restricted(a);
    if (format == Format::kTarGz) archive_write_add_filter_gzip(a);
  }
  bool ok = archive_write_open_filename(a, path.c_str()) == ARCHIVE_OK;
  for (const auto& m : members) {
    if (!ok) break;
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_perm(e, 0644);
    switch (m.kind) {
      case Member::kFile:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, static_cast<la_int64_t>(m.data.size()));
        break;
      case Member::kDir:
        archive_entry_set_filetype(e, AE_IFDIR);
        archive_entry_set_perm(e, 0755);
        break;
      case Member::kSymlink:
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, m.target.c_str());
        break;
      case Member::kHardlink:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, m.target.c_str());
        archive_entry_set_size(e, 0);
        break;
      case Member::kCharDevice:
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdevmajor(e, 1);
        archive_entry_set_rdevminor(e, 3);
        break;
      case Member::kFifo:
        archive_entry_set_filetype(e, AE_IFIFO);
        break;
    }
    ok = archive_write_header(a, e) == ARCHIVE_OK;
    if (ok && m.kind == Member::kFile && !m.data.empty()) {
      ok = archive_write_data(a, m.data.data(), m.data.size()) ==
           static_cast<la_ssize_t>(m.data.size());
    }
    archive_entry_free(e);
  }
  ok = archive_write_close(a) == ARCHIVE_OK && ok;
  archive_write_free(a);
  return ok;
}

class CopyInArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = makeLocalWorkspace(
        sys::UniqueFd(::openat(dest_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), ::geteuid(),
        ::getegid());
  }
  std::string build(Format format, const std::vector<Member>& members) {
    const std::string path = src_.sub(format == Format::kZip ? "a.zip" : "a.tar");
    ::unlink(path.c_str());
    EXPECT_TRUE(writeArchive(path, format, members));
    return path;
  }
  void expectEmpty() {
    auto list = ws_->listdir(".");
    ASSERT_TRUE(list.has_value());
    EXPECT_TRUE(list->empty()) << "first entry: " << (*list)[0].name;
  }
  // A good member first, then the bad one: refused, naming it, and nothing
  // was written.
  void expectRefused(Format format, const Member& bad, const std::string& message_part) {
    const std::string path = build(format, {file("good.txt", "good"), bad});
    auto r = copyInArchive(path, *ws_);
    ASSERT_FALSE(r.has_value()) << bad.name;
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
    EXPECT_NE(r.error().context.find(message_part), std::string::npos) << r.error().context;
    EXPECT_EQ(r.error().context.find(dest_.path()), std::string::npos) << r.error().context;
    expectEmpty();
  }

  TempDir src_;
  TempDir dest_;
  std::shared_ptr<LocalWorkspaceHandle> ws_;
};

const std::vector<Member> kGood = {
    dir("./"),
    dir("./pkg/"),
    dir("pkg/sub/"),
    file("./pkg/sub/data.bin", std::string("\0\x01\xff", 3)),
    file("top.txt", "hi\n"),
    file("implied/parent.txt", "p"),
    dir("empty/"),
    file("zero", ""),
};

void expectGoodExtracted(WorkspaceHandle& ws) {
  EXPECT_EQ(ws.read("top.txt").value_or("?"), "hi\n");
  EXPECT_EQ(ws.read("pkg/sub/data.bin").value_or("?"), std::string("\0\x01\xff", 3));
  EXPECT_EQ(ws.read("implied/parent.txt").value_or("?"), "p");
  EXPECT_EQ(ws.read("zero").value_or("?"), "");
  auto empty = ws.listdir("empty");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
  auto top = ws.listdir(".");
  ASSERT_TRUE(top.has_value());
  std::vector<std::string> names;
  for (const auto& e : *top) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"empty", "implied", "pkg", "top.txt", "zero"}));
  // Extracted files are UNKNOWN: an archive is not the tool's own write.
  EXPECT_EQ(ws.provenance("top.txt").value(), WorkspaceProvenance::kUnknown);
}

TEST_F(CopyInArchiveTest, ExtractsTar) {
  auto r = copyInArchive(build(Format::kTar, kGood), *ws_);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  expectGoodExtracted(*ws_);
}

TEST_F(CopyInArchiveTest, ExtractsGzippedTar) {
  auto r = copyInArchive(build(Format::kTarGz, kGood), *ws_);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  expectGoodExtracted(*ws_);
}

TEST_F(CopyInArchiveTest, ExtractsZip) {
  auto r = copyInArchive(build(Format::kZip, kGood), *ws_);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  expectGoodExtracted(*ws_);
}

TEST_F(CopyInArchiveTest, RefusesSymlinkMembers) {
  expectRefused(Format::kTar, {Member::kSymlink, "lnk", {}, "/"},
                "archive member \"lnk\" is a symlink");
  expectRefused(Format::kZip, {Member::kSymlink, "lnk", {}, "/"},
                "archive member \"lnk\" is a symlink");
  // B07: a symlink whose target is long and ends in "..": refused for being
  // a symlink, whatever the target.
  expectRefused(Format::kTar,
                {Member::kSymlink, "long", {}, std::string(1100, 'a') + "/../../../../etc"},
                "archive member \"long\" is a symlink");
}

TEST_F(CopyInArchiveTest, RefusesHardLinkMembers) {
  expectRefused(Format::kTar, {Member::kHardlink, "hl", {}, "/etc/passwd"},
                "archive member \"hl\" is a hard link");
  expectRefused(Format::kTar, {Member::kHardlink, "hl2", {}, "good.txt"},
                "archive member \"hl2\" is a hard link");
}

TEST_F(CopyInArchiveTest, RefusesDevicesAndFifos) {
  expectRefused(Format::kTar, {Member::kCharDevice, "null", {}, {}},
                "archive member \"null\" is a device");
  expectRefused(Format::kTar, {Member::kFifo, "fifo", {}, {}}, "archive member \"fifo\" is a FIFO");
}

TEST_F(CopyInArchiveTest, RefusesNamesThatLeaveTheWorkspace) {
  for (Format format : {Format::kTar, Format::kZip}) {
    for (const char* name : {"../evil", "../../x", "/abs", "/abs/x", "a/../../b", "a//b", "./../x",
                             "././x", "a/./b", ".."}) {
      SCOPED_TRACE(name);
      expectRefused(format, file(name, "evil"),
                    "archive member \"" + std::string(name) + "\" leaves the workspace");
    }
  }
}

// B07: every member of the case, in tar and zip. Traversing names, links
// (including a link followed by a file below it, and a link whose long
// target ends in ".."), hard links, devices and FIFOs are refused naming the
// member and nothing is written; a backslash is an ordinary byte of a Linux
// name, so "..\..\x" is one file in the workspace root and nothing appears
// outside it. (A NUL cannot be inside a member name: tar and zip names end
// at the first NUL, so such a name is its prefix. Oversized members and
// many members meet the workspace's own limits: redteam B07 tests.)
TEST_F(CopyInArchiveTest, B07_ArchiveSlipLinkAndSpecialMembersAreRefused) {
  for (Format format : {Format::kTar, Format::kZip}) {
    SCOPED_TRACE(format == Format::kTar ? "tar" : "zip");
    for (const char* name : {"../../x", "/abs/x", "a/../../x"})
      expectRefused(format, file(name, "evil"),
                    "archive member \"" + std::string(name) + "\" leaves the workspace");
    expectRefused(format, {Member::kSymlink, "lnk", {}, "/"},
                  "archive member \"lnk\" is a symlink");
    expectRefused(format,
                  {Member::kSymlink, "long", {}, std::string(1100, 'a') + "/../../../../etc"},
                  "archive member \"long\" is a symlink");
    // The link, then a file below it: refused at the link, before the file.
    const std::string path =
        build(format, {{Member::kSymlink, "lnk", {}, "/"}, file("lnk/etc/cron.d/x", "evil")});
    auto r = copyInArchive(path, *ws_);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().context.find("archive member \"lnk\" is a symlink"), std::string::npos)
        << r.error().context;
    expectEmpty();
  }
  expectRefused(Format::kTar, {Member::kHardlink, "hl", {}, "/etc/passwd"},
                "archive member \"hl\" is a hard link");
  expectRefused(Format::kTar, {Member::kCharDevice, "null", {}, {}},
                "archive member \"null\" is a device");
  expectRefused(Format::kTar, {Member::kFifo, "fifo", {}, {}}, "archive member \"fifo\" is a FIFO");

  // Backslashes: one ordinary name inside the workspace, nothing outside.
  // The workspace is outer/ws, so "outside" is a directory only this test
  // writes to: after the copy-in it still holds nothing but ws.
  TempDir outer;
  ASSERT_TRUE(testing::mkdirs(outer.fd(), "ws"));
  auto nested = makeLocalWorkspace(
      sys::UniqueFd(::openat(outer.fd(), "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), ::geteuid(),
      ::getegid());
  auto ok = copyInArchive(build(Format::kTar, {file("..\\..\\x", "data")}), *nested);
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  auto list = nested->listdir(".");
  ASSERT_TRUE(list.has_value());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "..\\..\\x");
  std::vector<std::string> beside;
  for (const auto& e : std::filesystem::directory_iterator(outer.path()))
    beside.push_back(e.path().filename());
  EXPECT_EQ(beside, std::vector<std::string>{"ws"});
}

TEST_F(CopyInArchiveTest, RefusesAMemberBelowAFileMember) {
  expectRefused(Format::kTar, file("good.txt/x", "x"),
                "archive member \"good.txt/x\" lies below a file member");
}

TEST_F(CopyInArchiveTest, RefusesAMemberOverTheLimit) {
  expectRefused(Format::kTar, file("big", std::string((std::size_t{64} << 20) + 1, 'x')),
                "archive member \"big\" is larger than the 64 MiB per-member limit");
}

TEST_F(CopyInArchiveTest, RefusesAFileThatIsNotAnArchive) {
  ASSERT_TRUE(testing::writeFileAt(src_.fd(), "notes.txt", "just some text, not an archive\n"));
  auto r = copyInArchive(src_.sub("notes.txt"), *ws_);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(r.error().context.find("is not a readable tar or zip archive"), std::string::npos)
      << r.error().context;
  expectEmpty();
  auto missing = copyInArchive(src_.sub("missing.tar"), *ws_);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().context.find("does not exist"), std::string::npos);
  auto directory = copyInArchive(src_.path(), *ws_);
  ASSERT_FALSE(directory.has_value());
  EXPECT_NE(directory.error().context.find("is not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace airlock::workspace
