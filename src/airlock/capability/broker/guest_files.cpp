#include "airlock/capability/broker/guest_files.h"

namespace airlock::capability {

Result<void> installGuestFiles(CapabilityChannel& channel) {
  for (const auto& f : guestFiles()) {
    if (auto r = channel.writeFile(f.path, f.contents, f.executable ? 0755 : 0644,
                                   CapabilityFileOwner::kService);
        !r)
      return r;
  }
  return {};
}

}  // namespace airlock::capability
