// What code mode's end-to-end tests share across mechanisms
// (code_mode_linux_test.cpp, code_mode_gvisor_test.cpp): running a program,
// reading its outcome, draining a side process, and the cases both
// mechanisms run with the same program and the same assertions. Each
// mechanism's file keeps its own set-up and its mechanism-specific tests.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "airlock/capability/broker/code_run.h"
#include "airlock/port/execution_environment.h"

namespace airlock::testing {

// Runs `program` in code mode (1 MiB of output, execution id "test-exec");
// a failure to run at all fails the test and gives an empty result.
capability::CodeRunResult runCodeProgram(ExecutionEnvironment& env, const EnvironmentHandle& handle,
                                         const std::string& program,
                                         std::int64_t timeout_seconds = 120);

// The run's outcome as JSON, and all of the run for a failure message.
nlohmann::json outcome(const capability::CodeRunResult& r);
std::string describe(const capability::CodeRunResult& r);

// Reads a side process to its end (bounded), returning stdout and status.
std::pair<std::string, int> drain(SideProcess& p);

// Starts `probe` (a shell script) as a side process and expects it to exit
// 0 printing exactly `command_stdout`, what the same probe printed as a
// command. What the side process printed goes to `out`.
void expectSideProcessSeesWhatACommandSees(ExecutionEnvironment& env,
                                           const EnvironmentHandle& handle,
                                           const std::string& probe,
                                           const std::string& command_stdout, std::string& out);

// A side process in the existing workspace directory "sub", with GREETING
// in its environment and "input\n" on its stdin, prints its directory, the
// greeting and its input. `side` is the command it was started with;
// `status` its exit status.
void expectSideProcessGetsStdinEnvAndWorkingDirectory(ExecutionEnvironment& env,
                                                      const EnvironmentHandle& handle,
                                                      SideCommand& side, int& status);

// The issue's example: a program reads a file, runs a process, drives a job
// through stdin to its end, writes a file and a note and returns them all;
// one audit line a call.
void expectTheIssueExampleCompletes(ExecutionEnvironment& env, const EnvironmentHandle& handle);

// Killing the guest mid-proc.run kills the effect's process group: a child
// program calls proc.run on a shell that backgrounds a sleeper and waits;
// the first program SIGKILLs the child and watches both effect processes
// disappear while it (the command) still runs.
void expectKillingTheGuestMidProcRunKillsTheEffect(ExecutionEnvironment& env,
                                                   const EnvironmentHandle& handle);

// The program returned {"refused_at": 33, ...} from cap.SpawnCeilingReached.
void expectRefusedAtThe33rdSpawn(const capability::CodeRunResult& r);

// The names in `dir` but "." and "..".
std::vector<std::string> entriesOf(const std::string& dir);

// `command` through the shell: what it printed; its wait status in `status`.
std::string commandOutput(const std::string& command, int* status = nullptr);

// Writes `text` to the file `path`.
void writeText(const std::string& path, const char* text);

// `airlock run OPTIONS--state-dir STATE_DIR --code STATE_DIR/prog.py --json`
// (`airlock` the binary) on `program` written to STATE_DIR/prog.py: expects
// it to exit 0 printing JSON, parsed into `result`; `out` is what it printed.
void runCodeWithTheCli(const std::string& airlock, const std::string& options,
                       const std::string& state_dir, const char* program, nlohmann::json& result,
                       std::string& out);

}  // namespace airlock::testing
