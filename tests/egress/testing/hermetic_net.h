// A private network for tests that must not send anything off the machine,
// DNS included: a new network namespace with only loopback up, and a new
// mount namespace in which /etc/hosts and /etc/resolv.conf are bind mounts
// of files the test wrote. getaddrinfo then answers from the test's hosts
// file (glibc 2.36 compares /etc/hosts names literally, so a name the
// resolver asks for as "name." needs a "name." line); a lookup that misses
// goes to the default nameserver 127.0.0.1 inside the namespace, where
// nothing listens, and fails.
//
// Needs CAP_SYS_ADMIN and CAP_NET_ADMIN (root). The caller must be single
// threaded (unshare(CLONE_NEWNS) fails otherwise). Makes only syscalls and
// allocates nothing, so it may run in a forked child before exec.
#pragma once

namespace airlock::egress::testing {

// 0 on success, otherwise the errno of the first failing step; `*step` (if
// not null) names that step.
int enterHermeticNetwork(const char* hosts_file, const char* resolv_file,
                         const char** step = nullptr) noexcept;

}  // namespace airlock::egress::testing
