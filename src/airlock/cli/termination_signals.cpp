#include "airlock/cli/termination_signals.h"

#include <signal.h>

#include <atomic>
#include <cerrno>

namespace airlock::cli {
namespace {

// The token the handler cancels. Set before the handlers are installed; the
// handler only calls CancelToken::cancel (one write(2)).
std::atomic<const CancelToken*> g_cancel_token{nullptr};

extern "C" void onTerminationSignal(int /*signo*/) {
  const int saved_errno = errno;
  if (const CancelToken* token = g_cancel_token.load()) token->cancel();
  errno = saved_errno;
}

}  // namespace

void cancelOnTerminationSignals(const CancelToken& token) {
  g_cancel_token.store(&token);
  struct sigaction action {};
  action.sa_handler = onTerminationSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

}  // namespace airlock::cli
