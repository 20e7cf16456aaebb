// A job's whole output spilled to the artifact store once it is terminal
// (spec 001 "cap/job", Job.spill; execution_capabilities.h
// JobSpillServices, stored through gateway/capabilities/job_output_artifacts.h;
// docs/capabilities.md "job.*"). The jobs run in a real
// linux sandbox (root; skipped otherwise) and are driven through the
// capability table's handlers, as the broker calls them; the spill goes to a
// filesystem artifact store in a temporary directory and is read back
// through the store. The last test goes through `airlock run --code` and
// `airlock artifact get`.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/memory_repository.h"
#include "airlock/capability/broker/capabilities.h"
#include "airlock/execution/capabilities/execution_capabilities.h"
#include "airlock/gateway/capabilities/job_output_artifacts.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"
#include "code_mode_cases.h"
#include "linux_test_support.h"

namespace airlock::testing {
namespace {

using capability::wire::Answer;
using capability::wire::Refusal;
using capability::wire::Value;

constexpr const char* kEmptyDigest =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// `period` repeated and cut to `size` bytes: what `yes LINE | head -c SIZE` writes.
std::string repeated(const std::string& period, std::size_t size) {
  std::string out;
  out.reserve(size + period.size());
  while (out.size() < size) out += period;
  out.resize(size);
  return out;
}

// Open descriptors of this process on a file under `dir` (an unnamed spool
// file reads "<dir>/#123 (deleted)").
int fdsUnder(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    char target[PATH_MAX];
    ssize_t len = ::readlink(e.path().c_str(), target, sizeof target - 1);
    if (len <= 0) continue;
    if (std::string_view(target, static_cast<std::size_t>(len)).rfind(dir + "/", 0) == 0) ++n;
  }
  return n;
}

bool dirEmpty(const std::string& dir) {
  return std::filesystem::is_empty(dir);
}

std::string str(const Value* v) {
  return v != nullptr && v->asString() != nullptr ? *v->asString() : "<not a str>";
}
std::uint64_t uint(const Value* v) {
  return v != nullptr && v->asUnsigned() ? *v->asUnsigned() : ~0ull;
}

class JobSpillTest : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    spool_ = dir_.path() + "/spool";
    store_dir_ = dir_.path() + "/store";
    ASSERT_TRUE(std::filesystem::create_directory(spool_));
    ASSERT_TRUE(std::filesystem::create_directory(store_dir_));
  }

  // A filesystem store over a memory repository, with a writer bound to
  // tenant "tenant-a" and run "run-1".
  void openStore(artifacts::FilesystemStoreOptions options = {}) {
    repository_ = std::make_shared<artifacts::MemoryArtifactRepository>();
    auto store = artifacts::FilesystemArtifactStore::create(
        sys::UniqueFd(::open(store_dir_.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC)), repository_,
        options);
    ASSERT_TRUE(store) << store.error().message();
    store_ = std::move(*store);
    auto tenant = artifacts::TenantId::parse("tenant-a");
    ASSERT_TRUE(tenant);
    writer_ = artifacts::makeArtifactWriter(
        *store_,
        artifacts::ArtifactWriterScope{*tenant, "run-1", artifacts::ArtifactOrigin::kToolOutput,
                                       artifacts::TrustLevel::kExternalUntrusted});
  }

  void makeTable(std::uint64_t max_stream_bytes = execution::JobSpillServices{}.max_stream_bytes,
                 std::string spool_dir = {},
                 std::uint64_t max_total_bytes = execution::JobSpillServices{}.max_total_bytes) {
    capability::SandboxServices s{env_.get(), handle_};
    s.job_spill.sink = gateway::artifactJobOutputSink(writer_);
    s.job_spill.spool_dir = spool_dir.empty() ? spool_ : spool_dir;
    s.job_spill.max_stream_bytes = max_stream_bytes;
    s.job_spill.max_total_bytes = max_total_bytes;
    s.add_execution = execution::addExecutionCapabilities;
    table_ = capability::makeSandboxCapabilities(s);
  }

  Answer call(const char* capability, Value args,
              std::chrono::seconds budget = std::chrono::seconds(60)) {
    auto cancel = CancelToken::create();
    EXPECT_TRUE(cancel);
    const auto* entry = table_->find(capability);
    EXPECT_NE(entry, nullptr) << capability;
    capability::CallContext ctx{capability, args, capability::BrokerClock::now() + budget, *cancel};
    return entry->handler(ctx);
  }
  Value value(const char* capability, Value args) {
    auto a = call(capability, std::move(args));
    if (auto* r = std::get_if<Refusal>(&a)) {
      ADD_FAILURE() << capability << " refused: " << r->code << " " << r->message;
      return Value::nil();
    }
    return std::get<Value>(std::move(a));
  }

  std::string start(const std::string& script) {
    auto v = value("job.start",
                   Value::map({{"argv", Value::array({Value::string("sh"), Value::string("-c"),
                                                      Value::string(script)})}}));
    return str(v.find("job_id"));
  }
  Value poll(const std::string& id, std::uint64_t out_cursor = 0) {
    return value("job.poll", Value::map({{"job_id", Value::string(id)},
                                         {"stdout_cursor", Value::unsignedInteger(out_cursor)}}));
  }
  // job.wait with moving cursors until `until(state)` holds; bounded by
  // the number of calls (each returns when the output moves or the job
  // settles, or after its own timeout).
  Value waitFor(const std::string& id, const std::function<bool(const Value&)>& until) {
    std::uint64_t oc = 0, ec = 0;
    for (int i = 0; i < 100000; ++i) {
      auto st = value("job.wait", Value::map({{"job_id", Value::string(id)},
                                              {"stdout_cursor", Value::unsignedInteger(oc)},
                                              {"stderr_cursor", Value::unsignedInteger(ec)},
                                              {"timeout_ms", Value::unsignedInteger(20000)}}));
      if (st.isNil() || until(st)) return st;
      oc = uint(st.find("stdout")->find("cursor"));
      ec = uint(st.find("stderr")->find("cursor"));
    }
    ADD_FAILURE() << "job " << id << " never got there";
    return Value::nil();
  }
  Value waitTerminal(const std::string& id) {
    return waitFor(id, [](const Value& st) { return st.find("pending")->asBool() == false; });
  }

  // The stored bytes of a stream's spill, through the store.
  std::string readBack(const Value& spilled) {
    auto id = artifacts::ArtifactId::parse(str(spilled.find("artifact_id")));
    EXPECT_TRUE(id);
    if (!id) return {};
    artifacts::ArtifactRef ref{*id, str(spilled.find("sha256")),
                               static_cast<std::int64_t>(uint(spilled.find("size_bytes"))),
                               str(spilled.find("media_type"))};
    auto source = store_->open(ref);
    EXPECT_TRUE(source) << source.error().message();
    if (!source) return {};
    auto bytes = artifacts::readAll(**source, std::size_t{64} << 20);
    EXPECT_TRUE(bytes) << bytes.error().message();
    return bytes ? *bytes : std::string();
  }

  TempStateDir dir_;
  std::string spool_, store_dir_;
  std::shared_ptr<artifacts::MemoryArtifactRepository> repository_;
  std::unique_ptr<artifacts::FilesystemArtifactStore> store_;
  std::shared_ptr<artifacts::ArtifactWriter> writer_;
  std::shared_ptr<capability::CapabilityTable> table_;
};

// 1 MiB of stdout (16 times the tail), with a UTF-8 character that the
// pipe's 64 KiB reads split, and a non-UTF-8 stderr: each stream is stored
// whole, its digest is that of the bytes the job wrote, and the store gives
// the same bytes back.
TEST_F(JobSpillTest, TheWholeOutputFarPastTheTailIsStoredAndReadsBack) {
  openStore();
  makeTable();
  // 18 bytes: a 64 KiB read ends between the é's two bytes (65536 % 18 == 16).
  const std::string period = "0123456789abcde\xc3\xa9\n";
  const std::string expected_out = repeated(period, std::size_t{1} << 20);
  const std::string expected_err = "err\xff\n";
  const std::string id =
      start("yes '0123456789abcde\xc3\xa9' | head -c 1048576; printf 'err\\377\\n' >&2");
  auto st = waitTerminal(id);
  ASSERT_FALSE(st.isNil());
  EXPECT_EQ(str(st.find("state")), "exited");
  EXPECT_EQ(uint(st.find("exit_code")), 0u);

  // The tail holds 64 KiB of it: the rest left the window.
  auto from_start = poll(id);
  EXPECT_EQ(uint(from_start.find("stdout")->find("dropped")), expected_out.size() - kJobTailBytes);

  const Value* spill = st.find("spill");
  ASSERT_TRUE(spill != nullptr && spill->asMap() != nullptr) << "a terminal job carries its spill";
  const Value& out = *spill->find("stdout");
  ASSERT_TRUE(out.asMap() != nullptr) << str(&out);
  EXPECT_EQ(str(out.find("sha256")), sys::sha256Hex(expected_out));
  EXPECT_EQ(uint(out.find("size_bytes")), expected_out.size());
  EXPECT_EQ(out.find("truncated")->asBool(), false);
  EXPECT_EQ(uint(out.find("dropped_bytes")), 0u);
  EXPECT_EQ(str(out.find("media_type")), "text/plain; charset=utf-8");
  EXPECT_TRUE(readBack(out) == expected_out) << "the stored stdout is the bytes the job wrote";

  const Value& err = *spill->find("stderr");
  ASSERT_TRUE(err.asMap() != nullptr) << str(&err);
  EXPECT_EQ(str(err.find("sha256")), sys::sha256Hex(expected_err));
  EXPECT_EQ(uint(err.find("size_bytes")), expected_err.size());
  EXPECT_EQ(str(err.find("media_type")), "application/octet-stream");
  EXPECT_EQ(readBack(err), expected_err);

  // What the store recorded: the writer's scope, the job's names, untrusted.
  auto stored = repository_->find(*artifacts::ArtifactId::parse(str(out.find("artifact_id"))));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->metadata.filename, id + ".stdout");
  EXPECT_EQ(stored->metadata.tenant_id.str(), "tenant-a");
  EXPECT_EQ(stored->metadata.run_id, std::optional<std::string>("run-1"));
  EXPECT_EQ(stored->metadata.origin, artifacts::ArtifactOrigin::kToolOutput);
  EXPECT_EQ(stored->metadata.trust, artifacts::TrustLevel::kExternalUntrusted);

  // job.poll and job.list say the same; the spool is gone.
  EXPECT_EQ(*from_start.find("spill"), *spill);
  auto list = value("job.list", Value::nil());
  ASSERT_TRUE(list.asArray() != nullptr && list.asArray()->size() == 1u);
  EXPECT_EQ(*list.asArray()->at(0).find("spill"), *spill);
  EXPECT_EQ(fdsUnder(spool_), 0);
  EXPECT_TRUE(dirEmpty(spool_));
}

// A job killed while it is still writing: its spill is every byte it got
// out before the kill, no more and no less. While it runs there is no spill
// yet, and its spool is an open file without a name in the spool directory.
TEST_F(JobSpillTest, AJobKilledMidOutputSpillsWhatItWrote) {
  openStore();
  makeTable();
  const std::string id = start("while :; do echo spill-line; done");
  auto running = waitFor(
      id, [](const Value& st) { return uint(st.find("stdout")->find("cursor")) >= (1u << 20); });
  ASSERT_FALSE(running.isNil());
  EXPECT_EQ(str(running.find("state")), "running");
  EXPECT_TRUE(running.find("spill")->isNil()) << "no spill while the job runs";
  EXPECT_TRUE(running.find("pending")->asBool().value_or(false));
  EXPECT_GE(fdsUnder(spool_), 1) << "the stream is spooled in the spool directory";
  EXPECT_TRUE(dirEmpty(spool_)) << "under no name";

  ASSERT_TRUE(
      std::holds_alternative<Value>(call("job.kill", Value::map({{"job_id", Value::string(id)}}))));
  auto st = waitTerminal(id);
  ASSERT_FALSE(st.isNil());
  EXPECT_EQ(str(st.find("state")), "killed");
  const std::uint64_t total = uint(st.find("stdout")->find("cursor"));
  ASSERT_GE(total, 1u << 20);

  const Value& out = *st.find("spill")->find("stdout");
  ASSERT_TRUE(out.asMap() != nullptr) << str(&out);
  EXPECT_EQ(uint(out.find("size_bytes")), total) << "every byte the job wrote";
  EXPECT_EQ(out.find("truncated")->asBool(), false);
  const std::string stored = readBack(out);
  EXPECT_EQ(stored.size(), total);
  EXPECT_TRUE(stored == repeated("spill-line\n", stored.size())) << "the job's own bytes, in order";
  EXPECT_EQ(str(out.find("sha256")), sys::sha256Hex(stored));

  // Nothing on stderr: no artifact, size 0, the digest of no bytes.
  const Value& err = *st.find("spill")->find("stderr");
  ASSERT_TRUE(err.asMap() != nullptr) << str(&err);
  EXPECT_TRUE(err.find("artifact_id")->isNil());
  EXPECT_EQ(uint(err.find("size_bytes")), 0u);
  EXPECT_EQ(str(err.find("sha256")), kEmptyDigest);

  EXPECT_EQ(fdsUnder(spool_), 0);
  EXPECT_TRUE(dirEmpty(spool_));
}

// Past max_stream_bytes the spool stops: the artifact is the stream's
// start, and the spill says truncated and how much was dropped.
TEST_F(JobSpillTest, AStreamPastItsCapIsStoredTruncated) {
  openStore();
  constexpr std::uint64_t kCap = 256 << 10;
  makeTable(kCap);
  const std::string expected = repeated("capped\n", std::size_t{1} << 20);
  const std::string id = start("yes capped | head -c 1048576");
  auto st = waitTerminal(id);
  ASSERT_FALSE(st.isNil());
  const Value& out = *st.find("spill")->find("stdout");
  ASSERT_TRUE(out.asMap() != nullptr) << str(&out);
  EXPECT_EQ(out.find("truncated")->asBool(), true);
  EXPECT_EQ(uint(out.find("size_bytes")), kCap);
  EXPECT_EQ(uint(out.find("dropped_bytes")), expected.size() - kCap);
  EXPECT_EQ(str(out.find("sha256")), sys::sha256Hex(expected.substr(0, kCap)));
  EXPECT_TRUE(readBack(out) == expected.substr(0, kCap));
}

// The execution's spool budget holds across jobs and streams: two jobs of
// 512 KiB each under a 768 KiB budget spool 768 KiB between them, and the
// rest is dropped and counted, whatever the per-stream cap allows.
TEST_F(JobSpillTest, EveryJobTogetherStaysWithinTheExecutionsBudget) {
  openStore();
  constexpr std::uint64_t kBudget = 768 << 10;
  makeTable(execution::JobSpillServices{}.max_stream_bytes, {}, kBudget);
  const std::string a = start("yes first | head -c 524288");
  auto first = waitTerminal(a);
  const std::string b = start("yes second | head -c 524288");
  auto second = waitTerminal(b);
  ASSERT_FALSE(first.isNil());
  ASSERT_FALSE(second.isNil());
  const Value& out1 = *first.find("spill")->find("stdout");
  const Value& out2 = *second.find("spill")->find("stdout");
  ASSERT_TRUE(out1.asMap() != nullptr && out2.asMap() != nullptr) << str(&out1) << str(&out2);
  EXPECT_EQ(uint(out1.find("size_bytes")), 524288u);
  EXPECT_EQ(out1.find("truncated")->asBool(), false);
  EXPECT_EQ(uint(out2.find("size_bytes")), kBudget - 524288u);
  EXPECT_EQ(uint(out2.find("dropped_bytes")), 524288u - (kBudget - 524288u));
  EXPECT_EQ(out2.find("truncated")->asBool(), true);
  EXPECT_EQ(str(out2.find("sha256")),
            sys::sha256Hex(repeated("second\n", 524288).substr(0, kBudget - 524288u)));
}

// The media type is text only when every byte is UTF-8, also when a
// character arrives in two reads: the job writes its first byte, waits for
// input (so the pump has read it on its own), then the second.
TEST_F(JobSpillTest, AStreamIsTextOnlyWhenAllOfItIsUtf8) {
  openStore();
  makeTable();
  struct Case {
    const char* second;
    std::string bytes;
    const char* media_type;
  };
  for (const Case& c : {Case{"\\251b",
                             "a\xc3\xa9"
                             "b",
                             "text/plain; charset=utf-8"},
                        Case{"b",
                             "a\xc3"
                             "b",
                             "application/octet-stream"},
                        Case{"", "a\xc3", "application/octet-stream"}}) {
    const std::string id = start(std::string("printf 'a\\303'; read x; printf '") + c.second + "'");
    ASSERT_FALSE(waitFor(id, [](const Value& st) {
                   return uint(st.find("stdout")->find("cursor")) >= 2;
                 }).isNil());
    ASSERT_TRUE(std::holds_alternative<Value>(
        call("job.send_last",
             Value::map({{"job_id", Value::string(id)}, {"data", Value::string("\n")}}))));
    auto st = waitTerminal(id);
    ASSERT_FALSE(st.isNil());
    const Value& out = *st.find("spill")->find("stdout");
    ASSERT_TRUE(out.asMap() != nullptr) << str(&out);
    EXPECT_EQ(str(out.find("media_type")), c.media_type) << c.second;
    EXPECT_EQ(str(out.find("sha256")), sys::sha256Hex(c.bytes)) << c.second;
    EXPECT_EQ(readBack(out), c.bytes);
  }
}

// A job that echoes its input while it reads it (`cat`): a send larger than
// the pipes hold completes, because the pump keeps reading the job's output
// while the send waits for room in its input.
TEST_F(JobSpillTest, ASendLargerThanThePipesReachesAJobThatEchoesIt) {
  openStore();
  makeTable();
  const std::string id = start("cat");
  const std::string input(2 << 20, 'y');  // 2 MiB: far past stdin's and stdout's pipes
  auto sent = call("job.send_last",
                   Value::map({{"job_id", Value::string(id)}, {"data", Value::string(input)}}),
                   std::chrono::seconds(30));
  ASSERT_TRUE(std::holds_alternative<Value>(sent))
      << "refused: " << std::get<Refusal>(sent).code << " " << std::get<Refusal>(sent).message;
  auto st = waitTerminal(id);
  ASSERT_FALSE(st.isNil());
  EXPECT_EQ(uint(st.find("exit_code")), 0u);
  EXPECT_EQ(uint(st.find("stdout")->find("cursor")), input.size()) << "every byte came back";
}

// A store that refuses the spill (here: larger than its per-artifact cap)
// costs that stream its artifact and nothing else: state, exit code and
// tail are the job's.
TEST_F(JobSpillTest, AStoreFailureIsReportedPerStreamAndKeepsTheJobsState) {
  artifacts::FilesystemStoreOptions small;
  small.max_artifact_bytes = 1000;
  openStore(small);
  makeTable();
  const std::string id = start("head -c 5000 /dev/zero | tr '\\0' x; echo short >&2; exit 3");
  auto st = waitTerminal(id);
  ASSERT_FALSE(st.isNil());
  EXPECT_EQ(str(st.find("state")), "exited");
  EXPECT_EQ(uint(st.find("exit_code")), 3u);
  const std::string out = str(st.find("spill")->find("stdout"));
  EXPECT_EQ(out.rfind("storing the spill failed: ", 0), 0u) << out;
  const Value& err = *st.find("spill")->find("stderr");
  ASSERT_TRUE(err.asMap() != nullptr) << str(&err);
  EXPECT_EQ(readBack(err), "short\n");
  EXPECT_EQ(str(poll(id).find("stdout")->find("data")), std::string(5000, 'x'));
  auto rows = repository_->listForTenant(*artifacts::TenantId::parse("tenant-a"), 10);
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->size(), 1u) << "only stderr was stored";
  EXPECT_EQ(fdsUnder(spool_), 0);
}

// A spool directory that does not exist: the spill says why, the job is
// untouched.
TEST_F(JobSpillTest, ASpoolThatCannotOpenIsReportedPerStream) {
  openStore();
  makeTable(execution::JobSpillServices{}.max_stream_bytes, dir_.path() + "/no-such-dir");
  const std::string id = start("echo out");
  auto st = waitTerminal(id);
  ASSERT_FALSE(st.isNil());
  EXPECT_EQ(uint(st.find("exit_code")), 0u);
  EXPECT_EQ(str(poll(id).find("stdout")->find("data")), "out\n");
  const std::string out = str(st.find("spill")->find("stdout"));
  EXPECT_EQ(out.rfind("spooling failed: ", 0), 0u) << out;
  EXPECT_EQ(uint(st.find("spill")->find("stderr")->find("size_bytes")), 0u)
      << "an empty stream opens no spool";
}

// No writer: nothing is spooled, and a terminal job's spill says there is
// no store, per stream.
TEST_F(JobSpillTest, WithoutAWriterNothingIsSpooledAndTheSpillSaysSo) {
  makeTable();
  const std::string id = start("head -c 200000 /dev/zero; cat >/dev/null");
  auto running = waitFor(
      id, [](const Value& st) { return uint(st.find("stdout")->find("cursor")) >= 200000u; });
  ASSERT_FALSE(running.isNil());
  EXPECT_TRUE(running.find("spill")->isNil());
  EXPECT_EQ(fdsUnder(spool_), 0) << "no spool without a writer";
  ASSERT_TRUE(std::holds_alternative<Value>(call(
      "job.send_last", Value::map({{"job_id", Value::string(id)}, {"data", Value::string("")}}))));
  auto st = waitTerminal(id);
  ASSERT_FALSE(st.isNil());
  EXPECT_EQ(str(st.find("state")), "exited");
  for (const char* stream : {"stdout", "stderr"})
    EXPECT_EQ(str(st.find("spill")->find(stream)), "no artifact store is configured for job output")
        << stream;
  EXPECT_TRUE(dirEmpty(spool_));
}

// Destroying the table (the execution's end) kills a running job and
// closes its spool: nothing is left, and nothing is stored.
TEST_F(JobSpillTest, DestroyingTheTableLeavesNoSpoolAndNoArtifact) {
  openStore();
  makeTable();
  const std::string id = start("while :; do echo still-going; done");
  auto running = waitFor(
      id, [](const Value& st) { return uint(st.find("stdout")->find("cursor")) >= 100000u; });
  ASSERT_FALSE(running.isNil());
  EXPECT_GE(fdsUnder(spool_), 1);
  table_.reset();
  EXPECT_EQ(fdsUnder(spool_), 0);
  EXPECT_TRUE(dirEmpty(spool_));
  auto rows = repository_->listForTenant(*artifacts::TenantId::parse("tenant-a"), 10);
  ASSERT_TRUE(rows);
  EXPECT_TRUE(rows->empty());
}

#ifdef AIRLOCK_BINARY
// `airlock run --code`: a job's spill lands in the state directory's store,
// where `airlock artifact get` reads the same bytes.
TEST(JobSpillCliTest, RunCodeSpillsIntoTheStoreArtifactGetReads) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  std::string out;
  nlohmann::json j;
  runCodeWithTheCli(
      AIRLOCK_BINARY, "", state.path(),
      "import airlock_cap as cap\n"
      "def main():\n"
      "    j = cap.job.start(['sh', '-c', 'yes 0123456789abcdef | head -c 1048576'])\n"
      "    while True:\n"
      "        st = cap.job.wait(j, timeout_ms=20000)\n"
      "        if not st.pending:\n"
      "            break\n"
      "    out = st.spill.stdout\n"
      "    return {'state': st.state, 'dropped': st.stdout_dropped, 'artifact_id': "
      "out.artifact_id,\n"
      "            'sha256': out.sha256, 'size_bytes': out.size_bytes, 'stderr': "
      "st.spill.stderr.size_bytes}\n",
      j, out);
  if (HasFatalFailure()) return;
  auto v = j["outcome"]["completed"];
  ASSERT_TRUE(v.is_object()) << out;
  const std::string expected = repeated("0123456789abcdef\n", std::size_t{1} << 20);
  EXPECT_EQ(v["state"], "exited");
  EXPECT_EQ(v["sha256"], sys::sha256Hex(expected));
  EXPECT_EQ(v["size_bytes"], expected.size());
  EXPECT_EQ(v["stderr"], 0);
  ASSERT_TRUE(v["artifact_id"].is_string()) << out;
  EXPECT_FALSE(j.contains("artifacts")) << "no --export, no export list";

  const std::string file = state.path() + "/got";
  int status = -1;
  const std::string got =
      commandOutput(std::string(AIRLOCK_BINARY) + " artifact get --state-dir " + state.path() +
                        " " + v["artifact_id"].get<std::string>() + " -o " + file + " 2>&1",
                    &status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << got;
  auto bytes = sys::readFile(AT_FDCWD, file.c_str(), std::size_t{2} << 20);
  ASSERT_TRUE(bytes) << bytes.error().message();
  EXPECT_TRUE(*bytes == expected) << "airlock artifact get gives the job's bytes";
  const std::string listed = commandOutput(std::string(AIRLOCK_BINARY) +
                                           " artifact list --json --state-dir " + state.path());
  auto rows = nlohmann::json::parse(listed, nullptr, false);
  ASSERT_TRUE(rows.is_array()) << listed;
  ASSERT_EQ(rows.size(), 1u) << listed;
  EXPECT_EQ(rows[0]["filename"], "job-1.stdout") << listed;
}
#endif

}  // namespace
}  // namespace airlock::testing
