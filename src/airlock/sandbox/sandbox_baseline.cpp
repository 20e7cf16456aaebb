#include "airlock/sandbox/sandbox_baseline.h"

namespace airlock {

std::vector<std::string> defaultImageEtc() {
  return {
      "/etc/ld.so.cache", "/etc/alternatives", "/etc/services",        "/etc/protocols",
      "/etc/rpc",         "/etc/ssl/certs",    "/etc/ssl/openssl.cnf", "/etc/ca-certificates.conf"};
}

std::vector<GeneratedEtcEntry> generatedEtcEntries(std::uint32_t uid, std::uint32_t gid) {
  const std::string u = std::to_string(uid);
  const std::string g = std::to_string(gid);
  const std::string tty = std::to_string(kTtyGid);
  return {
      {"/etc/passwd",
       "root:x:0:0:root:/root:/usr/sbin/nologin\n"
       "sandbox:x:" +
           u + ":" + g +
           ":sandbox:/workspace:/bin/sh\n"
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
      {"/etc/group", "root:x:0:\ntty:x:" + tty + ":\nsandbox:x:" + g + ":\nnogroup:x:65534:\n"},
      {"/etc/hosts", "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost\n"},
      {"/etc/hostname", "sandbox\n"},
      {"/etc/nsswitch.conf",
       "passwd: files\ngroup: files\nhosts: files\nprotocols: files\nservices: files\n"
       "rpc: files\n"},
      {"/etc/localtime", "/usr/share/zoneinfo/Etc/UTC", true},
      {"/etc/timezone", "Etc/UTC\n"},
  };
}

}  // namespace airlock
