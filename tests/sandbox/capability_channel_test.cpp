// The in-process capability channel (capability_channel.h,
// openDirectoryCapabilityChannel) over a temporary host directory: its file
// writes (path rules, symlinks, owner and mode), its socket, and its
// connections' reads (data, end, stop, timeout) and sends.
#include "airlock/port/capability_channel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_tree.h"

namespace airlock {
namespace {

using std::chrono::milliseconds;
using sys::UniqueFd;
using Status = CapabilityReadStatus;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// <root>/cap is the capability directory; <root> is outside it.
class CapabilityChannelTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::mkdir(dir_.c_str(), 0755), 0); }
  void TearDown() override { channel_.reset(); }  // before the tree goes

  // The channel over dir_, opened now (after any chown of the test).
  CapabilityChannel& channel() {
    if (!channel_) {
      auto c = openDirectoryCapabilityChannel(
          UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)));
      EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message());
      if (c) channel_ = std::move(*c);
    }
    return *channel_;
  }

  // A client connected to the channel socket (queued until accepted).
  UniqueFd connectClient() {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = dir_ + "/" + std::string(kCapabilitySocketName);
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << std::strerror(errno);
    return fd;
  }

  // Listens, connects a client, and accepts its connection.
  std::unique_ptr<CapabilityConnection> acceptedConnection() {
    auto listening = channel().listen();
    EXPECT_TRUE(listening) << (listening ? "" : listening.error().message());
    client_ = connectClient();
    EXPECT_EQ(channel().waitForConnection(token()), CapabilityWait::kConnection);
    auto conn = channel().accept();
    EXPECT_NE(conn, nullptr);
    return conn;
  }

  const CancelToken& token() {
    if (!token_) {
      auto t = CancelToken::create();
      EXPECT_TRUE(t.has_value());
      token_.emplace(std::move(*t));
    }
    return *token_;
  }

  workspace::testing::TempDir tree_;  // removed after the channel (TearDown)
  std::string root_ = tree_.path();
  std::string dir_ = root_ + "/cap";
  std::unique_ptr<CapabilityChannel> channel_;
  UniqueFd client_;
  std::optional<CancelToken> token_;
};

TEST_F(CapabilityChannelTest, WriteFileRefusesPathsOutsideTheDirectoryWithAClearError) {
  const std::array<std::pair<const char*, const char*>, 8> refused = {{
      {"../x", "\"..\""},
      {"a/../../x", "\"..\""},
      {"/etc/x", "relative"},
      {"", "empty"},
      {"a//x", "empty"},
      {"./x", "\".\""},
      {"a/", "empty"},
      {"..", "\"..\""},
  }};
  for (const auto& [path, why] : refused) {
    auto r = channel().writeFile(path, "bytes", 0644, CapabilityFileOwner::kService);
    ASSERT_FALSE(r) << path;
    EXPECT_EQ(r.error().code, ErrorCode::kExecutionUnavailable) << path;
    EXPECT_NE(r.error().message().find("refused"), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find(why), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find(std::string("\"") + path + "\""), std::string::npos)
        << "names the path: " << r.error().message();
    auto removed = channel().removeFile(path);
    EXPECT_FALSE(removed) << "removeFile keeps the same rules: " << path;
  }
  EXPECT_FALSE(exists(root_ + "/x")) << "nothing was written beside the directory";
  EXPECT_FALSE(exists("/etc/x"));
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "nothing was written inside either";
  EXPECT_FALSE(channel().writeFile("ok", "x", 04755, CapabilityFileOwner::kService))
      << "only permission bits";
}

TEST_F(CapabilityChannelTest, WriteFileCreatesParentsAndSetsExactlyTheModeAsked) {
  const mode_t old_umask = ::umask(077);  // the modes asked for hold whatever the umask
  auto r = channel().writeFile("a/b/c.txt", "hello", 0640, CapabilityFileOwner::kService);
  auto exe = channel().writeFile("bin/tool", "#!/bin/sh\n", 0755, CapabilityFileOwner::kService);
  ::umask(old_umask);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_TRUE(exe) << exe.error().message();
  EXPECT_EQ(slurp(dir_ + "/a/b/c.txt"), "hello");
  struct stat st {};
  ASSERT_EQ(::lstat((dir_ + "/a/b/c.txt").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_uid, ::geteuid()) << "kService: the service's own";
  ASSERT_EQ(::lstat((dir_ + "/bin/tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  for (const char* d : {"/a", "/a/b", "/bin"}) {
    ASSERT_EQ(::lstat((dir_ + d).c_str(), &st), 0) << d;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << d;
    EXPECT_EQ(st.st_mode & 07777, 0755u) << d;
  }
}

TEST_F(CapabilityChannelTest, WriteFileReplacesTheFileAndLeavesNoTemporaryBehind) {
  ASSERT_TRUE(channel().writeFile("program/main.py", "first", 0644, CapabilityFileOwner::kService));
  ASSERT_TRUE(
      channel().writeFile("program/main.py", "second", 0400, CapabilityFileOwner::kService));
  EXPECT_EQ(slurp(dir_ + "/program/main.py"), "second");
  struct stat st {};
  ASSERT_EQ(::lstat((dir_ + "/program/main.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/program"))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"main.py"});
}

TEST_F(CapabilityChannelTest, SandboxUserFilesAndTheSocketBelongToTheDirectoryOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown the directory";
  ASSERT_EQ(::chown(dir_.c_str(), 4242, 4243), 0);
  ASSERT_TRUE(channel().writeFile("token", "t0k3n", 0400, CapabilityFileOwner::kSandboxUser));
  ASSERT_TRUE(channel().writeFile("lib/g.py", "pass", 0644, CapabilityFileOwner::kService));
  struct stat st {};
  ASSERT_EQ(::lstat((dir_ + "/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_gid, 4243u);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(slurp(dir_ + "/token"), "t0k3n");
  ASSERT_EQ(::lstat((dir_ + "/lib/g.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "kService: the service's own";

  auto listening = channel().listen();
  ASSERT_TRUE(listening) << listening.error().message();
  ASSERT_EQ(::lstat((dir_ + "/cap.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_gid, 4243u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(CapabilityChannelTest, PlantedSymlinksAreNotFollowed) {
  const std::string outside = root_ + "/outside";
  ASSERT_EQ(::mkdir(outside.c_str(), 0755), 0);
  { std::ofstream(outside + "/victim") << "original"; }
  ASSERT_EQ(::symlink(outside.c_str(), (dir_ + "/evil").c_str()), 0);
  ASSERT_EQ(::symlink((outside + "/victim").c_str(), (dir_ + "/link").c_str()), 0);

  // A symlink as a parent: refused, nothing written through it.
  auto through = channel().writeFile("evil/x", "bytes", 0644, CapabilityFileOwner::kService);
  ASSERT_FALSE(through);
  EXPECT_EQ(through.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_FALSE(exists(outside + "/x"));
  EXPECT_FALSE(exists(outside + "/x.new"));
  EXPECT_FALSE(channel().removeFile("evil/victim"));
  EXPECT_TRUE(exists(outside + "/victim")) << "removeFile did not follow it either";

  // A symlink at the path itself: replaced by the file, its target untouched.
  auto over = channel().writeFile("link", "new", 0644, CapabilityFileOwner::kService);
  ASSERT_TRUE(over) << over.error().message();
  EXPECT_EQ(slurp(outside + "/victim"), "original");
  struct stat st {};
  ASSERT_EQ(::lstat((dir_ + "/link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(slurp(dir_ + "/link"), "new");
}

TEST_F(CapabilityChannelTest, RemoveFileRemovesAndAMissingFileIsNotAnError) {
  ASSERT_TRUE(channel().writeFile("d/f", "x", 0644, CapabilityFileOwner::kService));
  ASSERT_TRUE(channel().removeFile("d/f"));
  EXPECT_FALSE(exists(dir_ + "/d/f"));
  EXPECT_TRUE(exists(dir_ + "/d")) << "only the file";
  EXPECT_TRUE(channel().removeFile("d/f"));
  EXPECT_TRUE(channel().removeFile("no/such/file"));
  auto dir = channel().removeFile("d");
  ASSERT_FALSE(dir) << "not a directory";
  EXPECT_EQ(dir.error().code, ErrorCode::kExecutionUnavailable);
}

TEST_F(CapabilityChannelTest, ListenCreatesTheSocketOnceAndCloseRemovesIt) {
  EXPECT_EQ(channel().waitForConnection(token()), CapabilityWait::kClosed) << "not listening yet";
  EXPECT_EQ(channel().accept(), nullptr);
  ASSERT_TRUE(channel().listen());
  struct stat st {};
  ASSERT_EQ(::lstat((dir_ + "/cap.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto again = channel().listen();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(channel().accept(), nullptr) << "nothing queued: accept does not wait";
  EXPECT_FALSE(channel().connectionQueued());
  channel().close();
  EXPECT_FALSE(exists(dir_ + "/cap.sock"));
  channel().close();  // idempotent
}

TEST_F(CapabilityChannelTest, AcceptAfterCloseYieldsNothing) {
  ASSERT_TRUE(channel().listen());
  UniqueFd client = connectClient();
  EXPECT_TRUE(channel().connectionQueued());
  channel().close();
  EXPECT_EQ(channel().accept(), nullptr);
  EXPECT_FALSE(channel().connectionQueued());
  EXPECT_EQ(channel().waitForConnection(token()), CapabilityWait::kClosed);
  char c = 0;
  EXPECT_LE(::read(client.get(), &c, 1), 0) << "the queued peer sees its stream end";
}

TEST_F(CapabilityChannelTest, WaitForConnectionReportsAConnectionThenTheStopToken) {
  ASSERT_TRUE(channel().listen());
  UniqueFd client = connectClient();
  EXPECT_EQ(channel().waitForConnection(token()), CapabilityWait::kConnection);
  EXPECT_TRUE(channel().connectionQueued());
  auto conn = channel().accept();
  ASSERT_NE(conn, nullptr);
  EXPECT_FALSE(channel().connectionQueued());
  token().cancel();
  EXPECT_EQ(channel().waitForConnection(token()), CapabilityWait::kStopped);
  UniqueFd second = connectClient();
  EXPECT_EQ(channel().waitForConnection(token()), CapabilityWait::kStopped)
      << "the stop token is checked first";
}

TEST_F(CapabilityChannelTest, ConnectionReadsAndSendsBytes) {
  auto conn = acceptedConnection();
  ASSERT_NE(conn, nullptr);
  ASSERT_EQ(::send(client_.get(), "hello", 5, MSG_NOSIGNAL), 5);
  std::array<char, 64> buf{};
  auto got = conn->read(buf);
  ASSERT_EQ(got.status, Status::kData);
  EXPECT_EQ(std::string(buf.data(), got.bytes), "hello");
  ASSERT_EQ(::send(client_.get(), "again", 5, MSG_NOSIGNAL), 5);
  got = conn->read(buf, &token(), milliseconds(10000));
  ASSERT_EQ(got.status, Status::kData);
  EXPECT_EQ(std::string(buf.data(), got.bytes), "again");

  ASSERT_TRUE(conn->send("answer"));
  char in[16] = {};
  ASSERT_EQ(::recv(client_.get(), in, sizeof in, 0), 6);
  EXPECT_EQ(std::string(in, 6), "answer");

  client_.reset();
  got = conn->read(buf);
  EXPECT_EQ(got.status, Status::kEnd) << "the peer closed";
  EXPECT_EQ(got.bytes, 0u);
  EXPECT_FALSE(conn->send("nobody reads this")) << "the peer is gone";
}

TEST_F(CapabilityChannelTest, ReadReportsStoppedWhenTheTokenIsCancelled) {
  auto conn = acceptedConnection();
  ASSERT_NE(conn, nullptr);
  auto waiting = std::async(std::launch::async, [&] {
    std::array<char, 64> buf{};
    return conn->read(buf, &token(), CapabilityConnection::kNoTimeout).status;
  });
  token().cancel();
  if (waiting.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the read did not stop";
    client_.reset();  // ends the read, so the test can end
  }
  EXPECT_EQ(waiting.get(), Status::kStopped);

  // A cancelled token wins over bytes waiting; the bytes stay readable.
  ASSERT_EQ(::send(client_.get(), "x", 1, MSG_NOSIGNAL), 1);
  std::array<char, 8> buf{};
  EXPECT_EQ(conn->read(buf, &token(), milliseconds(1000)).status, Status::kStopped);
  auto got = conn->read(buf);
  ASSERT_EQ(got.status, Status::kData);
  EXPECT_EQ(got.bytes, 1u);
}

TEST_F(CapabilityChannelTest, ShutdownReadWakesABlockedReadWithEnd) {
  auto conn = acceptedConnection();
  ASSERT_NE(conn, nullptr);
  auto waiting = std::async(std::launch::async, [&] {
    std::array<char, 64> buf{};
    return conn->read(buf).status;  // no stop, no timeout: the blocking read
  });
  conn->shutdownRead();
  if (waiting.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "shutdownRead did not wake the read";
    client_.reset();
  }
  EXPECT_EQ(waiting.get(), Status::kEnd);
  std::array<char, 8> buf{};
  EXPECT_EQ(conn->read(buf, &token(), milliseconds(1000)).status, Status::kEnd)
      << "and every later read, waiting or not";
  EXPECT_TRUE(conn->send("still")) << "the other direction stays open";
  char in[8] = {};
  EXPECT_EQ(::recv(client_.get(), in, sizeof in, 0), 5);
}

TEST_F(CapabilityChannelTest, ReadTimesOutAtItsTimeout) {
  auto conn = acceptedConnection();
  ASSERT_NE(conn, nullptr);
  std::array<char, 8> buf{};
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(conn->read(buf, nullptr, milliseconds(60)).status, Status::kTimedOut);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(60));
  EXPECT_EQ(conn->read(buf, &token(), milliseconds(20)).status, Status::kTimedOut);
  EXPECT_EQ(conn->read(buf, &token(), milliseconds(0)).status, Status::kTimedOut)
      << "zero: does not wait";
  ASSERT_EQ(::send(client_.get(), "late", 4, MSG_NOSIGNAL), 4);
  auto got = conn->read(buf, nullptr, milliseconds(0));
  ASSERT_EQ(got.status, Status::kData) << "zero still reads what is there";
  EXPECT_EQ(got.bytes, 4u);
}

TEST_F(CapabilityChannelTest, ShutdownEndsBothDirections) {
  auto conn = acceptedConnection();
  ASSERT_NE(conn, nullptr);
  conn->shutdown();
  char c = 0;
  EXPECT_EQ(::read(client_.get(), &c, 1), 0) << "the peer sees the end of its stream";
  EXPECT_FALSE(conn->send("x"));
  std::array<char, 8> buf{};
  EXPECT_EQ(conn->read(buf).status, Status::kEnd);
  conn->shutdown();  // idempotent
}

TEST_F(CapabilityChannelTest, ConnectionsOutliveTheirChannel) {
  auto conn = acceptedConnection();
  ASSERT_NE(conn, nullptr);
  channel_.reset();
  EXPECT_FALSE(exists(dir_ + "/cap.sock")) << "destroying the channel closes it";
  ASSERT_TRUE(conn->send("ok"));
  char in[4] = {};
  EXPECT_EQ(::recv(client_.get(), in, sizeof in, 0), 2);
}

TEST(OpenDirectoryCapabilityChannel, RefusesWhatIsNotADirectory) {
  auto none = openDirectoryCapabilityChannel(UniqueFd());
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kExecutionUnavailable);
  auto file = openDirectoryCapabilityChannel(UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_TRUE(
      openDirectoryCapabilityChannel(UniqueFd(::open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC))));
}

}  // namespace
}  // namespace airlock
