#include "airlock/gateway/mcp/mcp_stdio.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::gateway::mcp {
namespace {

bool writeLine(int fd, std::string line) {
  line.push_back('\n');
  return sys::writeAll(fd, line.data(), line.size());
}

// Bytes of messages read and not yet handled above which the reader stops
// reading (the client waits in its write).
constexpr std::size_t kMaxQueuedBytes = std::size_t{64} << 20;

// What the reader hands the handler: a complete line, an oversized line's
// error, or the end of input.
struct Item {
  enum class Kind { kLine, kOversized, kEnd } kind;
  std::string line;
};

// The reader thread: frames stdin into lines, handles cancellation at once
// (it must reach a call that the handler thread is blocked in), and queues
// everything else in order.
class Reader {
 public:
  Reader(Session& session, int in_fd, int stop_fd, int quit_fd, std::size_t max_message_bytes)
      : session_(session),
        in_fd_(in_fd),
        stop_fd_(stop_fd),
        quit_fd_(quit_fd),
        max_message_bytes_(max_message_bytes) {}

  void run() {
    std::string pending;
    bool discarding = false;
    char buffer[65536];
    for (;;) {
      pollfd fds[3] = {{quit_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}, {in_fd_, POLLIN, 0}};
      const int ready = sys::pollSome(fds, 3, -1);
      if (ready < 0) return finish(StdioEnd::kEndOfInput, errno);
      if (ready == 0) continue;  // interrupted
      if (fds[0].revents != 0) return finish(StdioEnd::kEndOfInput, 0);
      if (fds[1].revents & POLLIN) {
        session_.cancelInFlight();
        return finish(StdioEnd::kStopped, 0);
      }
      if (fds[2].revents == 0) continue;
      const ssize_t n = sys::readSome(in_fd_, buffer, sizeof buffer);
      if (n < 0) return finish(StdioEnd::kEndOfInput, errno);
      if (n == 0) {
        if (!discarding && !pending.empty()) deliver(std::move(pending));
        return finish(StdioEnd::kEndOfInput, 0);
      }
      std::string_view chunk(buffer, static_cast<std::size_t>(n));
      while (!chunk.empty()) {
        const std::size_t newline = chunk.find('\n');
        const std::string_view part = chunk.substr(0, newline);
        if (!discarding) {
          if (pending.size() + part.size() > max_message_bytes_) {
            discarding = true;
            std::string().swap(pending);
          } else {
            pending.append(part);
          }
        }
        if (newline == std::string_view::npos) break;
        chunk.remove_prefix(newline + 1);
        if (discarding) {
          discarding = false;
          push(Item{Item::Kind::kOversized, {}});
          continue;
        }
        std::string line;
        line.swap(pending);
        deliver(std::move(line));
      }
    }
  }

  // The handler's side: the next item (blocks).
  Item next() {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] { return !queue_.empty(); });
    Item item = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= item.line.size();
    space_.notify_all();
    return item;
  }

  StdioEnd end() const { return end_; }
  int readErrno() const { return read_errno_; }

 private:
  void deliver(std::string line) {
    if (auto id = Session::cancelledRequestOf(line)) {
      session_.cancelRequest(*id);
      return;
    }
    push(Item{Item::Kind::kLine, std::move(line)});
  }

  void push(Item item) {
    std::unique_lock lock(mu_);
    // Backpressure: wait for the handler, but keep noticing a stop request
    // (a signal must still cancel the call in progress).
    while (queued_bytes_ > kMaxQueuedBytes) {
      if (space_.wait_for(lock, std::chrono::milliseconds(100)) == std::cv_status::timeout) {
        pollfd probe{stop_fd_, POLLIN, 0};
        if (::poll(&probe, 1, 0) > 0) session_.cancelInFlight();
      }
    }
    queued_bytes_ += item.line.size();
    queue_.push_back(std::move(item));
    ready_.notify_one();
  }

  void finish(StdioEnd end, int err) {
    std::lock_guard lock(mu_);
    end_ = end;
    read_errno_ = err;
    // On a stop, requests not yet started are dropped: nothing new runs
    // once the session is ending.
    if (end == StdioEnd::kStopped) {
      queue_.clear();
      queued_bytes_ = 0;
    }
    queue_.push_back(Item{Item::Kind::kEnd, {}});
    ready_.notify_one();
  }

  Session& session_;
  const int in_fd_;
  const int stop_fd_;
  const int quit_fd_;
  const std::size_t max_message_bytes_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable space_;
  std::deque<Item> queue_;
  std::size_t queued_bytes_ = 0;
  StdioEnd end_ = StdioEnd::kEndOfInput;  // written before the kEnd item is pushed
  int read_errno_ = 0;
};

}  // namespace

Result<StdioEnd> serveStdio(Session& session, int in_fd, int out_fd, int stop_fd,
                            std::size_t max_message_bytes) {
  // Tells the reader to stop when the handler ends first (output closed).
  sys::UniqueFd quit(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!quit.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "mcp: eventfd", errno);

  Reader reader(session, in_fd, stop_fd, quit.get(), max_message_bytes);
  std::thread thread([&reader] { reader.run(); });

  StdioEnd end = StdioEnd::kEndOfInput;
  bool reader_done = false;
  for (;;) {
    Item item = reader.next();
    if (item.kind == Item::Kind::kEnd) {
      reader_done = true;
      end = reader.end();
      break;
    }
    std::optional<std::string> response;
    if (item.kind == Item::Kind::kOversized) {
      response = Session::oversizedLineError(max_message_bytes);
    } else {
      std::string_view line = item.line;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      response = session.handleLine(line);
    }
    if (response && !writeLine(out_fd, std::move(*response))) {
      end = StdioEnd::kOutputClosed;
      break;
    }
  }
  if (!reader_done) {
    const std::uint64_t one = 1;
    (void)sys::writeAll(quit.get(), &one, sizeof one);
    // Drain until the reader's end marker so that it is not blocked pushing.
    while (reader.next().kind != Item::Kind::kEnd) {
    }
  }
  thread.join();
  if (end == StdioEnd::kEndOfInput && reader.readErrno() != 0) {
    return failErrno(ErrorCode::kExecutionUnavailable, "mcp: reading stdin", reader.readErrno());
  }
  return end;
}

}  // namespace airlock::gateway::mcp
