// `airlock tenant-key create <tenant_id>` (docs/serve.md, "Tenants and
// keys"; the key file: service/tenant_keys.h): mints a tenant API key and
// prints it once, with the line that makes it one in the operator's
// tenant_keys_file. The key itself is stored nowhere; the line holds only
// its SHA-256. With --append FILE the line is appended to FILE (created
// 0600 when absent; an existing FILE must load as a key file, 0600 and
// owned by this user, first), so the key is never on a shell's command line.
//
// Output on stdout, one "name: value" per line:
//   tenant_id: <tenant_id>
//   key: alk_<64 hex digits>        (32 bytes of the kernel's CSPRNG)
//   line: <tenant_id> sha256:<hex>
// Exit status: 0; 125 a tenant id that is not a platform identifier, a key
// file that does not load, or an append that fails (one line on stderr).
// A running `airlock serve` reads the file at start: restart it to use the
// new key.
#pragma once

#include <string>

namespace airlock::cli {

struct TenantKeyFlags {
  std::string tenant_id;
  std::string append_to;  // empty: print only
};

// Mints, prints (and appends) as above; returns the exit status.
int runTenantKeyCreate(const TenantKeyFlags& flags);

}  // namespace airlock::cli
