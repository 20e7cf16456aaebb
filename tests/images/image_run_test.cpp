// Real images through the airlock binary, end to end: two images built with
// umoci from Debian's Lua 5.4 packages (downloaded by scripts/bootstrap,
// never installed on this machine) and this machine's C libraries, pushed
// with skopeo to a real docker-registry on loopback; then `airlock image
// pull`, `airlock run --image` on linux and gvisor, a tag moved in the
// registry, and `airlock serve` with both images configured. And two
// `airlock image pull` processes sharing their downloads through the store.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../service/serve_process.h"
#include "http_test_server.h"
#include "oci_layout.h"
#include "registry_server.h"
#include "test_tree.h"

namespace airlock::images {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RegistryServer;
using testing::runTool;
using testing::ToolRun;
using workspace::testing::TempDir;

const std::string kUmoci = "/usr/bin/umoci";
const std::string kSkopeo = "/usr/bin/skopeo";
const std::string kDpkgDeb = "/usr/bin/dpkg-deb";
const std::string kDebsDir = std::string(AIRLOCK_SOURCE_DIR) + "/.cache/image-debs";
constexpr const char* kToken = "image-run-token-0123456789abcdef";
// What the image's Lua prints: its version and the image's own variable.
const std::string kLuaProgram = "print(_VERSION .. ' ' .. (os.getenv('IMAGE_MARK') or 'unset'))";

struct Outcome {
  int status = -1;
  std::string out, err;
};

// The airlock binary with a clean environment.
Outcome airlock(const std::vector<std::string>& args, const std::string& home) {
  std::vector<std::string> argv = {AIRLOCK_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  ToolRun run = runTool(argv, home);
  return Outcome{run.exit_code, run.output, run.errors};
}

std::string firstWord(const std::string& text) {
  return text.substr(0, text.find_first_of(" \n"));
}

// Copies a host file (following links) to `to`, keeping its mode.
bool copyHostFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::create_directories(fs::path(to).parent_path(), ec);
  fs::copy_file(fs::canonical(from, ec), to, fs::copy_options::overwrite_existing, ec);
  return !ec;
}

// The registry and the two images, made once for the suite. Any step that
// fails is kept in `setup_error`, and every test fails with it.
struct Fixture {
  TempDir dir;
  RegistryServer registry;
  std::string setup_error;
  std::string lua_ref, second_ref;        // team/lua:5.4, team/second:1
  std::string lua_digest, second_digest;  // as the registry reports them
  std::string layout;                     // the OCI layout both images are in

  std::string fail(const std::string& step, const ToolRun& run) {
    return step + " exited " + std::to_string(run.exit_code) + ": " + run.errors + run.output;
  }

  // An image tagged `tag` in the layout: the Lua packages and the C
  // libraries lua5.4 links, Env PATH and IMAGE_MARK=<mark>, User 0
  // (which the sandbox does not follow).
  std::string build(const std::string& tag, const std::string& mark) {
    const std::string bundle = dir.path() + "/bundle-" + tag;
    const std::string image = layout + ":" + tag;
    if (auto r = runTool({kUmoci, "new", "--image", image}, dir.path()); r.exit_code != 0)
      return fail("umoci new", r);
    if (auto r = runTool({kUmoci, "unpack", "--image", image, bundle}, dir.path());
        r.exit_code != 0)
      return fail("umoci unpack", r);
    const std::string rootfs = bundle + "/rootfs";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(kDebsDir, ec)) {
      if (e.path().extension() != ".deb") continue;
      if (auto r = runTool({kDpkgDeb, "-x", e.path().string(), rootfs}, dir.path());
          r.exit_code != 0)
        return fail("dpkg-deb -x", r);
    }
    if (ec || !fs::exists(rootfs + "/usr/bin/lua5.4"))
      return "no Lua packages in " + kDebsDir + ": run scripts/bootstrap";
    const std::string libdir = rootfs + "/usr/lib/x86_64-linux-gnu/";
    for (const char* lib : {"libc.so.6", "libm.so.6", "libreadline.so.8", "libtinfo.so.6"})
      if (!copyHostFile(std::string("/lib/x86_64-linux-gnu/") + lib, libdir + lib))
        return std::string("cannot copy the host's ") + lib;
    if (!copyHostFile("/lib64/ld-linux-x86-64.so.2", rootfs + "/lib64/ld-linux-x86-64.so.2"))
      return "cannot copy the host's dynamic loader";
    fs::create_directory_symlink("usr/lib", rootfs + "/lib", ec);
    fs::create_directory_symlink("usr/bin", rootfs + "/bin", ec);
    if (auto r = runTool({kUmoci, "repack", "--image", image, bundle}, dir.path());
        r.exit_code != 0)
      return fail("umoci repack", r);
    if (auto r = runTool({kUmoci, "config", "--image", image, "--config.env=PATH=/usr/bin:/bin",
                          "--config.env=IMAGE_MARK=" + mark, "--config.user=0:0"},
                         dir.path());
        r.exit_code != 0)
      return fail("umoci config", r);
    return "";
  }

  // Pushes layout:tag to the registry as `ref`; the registry's digest.
  std::string push(const std::string& tag, const std::string& ref, std::string* digest) {
    auto r = runTool({kSkopeo, "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false",
                      "oci:" + layout + ":" + tag, "docker://" + ref},
                     dir.path());
    if (r.exit_code != 0) return fail("skopeo copy", r);
    auto inspect =
        runTool({kSkopeo, "inspect", "--tls-verify=false", "docker://" + ref}, dir.path());
    if (inspect.exit_code != 0) return fail("skopeo inspect", inspect);
    *digest = json::parse(inspect.output, nullptr, false).value("Digest", "");
    return digest->empty() ? "skopeo inspect gave no Digest" : "";
  }

  Fixture() {
    for (const auto& tool : {kUmoci, kSkopeo, kDpkgDeb})
      if (::access(tool.c_str(), X_OK) != 0) {
        setup_error = tool + " is missing: run scripts/bootstrap";
        return;
      }
    if (auto started = registry.start(); !started) {
      setup_error = started.error().message();
      return;
    }
    layout = dir.path() + "/oci";
    if (auto r = runTool({kUmoci, "init", "--layout", layout}, dir.path()); r.exit_code != 0) {
      setup_error = fail("umoci init", r);
      return;
    }
    lua_ref = registry.address() + "/team/lua:5.4";
    second_ref = registry.address() + "/team/second:1";
    for (auto step :
         {build("lua", "lua"), build("second", "second"), push("lua", lua_ref, &lua_digest),
          push("second", second_ref, &second_digest)})
      if (!step.empty()) {
        setup_error = step;
        return;
      }
  }
};

class ImageRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { fixture_ = new Fixture(); }
  static void TearDownTestSuite() {
    delete fixture_;
    fixture_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the sandbox mechanisms need root";
    ASSERT_EQ(fixture_->setup_error, "");
  }
  static Fixture& f() { return *fixture_; }

  Outcome runLua(const std::string& image, const std::string& mechanism = "linux") {
    return airlock({"run", "--state-dir", state_.path(), "--mechanism", mechanism, "--image", image,
                    "--", "lua5.4", "-e", kLuaProgram},
                   home_.path());
  }

  static inline Fixture* fixture_ = nullptr;
  TempDir state_, home_;
};

// The image's Lua, which this machine does not have, runs on both
// mechanisms with the image's Env; the digest printed is the registry's;
// nothing of the host's /usr is there; the image's User 0 is not followed.
TEST_F(ImageRun, RunsTheImagesRuntimeOnLinuxAndGvisor) {
  ASSERT_NE(::access("/usr/bin/lua5.4", F_OK), 0) << "the premise: this machine has no Lua 5.4";
  auto pulled = airlock({"image", "pull", "--state-dir", state_.path(), f().lua_ref}, home_.path());
  ASSERT_EQ(pulled.status, 0) << pulled.err;
  EXPECT_EQ(firstWord(pulled.out), f().lua_digest) << pulled.out;

  auto linux_run = runLua(f().lua_ref);
  ASSERT_EQ(linux_run.status, 0) << linux_run.err;
  EXPECT_EQ(linux_run.out, "Lua 5.4 lua\n");
  if (::access("/usr/bin/runsc", X_OK) == 0) {
    auto gvisor_run = runLua(f().lua_digest, "gvisor");
    ASSERT_EQ(gvisor_run.status, 0) << gvisor_run.err;
    EXPECT_EQ(gvisor_run.out, "Lua 5.4 lua\n");
  } else {
    ADD_FAILURE() << "runsc is missing: run scripts/bootstrap";
  }

  // The host's python3 is not in the image.
  auto python = airlock({"run", "--state-dir", state_.path(), "--image", f().lua_digest, "--",
                         "python3", "-c", "print(1)"},
                        home_.path());
  EXPECT_EQ(python.status, 127) << python.out << python.err;
  // User 0 in the config; the command runs as the sandbox's own user.
  auto uid =
      airlock({"run", "--state-dir", state_.path(), "--image", f().lua_digest, "--", "lua5.4", "-e",
               "for l in io.lines('/proc/self/status') do if l:match('^Uid') then "
               "print(l:match('%d+')) end end"},
              home_.path());
  ASSERT_EQ(uid.status, 0) << uid.err;
  EXPECT_NE(uid.out, "0\n");
  EXPECT_FALSE(uid.out.empty());

  // --json carries the digest the sandbox ran.
  auto listed = airlock({"image", "ls", "--json", "--state-dir", state_.path()}, home_.path());
  ASSERT_EQ(listed.status, 0) << listed.err;
  auto images = json::parse(listed.out, nullptr, false)["images"];
  ASSERT_EQ(images.size(), 1u) << listed.out;
  EXPECT_EQ(images[0]["digest"], f().lua_digest);
  EXPECT_EQ(images[0]["references"], json::array({f().lua_ref}));
}

// Code mode on an image without python3 is refused before a sandbox
// starts, naming python3 and the image (not the /usr/bin/env it would have
// failed to execute first).
TEST_F(ImageRun, CodeModeOnAnImageWithoutPython3NamesPython3AndTheImage) {
  const std::string program = state_.path() + "/main.py";
  std::ofstream(program) << "print(1)\n";
  auto run =
      airlock({"run", "--state-dir", state_.path(), "--image", f().lua_ref, "--code", program},
              home_.path());
  EXPECT_EQ(run.status, 125) << run.out << run.err;
  EXPECT_NE(run.err.find("has no python3"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(f().lua_digest), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("cannot execute"), std::string::npos) << run.err;
}

// A reference not in the store is pulled by run itself, and said so.
TEST_F(ImageRun, RunPullsAReferenceItHasNotStored) {
  auto run = runLua(f().second_ref);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, "Lua 5.4 second\n");
  EXPECT_NE(run.err.find("image " + f().second_ref + " is " + f().second_digest + " (pulled)"),
            std::string::npos)
      << run.err;
  // The second run finds it stored: nothing pulled.
  auto again = runLua(f().second_ref);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.err.find("(pulled)"), std::string::npos) << again.err;
}

// Moving the tag in the registry changes neither a digest nor a reference
// already resolved; only a new pull moves the reference.
TEST_F(ImageRun, ATagMovedInTheRegistryChangesNothingUntilItIsPulled) {
  const std::string moving = f().registry.address() + "/team/moving:1";
  std::string first, second;
  ASSERT_EQ(f().push("lua", moving, &first), "");
  auto pulled = airlock({"image", "pull", "--state-dir", state_.path(), moving}, home_.path());
  ASSERT_EQ(pulled.status, 0) << pulled.err;
  ASSERT_EQ(firstWord(pulled.out), first);

  ASSERT_EQ(f().push("second", moving, &second), "");
  ASSERT_NE(first, second);
  EXPECT_EQ(runLua(first).out, "Lua 5.4 lua\n");
  EXPECT_EQ(runLua(moving).out, "Lua 5.4 lua\n") << "the stored reference, not the registry's tag";

  auto repulled = airlock({"image", "pull", "--state-dir", state_.path(), moving}, home_.path());
  ASSERT_EQ(repulled.status, 0) << repulled.err;
  EXPECT_EQ(firstWord(repulled.out), second);
  EXPECT_EQ(runLua(moving).out, "Lua 5.4 second\n");
  EXPECT_EQ(runLua(first).out, "Lua 5.4 lua\n") << "a digest runs what it names";

  // rm of the reference: the second image is forgotten, the first stays.
  auto removed = airlock({"image", "rm", "--state-dir", state_.path(), moving}, home_.path());
  ASSERT_EQ(removed.status, 0) << removed.err;
  EXPECT_EQ(removed.out, "removed " + second + "\n");
  auto gone = runLua(second);
  EXPECT_EQ(gone.status, 125);
  EXPECT_NE(gone.err.find("is not in the image store"), std::string::npos) << gone.err;
}

// serve with both images: each is resolved and logged with its digest at
// start, environments of both run side by side, GET /v1/images lists them.
TEST_F(ImageRun, ServeRunsTwoConfiguredImagesSideBySide) {
  const std::string config = state_.path() + "/serve.yaml";
  {
    std::ofstream out(config);
    out << "images:\n  - name: lua\n    reference: " << f().lua_ref << "\n  - " << f().second_ref
        << "\ndefault_image: lua\n";
  }
  airlock::testing::ServeProcess serve(
      {"AIRLOCK_STATE_DIR=" + state_.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
       std::string("AIRLOCK_SERVICE_TOKEN=") + kToken, "PATH=/usr/bin:/bin"},
      AIRLOCK_BINARY, {"--config", config});
  ASSERT_GT(serve.port(), 0) << serve.log();
  const std::string log = serve.log();
  EXPECT_NE(
      log.find("image lua " + f().lua_ref + " is " + f().lua_digest + " (pulled) (the default)"),
      std::string::npos)
      << log;
  EXPECT_NE(log.find("image " + f().second_ref + " is " + f().second_digest + " (pulled)\n"),
            std::string::npos)
      << log;

  auto images = serve.request("GET", "/v1/images", "", kToken);
  ASSERT_EQ(images.status, 200) << images.body;
  ASSERT_EQ(images.json()["images"].size(), 3u) << images.body;
  EXPECT_EQ(images.json()["images"][0]["name"], "lua");

  std::vector<std::string> digests;  // of each environment, as its handle says
  auto provision = [&](const std::string& image_field) {
    auto h = serve.request(
        "POST", "/v1/environments",
        R"({"tenant_id": "t1", "run_id": "r)" + std::to_string(rand()) + "\"" + image_field + "}",
        kToken);
    EXPECT_EQ(h.status, 201) << h.body;
    digests.push_back(h.json().value("image_digest", ""));
    return h.json().value("environment_id", "");
  };
  const std::string lua_env = provision("");
  const std::string second_env = provision(R"(, "image": ")" + f().second_ref + "\"");
  const std::string by_digest = provision(R"(, "image": ")" + f().second_digest + "\"");
  EXPECT_EQ(digests,
            (std::vector<std::string>{f().lua_digest, f().second_digest, f().second_digest}));
  for (auto [id, mark] :
       {std::pair{lua_env, "lua"}, {second_env, "second"}, {by_digest, "second"}}) {
    auto r = serve.request("POST", "/v1/environments/" + id + "/execute",
                           json{{"argv", {"lua5.4", "-e", kLuaProgram}}}.dump(), kToken);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["stdout"], std::string("Lua 5.4 ") + mark + "\n") << r.body;
  }
  auto host = provision(R"(, "image": "host")");
  auto r = serve.request("POST", "/v1/environments/" + host + "/execute",
                         json{{"argv", {"lua5.4", "-v"}}}.dump(), kToken);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["exit_code"], 127) << "the host image has no Lua: " << r.body;

  auto unknown = serve.request("POST", "/v1/environments",
                               R"({"tenant_id": "t1", "run_id": "x", "image": "ruby"})", kToken);
  EXPECT_EQ(unknown.status, 409) << unknown.body;
  EXPECT_NE(unknown.body.find("unknown image"), std::string::npos) << unknown.body;
  auto unknown_digest = serve.request(
      "POST", "/v1/environments",
      R"({"tenant_id": "t1", "run_id": "x", "image": "sha256:)" + std::string(64, 'a') + "\"}",
      kToken);
  EXPECT_EQ(unknown_digest.status, 409) << unknown_digest.body;
  EXPECT_NE(unknown_digest.body.find("unknown image digest"), std::string::npos)
      << unknown_digest.body;
  EXPECT_EQ(serve.signalAndWait(SIGTERM), 0) << serve.log();
}

// A reference that does not resolve stops the start, naming it.
TEST_F(ImageRun, ServeRefusesToStartOnAReferenceThatDoesNotResolve) {
  const std::string config = state_.path() + "/serve.yaml";
  const std::string missing = f().registry.address() + "/team/absent:1";
  {
    std::ofstream out(config);
    out << "state_dir: " << state_.path() << "\nimages:\n  - " << missing << "\n";
  }
  auto run = airlock({"serve", "--config", config}, home_.path());
  EXPECT_EQ(run.status, 125) << run.err;
  EXPECT_NE(run.err.find("refusing to start: images entry \"" + missing + "\""), std::string::npos)
      << run.err;
}

// Whether /proc/locks shows a process waiting ("->") for an flock on the
// file with inode `ino`.
bool someoneWaitsOnLock(ino_t ino) {
  std::ifstream in("/proc/locks");
  const std::string suffix = ":" + std::to_string(ino) + " ";
  for (std::string line; std::getline(in, line);)
    if (line.find(" -> FLOCK ") != std::string::npos && line.find(suffix) != std::string::npos)
      return true;
  return false;
}

// A registry on loopback serving one image, counting the GETs of each blob.
// The first GET of a blob is answered only once the other pull has reached
// that blob too: it asked for it as well (two downloads), or it waits on the
// blob's lock in the store (one). So the two pulls overlap on every blob.
struct CountingRegistry {
  testing::BuiltImage image;
  std::string locks_dir;  // the store's locks/
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int> blob_gets;
  std::unique_ptr<testing::HttpTestServer> server;

  testing::HttpResponse blob(const std::string& digest, const std::string& bytes) {
    std::unique_lock<std::mutex> lock(mu);
    const int nth = ++blob_gets[digest];
    cv.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const std::string lock_file = locks_dir + "/" + digest.substr(7);
    // /proc/locks has no notification: checked again every 20 ms.
    while (nth == 1 && blob_gets[digest] < 2 && std::chrono::steady_clock::now() < deadline) {
      struct stat st {};
      if (::stat(lock_file.c_str(), &st) == 0 && someoneWaitsOnLock(st.st_ino)) break;
      cv.wait_for(lock, std::chrono::milliseconds(20));
    }
    return {200, {{"Content-Type", "application/octet-stream"}}, bytes};
  }

  testing::HttpResponse answer(const testing::HttpRequest& req) {
    if (req.path == "/v2/team/app/manifests/v1")
      return {
          200, {{"Content-Type", "application/vnd.oci.image.manifest.v1+json"}}, image.manifest};
    if (req.path == "/v2/team/app/blobs/" + image.config_digest)
      return blob(image.config_digest, image.config);
    for (std::size_t i = 0; i < image.layers.size(); ++i)
      if (req.path == "/v2/team/app/blobs/" + image.layer_digests[i])
        return blob(image.layer_digests[i], image.layers[i]);
    return {404, {}, ""};
  }
};

// Two `airlock image pull` processes pulling one image at once fetch each
// blob once: the second waits on the blob's lock in the store, then finds
// it stored. Both succeed with the same digest.
TEST(ImagePullProcesses, TwoPullsOfOneImageFetchEachBlobOnce) {
  TempDir tmp, state, home;
  testing::OciLayout layout(tmp.sub("layout"));
  CountingRegistry registry;
  registry.image = layout.addImage("amd64", "shared");
  registry.locks_dir = state.path() + "/images/locks";
  registry.server = std::make_unique<testing::HttpTestServer>(
      "127.0.0.1", [&registry](const testing::HttpRequest& req) { return registry.answer(req); },
      testing::HttpTestServer::Mode::kConcurrent);
  ASSERT_TRUE(registry.server->ok());
  const std::string ref = registry.server->authority() + "/team/app:v1";
  Outcome first, second;
  std::thread other([&] {
    second = airlock({"image", "pull", "--state-dir", state.path(), ref}, home.path());
  });
  first = airlock({"image", "pull", "--state-dir", state.path(), ref}, home.path());
  other.join();
  ASSERT_EQ(first.status, 0) << first.err;
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(firstWord(first.out), registry.image.manifest_digest);
  EXPECT_EQ(firstWord(second.out), registry.image.manifest_digest);
  std::lock_guard<std::mutex> lock(registry.mu);
  EXPECT_EQ(registry.blob_gets.size(), 1 + registry.image.layers.size());
  for (const auto& [digest, gets] : registry.blob_gets)
    EXPECT_EQ(gets, 1) << digest << " was fetched " << gets << " times";
  EXPECT_TRUE(fs::is_empty(registry.locks_dir)) << "a lock file was left behind";
}

}  // namespace
}  // namespace airlock::images
