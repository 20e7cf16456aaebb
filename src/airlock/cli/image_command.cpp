#include "airlock/cli/image_command.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "airlock/cli/exit_codes.h"
#include "airlock/cli/summary.h"
#include "airlock/core/encoding.h"
#include "airlock/images/registry_client.h"
#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::cli {
namespace {

// For people: "812 B", "14.2 KiB", "2.1 MiB", "1.4 GiB".
std::string humanSize(std::int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) value /= 1024, ++unit;
  char text[32];
  (void)std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return text;
}

// Whether terminalPullProgress wrote a line that is still showing.
std::atomic<bool> g_progress_shown{false};

nlohmann::json imageJson(const images::StoredImage& image) {
  return nlohmann::json{
      {"digest", image.digest},         {"references", image.references},
      {"size_bytes", image.size_bytes}, {"layers", image.layer_digests.size()},
      {"os", image.config.os},          {"architecture", image.config.architecture},
      {"env", image.config.env}};
}

std::string shown(const std::vector<std::string>& references) {
  if (references.empty()) return "-";
  std::string out;
  for (const auto& r : references) out += (out.empty() ? "" : ",") + escapeForTerminal(r);
  return out;
}

}  // namespace

std::optional<std::pair<images::StoredImage, std::string>> findNamed(images::ImageStore& store,
                                                                     const std::string& name) {
  if (auto found = store.find(name)) return std::pair{std::move(*found), name};
  auto ref = images::parseImageReference(name);
  if (!ref) return std::nullopt;
  const std::string normalized = images::toString(*ref);
  if (auto found = store.find(normalized)) return std::pair{std::move(*found), normalized};
  return std::nullopt;
}

std::string imageStoreDirectory(const std::string& state_dir) {
  return state_dir + "/images";
}

Result<std::shared_ptr<images::ImageStore>> openImageStore(const std::string& state_dir) {
  // The state directory itself, as the other stores under it make it.
  if (::mkdir(state_dir.c_str(), 0711) != 0 && errno != EEXIST)
    return fail(ErrorCode::kExecutionUnavailable,
                "cannot make the state directory " + state_dir + ": " + std::strerror(errno));
  auto store = images::ImageStore::open(imageStoreDirectory(state_dir));
  if (!store) return tl::unexpected(store.error());
  return std::shared_ptr<images::ImageStore>(std::move(*store));
}

Result<ResolvedImage> resolveImage(images::ImageStore& store, const std::string& name,
                                   const PullProgress& progress) {
  if (images::isDigest(name)) {
    auto found = store.find(name);
    if (!found) {
      if (found.error().code != ErrorCode::kNotFound) return tl::unexpected(found.error());
      return fail(ErrorCode::kNotFound, "image " + name +
                                            " is not in the image store (airlock image pull "
                                            "REGISTRY/NAME@" +
                                            name + ", or airlock image import PATH)");
    }
    return ResolvedImage{std::move(*found), false};
  }
  if (auto found = findNamed(store, name)) return ResolvedImage{std::move(found->first), false};
  auto ref = images::parseImageReference(name);
  if (!ref)
    return fail(ErrorCode::kExecutionRejected,
                "image " + quoteForMessage(name) +
                    " is neither a digest (sha256:<64 hex>) nor an image reference (" +
                    ref.error().context + ")");
  if (!ref->digest.empty())
    if (auto found = store.find(ref->digest)) return ResolvedImage{std::move(*found), false};
  images::RegistryClientOptions options;
  options.progress = progress;
  images::RegistryClient registry(std::move(options));
  auto pulled = store.pull(*ref, registry);
  if (!pulled) return tl::unexpected(pulled.error());
  return ResolvedImage{std::move(*pulled), true};
}

Result<void> checkCodeModeImage(images::ImageStore& store, const std::string& digest) {
  auto root = store.use(digest);
  if (!root) return tl::unexpected(root.error());
  sys::UniqueFd dir(::open(root->root_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid())
    return failErrno(ErrorCode::kExecutionUnavailable, "open the root of image " + digest, errno);
  // What the sandbox will execute, in order, and why.
  const std::pair<const char*, const char*> needed[] = {
      {"/usr/bin/python3", "python3, which code mode runs the program with"},
      {"/usr/bin/env", "/usr/bin/env, which code mode starts python3 with"}};
  for (const auto& [path, what] : needed) {
    // Resolved as the sandbox will: symlinks stay inside the image's root.
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, dir.get(), path, &how, sizeof how);
    if (fd >= 0) {
      ::close(static_cast<int>(fd));
      continue;
    }
    if (errno != ENOENT && errno != ENOTDIR) return {};  // no openat2: the exec says why
    return fail(ErrorCode::kExecutionRejected,
                "--code: image " + digest + " has no " + what + " (" + path +
                    "): run code mode on an image that has Python 3, or on the host image");
  }
  return {};
}

PullProgress terminalPullProgress(const std::string& reference) {
  if (::isatty(STDERR_FILENO) != 1) return {};
  const std::string shown_ref = escapeForTerminal(reference);
  // Redrawn at most every 100 ms, and when a blob is complete.
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [shown_ref, last](std::int64_t done, std::int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done != total && now - *last < std::chrono::milliseconds(100)) return;
    *last = now;
    writeOut(STDERR_FILENO, "\r\x1b[Kairlock: pulling " + shown_ref + ": " + humanSize(done) +
                                " of " + humanSize(total));
    g_progress_shown = true;
  };
}

void endTerminalPullProgress() {
  if (g_progress_shown.exchange(false)) writeOut(STDERR_FILENO, "\r\x1b[K");
}

int runImagePull(const std::string& state_dir, const std::string& reference, bool json) {
  auto store = openImageStore(state_dir);
  if (!store) return printErrorLine(store.error().message());
  auto ref = images::parseImageReference(reference);
  if (!ref) return printErrorLine(ref.error().message());
  images::RegistryClientOptions options;
  options.progress = terminalPullProgress(reference);
  images::RegistryClient registry(std::move(options));
  auto pulled = (*store)->pull(*ref, registry);
  endTerminalPullProgress();
  if (!pulled) return printErrorLine(pulled.error().message());
  if (json)
    writeOut(STDOUT_FILENO, imageJson(*pulled).dump() + "\n");
  else
    writeOut(STDOUT_FILENO,
             pulled->digest + " " + escapeForTerminal(images::toString(*ref)) + "\n");
  return 0;
}

int runImageImport(const std::string& state_dir, const std::string& path,
                   const std::string& ref_name, bool json) {
  auto store = openImageStore(state_dir);
  if (!store) return printErrorLine(store.error().message());
  auto imported = (*store)->importPath(path, ref_name);
  if (!imported) return printErrorLine(imported.error().message());
  if (json)
    writeOut(STDOUT_FILENO, imageJson(*imported).dump() + "\n");
  else
    writeOut(STDOUT_FILENO, imported->digest + " " + shown(imported->references) + "\n");
  return 0;
}

int runImageList(const std::string& state_dir, bool json) {
  auto store = openImageStore(state_dir);
  if (!store) return printErrorLine(store.error().message());
  const auto all = (*store)->list();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& image : all) out.push_back(imageJson(image));
    writeOut(STDOUT_FILENO, nlohmann::json{{"images", out}}.dump() + "\n");
    return 0;
  }
  writeOut(STDOUT_FILENO, formatImageTable(all));
  return 0;
}

std::string formatImageTable(const std::vector<images::StoredImage>& all) {
  // Columns two spaces apart: the digest (71 characters) padded, the size
  // right-aligned to the widest ("1023.9 KiB"), then the references.
  constexpr std::size_t kDigestWidth = 71;
  std::size_t size_width = 10;
  std::vector<std::string> sizes;
  for (const auto& image : all) {
    sizes.push_back(humanSize(image.size_bytes));
    size_width = std::max(size_width, sizes.back().size());
  }
  const auto padRight = [](std::string text, std::size_t width) {
    if (text.size() < width) text.append(width - text.size(), ' ');
    return text;
  };
  const auto padLeft = [](std::string text, std::size_t width) {
    if (text.size() < width) text.insert(0, width - text.size(), ' ');
    return text;
  };
  std::string text =
      padRight("DIGEST", kDigestWidth) + "  " + padLeft("SIZE", size_width) + "  REFERENCES\n";
  for (std::size_t i = 0; i < all.size(); ++i)
    text += padRight(all[i].digest, kDigestWidth) + "  " + padLeft(sizes[i], size_width) + "  " +
            shown(all[i].references) + "\n";
  return text;
}

int runImageRemove(const std::string& state_dir, const std::string& name) {
  auto store = openImageStore(state_dir);
  if (!store) return printErrorLine(store.error().message());
  auto named = findNamed(**store, name);
  auto removed = (*store)->remove(named ? named->second : name);
  if (!removed) return printErrorLine(removed.error().message());
  auto after = (*store)->find(removed->digest);
  if (after)
    writeOut(STDOUT_FILENO, "untagged " + escapeForTerminal(name) + " (" + removed->digest +
                                " keeps " + shown(after->references) + ")\n");
  else
    writeOut(STDOUT_FILENO, "removed " + removed->digest + "\n");
  return 0;
}

}  // namespace airlock::cli
