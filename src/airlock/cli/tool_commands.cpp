// The small commands: `airlock egress check` (cli/egress_command.h),
// `airlock doctor` (cli/doctor.h) and `airlock version`, as command objects
// (cli/command.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <string>
#include <utility>

#include "airlock/cli/command.h"
#include "airlock/cli/doctor.h"
#include "airlock/cli/egress_command.h"
#include "airlock/cli/summary.h"

namespace airlock::cli {
namespace {

class EgressCommand final : public Command {
 public:
  std::string_view name() const override { return "egress"; }
  std::string_view summary() const override {
    return "Egress policy tools (the policy: docs/egress.md; egress check: docs/cli.md).";
  }
  void defineUsage(CLI::App& app) override {
    app.require_subcommand(1);
    CLI::App* check = app.add_subcommand(
        "check",
        "Decide URL|host:port against a policy (no connection is made); exit 0 allowed, 1 "
        "denied.");
    check->add_option("--policy", flags_.policy_file, "The egress policy (YAML)")
        ->required()
        ->type_name("FILE");
    check->add_flag("--json", flags_.json, "Print the decision as one JSON object");
    check->add_option("target", flags_.target, "An http(s) URL or host:port")
        ->required()
        ->type_name("URL|HOST:PORT");
  }
  int execute(const CLI::App& /*app*/) override { return runEgressCheck(flags_); }

 private:
  EgressCheckFlags flags_;
};

class DoctorCommand final : public Command {
 public:
  std::string_view name() const override { return "doctor"; }
  std::string_view summary() const override {
    return "Report what this machine offers the linux mechanism; exit 1 if it cannot run.";
  }
  void defineUsage(CLI::App& /*app*/) override {}
  int execute(const CLI::App& /*app*/) override { return runDoctor(); }
};

class VersionCommand final : public Command {
 public:
  explicit VersionCommand(std::string version) : version_(std::move(version)) {}
  std::string_view name() const override { return "version"; }
  std::string_view summary() const override { return "Print the version."; }
  void defineUsage(CLI::App& /*app*/) override {}
  int execute(const CLI::App& /*app*/) override {
    writeOut(STDOUT_FILENO, "airlock " + version_ + "\n");
    return 0;
  }

 private:
  std::string version_;
};

}  // namespace

std::unique_ptr<Command> makeEgressCommand() {
  return std::make_unique<EgressCommand>();
}

std::unique_ptr<Command> makeDoctorCommand() {
  return std::make_unique<DoctorCommand>();
}

std::unique_ptr<Command> makeVersionCommand(std::string version) {
  return std::make_unique<VersionCommand>(std::move(version));
}

}  // namespace airlock::cli
