#include "airlock/images/image_store.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "airlock/core/thread_annotations.h"
#include "airlock/images/registry_client.h"
#include "airlock/sys/io.h"
#include "airlock/sys/random.h"
#include "airlock/sys/sha256.h"
#include "airlock/workspace/resolve.h"

namespace airlock::images {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Manifests, indexes, configs and the small files of a layout or archive.
constexpr std::size_t kMaxDocumentBytes = 4u << 20;
constexpr const char* kOciManifestType = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kOciConfigType = "application/vnd.oci.image.config.v1+json";
constexpr const char* kOciLayerType = "application/vnd.oci.image.layer.v1.tar";
// The name of the host image: an image may not take it.
constexpr const char* kReservedName = "host";

// The store's own failures (its directory, a write): retriable.
Error storeError(const std::string& what, int err = 0) {
  return Error{ErrorCode::kExecutionUnavailable, err, "image store: " + what};
}
// What was given to import or pull cannot be used.
Error rejected(const std::string& what) {
  return Error{ErrorCode::kExecutionRejected, 0, what};
}

// A small document read whole from an open file; ExecutionRejected when it
// is larger than kMaxDocumentBytes.
Result<std::string> readDocument(int fd, const std::string& what) {
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return tl::unexpected(storeError("read " + what, errno));
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxDocumentBytes)
      return tl::unexpected(
          rejected(what + " is larger than " + std::to_string(kMaxDocumentBytes) + " bytes"));
  }
}

std::string hexOf(std::string_view digest) {
  return std::string(digest.substr(7));
}

// An exclusive or shared flock on `path` (created 0600), held by the fd.
Result<sys::UniqueFd> lockFile(const std::string& path, int operation) {
  sys::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return tl::unexpected(storeError("open the lock " + path, errno));
  if (sys::flockWait(fd.get(), operation) != 0) {
    if (errno == EWOULDBLOCK)
      return fail(ErrorCode::kExecutionUnavailable, "image store: " + path + " is held");
    return tl::unexpected(storeError("lock " + path, errno));
  }
  return fd;
}

// Copies `in` to `out` while hashing, at most `max_bytes` bytes (one more
// is an error). The hex digest of what was copied, or an error.
Result<std::pair<std::string, std::int64_t>> copyHashed(int in, int out, std::int64_t max_bytes,
                                                        const std::string& what) {
  sys::Sha256 h;
  std::int64_t total = 0;
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return tl::unexpected(storeError("read " + what, errno));
    if (n == 0) break;
    total += n;
    if (total > max_bytes)
      return tl::unexpected(
          rejected(what + " is larger than " + std::to_string(max_bytes) + " bytes"));
    h.update(buf.data(), static_cast<std::size_t>(n));
    if (!sys::writeAll(out, buf.data(), static_cast<std::size_t>(n)))
      return tl::unexpected(storeError("write " + what, errno));
  }
  return std::pair{h.finishHex(), total};
}

// What a record file holds.
json recordJson(const StoredImage& image) {
  return json{{"digest", image.digest},
              {"config", image.config_digest},
              {"layers", image.layer_digests},
              {"references", image.references},
              {"size", image.size_bytes}};
}

std::optional<StoredImage> recordFrom(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  StoredImage image;
  try {
    image.digest = j.at("digest").get<std::string>();
    image.config_digest = j.at("config").get<std::string>();
    image.layer_digests = j.at("layers").get<std::vector<std::string>>();
    image.references = j.at("references").get<std::vector<std::string>>();
    image.size_bytes = j.at("size").get<std::int64_t>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
  if (!isDigest(image.digest) || !isDigest(image.config_digest)) return std::nullopt;
  for (const auto& l : image.layer_digests)
    if (!isDigest(l)) return std::nullopt;
  return image;
}

// A document named inside a layout or archive, normalized: no "./", no
// leading "/".
std::string normalizedName(std::string name) {
  while (name.rfind("./", 0) == 0) name.erase(0, 2);
  while (!name.empty() && name.front() == '/') name.erase(0, 1);
  return name;
}

// The parent directory part of a name inside an archive ("" at the top).
std::string dirnameOf(const std::string& name) {
  auto slash = name.rfind('/');
  return slash == std::string::npos ? "" : name.substr(0, slash);
}

// Resolves `target` of a symlink at `name` to a name inside the archive,
// lexically; "" when it climbs out.
std::string resolveLink(const std::string& name, const std::string& target) {
  if (!target.empty() && target.front() == '/') return normalizedName(target);
  std::vector<std::string> parts;
  std::string joined = dirnameOf(name).empty() ? target : dirnameOf(name) + "/" + target;
  std::size_t start = 0;
  while (start <= joined.size()) {
    auto end = joined.find('/', start);
    if (end == std::string::npos) end = joined.size();
    std::string part = joined.substr(start, end - start);
    if (part == "..") {
      if (parts.empty()) return "";
      parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = end + 1;
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

struct ArchiveFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

class ImageStoreImpl;

// The blobs the import running on this thread has added (importPath).
thread_local std::vector<std::string>* t_added = nullptr;

// Where the blobs of an import come from: a layout directory, or the blobs
// an archive's stream has already put in the store.
struct ImportSource {
  // index.json and manifest.json, when present.
  std::optional<std::string> index_json;
  std::optional<std::string> docker_manifest_json;
  // docker save: archive names ("<id>/layer.tar", "<id>.json") -> digest.
  std::map<std::string, std::pair<std::string, std::int64_t>> named_blobs;
  std::map<std::string, std::string> links;  // name -> the name it points at
  // A layout directory: its blobs are copied in as the documents name them.
  sys::UniqueFd layout_root;
  std::string path;
};

class ImageStoreImpl final : public ImageStore {
 public:
  ImageStoreImpl(std::string dir, ImageStoreOptions options)
      : dir_(std::move(dir)), options_(std::move(options)) {}

  Result<void> init() {
    // The roots are reached by sandboxes' own uids (a bind's source is
    // looked up with the credentials of the sandbox's init): the store and
    // roots/ are searchable by all, the rest is the service's alone.
    for (auto [sub, mode] : {std::pair{"", 0711},
                             {"/blobs", 0700},
                             {"/blobs/sha256", 0700},
                             {"/images", 0700},
                             {"/locks", 0700},
                             {"/roots", 0711},
                             {"/tmp", 0700}}) {
      const std::string path = dir_ + sub;
      if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST)
        return tl::unexpected(storeError("make " + path, errno));
    }
    // An interrupted writer's files; another process's in-flight writes are
    // under a name with its pid, so only those of dead writers go.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/tmp", ec)) {
      const std::string name = e.path().filename().string();
      auto dash = name.rfind('.');
      pid_t pid = 0;
      if (dash != std::string::npos)
        (void)std::from_chars(name.data() + dash + 1, name.data() + name.size(), pid);
      if (pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM)) continue;
      fs::remove_all(e.path(), ec);
    }
    return {};
  }

  const std::string& directory() const override { return dir_; }

  Result<StoredImage> pull(const ImageReference& ref, RegistryClient& registry) override {
    // The blobs this pull adds: removed again when it is refused (a hostile
    // layer, another platform), as an import's are.
    std::vector<std::string> added;
    Result<StoredImage> pulled;
    {
      // Held while blobs are written and not yet recorded: collectGarbage
      // leaves blobs alone meanwhile.
      auto writing = lockFile(dir_ + "/gc.lock", LOCK_SH);
      if (!writing) return tl::unexpected(writing.error());
      t_added = &added;
      pulled = pullOnce(ref, registry);
      t_added = nullptr;
    }
    removeUnrecorded(added);
    return pulled;
  }

  Result<StoredImage> pullOnce(const ImageReference& ref, RegistryClient& registry) {
    auto manifest = registry.resolve(ref);
    if (!manifest) return tl::unexpected(manifest.error());
    auto parsed = parseImageManifest(manifest->bytes);
    if (!parsed) return tl::unexpected(parsed.error());
    if (auto r = checkSizes(*parsed); !r) return tl::unexpected(r.error());
    if (auto r = putBytes(manifest->digest, manifest->bytes); !r) return tl::unexpected(r.error());
    std::vector<Descriptor> wanted = parsed->layers;
    wanted.insert(wanted.begin(), parsed->config);
    for (const auto& d : wanted) {
      auto r =
          fetchShared(d, [&](int out) { return registry.fetchBlob(ref, d.digest, d.size, out); });
      if (!r) return tl::unexpected(r.error());
    }
    return recordAndUnpack(manifest->digest, {toString(ref)});
  }

  // Removes those of `added` (blobs an import or pull stored) that no record
  // uses: all of them after a refusal; after a success, an archive's entries
  // its manifest does not name. Not while another import or pull is writing:
  // it may need the same blobs (collectGarbage takes them later).
  void removeUnrecorded(const std::vector<std::string>& added) {
    if (added.empty()) return;
    auto alone = lockFile(dir_ + "/gc.lock", LOCK_EX | LOCK_NB);
    if (!alone) return;
    auto lock = lockFile(dir_ + "/lock", LOCK_EX);
    std::set<std::string> live;
    for (const auto& image : list()) {
      live.insert(image.digest);
      live.insert(image.config_digest);
      live.insert(image.layer_digests.begin(), image.layer_digests.end());
    }
    for (const auto& digest : added)
      if (!live.count(digest)) (void)::unlink(blobPath(digest).c_str());
  }

  using ImageStore::importPath;
  Result<StoredImage> importPath(const std::string& path, const std::string& ref_name) override {
    // The blobs this import adds: removed again when it fails (those of a
    // record written meanwhile excepted), so that a refused archive leaves
    // nothing behind.
    std::vector<std::string> added;
    Result<StoredImage> imported;
    {
      auto writing = lockFile(dir_ + "/gc.lock", LOCK_SH);
      if (!writing) return tl::unexpected(writing.error());
      t_added = &added;
      imported = importOnce(path, ref_name);
      t_added = nullptr;
    }
    removeUnrecorded(added);
    return imported;
  }

  Result<StoredImage> importOnce(const std::string& path, const std::string& ref_name) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      return tl::unexpected(rejected("image import: " + path + ": " + std::strerror(errno)));
    ImportSource source;
    source.path = path;
    if (S_ISDIR(st.st_mode)) {
      auto r = readLayout(path, source);
      if (!r) return tl::unexpected(r.error());
    } else if (!S_ISREG(st.st_mode)) {
      return tl::unexpected(
          rejected("image import: " + path + " is neither a directory nor a regular file"));
    } else {
      auto r = readArchive(path, source);
      if (!r) return tl::unexpected(r.error());
    }
    if (source.index_json) return importIndex(*source.index_json, source, ref_name);
    if (!ref_name.empty())
      return tl::unexpected(rejected("image import: " + path +
                                     ": a name picks an image of an OCI layout, and this is none"));
    if (source.docker_manifest_json)
      return importDockerSave(*source.docker_manifest_json, source, path);
    return tl::unexpected(rejected("image import: " + path +
                                   " is neither an OCI image layout (no index.json) nor a docker "
                                   "save archive (no manifest.json)"));
  }

  Result<StoredImage> find(std::string_view name) override {
    const bool by_digest = isDigest(name);
    for (auto& image : list()) {
      if (image.digest == name) return image;
      if (by_digest) continue;  // a digest names its own image, never a reference
      if (std::find(image.references.begin(), image.references.end(), name) !=
          image.references.end())
        return image;
    }
    return fail(ErrorCode::kNotFound, "image " + std::string(name) + " is not in the store");
  }

  std::vector<StoredImage> list() override {
    std::vector<StoredImage> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/images", ec)) {
      if (e.path().extension() != ".json") continue;
      auto text = sys::readFile(AT_FDCWD, e.path().c_str(), kMaxDocumentBytes);
      if (!text) continue;
      auto image = recordFrom(*text);
      if (!image) continue;
      if (auto config = readBlob(image->config_digest))
        if (auto parsed = parseImageConfig(*config)) image->config = *parsed;
      out.push_back(std::move(*image));
    }
    std::sort(out.begin(), out.end(),
              [](const StoredImage& a, const StoredImage& b) { return a.digest < b.digest; });
    return out;
  }

  Result<ImageRoot> use(std::string_view digest) override {
    auto image = find(digest);
    if (!image) return tl::unexpected(image.error());
    if (image->digest != digest)
      return fail(ErrorCode::kNotFound, "image " + std::string(digest) + ": use() takes a digest");
    return holdRootOf(*image);
  }

  // The image's root, unpacked under its lock when it is not there yet.
  Result<ImageRoot> holdRootOf(const StoredImage& image) {
    const std::string hex = hexOf(image.digest);
    const std::string root = dir_ + "/roots/" + hex;
    // Shared first: a root that is there is used as it is, beside every
    // other holder (flock locks belong to the open file, so a second use in
    // this process would wait forever for an exclusive lock). Only a missing
    // root takes the lock exclusively, to unpack it once.
    auto hold = holdRoot(root, LOCK_SH);
    if (!hold) return tl::unexpected(hold.error());
    if (!exists(root)) {
      hold->reset();
      hold = holdRoot(root, LOCK_EX);
      if (!hold) return tl::unexpected(hold.error());
      if (!exists(root)) {
        if (auto r = unpack(image, root); !r) {
          (void)::unlink((root + ".lock").c_str());
          return tl::unexpected(r.error());
        }
      }
      // Downgraded to shared: other users may hold it too, GC may not.
      if (sys::flockWait(hold->get(), LOCK_SH) != 0)
        return tl::unexpected(storeError("lock " + root + ".lock", errno));
    }
    ImageRoot out;
    out.digest = image.digest;
    out.root_dir = root;
    out.env = image.config.env;
    out.hold = std::move(*hold);
    return out;
  }

  static bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
  }

  // The lock of `root`, held with `operation`. collectGarbage() unlinks a
  // lock file once its root is gone.
  static Result<sys::UniqueFd> holdRoot(const std::string& root, int operation) {
    return lockCurrent(root + ".lock", operation);
  }

  // An flock on the file at `path`, held with `operation`. A lock file may
  // be unlinked by its holder, so a lock taken on a file that is no longer
  // at the path is taken again on the one that is.
  static Result<sys::UniqueFd> lockCurrent(const std::string& path, int operation) {
    for (;;) {
      auto fd = lockFile(path, operation);
      if (!fd) return fd;
      struct stat held {
      }, named{};
      if (::fstat(fd->get(), &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
          held.st_ino == named.st_ino && held.st_dev == named.st_dev)
        return fd;
    }
  }

  Result<StoredImage> remove(std::string_view name) override {
    StoredImage before;
    {
      auto lock = lockFile(dir_ + "/lock", LOCK_EX);
      if (!lock) return tl::unexpected(lock.error());
      auto image = find(name);
      if (!image) return tl::unexpected(image.error());
      before = *image;
      auto& refs = image->references;
      const bool by_reference = image->digest != name;
      if (by_reference) refs.erase(std::remove(refs.begin(), refs.end(), name), refs.end());
      if (by_reference && !refs.empty()) {
        if (auto r = writeRecord(*image); !r) return tl::unexpected(r.error());
      } else if (::unlink(recordPath(image->digest).c_str()) != 0 && errno != ENOENT) {
        return tl::unexpected(storeError("remove the record of " + image->digest, errno));
      }
    }
    if (auto gc = collectGarbage(); !gc) return tl::unexpected(gc.error());
    return before;
  }

  Result<GarbageCollected> collectGarbage() override {
    auto lock = lockFile(dir_ + "/lock", LOCK_EX);
    if (!lock) return tl::unexpected(lock.error());
    std::set<std::string> live_blobs, live_roots;
    for (const auto& image : list()) {
      live_blobs.insert(hexOf(image.digest));
      live_blobs.insert(hexOf(image.config_digest));
      for (const auto& l : image.layer_digests) live_blobs.insert(hexOf(l));
      live_roots.insert(hexOf(image.digest));
    }
    GarbageCollected out;
    std::error_code ec;
    // Blobs only while no import or pull is writing any (they hold gc.lock
    // shared): theirs are not recorded yet. The next collection takes them.
    auto quiet = lockFile(dir_ + "/gc.lock", LOCK_EX | LOCK_NB);
    for (const auto& e : fs::directory_iterator(dir_ + "/blobs/sha256", ec)) {
      if (!quiet) break;
      const std::string hex = e.path().filename().string();
      if (live_blobs.count(hex)) continue;
      std::error_code size_ec;
      const auto size = fs::file_size(e.path(), size_ec);
      if (::unlink(e.path().c_str()) == 0) {
        ++out.blobs;
        if (!size_ec) out.bytes += static_cast<std::int64_t>(size);
      }
    }
    for (const auto& e : fs::directory_iterator(dir_ + "/roots", ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() != 64 || live_roots.count(name)) continue;
      // Held by a user: kept; the next collection tries again.
      auto hold = lockFile(e.path().string() + ".lock", LOCK_EX | LOCK_NB);
      if (!hold) continue;
      std::error_code rm_ec;
      fs::remove_all(e.path(), rm_ec);
      if (!rm_ec) ++out.roots;
      (void)::unlink((e.path().string() + ".lock").c_str());
    }
    return out;
  }

 private:
  std::string blobPath(const std::string& digest) const {
    return dir_ + "/blobs/sha256/" + hexOf(digest);
  }
  std::string recordPath(const std::string& digest) const {
    return dir_ + "/images/" + hexOf(digest) + ".json";
  }
  // A fresh name under tmp/: random (never a predictable stand-in, so a
  // failing CSPRNG is an error), then the writer's pid for the sweep.
  Result<std::string> tmpPath(const std::string& what) const {
    auto random = sys::randomHexToken(8);
    if (!random) return tl::unexpected(random.error());
    return dir_ + "/tmp/" + what + "-" + *random + "." + std::to_string(::getpid());
  }
  // A new file under tmp/ for a blob, open with `access` (O_WRONLY or
  // O_RDWR), created 0444: read-only once it is committed by its digest.
  struct TmpBlob {
    std::string path;
    sys::UniqueFd fd;
  };
  Result<TmpBlob> createTmpBlob(int access) const {
    auto path = tmpPath("blob");
    if (!path) return tl::unexpected(path.error());
    sys::UniqueFd fd(::open(path->c_str(), access | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
    if (!fd.valid()) return tl::unexpected(storeError("create " + *path, errno));
    return TmpBlob{std::move(*path), std::move(fd)};
  }
  bool hasBlob(const std::string& digest) const {
    struct stat st {};
    return ::stat(blobPath(digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }
  Result<std::string> readBlob(const std::string& digest) const {
    return sys::readFile(AT_FDCWD, blobPath(digest).c_str(), kMaxDocumentBytes);
  }

  Result<void> checkSizes(const ImageManifest& m) const {
    std::vector<Descriptor> all = m.layers;
    all.push_back(m.config);
    for (const auto& d : all)
      if (d.size > options_.max_blob_bytes)
        return tl::unexpected(rejected("image blob " + d.digest + " declares " +
                                       std::to_string(d.size) + " bytes, over the store's " +
                                       std::to_string(options_.max_blob_bytes)));
    return {};
  }

  // Writes bytes whose digest is `digest` into the store, verified.
  Result<void> putBytes(const std::string& digest, std::string_view bytes) {
    if ("sha256:" + sys::sha256Hex(bytes) != digest)
      return tl::unexpected(rejected("image blob " + digest + ": its bytes have another digest"));
    if (hasBlob(digest)) return {};
    auto blob = createTmpBlob(O_WRONLY);
    if (!blob) return tl::unexpected(blob.error());
    const std::string& tmp = blob->path;
    const sys::UniqueFd& fd = blob->fd;
    if (!sys::writeAll(fd.get(), bytes.data(), bytes.size())) {
      const int err = errno;
      (void)::unlink(tmp.c_str());
      return tl::unexpected(storeError("write " + tmp, err));
    }
    return commitBlob(tmp, digest);
  }

  Result<void> commitBlob(const std::string& tmp, const std::string& digest) {
    const bool existed = hasBlob(digest);
    if (::rename(tmp.c_str(), blobPath(digest).c_str()) != 0) {
      const int err = errno;
      (void)::unlink(tmp.c_str());
      return tl::unexpected(storeError("store blob " + digest, err));
    }
    if (!existed && t_added != nullptr) t_added->push_back(digest);
    return {};
  }

  // Stores the blob `d` by calling `fetch` with a file to write it to, once
  // per digest at a time: in this process a second caller for the same
  // digest waits for the first and shares its result; across processes
  // fetchOnce's lock serializes them. The fetcher verifies
  // (the registry client does); the store checks the digest again before
  // the rename, so nothing unverified is ever named by its digest.
  Result<void> fetchShared(const Descriptor& d, const std::function<Result<void>(int)>& fetch) {
    if (!isDigest(d.digest))
      return tl::unexpected(rejected("image blob '" + d.digest + "': not a digest"));
    std::shared_ptr<Inflight> inflight;
    {
      MutexLock lk(mu_);
      auto it = inflight_.find(d.digest);
      if (it != inflight_.end()) {
        inflight = it->second;
        while (!inflight->done) inflight->cv.wait(mu_);
        return inflight->result;
      }
      if (hasBlob(d.digest)) return {};
      inflight = std::make_shared<Inflight>();
      inflight_[d.digest] = inflight;
    }
    Result<void> result = fetchOnce(d, fetch);
    MutexLock lk(mu_);
    inflight->result = result;
    inflight->done = true;
    inflight_.erase(d.digest);
    inflight->cv.notifyAll();
    return result;
  }

  // Across processes, one fetch of a blob at a time: under an exclusive
  // lock on locks/<hex>, after which a waiter finds the blob stored by the
  // one before it (or fetches it itself when that one failed). The holder
  // unlinks the lock file before it lets go, so locks/ keeps nothing.
  Result<void> fetchOnce(const Descriptor& d, const std::function<Result<void>(int)>& fetch) {
    const std::string lock_path = dir_ + "/locks/" + hexOf(d.digest);
    auto lock = lockCurrent(lock_path, LOCK_EX);
    if (!lock) return tl::unexpected(lock.error());
    Result<void> result = hasBlob(d.digest) ? Result<void>{} : fetchUnlocked(d, fetch);
    (void)::unlink(lock_path.c_str());
    return result;
  }

  Result<void> fetchUnlocked(const Descriptor& d, const std::function<Result<void>(int)>& fetch) {
    auto blob = createTmpBlob(O_RDWR);
    if (!blob) return tl::unexpected(blob.error());
    const std::string& tmp = blob->path;
    const sys::UniqueFd& fd = blob->fd;
    auto fetched = fetch(fd.get());
    if (fetched) {
      // Verified again from the file itself.
      sys::UniqueFd in(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
      sys::UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
      auto hashed = in.valid() && null.valid()
                        ? copyHashed(in.get(), null.get(), options_.max_blob_bytes, d.digest)
                        : tl::unexpected(storeError("reopen " + tmp, errno));
      if (!hashed)
        fetched = tl::unexpected(hashed.error());
      else if ("sha256:" + hashed->first != d.digest || hashed->second != d.size)
        fetched = tl::unexpected(
            rejected("image blob " + d.digest + ": the bytes fetched have another digest or size"));
    }
    if (!fetched) {
      (void)::unlink(tmp.c_str());
      return fetched;
    }
    return commitBlob(tmp, d.digest);
  }

  // Copies a file of a layout or archive into the store by its content.
  // `expect`: the digest its name claims, or "" (docker save names).
  Result<std::pair<std::string, std::int64_t>> putStream(int in, const std::string& expect,
                                                         const std::string& what) {
    auto blob = createTmpBlob(O_WRONLY);
    if (!blob) return tl::unexpected(blob.error());
    const std::string& tmp = blob->path;
    const sys::UniqueFd& fd = blob->fd;
    auto hashed = copyHashed(in, fd.get(), options_.max_blob_bytes, what);
    if (hashed && !expect.empty() && "sha256:" + hashed->first != expect)
      hashed = tl::unexpected(rejected(what + ": its bytes do not have the digest its name says"));
    if (!hashed) {
      (void)::unlink(tmp.c_str());
      return tl::unexpected(hashed.error());
    }
    const std::string digest = "sha256:" + hashed->first;
    if (auto r = commitBlob(tmp, digest); !r) return tl::unexpected(r.error());
    return std::pair{digest, hashed->second};
  }

  // An OCI image layout directory: its index.json now, its blobs as the
  // documents name them (copyLayoutBlob).
  // A regular file beneath a layout's root, opened for reading without
  // following a symlink and without waiting on a FIFO; what is wrong
  // otherwise ("is missing", "is not a regular file").
  static tl::expected<sys::UniqueFd, std::string> openRegularBeneath(int root,
                                                                     const std::string& rel) {
    auto fd = workspace::openBeneath(root, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (!fd) return tl::unexpected(std::string("is missing or not reachable"));
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode))
      return tl::unexpected(std::string("is not a regular file"));
    const int flags = ::fcntl(fd->get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd->get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
      return tl::unexpected(std::string("cannot be read: ") + std::strerror(errno));
    return std::move(*fd);
  }

  Result<void> readLayout(const std::string& path, ImportSource& source) {
    sys::UniqueFd root(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root.valid())
      return tl::unexpected(rejected("image import: open " + path + ": " + std::strerror(errno)));
    auto index = openRegularBeneath(root.get(), "index.json");
    if (!index)
      return tl::unexpected(rejected("image import: " + path + "/index.json: " + index.error()));
    auto text = readDocument(index->get(), path + "/index.json");
    if (!text) return tl::unexpected(text.error());
    source.index_json = *text;
    source.layout_root = std::move(root);
    return {};
  }

  // A blob of a layout directory into the store, verified against its name
  // (a no-op for an archive, whose blobs are stored as they stream past).
  Result<void> copyLayoutBlob(const ImportSource& source, const std::string& digest) {
    if (!isDigest(digest))
      return tl::unexpected(rejected("image import: '" + digest + "' is not a digest"));
    if (hasBlob(digest) || !source.layout_root.valid()) return {};
    auto in = openRegularBeneath(source.layout_root.get(), "blobs/sha256/" + hexOf(digest));
    if (!in)
      return tl::unexpected(
          rejected("image import: " + source.path + ": the blob " + digest + ": " + in.error()));
    auto put = putStream(in->get(), digest, "blob " + digest);
    if (!put) return tl::unexpected(put.error());
    return {};
  }

  // A tar archive: an OCI layout inside one, or a docker save. Every
  // regular file that can be a blob is stored by its content as it streams
  // past; the small documents are kept.
  Result<void> readArchive(const std::string& path, ImportSource& source) {
    std::unique_ptr<struct archive, ArchiveFree> a(archive_read_new());
    if (!a) return tl::unexpected(storeError("archive_read_new failed"));
    archive_read_support_format_tar(a.get());
    archive_read_support_format_gnutar(a.get());
    archive_read_support_filter_gzip(a.get());
    archive_read_support_filter_zstd(a.get());
    if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
      return tl::unexpected(
          rejected("image import: " + path + ": " + archive_error_string(a.get())));
    archive_entry* entry = nullptr;
    for (;;) {
      int rc = archive_read_next_header(a.get(), &entry);
      if (rc == ARCHIVE_EOF) break;
      if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
        return tl::unexpected(rejected(
            "image import: " + path +
            (source.named_blobs.empty() && !source.index_json && !source.docker_manifest_json
                 ? " is not an OCI image layout directory, nor a tar archive of one or of docker "
                   "save ("
                 : " is a damaged archive (") +
            archive_error_string(a.get()) + ")"));
      const char* raw = archive_entry_pathname(entry);
      const std::string name = normalizedName(raw ? raw : "");
      const auto type = archive_entry_filetype(entry);
      if (type == AE_IFLNK) {
        const char* to = archive_entry_symlink(entry);
        source.links[name] = resolveLink(name, to ? to : "");
        continue;
      }
      if (type != AE_IFREG) continue;
      if (name == "index.json" || name == "manifest.json") {
        std::string text;
        char buf[8192];
        for (la_ssize_t n; (n = archive_read_data(a.get(), buf, sizeof buf)) > 0;) {
          text.append(buf, static_cast<std::size_t>(n));
          if (text.size() > kMaxDocumentBytes)
            return tl::unexpected(
                rejected("image import: " + name + " in " + path + " is too large"));
        }
        (name == "index.json" ? source.index_json : source.docker_manifest_json) = text;
        continue;
      }
      const bool oci_blob =
          name.rfind("blobs/sha256/", 0) == 0 && isDigest("sha256:" + name.substr(13));
      const bool docker_file =
          name.size() > 5 && (name.ends_with(".tar") || name.ends_with(".json"));
      if (!oci_blob && !docker_file) continue;
      auto put = putArchiveEntry(a.get(), oci_blob ? "sha256:" + name.substr(13) : "",
                                 "archive entry '" + name + "'");
      if (!put) return tl::unexpected(put.error());
      source.named_blobs[name] = *put;
    }
    return {};
  }

  // The current archive entry's data into the store, through a pipe-free
  // temporary file.
  Result<std::pair<std::string, std::int64_t>> putArchiveEntry(struct archive* a,
                                                               const std::string& expect,
                                                               const std::string& what) {
    auto blob = createTmpBlob(O_WRONLY);
    if (!blob) return tl::unexpected(blob.error());
    const std::string& tmp = blob->path;
    const sys::UniqueFd& fd = blob->fd;
    sys::Sha256 h;
    std::int64_t total = 0;
    std::vector<char> buf(1 << 16);
    Result<void> ok{};
    for (la_ssize_t n; (n = archive_read_data(a, buf.data(), buf.size())) != 0;) {
      if (n < 0) {
        ok = tl::unexpected(rejected(what + ": " + archive_error_string(a)));
        break;
      }
      total += n;
      if (total > options_.max_blob_bytes) {
        ok = tl::unexpected(rejected(what + " is larger than the store's blob cap"));
        break;
      }
      h.update(buf.data(), static_cast<std::size_t>(n));
      if (!sys::writeAll(fd.get(), buf.data(), static_cast<std::size_t>(n))) {
        ok = tl::unexpected(storeError("write " + tmp, errno));
        break;
      }
    }
    const std::string digest = "sha256:" + h.finishHex();
    if (ok && !expect.empty() && digest != expect)
      ok = tl::unexpected(rejected(what + ": its bytes do not have the digest its name says"));
    if (!ok) {
      (void)::unlink(tmp.c_str());
      return tl::unexpected(ok.error());
    }
    if (auto r = commitBlob(tmp, digest); !r) return tl::unexpected(r.error());
    return std::pair{digest, total};
  }

  // index.json of a layout: the image for this platform, or the only one.
  Result<StoredImage> importIndex(const std::string& index_json, const ImportSource& source,
                                  const std::string& ref_name) {
    const std::string& path = source.path;
    auto index = parseImageIndex(index_json);
    if (!index)
      return tl::unexpected(
          rejected("image import: " + path + ": index.json: " + index.error().message()));
    std::string names;  // the images' names, for the messages
    for (const auto& d : index->manifests)
      names += (names.empty() ? "" : ", ") + (refName(d).empty() ? "(no name)" : refName(d));
    if (!ref_name.empty()) {
      auto& m = index->manifests;
      m.erase(std::remove_if(m.begin(), m.end(),
                             [&](const Descriptor& d) { return refName(d) != ref_name; }),
              m.end());
      if (m.empty())
        return tl::unexpected(rejected("image import: " + path + " has no image named " + ref_name +
                                       " (it has " + names + ")"));
    }
    Descriptor chosen;
    if (index->manifests.size() == 1 && !index->manifests[0].platform) {
      chosen = index->manifests[0];
    } else {
      auto sel = selectPlatform(*index, options_.os, options_.architecture);
      if (!sel)
        return tl::unexpected(
            rejected("image import: " + path + ": " + sel.error().message() +
                     (ref_name.empty() && index->manifests.size() > 1
                          ? "; pick one by its name with --ref (one of " + names + ")"
                          : "")));
      chosen = *sel;
    }
    if (auto r = copyLayoutBlob(source, chosen.digest); !r) return tl::unexpected(r.error());
    auto bytes = readBlob(chosen.digest);
    if (!bytes)
      return tl::unexpected(rejected("image import: " + path + " lacks the blob " + chosen.digest));
    // A nested index (a multi-platform image in a layout): one level down.
    auto kind = classifyDocument(chosen.media_type, *bytes);
    if (kind && *kind == DocumentKind::kIndex) {
      auto inner = parseImageIndex(*bytes);
      if (!inner) return tl::unexpected(inner.error());
      auto sel = selectPlatform(*inner, options_.os, options_.architecture);
      if (!sel)
        return tl::unexpected(rejected("image import: " + path + ": " + sel.error().message()));
      const std::string ref = refName(chosen);
      chosen = *sel;
      chosen.annotations[kRefNameAnnotation] = ref;
      if (auto r = copyLayoutBlob(source, chosen.digest); !r) return tl::unexpected(r.error());
      bytes = readBlob(chosen.digest);
      if (!bytes) return tl::unexpected(bytes.error());
    }
    auto manifest = parseImageManifest(*bytes);
    if (!manifest) return tl::unexpected(manifest.error());
    if (auto r = checkSizes(*manifest); !r) return tl::unexpected(r.error());
    if (auto r = copyLayoutBlob(source, manifest->config.digest); !r)
      return tl::unexpected(r.error());
    for (const auto& l : manifest->layers)
      if (auto r = copyLayoutBlob(source, l.digest); !r) return tl::unexpected(r.error());
    std::vector<std::string> refs;
    if (auto ref = refName(chosen); !ref.empty()) refs.push_back(ref);
    return recordAndUnpack(chosen.digest, refs);
  }

  static std::string refName(const Descriptor& d) {
    auto it = d.annotations.find(kRefNameAnnotation);
    return it == d.annotations.end() ? "" : it->second;
  }

  // docker save's manifest.json: [{Config, RepoTags, Layers}]. The image
  // gets an OCI manifest written here over the blobs the archive held.
  Result<StoredImage> importDockerSave(const std::string& text, const ImportSource& source,
                                       const std::string& path) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_array() || j.size() != 1 || !j[0].is_object())
      return tl::unexpected(
          rejected("image import: " + path + ": manifest.json must list exactly one image"));
    auto blobNamed = [&](const json& v) -> Result<std::pair<std::string, std::int64_t>> {
      if (!v.is_string())
        return tl::unexpected(rejected("image import: manifest.json names a non-string"));
      std::string name = normalizedName(v.get<std::string>());
      for (int hops = 0; hops < 8 && source.links.count(name); ++hops) name = source.links.at(name);
      auto it = source.named_blobs.find(name);
      if (it == source.named_blobs.end())
        return tl::unexpected(
            rejected("image import: " + path + " lacks '" + name + "', which manifest.json names"));
      return it->second;
    };
    const json& entry = j[0];
    if (!entry.contains("Config") || !entry.contains("Layers") || !entry["Layers"].is_array())
      return tl::unexpected(
          rejected("image import: " + path + ": manifest.json lacks Config or Layers"));
    auto config = blobNamed(entry["Config"]);
    if (!config) return tl::unexpected(config.error());
    json manifest = {
        {"schemaVersion", 2},
        {"mediaType", kOciManifestType},
        {"config",
         {{"mediaType", kOciConfigType}, {"digest", config->first}, {"size", config->second}}},
        {"layers", json::array()}};
    for (const auto& l : entry["Layers"]) {
      auto layer = blobNamed(l);
      if (!layer) return tl::unexpected(layer.error());
      manifest["layers"].push_back(
          {{"mediaType", kOciLayerType}, {"digest", layer->first}, {"size", layer->second}});
    }
    const std::string bytes = manifest.dump();
    const std::string digest = "sha256:" + sys::sha256Hex(bytes);
    if (auto r = putBytes(digest, bytes); !r) return tl::unexpected(r.error());
    std::vector<std::string> refs;
    if (entry.contains("RepoTags") && entry["RepoTags"].is_array())
      for (const auto& t : entry["RepoTags"])
        if (t.is_string()) refs.push_back(t.get<std::string>());
    return recordAndUnpack(digest, refs);
  }

  // The record of the image whose manifest blob is stored under `digest`
  // (its config and layers stored too), naming `refs`; a reference that
  // named another image moves here. Then the root is unpacked.
  Result<StoredImage> recordAndUnpack(const std::string& digest,
                                      const std::vector<std::string>& refs) {
    if (std::find(refs.begin(), refs.end(), kReservedName) != refs.end())
      return tl::unexpected(rejected(
          "image " + digest + " is named '" + kReservedName +
          "', the name of the host image (this host's /usr): give it another name (for a layout, "
          "skopeo copy oci:DIR:host oci:DIR:NAME)"));
    auto bytes = readBlob(digest);
    if (!bytes) return tl::unexpected(bytes.error());
    auto manifest = parseImageManifest(*bytes);
    if (!manifest) return tl::unexpected(manifest.error());
    StoredImage image;
    image.digest = digest;
    image.config_digest = manifest->config.digest;
    image.size_bytes = manifest->config.size;
    for (const auto& l : manifest->layers) {
      image.layer_digests.push_back(l.digest);
      image.size_bytes += l.size;
    }
    for (const auto& d : image.layer_digests)
      if (!hasBlob(d))
        return tl::unexpected(storeError("layer " + d + " of " + digest + " is missing"));
    auto config_bytes = readBlob(image.config_digest);
    if (!config_bytes) return tl::unexpected(storeError("the config of " + digest + " is missing"));
    auto config = parseImageConfig(*config_bytes);
    if (!config) return tl::unexpected(config.error());
    if (config->os != options_.os ||
        (!config->architecture.empty() && config->architecture != options_.architecture))
      return tl::unexpected(rejected(
          "image " + digest + " is for " + (config->os.empty() ? "no os" : config->os) + "/" +
          config->architecture + ", not " + options_.os + "/" + options_.architecture));
    std::vector<Descriptor> declared = manifest->layers;
    declared.push_back(manifest->config);
    for (const auto& d : declared) {
      struct stat st {};
      if (::stat(blobPath(d.digest).c_str(), &st) != 0 || st.st_size != d.size)
        return tl::unexpected(rejected("image " + digest + ": blob " + d.digest + " is " +
                                       std::to_string(st.st_size) + " bytes, its manifest says " +
                                       std::to_string(d.size)));
    }
    image.config = *config;
    // The root first: an image whose layers are refused records nothing and
    // moves no reference. The hold keeps the root from collection until
    // the record names it.
    auto root = holdRootOf(image);
    if (!root) return tl::unexpected(root.error());
    // A reference never names another image's digest: a bare digest, or a
    // name@digest of another digest, is not recorded.
    std::vector<std::string> kept;
    for (const auto& ref : refs) {
      if (ref.empty() || isDigest(ref) || std::any_of(ref.begin(), ref.end(), [](char c) {
            return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
          }))
        continue;
      if (const auto at = ref.rfind('@'); at != std::string::npos && ref.substr(at + 1) != digest)
        continue;
      kept.push_back(ref);
    }
    {
      auto lock = lockFile(dir_ + "/lock", LOCK_EX);
      if (!lock) return tl::unexpected(lock.error());
      for (auto& other : list()) {
        auto& r = other.references;
        const auto before = r.size();
        r.erase(std::remove_if(r.begin(), r.end(),
                               [&](const std::string& x) {
                                 return other.digest != digest &&
                                        std::find(kept.begin(), kept.end(), x) != kept.end();
                               }),
                r.end());
        if (other.digest == digest) image.references = other.references;
        if (r.size() != before)
          if (auto w = writeRecord(other); !w) return tl::unexpected(w.error());
      }
      for (const auto& ref : kept)
        if (std::find(image.references.begin(), image.references.end(), ref) ==
            image.references.end())
          image.references.push_back(ref);
      if (auto w = writeRecord(image); !w) return tl::unexpected(w.error());
    }
    return image;
  }

  Result<void> writeRecord(const StoredImage& image) {
    auto tmp_path = tmpPath("record");
    if (!tmp_path) return tl::unexpected(tmp_path.error());
    const std::string& tmp = *tmp_path;
    const std::string text = recordJson(image).dump(2) + "\n";
    sys::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.valid()) return tl::unexpected(storeError("create " + tmp, errno));
    if (!sys::writeAll(fd.get(), text.data(), text.size()) ||
        ::rename(tmp.c_str(), recordPath(image.digest).c_str()) != 0) {
      const int err = errno;
      (void)::unlink(tmp.c_str());
      return tl::unexpected(storeError("write the record of " + image.digest, err));
    }
    return {};
  }

  // Unpacks the image's layers in order into a fresh directory under tmp/
  // and renames it to `root`; on any failure the partial tree goes.
  Result<void> unpack(const StoredImage& image, const std::string& root) {
    auto tmp_path = tmpPath("root");
    if (!tmp_path) return tl::unexpected(tmp_path.error());
    const std::string& tmp = *tmp_path;
    if (::mkdir(tmp.c_str(), 0755) != 0) return tl::unexpected(storeError("make " + tmp, errno));
    // mkdir's mode is masked by the umask; the root's top is 0755 whatever it is.
    (void)::chmod(tmp.c_str(), 0755);
    auto cleanup = [&] {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    };
    sys::UniqueFd dir(::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!dir.valid()) {
      cleanup();
      return tl::unexpected(storeError("open " + tmp, errno));
    }
    UnpackTally tally;
    for (std::size_t i = 0; i < image.layer_digests.size(); ++i) {
      const auto& layer = image.layer_digests[i];
      sys::UniqueFd in(::open(blobPath(layer).c_str(), O_RDONLY | O_CLOEXEC));
      if (!in.valid()) {
        const int err = errno;
        cleanup();
        return tl::unexpected(storeError("open layer " + layer, err));
      }
      auto applied = applyLayer(dir.get(), in.get(), options_.unpack_limits, tally);
      if (!applied) {
        cleanup();
        Error e = applied.error();
        e.context = "image " + image.digest + ", layer " + std::to_string(i + 1) + " (" + layer +
                    "): " + e.context;
        return tl::unexpected(e);
      }
    }
    if (::rename(tmp.c_str(), root.c_str()) != 0) {
      const int err = errno;
      cleanup();
      return tl::unexpected(storeError("store the root of " + image.digest, err));
    }
    return {};
  }

  // One download in flight; its fields are guarded by the store's mu_.
  struct Inflight {
    CondVar cv;
    bool done = false;
    Result<void> result{};
  };

  const std::string dir_;
  const ImageStoreOptions options_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<Inflight>> inflight_ GUARDED_BY(mu_);
};

}  // namespace

Result<std::unique_ptr<ImageStore>> ImageStore::open(std::string dir, ImageStoreOptions options) {
  if (dir.empty() || dir.front() != '/')
    return tl::unexpected(storeError("the store's directory '" + dir + "' must be absolute"));
  auto store = std::make_unique<ImageStoreImpl>(std::move(dir), std::move(options));
  if (auto r = store->init(); !r) return tl::unexpected(r.error());
  return std::unique_ptr<ImageStore>(std::move(store));
}

}  // namespace airlock::images
