#include "airlock/execution/egress_runtime.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "airlock/egress/classifier.h"
#include "airlock/egress/proxy.h"
#include "airlock/egress/proxy_log.h"
#include "airlock/egress/resolver.h"
#include "airlock/egress/sandbox_route.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::execution {
namespace {

Result<sys::UniqueFd> openLog(const std::string& log_path) {
  sys::UniqueFd fd(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd.valid())
    return failErrno(ErrorCode::kConfigurationError, "egress log " + log_path + ": cannot open",
                     errno);
  return fd;
}

// Tells the service about every refusal, by reason code.
class RefusalCounter final : public egress::ProxyObserver {
 public:
  explicit RefusalCounter(RefusalObserver on_refusal) : on_refusal_(std::move(on_refusal)) {}
  void onDecision(const egress::DecisionRecord& record) override {
    if (!record.decision.allowed()) on_refusal_(record.decision.reasonCode());
  }

 private:
  RefusalObserver on_refusal_;
};

// Owns, in order of destruction: the proxy (stopped first, so no line is
// written after the log closes), then the log and its fd.
struct Holder {
  sys::UniqueFd log_fd;
  std::shared_ptr<egress::FdDecisionLog> log;
  std::shared_ptr<egress::EgressProxy> proxy;
  ~Holder() {
    if (proxy) proxy->stop();
  }
};

}  // namespace

Result<void> touchEgressLog(const std::string& log_path) {
  if (log_path.empty()) return {};
  auto fd = openLog(log_path);
  if (!fd) return tl::unexpected(fd.error());
  return {};
}

Result<EgressRuntime> startEgressRuntime(const std::string& log_path, RefusalObserver on_refusal) {
  auto holder = std::make_shared<Holder>();
  int fd = STDERR_FILENO;
  if (!log_path.empty()) {
    auto opened = openLog(log_path);
    if (!opened) return tl::unexpected(opened.error());
    holder->log_fd = std::move(*opened);
    fd = holder->log_fd.get();
  }
  holder->log = std::make_shared<egress::FdDecisionLog>(fd);
  egress::ProxyOptions options;
  options.resolver = std::make_shared<egress::GetaddrinfoResolver>();
  options.classifier = std::make_shared<const egress::AddressClassifier>(
      std::make_shared<egress::InterfaceAddressSource>());
  options.log = holder->log;
  if (on_refusal) options.observer = std::make_shared<RefusalCounter>(std::move(on_refusal));
  auto proxy = egress::EgressProxy::create(std::move(options));
  if (!proxy) return tl::unexpected(proxy.error());
  holder->proxy = std::shared_ptr<egress::EgressProxy>(std::move(*proxy));
  EgressRuntime runtime;
  runtime.route = std::make_shared<egress::ProxyEgressRoute>(holder->proxy);
  runtime.keepalive = holder;
  return runtime;
}

}  // namespace airlock::execution
