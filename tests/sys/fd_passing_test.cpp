// Fd passing over socketpairs: what is sent is what arrives.
#include "airlock/sys/fd_passing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "airlock/sys/unique_fd.h"

namespace airlock::sys {
namespace {

struct Pair {
  UniqueFd a, b;
};
Pair socketPair(int type) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// Whether two fds name the same open file.
bool sameFile(int x, int y) {
  struct stat sx {};
  struct stat sy {};
  return ::fstat(x, &sx) == 0 && ::fstat(y, &sy) == 0 && sx.st_dev == sy.st_dev &&
         sx.st_ino == sy.st_ino;
}

TEST(FdPassing, FdsAndBytesRoundTripInOrder) {
  auto s = socketPair(SOCK_SEQPACKET);
  int p1[2], p2[2];
  ASSERT_EQ(::pipe2(p1, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(p2, O_CLOEXEC), 0);
  UniqueFd r1(p1[0]), w1(p1[1]), r2(p2[0]), w2(p2[1]);
  char head[4] = {'h', 'e', 'a', 'd'};
  std::string payload = "payload";
  iovec out[2] = {{head, sizeof head}, {payload.data(), payload.size()}};
  const int fds[3] = {r1.get(), w2.get(), r2.get()};
  ASSERT_EQ(sendWithFds(s.a.get(), out, 2, fds, 3), 11);

  char buf[64] = {};
  iovec in{buf, sizeof buf};
  ReceivedFds got;
  ASSERT_EQ(receiveWithFds(s.b.get(), &in, 1, 3, got), 11);
  EXPECT_EQ(std::string(buf, 11), "headpayload");
  ASSERT_EQ(got.count, 3);
  EXPECT_FALSE(got.truncated);
  UniqueFd g0(got.fds[0]), g1(got.fds[1]), g2(got.fds[2]);
  EXPECT_TRUE(sameFile(g0.get(), r1.get()));
  EXPECT_TRUE(sameFile(g1.get(), w2.get()));
  EXPECT_TRUE(sameFile(g2.get(), r2.get()));
  EXPECT_NE(g0.get(), r1.get());  // new descriptors, close-on-exec
  EXPECT_TRUE(::fcntl(g0.get(), F_GETFD) & FD_CLOEXEC);
  // The passed write end really writes into the original pipe.
  ASSERT_EQ(::write(g1.get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(r2.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST(FdPassing, AMessageWithoutFdsCarriesNone) {
  auto s = socketPair(SOCK_SEQPACKET);
  char byte = 'b';
  iovec out{&byte, 1};
  ASSERT_EQ(sendWithFds(s.a.get(), &out, 1, nullptr, 0), 1);
  char buf[8];
  iovec in{buf, sizeof buf};
  ReceivedFds got;
  ASSERT_EQ(receiveWithFds(s.b.get(), &in, 1, 3, got), 1);
  EXPECT_EQ(got.count, 0);
  EXPECT_EQ(buf[0], 'b');
}

TEST(FdPassing, FdsBeyondWhatTheReceiverTakesAreClosed) {
  auto s = socketPair(SOCK_SEQPACKET);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  char byte = 'b';
  iovec out{&byte, 1};
  const int fds[3] = {w.get(), w.get(), w.get()};
  ASSERT_EQ(sendWithFds(s.a.get(), &out, 1, fds, 3), 1);
  w.reset();  // the only write ends left are in flight
  char buf[8];
  iovec in{buf, sizeof buf};
  ReceivedFds got;
  ASSERT_EQ(receiveWithFds(s.b.get(), &in, 1, 1, got), 1);
  ASSERT_EQ(got.count, 1);
  ::close(got.fds[0]);
  // Every write end is closed now (the two extra ones by receiveWithFds):
  // the read end sees end-of-file instead of blocking.
  ASSERT_EQ(::fcntl(r.get(), F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(::read(r.get(), buf, 1), 0);
}

TEST(FdPassing, ACutMessageIsReportedTruncated) {
  auto s = socketPair(SOCK_SEQPACKET);
  char data[16] = {};
  iovec out{data, sizeof data};
  ASSERT_EQ(sendWithFds(s.a.get(), &out, 1, nullptr, 0), 16);
  char buf[4];
  iovec in{buf, sizeof buf};
  ReceivedFds got;
  ASSERT_EQ(receiveWithFds(s.b.get(), &in, 1, 3, got), 4);
  EXPECT_TRUE(got.truncated);
}

TEST(FdPassing, NothingQueuedUnderDontWaitIsEagainAndAClosedPeerIsZero) {
  auto s = socketPair(SOCK_SEQPACKET);
  char buf[4];
  iovec in{buf, sizeof buf};
  ReceivedFds got;
  EXPECT_EQ(receiveWithFds(s.b.get(), &in, 1, 3, got, MSG_DONTWAIT), -1);
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
  s.a.reset();
  EXPECT_EQ(receiveWithFds(s.b.get(), &in, 1, 3, got), 0);
}

TEST(FdPassing, TooManyFdsIsRefused) {
  auto s = socketPair(SOCK_SEQPACKET);
  char byte = 'b';
  iovec out{&byte, 1};
  int fds[kMaxPassedFds + 1];
  for (int& f : fds) f = s.a.get();
  EXPECT_EQ(sendWithFds(s.a.get(), &out, 1, fds, kMaxPassedFds + 1), -1);
  EXPECT_EQ(errno, EINVAL);
  ReceivedFds got;
  iovec in{&byte, 1};
  EXPECT_EQ(receiveWithFds(s.b.get(), &in, 1, kMaxPassedFds + 1, got), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(FdPassing, AStreamCarriesTheFdsWithTheFirstBytes) {
  auto s = socketPair(SOCK_STREAM);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  std::string data = "0123456789";
  iovec out{data.data(), data.size()};
  const int fd = r.get();
  ASSERT_EQ(sendWithFds(s.a.get(), &out, 1, &fd, 1), 10);
  char buf[4];
  iovec in{buf, sizeof buf};
  ReceivedFds got;
  ASSERT_EQ(receiveWithFds(s.b.get(), &in, 1, 3, got), 4);
  ASSERT_EQ(got.count, 1);
  UniqueFd g(got.fds[0]);
  EXPECT_TRUE(sameFile(g.get(), r.get()));
}

}  // namespace
}  // namespace airlock::sys
