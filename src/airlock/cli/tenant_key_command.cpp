#include "airlock/cli/tenant_key_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <memory>

#include "airlock/cli/command.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/summary.h"
#include "airlock/core/encoding.h"
#include "airlock/core/ids.h"
#include "airlock/service/tenant_keys.h"
#include "airlock/sys/io.h"
#include "airlock/sys/random.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::cli {
namespace {

// Appends `line` to the key file at `path`, after checking that what is
// there loads (a file with an error would refuse to start the service with
// the new line too).
Result<void> appendLine(const std::string& path, const std::string& line) {
  const std::string source = "tenant keys file " + quoteForMessage(path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    auto existing = service::TenantKeys::loadFile(path);
    if (!existing) return tl::unexpected(existing.error());
  } else if (errno != ENOENT) {
    return failErrno(ErrorCode::kConfigurationError, source + " cannot be read", errno);
  }
  sys::UniqueFd fd(
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid())
    return failErrno(ErrorCode::kConfigurationError, source + " cannot be opened to append", errno);
  // A file that does not end in a newline gets one first.
  std::string text = line + "\n";
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (sys::preadSome(fd.get(), &last, 1, st.st_size - 1) == 1 && last != '\n')
      text.insert(text.begin(), '\n');
  }
  if (!sys::writeAll(fd.get(), text.data(), text.size()))
    return failErrno(ErrorCode::kConfigurationError, source + " cannot be written", errno);
  return {};
}

}  // namespace

int runTenantKeyCreate(const TenantKeyFlags& flags) {
  if (!isPlatformIdentifier(flags.tenant_id))
    return printErrorLine("tenant-key create: the tenant id " + quoteForMessage(flags.tenant_id) +
                          " is not 1-128 characters of A-Z a-z 0-9 . _ : -");
  auto random = sys::randomHexToken(32);
  if (!random) return printErrorLine(random.error());
  const std::string key = std::string(service::kTenantKeyPrefix) + *random;
  const std::string line = service::tenantKeyLine(flags.tenant_id, key);
  if (!flags.append_to.empty()) {
    if (auto r = appendLine(flags.append_to, line); !r) return printErrorLine(r.error());
  }
  writeOut(STDOUT_FILENO,
           "tenant_id: " + flags.tenant_id + "\nkey: " + key + "\nline: " + line + "\n");
  return 0;
}

namespace {

class TenantKeyCommand final : public Command {
 public:
  std::string_view name() const override { return "tenant-key"; }
  std::string_view summary() const override {
    return "Tenant API keys for `airlock serve` (docs/serve.md, \"Tenants and keys\").";
  }
  void defineUsage(CLI::App& app) override {
    app.require_subcommand(1);
    CLI::App* create = app.add_subcommand(
        "create",
        "Mint a key for a tenant: prints it once, and the tenant_keys_file line (its SHA-256).");
    create->add_option("tenant_id", flags_.tenant_id, "The tenant the key acts for")
        ->required()
        ->type_name("TENANT_ID");
    create
        ->add_option("--append", flags_.append_to,
                     "Append the line to this key file (created 0600 when absent)")
        ->type_name("FILE");
  }
  int execute(const CLI::App& /*app*/) override { return runTenantKeyCreate(flags_); }

 private:
  TenantKeyFlags flags_;
};

}  // namespace

std::unique_ptr<Command> makeTenantKeyCommand() {
  return std::make_unique<TenantKeyCommand>();
}

}  // namespace airlock::cli
