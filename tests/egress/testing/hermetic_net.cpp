#include "hermetic_net.h"

#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace airlock::egress::testing {

int enterHermeticNetwork(const char* hosts_file, const char* resolv_file,
                         const char** step) noexcept {
  auto failed = [step](const char* what) {
    const int err = errno != 0 ? errno : EIO;
    if (step != nullptr) *step = what;
    return err;
  };
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0)
    return failed("unshare(CLONE_NEWNET|CLONE_NEWNS)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return failed("mount / private");
  if (::mount(hosts_file, "/etc/hosts", nullptr, MS_BIND, nullptr) != 0)
    return failed("bind mount /etc/hosts");
  if (::mount(resolv_file, "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0)
    return failed("bind mount /etc/resolv.conf");
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return failed("socket");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ::ioctl(fd, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    rc = ::ioctl(fd, SIOCSIFFLAGS, &ifr);
  }
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    errno = err;
    return failed("bring lo up");
  }
  return 0;
}

}  // namespace airlock::egress::testing
