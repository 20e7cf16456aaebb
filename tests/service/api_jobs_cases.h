// Background jobs through their three doors on a real mechanism (shared by
// api_jobs_linux_test.cpp and api_jobs_gvisor_test.cpp): an Api over a
// LocalNode over the mechanism's adapter, with an artifact store, and the
// cases both mechanisms run with the same requests and assertions. Jobs
// are started, polled, fed and killed through code mode's job.* and the
// HTTP routes /v1/environments/{id}/jobs (port/job_port.h).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/artifacts/memory_repository.h"
#include "airlock/execution/node.h"
#include "airlock/gateway/api/api.h"
#include "airlock/service/metrics.h"

namespace airlock::testing {

class JobsApi {
 public:
  // An Api over a node over `env` (borrowed), artifacts stored under
  // `store_dir` (an existing directory), and one environment of tenant "t1"
  // provisioned through it. Fails the test (fatally) when it cannot.
  void open(ExecutionEnvironment& env, const std::string& image_digest,
            const std::string& store_dir);
  // Destroys what the node holds.
  void close();

  service::HttpResponse call(const std::string& method, const std::string& target,
                             const std::string& body = "");
  // A program through POST .../code: its outcome's "completed" value (null,
  // with a test failure, when it did not complete).
  nlohmann::json program(const std::string& source);
  // POST .../jobs: the 201's body (a failure otherwise).
  nlohmann::json startJob(const nlohmann::json& body);
  // GET .../jobs/{id} with the cursors and wait_ms.
  nlohmann::json poll(const std::string& job_id, std::uint64_t out_cursor = 0,
                      std::uint64_t err_cursor = 0, std::uint64_t wait_ms = 0);
  // Polls (waiting at most 5 s a call) until stdout from 0 holds `text`,
  // for at most 60 s; the last answer. Its stdout's data is all of stdout
  // read so far.
  nlohmann::json pollUntilStdoutHas(const std::string& job_id, const std::string& text);
  // Polls until the job is no longer pending (at most 60 s): the last answer.
  nlohmann::json pollUntilSettled(const std::string& job_id);

  std::string id;    // the environment's
  std::string base;  // "/v1/environments/<id>"

 private:
  service::Settings settings_;
  service::Metrics metrics_{"jobs"};
  std::shared_ptr<artifacts::MemoryArtifactRepository> repository_;
  std::unique_ptr<artifacts::ArtifactStore> store_;
  std::unique_ptr<execution::LocalNode> node_;
  std::unique_ptr<gateway::Api> api_;
};

// A job a program starts keeps running after the program returns: the HTTP
// API lists it, a later program lists and polls it and sees its output, the
// API kills it (killed, kill_reason requested). The other way round too: a
// job started over HTTP is fed and read by a program.
void expectAJobOutlivesItsProgramAndEitherDoorDrivesIt(JobsApi& api);

// The scripted session: an HTTP server started as a job on a loopback port
// inside the sandbox prints "listening"; the session polls until it does,
// runs a client through execute against it, reads the request line from
// the job's output, and kills it. The spilled artifacts hold what the polls
// read, byte for byte.
void expectAServerJobServesAClientAndIsKilled(JobsApi& api);

// The same session in code mode: one program starts the server with
// job.start, follows it with job.wait until it says where it listens, runs
// the client with proc.run, follows the server's log to the request line,
// kills it and waits until it settles, and returns what it saw; the
// artifact route then returns each stream's spill, equal to what the
// program read.
void expectAProgramRunsAServerSessionThroughJobAndProc(JobsApi& api);

// Output past the 64 KiB tail shows a dropped count while the spilled
// artifact holds every byte, with its digest.
void expectTheSpillHoldsTheWholeOutput(JobsApi& api);

// An extension of the environment moves the deadline of a job for its life
// and the room a later job is granted.
void expectAnExtensionMovesTheJobsDeadlines(JobsApi& api);

// Destroying the environment mid-job kills the job: afterwards its routes
// are 404 and `leftovers` (the mechanism's count of what of the
// environment is left on the host: processes, cgroups, mounts) is 0. It
// must be above 0 while the job runs. `leftovers_once_torn_down` counts
// the same after the destroy, once the mechanism has finished what it does
// in the background (gvisor reaps and unmounts on a teardown worker after
// destroy returns); for a mechanism that does it all in destroy it is
// `leftovers`.
void expectDestroyingTheEnvironmentMidJobLeavesNothing(
    JobsApi& api, const std::function<int(const std::string& environment_id)>& leftovers,
    const std::function<int(const std::string& environment_id)>& leftovers_once_torn_down);

// A job past its wall_ms is killed (kill_reason "deadline") and its output
// up to then is still spilled.
void expectAJobIsKilledAtItsDeadline(JobsApi& api);

// The job_* tools (POST /v1/tools/{name}) drive the same jobs: a job the
// HTTP route started is listed and polled by a tool, a tool's job is polled
// over HTTP and killed by a tool.
void expectTheToolsDriveTheSameJobs(JobsApi& api);

// A PTY job (start with "pty") through every door: `sh -i` started over
// HTTP runs what is typed into it; stdin, stdout and stderr are terminals;
// `stty size` prints the start size, then each size set by the resize
// route, the job_resize tool and code mode's job.resize (polls report it);
// everything arrives on stdout; send_last types ^D, which ends the shell,
// and a `cat` a program started with pty= (its input echoed); a resize of
// an ended job is 409, of a job on pipes 400; bad sizes are 400 naming the
// key.
// `eof_ends_a_line_reader` false: the mechanism's terminal drops a ^D typed
// at the start of a line in canonical mode (this gVisor release; the gvisor
// mechanism's docs say so), so the shell is ended by typing `exit` and the
// program's job reads one line (`head -n 1`) instead of `cat` to its ^D;
// send_last is still accepted.
void expectAPtyJobIsATerminalThroughEveryDoor(JobsApi& api, bool eof_ends_a_line_reader = true);

// Another tenant's environment is 404 on every job route; bad requests name
// their problem; job.start_for_session has no wall of its own.
void expectJobRoutesAreTheTenantsOwnAndCheckTheirInput(JobsApi& api);

}  // namespace airlock::testing
