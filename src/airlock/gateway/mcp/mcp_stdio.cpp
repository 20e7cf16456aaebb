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

// The one writer of out_fd: responses (handler and worker) and progress
// notifications (a call's ticker) are written whole, one at a time. The
// first failed write (the client is gone) cancels the call in progress and
// tells the reader to stop; every later write is dropped.
class Writer {
 public:
  Writer(Session& session, int out_fd, int quit_fd)
      : session_(session), out_fd_(out_fd), quit_fd_(quit_fd) {}

  void write(std::string line) {
    std::lock_guard lock(mu_);
    if (failed_) return;
    line.push_back('\n');
    if (sys::writeAll(out_fd_, line.data(), line.size())) return;
    failed_ = true;
    session_.cancelInFlight();
    const std::uint64_t one = 1;
    (void)sys::writeAll(quit_fd_, &one, sizeof one);
  }
  bool failed() {
    std::lock_guard lock(mu_);
    return failed_;
  }

 private:
  Session& session_;
  const int out_fd_;
  const int quit_fd_;
  std::mutex mu_;
  bool failed_ = false;  // guarded by mu_
};

// At most this many accepted tools/call wait behind the running one; more
// are refused (Session::busyError) rather than making the reader wait, so
// that ping and cancellations are always read.
constexpr std::size_t kMaxWaitingCalls = 32;

// Runs tools/call one at a time, in the order accepted, on a thread of its
// own, and writes each response through the writer.
class Worker {
 public:
  Worker(Session& session, Writer& writer)
      : session_(session), writer_(writer), thread_([this] { run(); }) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() { finish(/*drop_waiting=*/true); }

  // False when kMaxWaitingCalls already wait.
  bool push(PendingCall call) {
    {
      std::lock_guard lock(mu_);
      if (waiting_.size() >= kMaxWaitingCalls) return false;
      waiting_.push_back(std::move(call));
    }
    cv_.notify_one();
    return true;
  }
  // Returns once the call running and, unless drop_waiting, every waiting
  // one has been answered.
  void finish(bool drop_waiting) {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
      if (drop_waiting) waiting_.clear();
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    const Notify notify = [this](std::string line) { writer_.write(std::move(line)); };
    for (;;) {
      PendingCall call;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !waiting_.empty(); });
        if (waiting_.empty()) return;
        call = std::move(waiting_.front());
        waiting_.pop_front();
      }
      if (auto response = session_.runCall(std::move(call), notify)) writer_.write(*response);
    }
  }

  Session& session_;
  Writer& writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PendingCall> waiting_;  // guarded by mu_
  bool closing_ = false;             // guarded by mu_
  std::thread thread_;               // last: started once the rest exists
};

// Bytes of messages read and not yet handled above which the reader stops
// reading (the client waits in its write).
constexpr std::size_t kMaxQueuedBytes = std::size_t{64} << 20;

// What the reader hands the handler: a complete line, an oversized line's
// error, or the end of input.
struct Item {
  enum class Kind { kLine, kOversized, kEnd } kind;
  std::string line;
};

// The reader thread: frames stdin into lines and queues them in order for
// the handler; a stop request cancels the call in progress at once.
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
  void deliver(std::string line) { push(Item{Item::Kind::kLine, std::move(line)}); }

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

namespace {

// The handler: takes the reader's lines in order, answers each at once or
// hands a tools/call to the worker. Returns when the reader ends.
void handleLines(Session& session, Reader& reader, Writer& writer, Worker& worker,
                 std::size_t max_message_bytes) {
  for (;;) {
    Item item = reader.next();
    if (item.kind == Item::Kind::kEnd) return;
    if (writer.failed()) continue;  // draining until the reader stops
    if (item.kind == Item::Kind::kOversized) {
      writer.write(Session::oversizedLineError(max_message_bytes));
      continue;
    }
    std::string_view line = item.line;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    Accepted accepted = session.accept(line);
    if (accepted.call) {
      const nlohmann::json id = accepted.call->id;
      if (!worker.push(std::move(*accepted.call))) {
        session.forgetCall(id);
        writer.write(Session::busyError(id, kMaxWaitingCalls));
      }
    } else if (accepted.response) {
      writer.write(std::move(*accepted.response));
    }
  }
}

}  // namespace

Result<StdioEnd> serveStdio(Session& session, int in_fd, int out_fd, int stop_fd,
                            std::size_t max_message_bytes) {
  // Tells the reader to stop when the output is closed.
  sys::UniqueFd quit(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!quit.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "mcp: eventfd", errno);

  Writer writer(session, out_fd, quit.get());
  Reader reader(session, in_fd, stop_fd, quit.get(), max_message_bytes);
  std::thread thread([&reader] { reader.run(); });
  {
    Worker worker(session, writer);
    handleLines(session, reader, writer, worker, max_message_bytes);
    // EOF lets the waiting calls run; a stop or a closed output drops them.
    worker.finish(/*drop_waiting=*/reader.end() == StdioEnd::kStopped || writer.failed());
  }
  thread.join();
  if (writer.failed()) return StdioEnd::kOutputClosed;
  if (reader.end() == StdioEnd::kEndOfInput && reader.readErrno() != 0) {
    return failErrno(ErrorCode::kExecutionUnavailable, "mcp: reading stdin", reader.readErrno());
  }
  return reader.end();
}

}  // namespace airlock::gateway::mcp
