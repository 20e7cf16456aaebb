// What every sandbox offers the programs it runs, on every mechanism (the
// linux jail, sandbox/linux/jail_plan.h, and the gvisor bundle,
// sandbox/oci/oci_bundle.h): the small /etc files ordinary programs read and
// a private pseudo-terminal filesystem. One list, so the mechanisms cannot
// drift apart; tests/sandbox/baseline_checks.h checks both.
//
// /etc holds two kinds of entries, all read-only inside the sandbox:
//   generated  identity files for the sandbox user (passwd, group, hosts,
//              hostname, nsswitch.conf) and a fixed UTC time zone
//              (localtime, a link into the image's zoneinfo; timezone).
//              Nothing of the host's own identity or time zone.
//   image      host /etc entries that belong to the image's packages, bound
//              read-only when present (defaultImageEtc()): public tables and
//              the CA certificate store, never a secret (/etc/shadow,
//              /etc/ssl/private and the like are never bound).
// /dev/pts is a private devpts instance (kDevptsOptions) and /dev/ptmx a
// link to its pts/ptmx, so os.openpty() and friends work, and no terminal
// of the host or of another sandbox is visible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace airlock {

// The image's /etc entries every mechanism binds read-only when the host has
// them (absolute paths; a directory is bound with everything below it):
//   /etc/ld.so.cache, /etc/alternatives  the loader cache, Debian's alternatives
//   /etc/services, /etc/protocols, /etc/rpc  netbase (getservbyname,
//                                         getprotobyname, getrpcbyname)
//   /etc/ssl/certs                        the CA store: the bundle
//                                         ca-certificates.crt and the hashed
//                                         links into /usr/share/ca-certificates
//                                         and /usr/local/share/ca-certificates
//   /etc/ssl/openssl.cnf                  OpenSSL's configuration
//   /etc/ca-certificates.conf             which CAs the store was built from
std::vector<std::string> defaultImageEtc();

// One generated /etc entry: a regular file with `contents`, or (symlink) a
// symbolic link whose text is `contents`.
struct GeneratedEtcEntry {
  std::string path;  // absolute, under /etc
  std::string contents;
  bool symlink = false;
};

// The generated /etc entries for a sandbox whose commands run as uid:gid:
// passwd (root, sandbox, nobody), group (root, tty, sandbox, nogroup),
// hosts (localhost and "sandbox" on loopback), hostname, nsswitch.conf
// (files only, for every database that has a file), localtime
// (-> /usr/share/zoneinfo/Etc/UTC; dangling, hence UTC too, when the image
// has no tzdata) and timezone.
std::vector<GeneratedEtcEntry> generatedEtcEntries(std::uint32_t uid, std::uint32_t gid);

// The tty group: owner group of every pseudo-terminal in the sandbox.
inline constexpr std::uint32_t kTtyGid = 5;

// Mount options of the sandbox's devpts at /dev/pts: a new instance (no
// terminal of anyone else), /dev/pts/ptmx usable by everyone (0666), each
// terminal's slave owned by its opener with mode 0620 and group tty (gid 5
// must be mapped in the sandbox's user namespace).
inline constexpr const char* kDevptsOptions = "newinstance,ptmxmode=0666,mode=0620,gid=5";

}  // namespace airlock
