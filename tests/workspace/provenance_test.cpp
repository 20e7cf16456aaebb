// The local workspace's provenance record (spec 000, "Provenance, and why
// the handle answers it"): write -> TOOL_WRITTEN; what a
// command created or modified (reported by the adapter) -> SANDBOX_WRITTEN;
// deleted -> dropped; anything else UNKNOWN, including whenever the record
// cannot vouch for the bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "airlock/workspace/local_workspace.h"
#include "test_tree.h"

namespace airlock::workspace {
namespace {

using testing::TempDir;
using P = WorkspaceProvenance;

FileChange change(std::string path, ChangeKind kind) {
  FileChange c;
  c.path = std::move(path);
  c.change = kind;
  return c;
}

class ProvenanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = makeLocalWorkspace(
        sys::UniqueFd(::openat(tmp_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), ::geteuid(),
        ::getegid());
  }
  P of(const std::string& path) {
    auto p = ws_->provenance(path);
    EXPECT_TRUE(p.has_value()) << p.error().message();
    return p.value_or(P::kUnknown);
  }
  // What an adapter does around one command.
  void command(const std::vector<FileChange>& changes, bool complete = true) {
    ws_->beginSandboxCommand();
    ws_->recordSandboxChanges(changes, complete);
  }

  TempDir tmp_;
  std::shared_ptr<LocalWorkspaceHandle> ws_;
};

TEST_F(ProvenanceTest, NamesAreTheSpecsStrings) {
  EXPECT_STREQ(workspaceProvenanceName(P::kUnknown), "unknown");
  EXPECT_STREQ(workspaceProvenanceName(P::kToolWritten), "tool_written");
  EXPECT_STREQ(workspaceProvenanceName(P::kSandboxWritten), "sandbox_written");
}

TEST_F(ProvenanceTest, NeverSeenIsUnknown) {
  EXPECT_EQ(of("nothing.txt"), P::kUnknown);
  EXPECT_EQ(of("."), P::kUnknown);
  // A file placed by someone other than the handle (copy-in, a fixture).
  ASSERT_TRUE(testing::writeFileAt(tmp_.fd(), "fixture.txt", "x"));
  EXPECT_EQ(of("fixture.txt"), P::kUnknown);
}

TEST_F(ProvenanceTest, WriteRecordsToolWritten) {
  ASSERT_TRUE(ws_->write("a.txt", "a"));
  ASSERT_TRUE(ws_->write("d/e/b.txt", "b"));
  EXPECT_EQ(of("a.txt"), P::kToolWritten);
  EXPECT_EQ(of("d/e/b.txt"), P::kToolWritten);
  EXPECT_EQ(of("d/e"), P::kUnknown);
  ASSERT_TRUE(ws_->mkdir("m"));
  EXPECT_EQ(of("m"), P::kUnknown);
}

TEST_F(ProvenanceTest, PlacedFilesAreUnknown) {
  ASSERT_TRUE(ws_->write("a.txt", "tool"));
  ASSERT_TRUE(ws_->placeFile("a.txt", "copied in"));
  ASSERT_TRUE(ws_->placeFile("d/b.txt", "copied in"));
  EXPECT_EQ(*ws_->read("a.txt"), "copied in");
  EXPECT_EQ(of("a.txt"), P::kUnknown);
  EXPECT_EQ(of("d/b.txt"), P::kUnknown);
}

TEST_F(ProvenanceTest, FailedWriteRecordsNothing) {
  ASSERT_TRUE(ws_->mkdir("dir"));
  EXPECT_FALSE(ws_->write("dir", "x"));
  EXPECT_EQ(of("dir"), P::kUnknown);
}

TEST_F(ProvenanceTest, SandboxChangesOverrideAndDeletesDrop) {
  ASSERT_TRUE(ws_->write("a.txt", "a"));
  ASSERT_TRUE(ws_->write("b.txt", "b"));
  ASSERT_TRUE(ws_->write("c.txt", "c"));
  command({change("a.txt", ChangeKind::kModified), change("b.txt", ChangeKind::kDeleted),
           change("new.txt", ChangeKind::kCreated)});
  EXPECT_EQ(of("a.txt"), P::kSandboxWritten);
  EXPECT_EQ(of("b.txt"), P::kUnknown);
  EXPECT_EQ(of("new.txt"), P::kSandboxWritten);
  EXPECT_EQ(of("c.txt"), P::kToolWritten);  // untouched by the command
  // The tool writes over a sandbox file: its bytes now.
  ASSERT_TRUE(ws_->write("new.txt", "tool"));
  EXPECT_EQ(of("new.txt"), P::kToolWritten);
}

TEST_F(ProvenanceTest, ChangeAtAPathDropsWhatWasRecordedBelowIt) {
  ASSERT_TRUE(ws_->write("d/x.txt", "x"));
  command({change("d", ChangeKind::kCreated)});  // d is now a file or a symlink
  EXPECT_EQ(of("d/x.txt"), P::kUnknown);
  EXPECT_EQ(of("d"), P::kSandboxWritten);
}

TEST_F(ProvenanceTest, IncompleteListingDropsEveryToolWrittenEntry) {
  ASSERT_TRUE(ws_->write("a.txt", "a"));
  ASSERT_TRUE(ws_->write("b.txt", "b"));
  command({change("s.txt", ChangeKind::kCreated)});
  command({change("b.txt", ChangeKind::kModified)}, /*complete=*/false);
  EXPECT_EQ(of("a.txt"), P::kUnknown);
  EXPECT_EQ(of("b.txt"), P::kSandboxWritten);
  EXPECT_EQ(of("s.txt"), P::kSandboxWritten);
}

TEST_F(ProvenanceTest, WriteDuringACommandIsNotToolWritten) {
  ASSERT_TRUE(ws_->write("a.txt", "before"));
  ws_->beginSandboxCommand();
  ASSERT_TRUE(ws_->write("a.txt", "during"));
  ASSERT_TRUE(ws_->write("b.txt", "during"));
  EXPECT_EQ(of("a.txt"), P::kUnknown);
  EXPECT_EQ(of("b.txt"), P::kUnknown);
  ws_->recordSandboxChanges({}, true);
  ASSERT_TRUE(ws_->write("b.txt", "after"));
  EXPECT_EQ(of("b.txt"), P::kToolWritten);
}

TEST_F(ProvenanceTest, WriteThroughASymlinkIsNotRecorded) {
  ASSERT_TRUE(testing::mkdirs(tmp_.fd(), "real"));
  ASSERT_TRUE(testing::symlinkAt(tmp_.fd(), "real", "link"));
  ASSERT_TRUE(ws_->write("link/t.txt", "t"));
  EXPECT_EQ(of("link/t.txt"), P::kUnknown);
  EXPECT_EQ(of("real/t.txt"), P::kUnknown);
  // Replacing a symlink at the name itself writes a real file: recorded.
  ASSERT_TRUE(testing::symlinkAt(tmp_.fd(), "real/t.txt", "l2"));
  ASSERT_TRUE(ws_->write("l2", "t"));
  EXPECT_EQ(of("l2"), P::kToolWritten);
}

TEST_F(ProvenanceTest, PathsPassTheSameLexicalCheck) {
  for (const char* bad : {"../x", "/etc/passwd", "a//b", "a/./b", "a/../b"}) {
    auto p = ws_->provenance(bad);
    ASSERT_FALSE(p.has_value()) << bad;
    EXPECT_EQ(p.error().code, ErrorCode::kWorkspaceEscape) << bad;
  }
  EXPECT_FALSE(ws_->provenance(std::string("a\0b", 3)).has_value());
}

}  // namespace
}  // namespace airlock::workspace
