// Images, two comparisons in one run (docs/images.md):
//
// 1. Provisioning: provision + execute(/usr/bin/true) + destroy on the
//    linux mechanism, in the host image and in a cached image (built with
//    umoci from this machine's /usr/bin/true and C library, imported into
//    an image store), interleaved round by round. Also: the image's first
//    use() (which unpacks its root) against a second use() (which must
//    unpack nothing: the root's inode and mtime are unchanged).
// 2. Pull throughput: ImageStore::pull of a 64 MiB image (one gzip layer of
//    random bytes, built with umoci, pushed with skopeo to Debian's
//    docker-registry on loopback) into an empty store, against
//    `skopeo copy docker://... oci:DIR` of the same image, interleaved.
//    The store's pull verifies every blob and also unpacks the root; skopeo
//    verifies and writes the blobs only.
//
// Usage: bench_image_store [PROVISION_ROUNDS [PULL_ROUNDS]] (default 100, 5)
#include "airlock/images/image_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "airlock/core/environment_tiers.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/images/registry_client.h"
#include "airlock/sandbox/linux/linux_environment.h"
#include "airlock/sandbox/sandbox_image.h"
#include "registry_server.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using airlock::images::testing::runTool;

const std::string kUmoci = "/usr/bin/umoci";
const std::string kSkopeo = "/usr/bin/skopeo";

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double p90(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() * 9 / 10];
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_image_store: %s\n", what.c_str());
  std::exit(1);
}

void tool(const std::vector<std::string>& argv, const std::string& home) {
  auto run = runTool(argv, home);
  if (run.exit_code != 0) die(argv[0] + " " + argv[1] + " failed: " + run.errors + run.output);
}

void copyHostFile(const std::string& from, const std::string& to) {
  fs::create_directories(fs::path(to).parent_path());
  fs::copy_file(fs::canonical(from), to, fs::copy_options::overwrite_existing);
}

// An OCI layout at dir/oci with the image `tag`: umoci's empty image, then
// `fill(rootfs)`, repacked.
void buildImage(const std::string& dir, const std::string& tag,
                const std::function<void(const std::string&)>& fill) {
  const std::string layout = dir + "/oci";
  if (!fs::exists(layout)) tool({kUmoci, "init", "--layout", layout}, dir);
  tool({kUmoci, "new", "--image", layout + ":" + tag}, dir);
  const std::string bundle = dir + "/bundle-" + tag;
  tool({kUmoci, "unpack", "--image", layout + ":" + tag, bundle}, dir);
  fill(bundle + "/rootfs");
  tool({kUmoci, "repack", "--image", layout + ":" + tag, bundle}, dir);
  tool({kUmoci, "config", "--image", layout + ":" + tag, "--config.env=PATH=/usr/bin:/bin"}, dir);
  fs::remove_all(bundle);
}

void benchProvision(const std::string& dir, int rounds) {
  using namespace airlock;
  buildImage(dir, "true", [](const std::string& rootfs) {
    copyHostFile("/usr/bin/true", rootfs + "/usr/bin/true");
    copyHostFile("/lib/x86_64-linux-gnu/libc.so.6", rootfs + "/usr/lib/x86_64-linux-gnu/libc.so.6");
    copyHostFile("/lib64/ld-linux-x86-64.so.2", rootfs + "/lib64/ld-linux-x86-64.so.2");
    fs::create_directory_symlink("usr/lib", rootfs + "/lib");
    fs::create_directory_symlink("usr/bin", rootfs + "/bin");
  });
  auto store = images::ImageStore::open(dir + "/store");
  if (!store) die(store.error().message());
  auto imported = (*store)->importPath(dir + "/oci");
  if (!imported) die(imported.error().message());
  // importPath unpacked it; forget the root so that the first use() below
  // unpacks, as the first sandbox of a pulled image does.
  fs::remove_all((*store)->directory() + "/roots");
  fs::create_directory((*store)->directory() + "/roots");
  ::chmod(((*store)->directory() + "/roots").c_str(), 0711);

  auto t0 = Clock::now();
  auto first = (*store)->use(imported->digest);
  const double first_ms = msSince(t0);
  if (!first) die(first.error().message());
  struct stat before {};
  ::stat(first->root_dir.c_str(), &before);
  t0 = Clock::now();
  auto second = (*store)->use(imported->digest);
  const double second_ms = msSince(t0);
  if (!second) die(second.error().message());
  struct stat after {};
  ::stat(second->root_dir.c_str(), &after);
  const bool unpacked_again = before.st_ino != after.st_ino ||
                              before.st_mtim.tv_nsec != after.st_mtim.tv_nsec ||
                              before.st_mtim.tv_sec != after.st_mtim.tv_sec;

  linux_jail::LinuxEnvironmentOptions options;
  options.state_dir = "/run/airlock-bench";
  auto image = unpackedImage(first->digest, first->root_dir, first->env);
  if (!image) die(image.error().message());
  options.images = {*image};
  auto env = linux_jail::createLinuxEnvironment(options);
  if (!env) die(env.error().message());
  EnvironmentSpec host_spec;
  host_spec.tenant_id = "bench";
  host_spec.run_id = "bench";
  host_spec.image_digest = *airlock::computeImageDigest(options);
  host_spec.limits = defaultLimits();
  host_spec.environment =
      buildEnvironment(
          std::vector<std::string>{}, [](std::string_view) { return std::optional<std::string>{}; },
          ".", std::nullopt)
          .variables;
  EnvironmentSpec image_spec = host_spec;
  image_spec.image_digest = first->digest;
  ExecutionCommand cmd;
  cmd.argv = {"/usr/bin/true"};
  cmd.timeout_seconds = 10;
  cmd.maximum_output_bytes = 1 << 16;

  std::vector<double> host_ms, image_ms, host_provision, image_provision;
  auto once = [&](const EnvironmentSpec& spec, std::vector<double>& total,
                  std::vector<double>& provision) {
    auto t = Clock::now();
    auto h = (*env)->provision(spec);
    if (!h) die(h.error().message());
    provision.push_back(msSince(t));
    auto r = (*env)->execute(*h, cmd);
    if (!r || r->exit_code != 0) die("execute /usr/bin/true failed");
    if (!(*env)->destroy(*h)) die("destroy failed");
    total.push_back(msSince(t));
  };
  for (int i = 0; i < rounds + 3; ++i) {
    std::vector<double> skip_a, skip_b;
    const bool warm = i < 3;
    once(host_spec, warm ? skip_a : host_ms, warm ? skip_b : host_provision);
    once(image_spec, warm ? skip_a : image_ms, warm ? skip_b : image_provision);
  }
  std::printf("image provisioning, %d rounds each (median / p90, ms)\n", rounds);
  std::printf("  %-58s %7.2f / %7.2f\n", "host image: provision+execute+destroy /usr/bin/true",
              median(host_ms), p90(host_ms));
  std::printf("  %-58s %7.2f / %7.2f\n", "cached image: provision+execute+destroy /usr/bin/true",
              median(image_ms), p90(image_ms));
  std::printf("  %-58s %7.2f / %7.2f\n", "host image: provision alone", median(host_provision),
              p90(host_provision));
  std::printf("  %-58s %7.2f / %7.2f\n", "cached image: provision alone", median(image_provision),
              p90(image_provision));
  std::printf("  first use() of the image (unpacks its root): %.2f ms\n", first_ms);
  std::printf("  second use(): %.3f ms, %s\n", second_ms,
              unpacked_again ? "UNPACKED AGAIN (root changed)" : "no unpack (root unchanged)");
  std::printf("ratio cached image / host image, whole start: %.2fx (target <= 1.2x)\n",
              median(image_ms) / median(host_ms));
  std::printf("ratio cached image / host image, provision:   %.2fx\n",
              median(image_provision) / median(host_provision));
}

void benchPull(const std::string& dir, int rounds) {
  using namespace airlock;
  constexpr std::size_t kBytes = 64u << 20;
  buildImage(dir, "big", [&](const std::string& rootfs) {
    std::mt19937_64 rng(42);
    std::string data(kBytes, '\0');
    for (std::size_t i = 0; i + 8 <= data.size(); i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(data.data() + i, &v, 8);
    }
    std::ofstream(rootfs + "/blob.bin", std::ios::binary) << data;
  });
  images::testing::RegistryServer registry;
  if (auto started = registry.start(); !started) die(started.error().message());
  const std::string ref_text = registry.address() + "/bench/big:1";
  tool({kSkopeo, "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false",
        "oci:" + dir + "/oci:big", "docker://" + ref_text},
       dir);
  auto ref = images::parseImageReference(ref_text);
  if (!ref) die(ref.error().message());
  std::int64_t image_bytes = 0;
  std::vector<double> airlock_ms, skopeo_ms;
  for (int i = 0; i < rounds + 1; ++i) {
    const std::string store_dir = dir + "/pull-store";
    const std::string oci_dir = dir + "/pull-oci";
    fs::remove_all(store_dir);
    fs::remove_all(oci_dir);
    auto t0 = Clock::now();
    {
      auto store = images::ImageStore::open(store_dir);
      if (!store) die(store.error().message());
      images::RegistryClient client;
      auto pulled = (*store)->pull(*ref, client);
      if (!pulled) die(pulled.error().message());
      image_bytes = pulled->size_bytes;
    }
    const double a = msSince(t0);
    t0 = Clock::now();
    tool({kSkopeo, "--insecure-policy", "copy", "--quiet", "--src-tls-verify=false",
          "docker://" + ref_text, "oci:" + oci_dir + ":big"},
         dir);
    const double s = msSince(t0);
    if (i > 0) airlock_ms.push_back(a), skopeo_ms.push_back(s);
  }
  const double mib = static_cast<double>(image_bytes) / (1 << 20);
  std::printf("pull from a loopback docker-registry, %.1f MiB image, %d rounds (median ms)\n", mib,
              rounds);
  std::printf("  %-58s %7.1f  (%.0f MiB/s)\n", "airlock ImageStore::pull (fetch, verify, unpack)",
              median(airlock_ms), mib / (median(airlock_ms) / 1000));
  std::printf("  %-58s %7.1f  (%.0f MiB/s)\n", "skopeo copy docker:// oci: (fetch, verify)",
              median(skopeo_ms), mib / (median(skopeo_ms) / 1000));
  std::printf("ratio airlock pull / skopeo copy: %.2fx\n", median(airlock_ms) / median(skopeo_ms));
}

}  // namespace

int main(int argc, char** argv) {
  const int provision_rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  const int pull_rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  for (const auto& t : {kUmoci, kSkopeo})
    if (::access(t.c_str(), X_OK) != 0) die(t + " is missing: run scripts/bootstrap");
  char tmpl[] = "/tmp/airlock-bench-images-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) die("mkdtemp");
  const std::string dir = tmpl;
  // The sandbox's own uid looks up the image root's path (as under a state
  // directory, which the mechanisms make 0711).
  ::chmod(dir.c_str(), 0711);
  benchProvision(dir, provision_rounds);
  benchPull(dir, pull_rounds);
  fs::remove_all(dir);
  return 0;
}
