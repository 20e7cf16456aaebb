// The HTTP API as a handler (no sockets): authentication, routes, request
// validation with errors that name the field, workspace calls that never
// echo a host path, leases and the reaper. Runs on the fake mechanism.
#include "airlock/gateway/api/api.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/memory_repository.h"
#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/json.h"
#include "airlock/execution/node.h"
#include "airlock/port/job_port.h"
#include "airlock/sandbox/fake/fake_environment.h"
#include "airlock/service/request_keys.h"
#include "airlock/sys/sha256.h"

namespace airlock::gateway {
namespace {

using service::HttpRequest;
using service::HttpResponse;
using service::Metrics;
using service::percentDecoded;
using service::queryParam;
using service::Settings;

using json = nlohmann::json;
constexpr const char* kToken = "0123456789abcdef0123456789";

class ApiTest : public ::testing::Test {
 protected:
  ApiTest() {
    settings_.service_token = kToken;
    fake::FakeOptions options;
    options.clock = [this] { return now_; };
    env_ = std::make_unique<fake::FakeEnvironment>(options);
    env_->setFallback(fake::basicCommands);
    node_ = std::make_unique<execution::LocalNode>(
        *env_, [this] { return now_; }, nodeEvents(metrics_));
    api_ = std::make_unique<Api>(settings_, *node_, ServiceImages::hostOnly(fake::kFakeImageDigest),
                                 metrics_, [this] { return now_; });
  }
  HttpResponse call(std::string method, std::string target, std::string body = "",
                    std::string auth = std::string("Bearer ") + kToken) {
    return api_->handle(
        HttpRequest{std::move(method), std::move(target), std::move(auth), std::move(body)});
  }
  std::string provision(const json& body = {
                            {"tenant_id", "t1"}, {"run_id", "r1"}, {"lease_epoch", 1}}) {
    auto r = call("POST", "/v1/environments", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body).value("environment_id", "");
  }
  static std::string code(const HttpResponse& r) { return json::parse(r.body)["error"]["code"]; }
  static std::string message(const HttpResponse& r) {
    return json::parse(r.body)["error"]["message"];
  }

  Timestamp now_ =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  Settings settings_;
  Metrics metrics_{"fake"};
  std::unique_ptr<fake::FakeEnvironment> env_;
  std::unique_ptr<execution::LocalNode> node_;
  std::unique_ptr<Api> api_;
};

TEST_F(ApiTest, HealthNeedsNoTokenAndEverythingElseDoes) {
  EXPECT_EQ(call("GET", "/healthz", "", "").status, 200);
  for (const auto& [method, target] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/metrics"},
                                                        {"POST", "/v1/environments"},
                                                        {"GET", "/v1/environments"},
                                                        {"DELETE", "/v1/environments/x"},
                                                        {"PUT", "/v1/runs/r1/lease"}}) {
    for (const std::string& auth :
         std::vector<std::string>{"", "Bearer wrong", std::string("Basic ") + kToken,
                                  std::string("Bearer ") + kToken + "x"}) {
      auto r = call(method, target, "{}", auth);
      EXPECT_EQ(r.status, 401) << method << " " << target << " with '" << auth << "'";
      EXPECT_EQ(code(r), "unauthorized");
    }
  }
}

// RFC 9110, "Authentication Scheme": the scheme is case-insensitive, the
// token is not. Only "<scheme> SP <token>" authenticates: a value with a
// line break, a tab or extra spaces in it (what a folded or padded header
// leaves) does not.
// GET /v1/images lists what the service runs, the default first; a
// provision's `image` picks one by name; an unknown name is refused naming
// the images there are, and a digest the service does not run reaches the
// mechanism, which refuses it as every unknown digest.
TEST_F(ApiTest, AnEnvironmentPicksItsImageByNameAndAnUnknownOneIsRefused) {
  auto listed = call("GET", "/v1/images");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(json::parse(listed.body),
            json::parse(R"({"images": [{"name": "host", "reference": null, "digest": ")" +
                        std::string(fake::kFakeImageDigest) + R"(", "default": true}]})"));
  EXPECT_EQ(call("POST", "/v1/images").status, 405);

  const std::string id = provision({{"tenant_id", "t1"}, {"run_id", "r1"}, {"image", "host"}});
  EXPECT_FALSE(id.empty());
  auto got = call("GET", "/v1/environments/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(json::parse(got.body)["image_digest"], fake::kFakeImageDigest);
  auto unknown = call("POST", "/v1/environments",
                      json{{"tenant_id", "t1"}, {"run_id", "r2"}, {"image", "python"}}.dump());
  EXPECT_EQ(unknown.status, 409) << unknown.body;
  EXPECT_EQ(message(unknown), "unknown image \"python\" (this service runs host)");
  auto digest =
      call("POST", "/v1/environments",
           json{{"tenant_id", "t1"}, {"run_id", "r2"}, {"image", "sha256:" + std::string(64, 'b')}}
               .dump());
  EXPECT_EQ(digest.status, 409) << digest.body;
  EXPECT_EQ(code(digest), "execution_rejected") << digest.body;
  auto not_text = call("POST", "/v1/environments",
                       json{{"tenant_id", "t1"}, {"run_id", "r2"}, {"image", 7}}.dump());
  EXPECT_EQ(not_text.status, 400) << not_text.body;
}

TEST_F(ApiTest, TheBearerSchemeIsCaseInsensitiveAndNothingElseIsLoose) {
  const std::string token = kToken;
  for (const std::string scheme : {"Bearer", "bearer", "BEARER", "bEaReR"}) {
    auto r = call("GET", "/v1/environments", "", scheme + " " + token);
    EXPECT_EQ(r.status, 200) << scheme << ": " << r.body;
  }
  std::string upper = token;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& auth : std::vector<std::string>{
           "Bearer\r\n " + token, "Bearer \r\n " + token, "Bearer " + token + "\r\n",
           "Bearer " + token + "\r\n ", "Bearer\n" + token, "Bearer\r" + token, "Bearer\t" + token,
           "Bearer  " + token, " Bearer " + token, "Bearer " + token + " ",
           "Bearer " + token + "\t", "Bearer" + token, "Bearer " + upper,
           "Bearer " + token.substr(0, token.size() - 1), "Bearerx " + token, "Bearer: " + token,
           std::string("Bearer ") + '\0' + token, "Bearer " + token + '\0'}) {
    auto r = call("GET", "/v1/environments", "", auth);
    EXPECT_EQ(r.status, 401) << "authenticated with " << quoteForMessage(auth);
  }
}

TEST_F(ApiTest, ProvisionExecuteReadAndDestroy) {
  const std::string id = provision();
  ASSERT_FALSE(id.empty());
  auto exec = call("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["echo", "hello"]})");
  ASSERT_EQ(exec.status, 200) << exec.body;
  auto result = json::parse(exec.body);
  EXPECT_EQ(result["stdout"], "hello\n");
  EXPECT_EQ(result["exit_code"], 0);

  EXPECT_EQ(call("PUT", "/v1/environments/" + id + "/files?path=dir%2Fa%20b.txt", "bytes\n").status,
            204);
  auto read = call("GET", "/v1/environments/" + id + "/files?path=dir/a+b.txt");
  EXPECT_EQ(read.status, 200);
  EXPECT_EQ(read.content_type, "application/octet-stream");
  EXPECT_EQ(read.body, "bytes\n");
  auto list = call("GET", "/v1/environments/" + id + "/list?path=dir");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(json::parse(list.body)["entries"][0]["name"], "a b.txt");
  auto prov = call("GET", "/v1/environments/" + id + "/provenance?path=dir/a%20b.txt");
  EXPECT_EQ(json::parse(prov.body)["provenance"], "TOOL_WRITTEN");

  EXPECT_EQ(call("DELETE", "/v1/environments/" + id).status, 204);
  EXPECT_EQ(call("DELETE", "/v1/environments/" + id).status, 204) << "destroy is idempotent";
  EXPECT_EQ(env_->liveCount(), 0u);
  auto gone = call("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["true"]})");
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(code(gone), "not_found");
}

TEST_F(ApiTest, BadRequestsNameTheField) {
  struct Case {
    std::string body;
    std::string message_part;
  };
  for (const auto& c : std::vector<Case>{
           {"not json", "not valid JSON"},
           {"[1]", "must be a JSON object"},
           {R"({"run_id": "r"})", "tenant_id is required"},
           {R"({"tenant_id": "t/../x", "run_id": "r"})", "tenant_id must be"},
           {R"({"tenant_id": "t", "run_id": "r", "lease_epoch": "1"})",
            "lease_epoch must be a whole number"},
           {R"({"tenant_id": "t", "run_id": "r", "limits": {"memory": 1}})",
            "limits.memory is not a limit"},
           {R"({"tenant_id": "t", "run_id": "r", "limits": {"pids_max": 100000}})", "pids_max"},
           {R"({"tenant_id": "t", "run_id": "r", "environment": {"AWS_SECRET_ACCESS_KEY": "x"}})",
            "names a credential"},
           {R"({"tenant_id": "t", "run_id": "r", "environment": {"HOME": "/"}})",
            "is set by Airlock itself"},
       }) {
    auto r = call("POST", "/v1/environments", c.body);
    EXPECT_GE(r.status, 400) << c.body;
    EXPECT_LT(r.status, 500) << c.body;
    EXPECT_NE(message(r).find(c.message_part), std::string::npos) << c.body << " -> " << r.body;
  }
  const std::string id = provision();
  for (const auto& c : std::vector<Case>{
           {R"({})", "argv is required"},
           {R"({"argv": "ls -la"})", "argv is required and must be a non-empty array"},
           {R"({"argv": ["ls", 1]})", "argv must be an array of strings"},
           {R"({"argv": ["true"], "timeout_seconds": 1.5})",
            "timeout_seconds must be a whole number"},
           {R"({"argv": ["true"], "maximum_output_bytes": 0})",
            "maximum_output_bytes must be between"},
       }) {
    auto r = call("POST", "/v1/environments/" + id + "/execute", c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_NE(message(r).find(c.message_part), std::string::npos) << c.body << " -> " << r.body;
  }
  auto escape = call("GET", "/v1/environments/" + id + "/files?path=../../etc/passwd");
  EXPECT_EQ(escape.status, 400);
  EXPECT_EQ(code(escape), "workspace_escape");
  EXPECT_EQ(call("GET", "/v1/environments/" + id + "/files").status, 400) << "path is required";
  EXPECT_EQ(call("GET", "/v1/environments/" + id + "/files?path=%zz").status, 400);
  EXPECT_EQ(call("GET", "/v1/environments/" + id + "/files?path=missing.txt").status, 404);
  EXPECT_EQ(call("PATCH", "/v1/environments/" + id).status, 405);
  EXPECT_EQ(call("GET", "/v2/anything").status, 404);
}

TEST_F(ApiTest, WorkspacePathsAreRemovedRenamedStatedAndMadeWithErrorsThatNameThem) {
  const std::string id = provision();
  ASSERT_FALSE(id.empty());
  const std::string env = "/v1/environments/" + id;
  ASSERT_EQ(call("PUT", env + "/files?path=d%2Fa.txt", "12345").status, 204);
  ASSERT_EQ(call("POST", env + "/directories", R"({"path": "made/deep"})").status, 204);

  auto st = call("GET", env + "/stat?path=d/a.txt");
  ASSERT_EQ(st.status, 200) << st.body;
  const json stat = json::parse(st.body);
  EXPECT_EQ(stat["path"], "d/a.txt");
  EXPECT_EQ(stat["type"], "file");
  EXPECT_EQ(stat["size_bytes"], 5);
  EXPECT_EQ(stat["mode"], 0644);
  EXPECT_GT(stat["mtime_ns"].get<std::int64_t>(), 0);
  EXPECT_TRUE(parseTimestamp(stat["mtime"].get<std::string>()).has_value()) << stat["mtime"];
  EXPECT_EQ(json::parse(call("GET", env + "/stat?path=made%2Fdeep").body)["type"], "directory");

  auto exists = call("POST", env + "/files/rename", R"({"from": "d/a.txt", "to": "d"})");
  EXPECT_EQ(exists.status, 409) << exists.body;
  EXPECT_NE(message(exists).find("\"d\" already exists"), std::string::npos) << exists.body;
  ASSERT_EQ(call("POST", env + "/files/rename", R"({"from": "d/a.txt", "to": "b.txt"})").status,
            204);
  EXPECT_EQ(call("GET", env + "/files?path=b.txt").body, "12345");
  EXPECT_EQ(json::parse(call("GET", env + "/provenance?path=b.txt").body)["provenance"],
            "TOOL_WRITTEN");
  ASSERT_EQ(call("PUT", env + "/files?path=c.txt", "c").status, 204);
  EXPECT_EQ(
      call("POST", env + "/files/rename", R"({"from": "c.txt", "to": "b.txt", "replace": true})")
          .status,
      204);
  EXPECT_EQ(call("GET", env + "/files?path=b.txt").body, "c");

  ASSERT_EQ(call("PUT", env + "/files?path=d%2Fx", "x").status, 204);
  auto not_empty = call("DELETE", env + "/files?path=d");
  EXPECT_EQ(not_empty.status, 409) << not_empty.body;
  EXPECT_NE(message(not_empty).find("\"d\" is a directory that is not empty"), std::string::npos)
      << not_empty.body;
  EXPECT_EQ(call("DELETE", env + "/files?path=d&recursive=1").status, 204);
  EXPECT_EQ(call("DELETE", env + "/files?path=b.txt&recursive=0").status, 204);
  auto missing = call("GET", env + "/stat?path=b.txt");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_NE(message(missing).find("b.txt"), std::string::npos) << missing.body;
  auto gone = call("DELETE", env + "/files?path=d");
  EXPECT_EQ(gone.status, 404) << gone.body;
  EXPECT_NE(message(gone).find("d"), std::string::npos) << gone.body;
}

TEST_F(ApiTest, WorkspacePathRoutesRefuseEscapesAndMalformedInput) {
  const std::string id = provision();
  ASSERT_FALSE(id.empty());
  const std::string env = "/v1/environments/" + id;
  ASSERT_EQ(call("PUT", env + "/files?path=f", "f").status, 204);
  for (const auto& [method, target, body] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"DELETE", env + "/files?path=..%2Fx&recursive=1", ""},
           {"GET", env + "/stat?path=%2Fetc%2Fpasswd", ""},
           {"POST", env + "/files/rename", R"({"from": "f", "to": "../f"})"},
           {"POST", env + "/files/rename", R"({"from": "../../etc/passwd", "to": "p"})"},
           {"POST", env + "/directories", R"({"path": "a/../../b"})"},
       }) {
    auto r = call(method, target, body);
    EXPECT_EQ(r.status, 400) << method << " " << target << " " << body << " -> " << r.body;
    EXPECT_EQ(code(r), "workspace_escape") << r.body;
  }
  struct Case {
    std::string method, target, body, message_part;
  };
  for (const auto& c : std::vector<Case>{
           {"DELETE", env + "/files?path=f&recursive=yes", "", "recursive must be 1 or 0"},
           {"DELETE", env + "/files?path=.&recursive=1", "", "root is never removed"},
           {"DELETE", env + "/files", "", "path query parameter is required"},
           {"POST", env + "/files/rename", R"({"to": "g"})", "from is required"},
           {"POST", env + "/files/rename", R"({"from": "f", "to": 3})",
            "to must be a workspace path"},
           {"POST", env + "/files/rename", R"({"from": "f", "to": "g", "replace": "yes"})",
            "replace must be true or false"},
           {"POST", env + "/files/rename", R"({"from": "f", "too": "g"})", "unknown key \"too\""},
           {"POST", env + "/directories", R"({})", "path is required"},
           {"POST", env + "/directories", R"({"path": "f"})", "f"},
       }) {
    auto r = call(c.method, c.target, c.body);
    EXPECT_EQ(r.status, 400) << c.target << " " << c.body << " -> " << r.body;
    EXPECT_NE(message(r).find(c.message_part), std::string::npos) << c.body << " -> " << r.body;
  }
  EXPECT_EQ(call("GET", "/v1/environments/nope/stat?path=f").status, 404);
  EXPECT_EQ(call("POST", "/v1/environments/nope/directories", R"({"path": "x"})").status, 404);
}

// A tar built in memory with libarchive's writer: (name, bytes) regular
// files, a name ending in "/" a directory, "name->target" a symlink.
std::string tarOf(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out(4 << 20, '\0');
  std::size_t used = 0;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open_memory(a, out.data(), out.size(), &used);
  for (const auto& [name, data] : members) {
    struct archive_entry* e = archive_entry_new();
    const auto arrow = name.find("->");
    archive_entry_set_pathname(e, name.substr(0, arrow).c_str());
    if (arrow != std::string::npos) {
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, name.substr(arrow + 2).c_str());
    } else if (name.back() == '/') {
      archive_entry_set_filetype(e, AE_IFDIR);
      archive_entry_set_perm(e, 0755);
    } else {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_perm(e, 0644);
      archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    }
    archive_write_header(a, e);
    if (!data.empty()) archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  out.resize(used);
  return out;
}

TEST_F(ApiTest, AnUploadedTarIsExtractedIntoTheDirectoryAsUnknownFiles) {
  const std::string id = provision();
  ASSERT_FALSE(id.empty());
  const std::string env = "/v1/environments/" + id;
  const std::string tar = tarOf({{"src/", ""}, {"src/main.py", "print(1)\n"}, {"README", "r"}});
  auto put = call("PUT", env + "/archive?path=proj%2Fv1", tar);
  ASSERT_EQ(put.status, 204) << put.body;
  EXPECT_EQ(call("GET", env + "/files?path=proj/v1/src/main.py").body, "print(1)\n");
  EXPECT_EQ(call("GET", env + "/files?path=proj/v1/README").body, "r");
  EXPECT_EQ(json::parse(call("GET", env + "/provenance?path=proj/v1/README").body)["provenance"],
            "UNKNOWN");
  ASSERT_EQ(call("PUT", env + "/archive?path=.", tar).status, 204) << "into the root";
  EXPECT_EQ(call("GET", env + "/files?path=README").body, "r");
}

// The members of a tar (name -> bytes; a directory's bytes are "<dir>").
std::map<std::string, std::string> membersOf(const std::string& tar) {
  std::map<std::string, std::string> out;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_memory(a, tar.data(), tar.size()), ARCHIVE_OK);
  struct archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string data;
    if (archive_entry_filetype(e) == AE_IFDIR) {
      data = "<dir>";
    } else {
      char buf[4096];
      for (la_ssize_t n; (n = archive_read_data(a, buf, sizeof buf)) > 0;)
        data.append(buf, static_cast<std::size_t>(n));
    }
    out[archive_entry_pathname(e)] = data;
  }
  archive_read_free(a);
  return out;
}

// Everything a response's body source yields, checking each read stays
// within the buffer it was given. Each read runs on a thread of its own,
// as the server's reads run on whichever worker is free.
std::string drained(const HttpResponse& r) {
  std::string out;
  if (!r.body_source) return r.body;
  char buf[1000];
  for (;;) {
    Result<std::size_t> n = 0;
    std::thread([&] { n = r.body_source->read(buf, sizeof buf); }).join();
    EXPECT_TRUE(n.has_value()) << n.error().message();
    if (!n || *n == 0) return out;
    EXPECT_LE(*n, sizeof buf);
    out.append(buf, *n);
  }
}

TEST_F(ApiTest, ADirectoryComesOutAsATarStreamedFromItsSource) {
  const std::string id = provision();
  ASSERT_FALSE(id.empty());
  const std::string env = "/v1/environments/" + id;
  const std::string big(3000000, 'b');
  ASSERT_EQ(call("PUT", env + "/files?path=p%2Fsrc%2Fmain.py", "print(1)\n").status, 204);
  ASSERT_EQ(call("PUT", env + "/files?path=p%2Fbig.bin", big).status, 204);
  ASSERT_EQ(call("POST", env + "/directories", R"({"path": "p/empty"})").status, 204);
  auto r = call("GET", env + "/archive?path=p");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/x-tar");
  ASSERT_NE(r.body_source, nullptr) << "the tar is streamed, not held in the body";
  EXPECT_TRUE(r.body.empty());
  const auto members = membersOf(drained(r));
  EXPECT_EQ(members, (std::map<std::string, std::string>{{"big.bin", big},
                                                         {"empty/", "<dir>"},
                                                         {"src/", "<dir>"},
                                                         {"src/main.py", "print(1)\n"}}));
  // What comes out goes back in.
  auto whole = call("GET", env + "/archive?path=.");
  ASSERT_EQ(call("PUT", env + "/archive?path=copy", drained(whole)).status, 204);
  EXPECT_EQ(call("GET", env + "/files?path=copy/p/src/main.py").body, "print(1)\n");

  EXPECT_EQ(call("GET", env + "/archive?path=p%2Fbig.bin").status, 400) << "not a directory";
  EXPECT_EQ(call("GET", env + "/archive?path=nothing").status, 404);
  EXPECT_EQ(call("GET", env + "/archive?path=..").status, 400);
}

TEST_F(ApiTest, AnUploadedArchiveWithABadMemberIsRefusedNamingItAndWritesNothing) {
  const std::string id = provision();
  ASSERT_FALSE(id.empty());
  const std::string env = "/v1/environments/" + id;
  for (const auto& [members, part] :
       std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>>{
           {{{"ok.txt", "ok"}, {"../x", "x"}}, "archive member \"../x\" leaves the workspace"},
           {{{"ok.txt", "ok"}, {"/etc/x", "x"}}, "archive member \"/etc/x\" leaves the workspace"},
           {{{"ok.txt", "ok"}, {"lnk->/etc/passwd", ""}}, "archive member \"lnk\" is a symlink"},
       }) {
    auto r = call("PUT", env + "/archive?path=up", tarOf(members));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(message(r).find(part), std::string::npos) << r.body;
    EXPECT_EQ(call("GET", env + "/stat?path=up").status, 404) << "nothing was written";
  }
  auto junk = call("PUT", env + "/archive?path=up", "this is not an archive");
  EXPECT_EQ(junk.status, 400) << junk.body;
  EXPECT_NE(message(junk).find("the request body is not a readable tar or zip archive"),
            std::string::npos)
      << junk.body;
  auto escape = call("PUT", env + "/archive?path=..%2Fup", tarOf({{"a", "a"}}));
  EXPECT_EQ(escape.status, 400) << escape.body;
  EXPECT_EQ(code(escape), "workspace_escape");
}

TEST_F(ApiTest, AnUploadedArchiveStopsAtTheWorkspaceByteLimit) {
  const std::string id = provision(
      {{"tenant_id", "t1"}, {"run_id", "r1"}, {"limits", {{"workspace_bytes", 1 << 20}}}});
  ASSERT_FALSE(id.empty());
  auto r =
      call("PUT", "/v1/environments/" + id + "/archive?path=big",
           tarOf({{"a.bin", std::string(600 << 10, 'a')}, {"b.bin", std::string(600 << 10, 'b')}}));
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(message(r).find("workspace full"), std::string::npos) << r.body;
  EXPECT_EQ(call("GET", "/v1/environments/" + id + "/stat?path=big%2Fb.bin").status, 404);
}

TEST_F(ApiTest, ReaperDestroysStaleLeasesExpiredAndNothingElse) {
  const std::string current =
      provision({{"tenant_id", "t1"}, {"run_id", "run-a"}, {"lease_epoch", 3}});
  const std::string other =
      provision({{"tenant_id", "t1"}, {"run_id", "run-b"}, {"lease_epoch", 1}});
  EXPECT_EQ(api_->reap(), 0);
  // The platform moves run-a to epoch 4: its epoch-3 sandbox is stale.
  auto renew = call("PUT", "/v1/runs/run-a/lease", R"({"tenant_id": "t1", "lease_epoch": 4})");
  ASSERT_EQ(renew.status, 200) << renew.body;
  EXPECT_EQ(json::parse(renew.body)["lease_epoch"], 4);
  EXPECT_EQ(
      json::parse(call("PUT", "/v1/runs/run-a/lease", R"({"tenant_id": "t1", "lease_epoch": 2})")
                      .body)["lease_epoch"],
      4)
      << "leases only move forward";
  EXPECT_EQ(api_->reap(), 1);
  EXPECT_EQ(call("GET", "/v1/environments/" + current).status, 404);
  EXPECT_EQ(call("GET", "/v1/environments/" + other).status, 200);
  // A stale epoch cannot provision again.
  auto old = call("POST", "/v1/environments",
                  R"({"tenant_id": "t1", "run_id": "run-a", "lease_epoch": 3})");
  EXPECT_EQ(old.status, 409);
  // Past expires_at the reaper destroys it even with a current lease.
  now_ += std::chrono::hours(1);
  EXPECT_EQ(api_->reap(), 1);
  EXPECT_EQ(env_->liveCount(), 0u);
  EXPECT_EQ(api_->liveCount(), 0u);
  const std::string text = metrics_.render();
  EXPECT_NE(text.find("airlock_orphans_reaped_total{why=\"stale_lease\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("airlock_orphans_reaped_total{why=\"expired\"} 1"), std::string::npos)
      << text;
}

// POST .../extend moves expires_at to now + seconds, clamped to created_at
// plus environment_hard_cap and never earlier; GET shows it, the reaper and
// the adapter's command admission use it.
TEST_F(ApiTest, AnExtendedEnvironmentOutlivesItsFirstExpiryUpToTheHardCap) {
  settings_.environment_hard_cap = std::chrono::hours(2);  // the fake's lifetime is 30 min
  const std::string id = provision();
  const json handle = json::parse(call("GET", "/v1/environments/" + id).body);
  const Timestamp created = parseTimestamp(handle["created_at"].get<std::string>()).value();
  EXPECT_EQ(parseTimestamp(handle["expires_at"].get<std::string>()).value(),
            created + std::chrono::minutes(30));

  auto extended = call("POST", "/v1/environments/" + id + "/extend", R"({"seconds": 3600})");
  ASSERT_EQ(extended.status, 200) << extended.body;
  EXPECT_EQ(json::parse(extended.body)["expires_at"],
            formatTimestamp(now_ + std::chrono::hours(1)));
  EXPECT_EQ(json::parse(extended.body)["max_expires_at"],
            formatTimestamp(created + std::chrono::hours(2)));
  EXPECT_EQ(json::parse(call("GET", "/v1/environments/" + id).body)["expires_at"],
            formatTimestamp(now_ + std::chrono::hours(1)));

  now_ += std::chrono::minutes(45);  // past the first expires_at
  EXPECT_EQ(api_->reap(), 0);
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["true"]})").status,
            200)
      << "the adapter admits commands under the new expires_at";

  auto shorter = call("POST", "/v1/environments/" + id + "/extend", R"({"seconds": 60})");
  ASSERT_EQ(shorter.status, 200) << shorter.body;
  EXPECT_EQ(json::parse(shorter.body)["expires_at"],
            formatTimestamp(created + std::chrono::hours(1)))
      << "never earlier";
  auto past = call("POST", "/v1/environments/" + id + "/extend", R"({"seconds": 7200})");
  ASSERT_EQ(past.status, 200) << past.body;
  EXPECT_EQ(json::parse(past.body)["expires_at"], formatTimestamp(created + std::chrono::hours(2)))
      << "clamped to the hard cap";

  auto zero = call("POST", "/v1/environments/" + id + "/extend", R"({"seconds": 0})");
  EXPECT_EQ(zero.status, 400);
  EXPECT_EQ(message(zero), "seconds must be 1 to 7200 (environment_hard_cap), got 0");
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/extend", R"({"seconds": 7201})").status, 400);
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/extend", R"({"secs": 10})").status, 400);
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/extend", "{}").status, 400);
  EXPECT_EQ(call("POST", "/v1/environments/nope/extend", R"({"seconds": 10})").status, 404);

  now_ += std::chrono::hours(2);
  EXPECT_EQ(api_->reap(), 1) << "the hard cap still ends it";
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/extend", R"({"seconds": 10})").status, 404);
}

TEST_F(ApiTest, MetricsCountKillReasonsAndRequestsNeverLeakTheToken) {
  const std::string id = provision();
  call("POST", "/v1/environments/" + id + "/execute",
       R"({"argv": ["sleep", "10"], "timeout_seconds": 1})");
  call("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["true"]})");
  auto r = call("GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("airlock_executions_total{killed_by=\"TIMEOUT\"} 1"), std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("airlock_executions_total{killed_by=\"none\"} 1"), std::string::npos);
  EXPECT_NE(r.body.find("airlock_provision_seconds_count{mechanism=\"fake\"} 1"),
            std::string::npos);
  EXPECT_EQ(r.body.find(kToken), std::string::npos);
}

TEST_F(ApiTest, StreamingExecuteEmitsOutputLinesThenTheResult) {
  const std::string id = provision();
  HttpRequest request{"POST", "/v1/environments/" + id + "/execute?stream=1",
                      std::string("Bearer ") + kToken, R"({"argv": ["echo", "streamed"]})"};
  ASSERT_TRUE(api_->wantsStream(request));
  EXPECT_FALSE(
      api_->wantsStream(HttpRequest{"POST", "/v1/environments/" + id + "/execute", "", ""}));
  std::vector<std::string> lines;
  auto end = api_->handleStreaming(
      request, [&](std::string line) { lines.push_back(std::move(line)); }, nullptr);
  EXPECT_EQ(end.status, 200);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(json::parse(lines[0]), (json{{"stream", "stdout"}, {"data", "streamed\n"}}));
  EXPECT_EQ(json::parse(lines[1])["result"]["stdout"], "streamed\n");
  // Refused before starting: no line, an error response.
  lines.clear();
  request.body = R"({"argv": "echo"})";
  EXPECT_EQ(api_->handleStreaming(
                    request, [&](std::string line) { lines.push_back(line); }, nullptr)
                .status,
            400);
  request.authorization = "Bearer nope";
  EXPECT_EQ(api_->handleStreaming(
                    request, [&](std::string line) { lines.push_back(line); }, nullptr)
                .status,
            401);
  EXPECT_TRUE(lines.empty());
}

TEST_F(ApiTest, AnExecutionIsCancelledByItsIdThroughItsOwnRoute) {
  fake::ScriptedBehaviour forever;
  forever.stdout_data = "started\n";
  forever.runs_until_cancelled = true;
  env_->script({"wait-forever"}, forever);
  const std::string id = provision();
  HttpRequest request{"POST", "/v1/environments/" + id + "/execute?stream=1",
                      std::string("Bearer ") + kToken,
                      R"({"argv": ["wait-forever"], "execution_id": "exec-7"})"};
  std::promise<void> started;
  std::vector<std::string> lines;
  HttpResponse end;
  std::thread running([&] {
    bool said = false;
    end = api_->handleStreaming(
        request,
        [&](std::string line) {
          lines.push_back(std::move(line));
          if (!said) started.set_value();
          said = true;
        },
        nullptr);
  });
  ASSERT_EQ(started.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const std::string executions = "/v1/environments/" + id + "/executions/";
  auto other = call("POST", executions + "exec-8/cancel");
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(code(other), "not_found");
  EXPECT_EQ(call("GET", executions + "exec-7/cancel").status, 405);
  EXPECT_EQ(call("POST", executions + "exec-7/cancel?tenant_id=t2").status, 404)
      << "another tenant's environment is not found";
  auto cancelled = call("POST", executions + "exec%2D7/cancel");  // percent-encoded "exec-7"
  running.join();
  EXPECT_EQ(cancelled.status, 204) << cancelled.body;
  EXPECT_EQ(end.status, 200) << end.body;
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(json::parse(lines[1])["result"]["killed_by"], "CANCELLED");
  EXPECT_EQ(json::parse(lines[1])["result"]["stdout"], "started\n");
  EXPECT_EQ(call("POST", executions + "exec-7/cancel").status, 404) << "over: not running";
  EXPECT_EQ(call("POST", executions + "exec%2/cancel").status, 400) << "malformed encoding";
  auto empty = call("POST", "/v1/environments/" + id + "/execute",
                    R"({"argv": ["true"], "execution_id": ""})");
  EXPECT_EQ(empty.status, 400);
  EXPECT_NE(message(empty).find("execution_id must not be empty"), std::string::npos);
  auto bad = call("POST", "/v1/environments/" + id + "/execute",
                  R"({"argv": ["true"], "execution_id": "has space"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(message(bad).find("execution_id"), std::string::npos) << message(bad);
}

// `env` on execute: set for that command only; a name the tier rules
// refuse, or a value that is not a string, is a 400 naming it.
TEST_F(ApiTest, ExecuteEnvReachesOnlyItsCommandAndRefusedNamesAreNamed) {
  const std::string id = provision();
  const std::string execute = "/v1/environments/" + id + "/execute";
  auto seen =
      call("POST", execute, R"({"argv": ["printenv", "GREETING"], "env": {"GREETING": "hi"}})");
  ASSERT_EQ(seen.status, 200) << seen.body;
  EXPECT_EQ(json::parse(seen.body)["stdout"], "hi\n");
  auto after = call("POST", execute, R"({"argv": ["printenv", "GREETING"]})");
  EXPECT_EQ(json::parse(after.body)["exit_code"], 1) << "the variable outlived its command";
  for (const auto& [body, named] :
       {std::pair{R"({"argv": ["true"], "env": {"HOME": "/tmp"}})", "HOME"},
        std::pair{R"({"argv": ["true"], "env": {"AWS_SECRET_ACCESS_KEY": "x"}})",
                  "AWS_SECRET_ACCESS_KEY"},
        std::pair{R"({"argv": ["true"], "env": {"N": 1}})", "N"},
        std::pair{R"({"argv": ["true"], "env": ["N=1"]})", "env"}}) {
    auto refused = call("POST", execute, body);
    EXPECT_EQ(refused.status, 400) << body;
    EXPECT_NE(message(refused).find(named), std::string::npos) << message(refused);
  }
}

TEST(PercentDecoded, DecodesAPathSegmentWherePlusIsAPlus) {
  EXPECT_EQ(percentDecoded("job%3A1", false), "job:1");
  EXPECT_EQ(percentDecoded("a+b", false), "a+b");
  EXPECT_EQ(percentDecoded("a+b", true), "a b");
  EXPECT_EQ(percentDecoded("%4", false), std::nullopt);
  EXPECT_EQ(percentDecoded("%zz", false), std::nullopt);
}

TEST(QueryParam, DecodesAndRefusesMalformedEscapes) {
  EXPECT_EQ(queryParam("path=a%2Fb&x=1", "path"), "a/b");
  EXPECT_EQ(queryParam("x=1&path=a+b", "path"), "a b");
  EXPECT_EQ(queryParam("path=", "path"), "");
  EXPECT_EQ(queryParam("path=%00", "path"), std::string(1, '\0'));
  EXPECT_EQ(queryParam("other=1", "path"), std::nullopt);
  EXPECT_EQ(queryParam("path=%4", "path"), std::nullopt);
  EXPECT_EQ(queryParam("path=%g0", "path"), std::nullopt);
  EXPECT_EQ(queryParam("path=abc%", "path"), std::nullopt);
}

}  // namespace
}  // namespace airlock::gateway

namespace airlock::gateway {
namespace {

// The artifact routes over a real filesystem store (in-memory metadata).
class ApiArtifactTest : public ApiTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/airlock-api-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    repository_ = std::make_shared<artifacts::MemoryArtifactRepository>();
    auto store = artifacts::FilesystemArtifactStore::create(
        sys::UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)), repository_);
    ASSERT_TRUE(store) << store.error().message();
    store_ = std::move(*store);
    api_->attachArtifacts(ArtifactBackend{store_.get(), repository_.get(), {}, 1 << 20});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  std::shared_ptr<artifacts::MemoryArtifactRepository> repository_;
  std::unique_ptr<artifacts::FilesystemArtifactStore> store_;
};

TEST_F(ApiArtifactTest, ExportDownloadAsAttachmentAndDelete) {
  const std::string id = provision();
  ASSERT_EQ(
      call("PUT", "/v1/environments/" + id + "/files?path=out%2Fresult.csv", "a,b\n1,2\n").status,
      204);
  auto exported = call("POST", "/v1/environments/" + id + "/artifacts",
                       R"({"path": "out/result.csv", "media_type": "text/csv"})");
  ASSERT_EQ(exported.status, 201) << exported.body;
  auto meta = json::parse(exported.body);
  EXPECT_EQ(meta["filename"], "result.csv");
  EXPECT_EQ(meta["size_bytes"], 8);
  EXPECT_EQ(meta["origin"], "SANDBOX_EXPORT");
  EXPECT_EQ(meta["trust"], "EXTERNAL_UNTRUSTED");
  EXPECT_EQ(meta["tenant_id"], "t1");
  EXPECT_EQ(meta["run_id"], "r1");
  sys::Sha256 expected;
  expected.update("a,b\n1,2\n");
  EXPECT_EQ(meta["sha256"], expected.finishHex());
  const std::string aid = meta["artifact_id"];
  auto content = call("GET", "/v1/artifacts/" + aid + "/content?tenant_id=t1");
  ASSERT_EQ(content.status, 200) << content.body;
  EXPECT_EQ(content.body, "a,b\n1,2\n");
  EXPECT_EQ(content.content_type, "application/octet-stream");
  bool attachment = false;
  for (const auto& [k, v] : content.headers)
    if (k == "Content-Disposition")
      attachment = v == "attachment; filename=\"result.csv\"; filename*=UTF-8''result.csv";
  EXPECT_TRUE(attachment);
  // Another tenant sees nothing; a malformed id is not found either.
  EXPECT_EQ(call("GET", "/v1/artifacts/" + aid + "?tenant_id=t2").status, 404);
  EXPECT_EQ(call("GET", "/v1/artifacts/" + aid + "/content?tenant_id=t2").status, 404);
  EXPECT_EQ(call("GET", "/v1/artifacts/../../etc?tenant_id=t1").status, 404);
  EXPECT_EQ(call("GET", "/v1/artifacts/" + aid + "?tenant_id=t1").status, 200);
  EXPECT_EQ(call("DELETE", "/v1/artifacts/" + aid + "?tenant_id=t1").status, 204);
  EXPECT_EQ(call("GET", "/v1/artifacts/" + aid + "?tenant_id=t1").status, 404);
}

// A run's notes (what code mode's notes.* keeps) through the API: listed in
// key order with a prefix, one by key (percent-encoded), each with its
// value as JSON, writer and times; the tenant is required; expired notes go
// with the reaper's sweep.
TEST_F(ApiArtifactTest, ARunsNotesAreListedAndReadByTenantAndSweptWhenExpired) {
  auto put = [&](std::string key, std::string value_json, std::chrono::minutes life) {
    ASSERT_TRUE(repository_->putNote(
        "t1", "r1",
        artifacts::RunNote{std::move(key), std::move(value_json), "env-1", now_, now_ + life}));
  };
  put("plan", R"({"step": 1})", std::chrono::minutes(60));
  put("plan/next", R"("compile")", std::chrono::minutes(60));
  put("scratch", "[1, 2.5]", std::chrono::minutes(5));
  auto all = call("GET", "/v1/runs/r1/notes?tenant_id=t1");
  ASSERT_EQ(all.status, 200) << all.body;
  const json notes = json::parse(all.body)["notes"];
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0]["key"], "plan");
  EXPECT_EQ(notes[0]["value"], (json{{"step", 1}}));
  EXPECT_EQ(notes[0]["written_by"], "env-1");
  EXPECT_EQ(notes[0]["updated_at"], formatTimestamp(now_));
  EXPECT_EQ(notes[2]["value"], (json{1, 2.5}));
  auto prefixed = call("GET", "/v1/runs/r1/notes?tenant_id=t1&prefix=plan%2F");
  ASSERT_EQ(json::parse(prefixed.body)["notes"].size(), 1u) << prefixed.body;
  auto one = call("GET", "/v1/runs/r1/notes/plan%2Fnext?tenant_id=t1");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body)["value"], "compile");
  auto missing = call("GET", "/v1/runs/r1/notes/nope?tenant_id=t1");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(message(missing), "run \"r1\" has no note \"nope\"");
  EXPECT_EQ(call("GET", "/v1/runs/r1/notes").status, 400) << "the tenant is required";
  EXPECT_EQ(json::parse(call("GET", "/v1/runs/r2/notes?tenant_id=t1").body)["notes"],
            json::array());
  EXPECT_EQ(call("GET", "/v1/runs/r%20x/notes?tenant_id=t1").status, 400) << "not a run id";

  now_ += std::chrono::minutes(10);
  api_->reap();
  EXPECT_EQ(json::parse(call("GET", "/v1/runs/r1/notes?tenant_id=t1").body)["notes"].size(), 2u)
      << "the expired note was swept";
}

TEST_F(ApiArtifactTest, ExportRefusesEscapesAndOversizedFiles) {
  const std::string id = provision();
  auto escape =
      call("POST", "/v1/environments/" + id + "/artifacts", R"({"path": "../../etc/passwd"})");
  EXPECT_EQ(escape.status, 400);
  EXPECT_EQ(code(escape), "workspace_escape");
  ASSERT_EQ(
      call("PUT", "/v1/environments/" + id + "/files?path=big.bin", std::string((1 << 20) + 1, 'x'))
          .status,
      204);
  auto big = call("POST", "/v1/environments/" + id + "/artifacts", R"({"path": "big.bin"})");
  EXPECT_EQ(big.status, 409) << big.body;
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/artifacts", R"({"path": "missing"})").status,
            404);
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/artifacts", R"({"nopath": 1})").status, 400);
  auto media = call("POST", "/v1/environments/" + id + "/artifacts",
                    R"({"path": "big.bin", "media_type": "text/html\r\nX: y"})");
  EXPECT_EQ(media.status, 400);
}

TEST_F(ApiArtifactTest, ExportRefusesUnknownKeys) {
  const std::string id = provision();
  ASSERT_EQ(call("PUT", "/v1/environments/" + id + "/files?path=a.txt", "a").status, 204);
  auto r = call("POST", "/v1/environments/" + id + "/artifacts",
                R"({"path": "a.txt", "file_name": "b.txt"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(code(r), "bad_request");
  EXPECT_EQ(message(r), "unknown key \"file_name\" (did you mean \"filename\"?)");
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/artifacts",
                 R"({"path": "a.txt", "filename": "b.txt"})")
                .status,
            201);
}

TEST_F(ApiArtifactTest, UploadKeepsTheFilenameAsMetadataOnly) {
  auto up = call("POST",
                 "/v1/artifacts?tenant_id=t1&filename=..%2F..%2Fetc%2Fpasswd&media_type=text/plain",
                 "uploaded");
  ASSERT_EQ(up.status, 201) << up.body;
  auto meta = json::parse(up.body);
  EXPECT_EQ(meta["filename"], "../../etc/passwd");
  EXPECT_EQ(meta["origin"], "UPLOAD");
  auto download = call(
      "GET", "/v1/artifacts/" + meta["artifact_id"].get<std::string>() + "/content?tenant_id=t1");
  for (const auto& [k, v] : download.headers) {
    if (k == "Content-Disposition") {
      EXPECT_EQ(v, "attachment; filename=\"artifact\"; filename*=UTF-8''..%2F..%2Fetc%2Fpasswd");
    }
  }
  EXPECT_EQ(call("GET", "/v1/artifacts/" + meta["artifact_id"].get<std::string>() +
                            "/content?tenant_id=t1")
                .body,
            "uploaded");
  EXPECT_EQ(call("POST", "/v1/artifacts?filename=x", "y").status, 400) << "tenant_id is required";
  EXPECT_EQ(call("POST", "/v1/artifacts?tenant_id=../x", "y").status, 400);
}

}  // namespace
}  // namespace airlock::gateway

namespace airlock::gateway {
namespace {

using service::closestKey;
using service::HttpRequest;
using service::HttpResponse;
using service::unknownKeyMessage;

TEST_F(ApiTest, ToolsAreListedWithSchemasAndCalledInTheEnvironmentsScope) {
  auto list = call("GET", "/v1/tools");
  ASSERT_EQ(list.status, 200) << list.body;
  std::vector<std::string> names;
  const json listed = json::parse(list.body);
  for (const auto& t : listed["tools"]) {
    names.push_back(t["name"]);
    EXPECT_TRUE(t["input_schema"].is_object()) << t["name"];
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  for (const char* expected : {"sandbox_run_command", "workspace_read_text", "workspace_write_text",
                               "workspace_list", "artifact_export"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;

  const std::string id = provision();
  auto run = call(
      "POST", "/v1/tools/sandbox_run_command",
      json{{"environment_id", id}, {"arguments", {{"command", {"echo", "via", "tool"}}}}}.dump());
  ASSERT_EQ(run.status, 200) << run.body;
  EXPECT_NE(run.body.find("via tool"), std::string::npos) << run.body;
  // The spec's validation: a shell string is refused naming the argument.
  auto bad = call("POST", "/v1/tools/sandbox_run_command",
                  json{{"environment_id", id}, {"arguments", {{"command", "ls -la"}}}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["error"]["argument"], "command");
  auto write =
      call("POST", "/v1/tools/workspace_write_text",
           json{{"environment_id", id}, {"arguments", {{"path", "notes.md"}, {"text", "hello"}}}}
               .dump());
  EXPECT_EQ(write.status, 200) << write.body;
  auto read = call("POST", "/v1/tools/workspace_read_text",
                   json{{"environment_id", id}, {"arguments", {{"path", "notes.md"}}}}.dump());
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_NE(read.body.find("hello"), std::string::npos);
  EXPECT_EQ(call("POST", "/v1/tools/no.such.tool", json{{"environment_id", id}}.dump()).status,
            404);
  EXPECT_EQ(
      call("POST", "/v1/tools/workspace_list", json{{"environment_id", "nope"}}.dump()).status,
      404);
  EXPECT_EQ(call("POST", "/v1/tools/workspace_list", "[]").status, 400);
}

// Every JSON route refuses a top-level key it does not read, with 400
// bad_request naming it (and the known key it resembles), before acting.
TEST_F(ApiTest, UnknownBodyKeysAreRefusedByNameOnEveryJsonRoute) {
  auto provisioned =
      call("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1", "netwrok": true})");
  EXPECT_EQ(provisioned.status, 400);
  EXPECT_EQ(code(provisioned), "bad_request");
  EXPECT_EQ(message(provisioned), "unknown key \"netwrok\" (did you mean \"network\"?)");
  EXPECT_EQ(env_->liveCount(), 0u) << "nothing was provisioned";

  const std::string id = provision();
  auto exec =
      call("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["true"], "timeout": 5})");
  EXPECT_EQ(exec.status, 400);
  EXPECT_EQ(code(exec), "bad_request");
  EXPECT_EQ(message(exec),
            "unknown key \"timeout\" (known keys: argv, working_directory, timeout_seconds, "
            "maximum_output_bytes, stdin, env, execution_id)");
  auto cwd =
      call("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["true"], "workdir": "."})");
  EXPECT_EQ(code(cwd), "bad_request");
  EXPECT_NE(message(cwd).find("unknown key \"workdir\""), std::string::npos) << cwd.body;

  HttpRequest stream{"POST", "/v1/environments/" + id + "/execute?stream=1",
                     std::string("Bearer ") + kToken, R"({"argv": ["echo", "x"], "stdn": "y"})"};
  std::vector<std::string> lines;
  auto streamed = api_->handleStreaming(
      stream, [&](std::string line) { lines.push_back(std::move(line)); }, nullptr);
  EXPECT_EQ(streamed.status, 400);
  EXPECT_EQ(code(streamed), "bad_request");
  EXPECT_EQ(message(streamed), "unknown key \"stdn\" (did you mean \"stdin\"?)");
  EXPECT_TRUE(lines.empty()) << "nothing ran";

  auto lease =
      call("PUT", "/v1/runs/r1/lease", R"({"tenant_id": "t1", "lease_epoch": 2, "epoch": 3})");
  EXPECT_EQ(lease.status, 400);
  EXPECT_EQ(code(lease), "bad_request");
  EXPECT_EQ(api_->leases().current("t1", "r1"), std::nullopt) << "the lease was not renewed";

  auto tool = call("POST", "/v1/tools/workspace_list",
                   json{{"environment_id", id}, {"argument", {{"path", "."}}}}.dump());
  EXPECT_EQ(tool.status, 400);
  EXPECT_EQ(code(tool), "bad_request");
  EXPECT_EQ(message(tool), "unknown key \"argument\" (did you mean \"arguments\"?)");

  // A key is quoted for the message, never echoed raw.
  auto odd = call("POST", "/v1/environments/" + id + "/execute",
                  json{{"argv", {"true"}}, {"a\nb", 1}}.dump());
  EXPECT_EQ(message(odd).find('\n'), std::string::npos) << odd.body;
  // Known keys still pass.
  EXPECT_EQ(call("POST", "/v1/environments/" + id + "/execute",
                 R"({"argv": ["true"], "working_directory": ".", "timeout_seconds": 5,
                     "maximum_output_bytes": 100, "stdin": "x"})")
                .status,
            200);
}

// A key named twice is refused on every JSON route, 400 naming the key,
// before anything acts (nlohmann alone would keep the last value).
TEST_F(ApiTest, AKeyNamedTwiceIsRefusedByNameOnEveryJsonRoute) {
  auto provisioned =
      call("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1", "tenant_id": "t2"})");
  EXPECT_EQ(provisioned.status, 400);
  EXPECT_EQ(code(provisioned), "tool_validation_error");
  EXPECT_EQ(
      message(provisioned),
      "the request body is not valid JSON: the key \"tenant_id\" appears twice in one object");
  EXPECT_EQ(env_->liveCount(), 0u) << "nothing was provisioned";
  auto nested =
      call("POST", "/v1/environments",
           R"({"tenant_id": "t1", "run_id": "r1", "limits": {"pids_max": 64, "pids_max": 99999}})");
  EXPECT_EQ(nested.status, 400);
  EXPECT_NE(message(nested).find("the key \"pids_max\" appears twice"), std::string::npos)
      << nested.body;

  const std::string id = provision();
  auto exec = call("POST", "/v1/environments/" + id + "/execute",
                   R"({"argv": ["true"], "argv": ["false"]})");
  EXPECT_EQ(exec.status, 400);
  EXPECT_NE(message(exec).find("the key \"argv\" appears twice"), std::string::npos) << exec.body;
  auto lease = call("PUT", "/v1/runs/r1/lease",
                    R"({"tenant_id": "t1", "lease_epoch": 2, "lease_epoch": 3})");
  EXPECT_EQ(lease.status, 400);
  EXPECT_NE(message(lease).find("the key \"lease_epoch\" appears twice"), std::string::npos)
      << lease.body;
  EXPECT_EQ(api_->leases().current("t1", "r1"), std::nullopt) << "the lease was not renewed";
  auto tool =
      call("POST", "/v1/tools/workspace_list",
           R"({"environment_id": ")" + id + R"(", "arguments": {"path": ".", "path": "/"}})");
  EXPECT_EQ(tool.status, 400);
  EXPECT_EQ(code(tool), "tool_validation_error");
  EXPECT_NE(message(tool).find("the key \"path\" appears twice"), std::string::npos) << tool.body;
  auto code_run =
      call("POST", "/v1/environments/" + id + "/code", R"({"program": "1", "program": "2"})");
  EXPECT_EQ(code_run.status, 400);
  EXPECT_NE(message(code_run).find("the key \"program\" appears twice"), std::string::npos)
      << code_run.body;
}

// Integers beyond 64 bits are out of range, named with the largest value
// allowed; never wrapped into a negative number ("must not be negative").
TEST_F(ApiTest, IntegersPastSixtyFourBitsAreOutOfRangeNotNegative) {
  const std::string largest = "is out of range: the largest allowed is 9223372036854775807";
  auto provisioned =
      call("POST", "/v1/environments",
           R"({"tenant_id": "t1", "run_id": "r1", "lease_epoch": 9223372036854775808})");
  EXPECT_EQ(provisioned.status, 400);
  EXPECT_EQ(message(provisioned), "lease_epoch " + largest);
  auto lease = call("PUT", "/v1/runs/r1/lease",
                    R"({"tenant_id": "t1", "lease_epoch": 9223372036854775808})");
  EXPECT_EQ(lease.status, 400);
  EXPECT_EQ(message(lease), "lease_epoch " + largest);
  auto huge = call("PUT", "/v1/runs/r1/lease",
                   R"({"tenant_id": "t1", "lease_epoch": 123456789012345678901234567890})");
  EXPECT_EQ(message(huge), "lease_epoch " + largest);
  auto tiny = call("PUT", "/v1/runs/r1/lease",
                   R"({"tenant_id": "t1", "lease_epoch": -9223372036854775809})");
  EXPECT_EQ(message(tiny), "lease_epoch must be a whole number, 0 or more");
  EXPECT_EQ(message(call("PUT", "/v1/runs/r1/lease", R"({"tenant_id": "t1", "lease_epoch": -1})")),
            "lease_epoch must be a whole number, 0 or more");
  auto limit = call(
      "POST", "/v1/environments",
      R"({"tenant_id": "t1", "run_id": "r1", "limits": {"memory_bytes": 18446744073709551615}})");
  EXPECT_EQ(limit.status, 400);
  EXPECT_EQ(message(limit), "limits.memory_bytes " + largest);
  EXPECT_EQ(env_->liveCount(), 0u);

  const std::string id = provision();
  for (const char* field : {"timeout_seconds", "maximum_output_bytes"}) {
    auto r = call("POST", "/v1/environments/" + id + "/execute",
                  R"({"argv": ["true"], ")" + std::string(field) + R"(": 9223372036854775808})");
    EXPECT_EQ(r.status, 400) << field;
    EXPECT_EQ(message(r), std::string(field) + " " + largest);
  }
  auto code_run = call("POST", "/v1/environments/" + id + "/code",
                       R"({"program": "1", "timeout_seconds": 9223372036854775808})");
  EXPECT_EQ(code_run.status, 400);
  EXPECT_EQ(message(code_run), "timeout_seconds " + largest);
}

TEST(ClosestKey, SuggestsOnlyAKeyThatIsClose) {
  EXPECT_EQ(closestKey("netwrok", {"tenant_id", "network"}), "network");
  EXPECT_EQ(closestKey("tenant", {"tenant_id", "run_id"}), "tenant_id");
  EXPECT_EQ(closestKey("Network", {"network"}), "network");
  EXPECT_EQ(closestKey("foo", {"argv", "stdin"}), std::nullopt);
  EXPECT_EQ(closestKey(std::string(500, 'x'), {"argv"}), std::nullopt);
  EXPECT_EQ(unknownKeyMessage(json{{"argv", 1}}, {"argv"}), std::nullopt);
  EXPECT_EQ(unknownKeyMessage(json::array(), {"argv"}), std::nullopt);
}

// The HTTP API gives the CLI's hint for a shell string in one argv element,
// from the same function, spelled as the JSON argv to send instead.
TEST_F(ApiTest, AShellStringInArgvGetsTheSharedHint) {
  const std::string id = provision();
  auto r = call("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["ls -la", "/tmp"]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(message(r), shellStringProblem({"ls -la", "/tmp"}, ArgvSpelling::kJson).value());
  EXPECT_NE(message(r).find(R"(["sh","-c","ls -la /tmp"])"), std::string::npos) << r.body;
  EXPECT_EQ(
      call("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["echo", "two words"]})")
          .status,
      200);
}

// Every answer that shows an environment (provision, list, get, extend)
// says how far an extension can reach, from one builder: the same shape.
TEST_F(ApiTest, EveryAnswerShowingAnEnvironmentSaysItsMaxExpiresAt) {
  settings_.environment_hard_cap = std::chrono::hours(2);
  auto made = call("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})");
  ASSERT_EQ(made.status, 201) << made.body;
  const json handle = json::parse(made.body);
  const std::string id = handle["environment_id"];
  const Timestamp created = parseTimestamp(handle["created_at"].get<std::string>()).value();
  const std::string most = formatTimestamp(created + std::chrono::hours(2));
  EXPECT_EQ(handle["max_expires_at"], most) << made.body;
  const json got = json::parse(call("GET", "/v1/environments/" + id).body);
  EXPECT_EQ(got["max_expires_at"], most) << got.dump();
  EXPECT_EQ(got, handle);
  const json listed = json::parse(call("GET", "/v1/environments?tenant_id=t1").body);
  ASSERT_EQ(listed["environments"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["environments"][0], got);
  auto extended = call("POST", "/v1/environments/" + id + "/extend", R"({"seconds": 3600})");
  ASSERT_EQ(extended.status, 200) << extended.body;
  json expected = got;
  expected["expires_at"] = formatTimestamp(now_ + std::chrono::hours(1));
  EXPECT_EQ(json::parse(extended.body), expected);
  EXPECT_EQ(json::parse(call("GET", "/v1/environments/" + id).body), expected);
}

// A count refused anywhere (a job's body and query, a lease, the job tools)
// says what the field takes in its unit, never the range of a uint64.
TEST_F(ApiTest, ANegativeCountSaysWhatTheFieldTakes) {
  const std::string id = provision();
  const std::string jobs = "/v1/environments/" + id + "/jobs";
  std::vector<std::pair<HttpResponse, std::string>> answers;
  answers.emplace_back(call("POST", jobs, R"({"argv": ["true"], "wall_ms": -1})"),
                       "wall_ms must be a whole number of milliseconds, 0 or more");
  answers.emplace_back(call("POST", jobs, R"({"argv": ["true"], "wall_ms": 2.5})"),
                       "wall_ms must be a whole number of milliseconds, 0 or more");
  answers.emplace_back(call("GET", jobs + "/job-1?stdout_cursor=-1"),
                       "stdout_cursor must be a whole number, 0 or more");
  answers.emplace_back(call("GET", jobs + "/job-1?stderr_cursor=x"),
                       "stderr_cursor must be a whole number, 0 or more");
  answers.emplace_back(
      call("GET", jobs + "/job-1?wait_ms=" + std::to_string(kMaxJobWaitMs + 1)),
      "wait_ms must be a whole number of milliseconds from 0 to " + std::to_string(kMaxJobWaitMs));
  answers.emplace_back(
      call("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r2", "lease_epoch": -1})"),
      "lease_epoch must be a whole number, 0 or more");
  answers.emplace_back(
      call("PUT", "/v1/runs/r1/lease", R"({"tenant_id": "t1", "lease_epoch": -2})"),
      "lease_epoch must be a whole number, 0 or more");
  answers.emplace_back(
      call("POST", "/v1/tools/job_start",
           json{{"environment_id", id}, {"arguments", {{"command", {"true"}}, {"wall_ms", -1}}}}
               .dump()),
      "wall_ms must be a whole number of milliseconds, 0 or more");
  answers.emplace_back(
      call("POST", "/v1/tools/job_poll",
           json{{"environment_id", id}, {"arguments", {{"job_id", "job-1"}, {"stdout_cursor", -5}}}}
               .dump()),
      "stdout_cursor must be a whole number, 0 or more");
  for (const auto& [r, said] : answers) {
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(message(r), said) << r.body;
    EXPECT_EQ(r.body.find("18446744073709551615"), std::string::npos) << r.body;
  }
}

// A body with several misspelt keys is refused naming every one of them at
// once, each with the known key it resembles; the known keys are listed
// when one resembles none.
TEST_F(ApiTest, EveryUnknownKeyOfABodyIsNamedAtOnce) {
  const std::string id = provision();
  const std::string rename = "/v1/environments/" + id + "/files/rename";
  auto two = call("POST", rename, R"({"frm": "a", "too": "b", "replace": true})");
  EXPECT_EQ(two.status, 400) << two.body;
  EXPECT_EQ(message(two),
            R"(unknown keys "frm" (did you mean "from"?), "too" (did you mean "to"?))");
  auto mixed = call("POST", rename, R"({"from": "a", "tu": "b", "xyzzy": 1})");
  EXPECT_EQ(mixed.status, 400) << mixed.body;
  EXPECT_EQ(message(mixed),
            R"(unknown keys "tu" (did you mean "to"?), "xyzzy"; known keys: from, to, replace)");
  auto provisioned = call("POST", "/v1/environments", R"({"tenant_idd": "t1", "run_di": "r1"})");
  EXPECT_EQ(
      message(provisioned),
      R"(unknown keys "run_di" (did you mean "run_id"?), "tenant_idd" (did you mean "tenant_id"?))");
}

// Provision checks its environment's names with the rules every other path
// uses (checkAddedVariable): the same bad name gets the same words.
TEST_F(ApiTest, ProvisionRefusesAVariableInTheWordsOfTheSharedRules) {
  const std::string id = provision();
  for (const std::string name : {"HOME", "AWS_SECRET_ACCESS_KEY", "1ST", "A-B", "PATH"}) {
    auto provisioned =
        call("POST", "/v1/environments",
             json{{"tenant_id", "t1"}, {"run_id", "r9"}, {"environment", {{name, "x"}}}}.dump());
    EXPECT_EQ(provisioned.status, 400) << provisioned.body;
    EXPECT_EQ(message(provisioned), checkAddedVariable("environment", name, "x").error().context);
    auto executed = call("POST", "/v1/environments/" + id + "/execute",
                         json{{"argv", {"true"}}, {"env", {{name, "x"}}}}.dump());
    EXPECT_EQ(message(executed), checkAddedVariable("env", name, "x").error().context);
  }
  auto nul = call(
      "POST", "/v1/environments",
      json{{"tenant_id", "t1"}, {"run_id", "r9"}, {"environment", {{"A", std::string("x\0y", 3)}}}}
          .dump());
  EXPECT_EQ(message(nul),
            checkAddedVariable("environment", "A", std::string("x\0y", 3)).error().context);
  EXPECT_EQ(node_->live(std::string("t1")).size(), 1u) << "nothing was provisioned";
}

// The archive routes name the path and what is wrong with it, not the
// workspace operation that found it.
TEST_F(ApiTest, ArchiveErrorsNameThePathNotTheSyscall) {
  const std::string id = provision();
  const std::string env = "/v1/environments/" + id;
  ASSERT_EQ(call("PUT", env + "/files?path=f", "f").status, 204);
  auto missing = call("GET", env + "/archive?path=no%2Fsuch");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(message(missing), R"(archive: "no/such" does not exist in the workspace)");
  auto file = call("GET", env + "/archive?path=f");
  EXPECT_EQ(file.status, 400) << file.body;
  EXPECT_EQ(message(file), R"(archive: "f" is not a directory)");
  auto below_file = call("GET", env + "/archive?path=f%2Fx");
  EXPECT_GE(below_file.status, 400) << below_file.body;
  EXPECT_NE(message(below_file).find("\"f/x\""), std::string::npos) << below_file.body;
  for (const auto* r : {&missing, &file, &below_file})
    EXPECT_EQ(message(*r).find("stat"), std::string::npos) << r->body;
}

// A run's artifacts are listed after its environment is gone: newest
// first, bounded by limit (truncated says more are left), each with its id,
// name, media type, size, sha256 and time; another tenant's run of the same
// id, and another run, list nothing of it.
TEST_F(ApiArtifactTest, ARunsArtifactsAreListedNewestFirstForItsTenantOnly) {
  const std::string id = provision();
  const std::string env = "/v1/environments/" + id;
  std::vector<json> made;  // oldest first
  for (const std::string name : {"a.txt", "b.csv", "c.bin"}) {
    ASSERT_EQ(call("PUT", env + "/files?path=" + name, "bytes of " + name).status, 204);
    auto exported = call("POST", env + "/artifacts", json{{"path", name}}.dump());
    ASSERT_EQ(exported.status, 201) << exported.body;
    made.push_back(json::parse(exported.body));
    now_ += std::chrono::seconds(1);
  }
  ASSERT_EQ(call("DELETE", env).status, 204);
  auto listed = call("GET", "/v1/runs/r1/artifacts?tenant_id=t1");
  ASSERT_EQ(listed.status, 200) << listed.body;
  const json all = json::parse(listed.body);
  EXPECT_EQ(all["artifacts"], (json{made[2], made[1], made[0]}));
  EXPECT_EQ(all["truncated"], false);
  const json& newest = all["artifacts"][0];
  for (const char* field :
       {"artifact_id", "filename", "media_type", "size_bytes", "sha256", "created_at"})
    EXPECT_TRUE(newest.contains(field)) << field;
  EXPECT_EQ(newest["filename"], "c.bin");
  EXPECT_EQ(newest["size_bytes"], std::string("bytes of c.bin").size());
  sys::Sha256 sha;
  sha.update("bytes of c.bin");
  EXPECT_EQ(newest["sha256"], sha.finishHex());

  auto page = call("GET", "/v1/runs/r1/artifacts?tenant_id=t1&limit=2");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(json::parse(page.body)["artifacts"], (json{made[2], made[1]}));
  EXPECT_EQ(json::parse(page.body)["truncated"], true);
  auto theirs = call("GET", "/v1/runs/r1/artifacts?tenant_id=t2");
  ASSERT_EQ(theirs.status, 200) << theirs.body;
  EXPECT_EQ(json::parse(theirs.body)["artifacts"], json::array());
  EXPECT_EQ(json::parse(call("GET", "/v1/runs/r2/artifacts?tenant_id=t1").body)["artifacts"],
            json::array());
  EXPECT_EQ(call("GET", "/v1/runs/r1/artifacts").status, 400) << "the tenant is required";
  auto zero = call("GET", "/v1/runs/r1/artifacts?tenant_id=t1&limit=0");
  EXPECT_EQ(zero.status, 400);
  EXPECT_EQ(message(zero), "limit must be a whole number from 1 to 1000");
  auto negative = call("GET", "/v1/runs/r1/artifacts?tenant_id=t1&limit=-1");
  EXPECT_EQ(message(negative), "limit must be a whole number from 1 to 1000");
}

}  // namespace
}  // namespace airlock::gateway
