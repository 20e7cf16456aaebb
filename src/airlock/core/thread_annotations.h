// Clang thread-safety annotations and a mutex they can check.
//
// The macros are the ones of clang's thread-safety analysis documentation
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html). Under clang they
// expand to the analysis attributes; under any other compiler (the release
// build's g++) to nothing. scripts/check-tidy runs clang-tidy with
// -Wthread-safety, so every annotated member is checked on every run, with
// no second build.
//
// libstdc++'s std::mutex carries no annotations, so the analysis cannot see
// it being locked: annotated code uses Mutex, MutexLock and CondVar below.
//
//   class Queue {
//    public:
//     void push(int v) EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       items_.push_back(v);
//       ready_.notifyOne();
//     }
//     int pop() EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       while (items_.empty()) ready_.wait(mu_);  // a loop, not a predicate
//       ...
//     }
//    private:
//     Mutex mu_;
//     CondVar ready_;
//     std::deque<int> items_ GUARDED_BY(mu_);
//   };
//
// Waits take the Mutex and are loops in the caller rather than predicate
// lambdas: the analysis checks a lambda's body as its own function, without
// the lock its caller holds, so a predicate reading a guarded member would
// be reported.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define AIRLOCK_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define AIRLOCK_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (x names its kind in messages: "mutex").
#define CAPABILITY(x) AIRLOCK_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a capability for its lifetime.
#define SCOPED_CAPABILITY AIRLOCK_THREAD_ANNOTATION(scoped_lockable)
// A member read or written only with x held.
#define GUARDED_BY(x) AIRLOCK_THREAD_ANNOTATION(guarded_by(x))
// A pointer member whose pointee is read or written only with x held.
#define PT_GUARDED_BY(x) AIRLOCK_THREAD_ANNOTATION(pt_guarded_by(x))
// Lock ordering: this lock is taken before / after the ones named.
#define ACQUIRED_BEFORE(...) AIRLOCK_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) AIRLOCK_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
// The caller must hold the capabilities (exclusively / shared).
#define REQUIRES(...) AIRLOCK_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) AIRLOCK_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// The function takes / gives back the capabilities (with no argument on a
// member function: the object itself).
#define ACQUIRE(...) AIRLOCK_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) AIRLOCK_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// Takes the capability when it returns the first argument.
#define TRY_ACQUIRE(...) AIRLOCK_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// The caller must not hold the capabilities (the function takes them).
#define EXCLUDES(...) AIRLOCK_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// Checks at run time that the capability is held; the analysis assumes it.
#define ASSERT_CAPABILITY(x) AIRLOCK_THREAD_ANNOTATION(assert_capability(x))
// The function returns a reference to the capability x.
#define RETURN_CAPABILITY(x) AIRLOCK_THREAD_ANNOTATION(lock_returned(x))
// Turns the analysis off for one function; give the reason beside it.
#define NO_THREAD_SAFETY_ANALYSIS AIRLOCK_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace airlock {

// std::mutex with annotated lock and unlock. Not recursive; not movable.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool tryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction (std::lock_guard), and may
// give it up and take it again in between (std::unique_lock's unlock/lock).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// std::condition_variable for a Mutex. Every wait needs the Mutex held and
// holds it again when it returns; wakeups may be spurious, so callers wait
// in a loop on their condition.
class CondVar {
 public:
  void wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // std::cv_status::timeout once `deadline` (of any clock) has passed.
  template <class Clock, class Duration>
  std::cv_status waitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const std::cv_status status = cv_.wait_until(lock, deadline);
    lock.release();
    return status;
  }
  template <class Rep, class Period>
  std::cv_status waitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout)
      REQUIRES(mu) {
    return waitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  void notifyOne() noexcept { cv_.notify_one(); }
  void notifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace airlock
