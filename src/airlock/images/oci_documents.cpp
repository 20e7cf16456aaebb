#include "airlock/images/oci_documents.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>

#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/images/image_reference.h"

namespace airlock::images {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxMediaTypeBytes = 255;
constexpr std::size_t kMaxPlatformFieldBytes = 128;
// execve's limit on one argument or environment string (MAX_ARG_STRLEN).
constexpr std::size_t kMaxEnvEntryBytes = 128 * 1024;
constexpr std::size_t kMaxConfigStringBytes = 4096;

constexpr std::string_view kSchema1Hint =
    "Docker schema 1 manifests are not supported (a format deprecated since 2017; push the image "
    "again with a current client)";

std::string inQuotes(std::string_view text) {
  std::string q = quoteForMessage(text, 100);
  if (q.size() >= 2) q = q.substr(1, q.size() - 2);
  return "'" + q + "'";
}

tl::unexpected<Error> refuse(std::string_view what, const std::string& problem) {
  return fail(ErrorCode::kExecutionRejected, std::string(what) + ": " + problem);
}

bool isSchema1Type(std::string_view t) {
  return t == "application/vnd.docker.distribution.manifest.v1+json" ||
         t == "application/vnd.docker.distribution.manifest.v1+prettyjws";
}
bool isIndexType(std::string_view t) {
  return t == kOciIndexType || t == kDockerManifestListType;
}
bool isManifestType(std::string_view t) {
  return t == kOciManifestType || t == kDockerManifestType;
}
bool isGenericType(std::string_view t) {
  return t.empty() || t == "application/json" || t == "text/plain" ||
         t == "application/octet-stream";
}

// Refuses nesting deeper than kMaxJsonDepth by scanning the bytes (strings
// skipped), so that no parser recursion or allocation sees a deep document.
bool tooDeep(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

Result<json> parseObject(std::string_view what, std::string_view text) {
  if (text.size() > kMaxDocumentBytes)
    return refuse(what, "is " + std::to_string(text.size()) + " bytes, more than the limit of " +
                            std::to_string(kMaxDocumentBytes));
  if (tooDeep(text))
    return refuse(what,
                  "nests arrays or objects more than " + std::to_string(kMaxJsonDepth) + " deep");
  auto parsed = parseUntrustedJson(text);
  if (!parsed) return refuse(what, "is not valid JSON: " + parsed.error().context);
  if (!parsed->is_object()) return refuse(what, "is not a JSON object");
  return std::move(*parsed);
}

// An optional string member: nullopt when absent or null.
Result<std::optional<std::string>> optionalString(std::string_view what, const json& obj,
                                                  const char* key, const std::string& path,
                                                  std::size_t max_bytes) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return refuse(what, path + " is not a string");
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max_bytes)
    return refuse(what, path + " is longer than " + std::to_string(max_bytes) + " bytes");
  if (s.find('\0') != std::string::npos) return refuse(what, path + " contains a NUL byte");
  return std::optional<std::string>(s);
}

Result<std::string> requiredString(std::string_view what, const json& obj, const char* key,
                                   const std::string& path, std::size_t max_bytes) {
  auto s = optionalString(what, obj, key, path, max_bytes);
  if (!s) return tl::unexpected(s.error());
  if (!*s) return refuse(what, path + " is missing");
  return std::move(**s);
}

// "schemaVersion": must be 2; 1 is Docker schema 1.
Result<void> checkSchemaVersion(std::string_view what, const json& doc) {
  const auto it = doc.find("schemaVersion");
  if (it == doc.end()) return refuse(what, "schemaVersion is missing");
  if (!it->is_number_integer()) return refuse(what, "schemaVersion is not an integer");
  if (*it == 1) return refuse(what, std::string(kSchema1Hint));
  if (*it != 2) return refuse(what, "schemaVersion is " + it->dump() + ", not 2");
  return {};
}

Result<Platform> parsePlatform(std::string_view what, const json& j, const std::string& path) {
  if (!j.is_object()) return refuse(what, path + " is not an object");
  Platform p;
  auto os = requiredString(what, j, "os", path + ".os", kMaxPlatformFieldBytes);
  if (!os) return tl::unexpected(os.error());
  auto arch =
      requiredString(what, j, "architecture", path + ".architecture", kMaxPlatformFieldBytes);
  if (!arch) return tl::unexpected(arch.error());
  auto variant = optionalString(what, j, "variant", path + ".variant", kMaxPlatformFieldBytes);
  if (!variant) return tl::unexpected(variant.error());
  p.os = std::move(*os);
  p.architecture = std::move(*arch);
  if (*variant) p.variant = std::move(**variant);
  return p;
}

// OCI "Descriptors": mediaType, digest and size are required.
Result<Descriptor> parseDescriptor(std::string_view what, const json& j, const std::string& path,
                                   bool with_platform) {
  if (!j.is_object()) return refuse(what, path + " is not an object");
  Descriptor d;
  auto media = requiredString(what, j, "mediaType", path + ".mediaType", kMaxMediaTypeBytes);
  if (!media) return tl::unexpected(media.error());
  d.media_type = std::move(*media);
  auto digest = requiredString(what, j, "digest", path + ".digest", 1024);
  if (!digest) return tl::unexpected(digest.error());
  if (!isDigest(*digest))
    return refuse(what, path + ".digest " + inQuotes(*digest) +
                            " is not sha256: and 64 lowercase hex digits");
  d.digest = std::move(*digest);
  const auto size = j.find("size");
  if (size == j.end()) return refuse(what, path + ".size is missing");
  auto n = int64FromJson(*size);
  if (!n) return refuse(what, path + ".size " + n.error().context);
  if (*n < 0) return refuse(what, path + ".size is negative");
  d.size = *n;
  if (with_platform) {
    const auto p = j.find("platform");
    if (p != j.end() && !p->is_null()) {
      auto platform = parsePlatform(what, *p, path + ".platform");
      if (!platform) return tl::unexpected(platform.error());
      d.platform = std::move(*platform);
    }
    // OCI "Annotations": string to string; only the ones this code reads
    // are kept, so an index cannot make the store hold more than a name.
    const auto a = j.find("annotations");
    if (a != j.end() && !a->is_null()) {
      if (!a->is_object()) return refuse(what, path + ".annotations is not an object");
      const auto ref = a->find(kRefNameAnnotation);
      if (ref != a->end()) {
        if (!ref->is_string() || ref->get_ref<const std::string&>().size() > kMaxRefNameBytes)
          return refuse(what, path + ".annotations." + kRefNameAnnotation +
                                  " is not a string of at most " +
                                  std::to_string(kMaxRefNameBytes) + " bytes");
        d.annotations[kRefNameAnnotation] = ref->get<std::string>();
      }
    }
  }
  return d;
}

// The document's own "mediaType", "" when absent.
Result<std::string> documentMediaType(std::string_view what, const json& doc) {
  auto t = optionalString(what, doc, "mediaType", "mediaType", kMaxMediaTypeBytes);
  if (!t) return tl::unexpected(t.error());
  return t->value_or("");
}

// Whether `doc` has any of the members only an image index has
// ("manifests"), or any of those only an image manifest has ("config",
// "layers"), whatever their values.
bool hasIndexMembers(const json& doc) {
  return doc.contains("manifests");
}
bool hasManifestMembers(const json& doc) {
  return doc.contains("config") || doc.contains("layers");
}

constexpr std::string_view kBothKindsHint =
    "a document that reads as both an image index and an image manifest could name two images by "
    "one digest (CVE-2021-41190)";

// Refuses a document of kind `own` (by its mediaType, or as the caller
// takes it) that has a member of the other kind.
Result<void> checkMembers(std::string_view what, const json& doc, DocumentKind own) {
  if (own == DocumentKind::kIndex && hasManifestMembers(doc))
    return refuse(what, "has config or layers, which only an image manifest has: " +
                            std::string(kBothKindsHint));
  if (own == DocumentKind::kManifest && hasIndexMembers(doc))
    return refuse(what,
                  "has manifests, which only an image index has: " + std::string(kBothKindsHint));
  return {};
}

// The kind of a document by its own bytes (never by a Content-Type): its
// "mediaType" when it has one, which its members must not contradict; else
// its members, which must be those of one kind only.
Result<DocumentKind> kindOfBytes(std::string_view what, const json& doc) {
  auto t = documentMediaType(what, doc);
  if (!t) return tl::unexpected(t.error());
  const bool index_members = hasIndexMembers(doc);
  const bool manifest_members = hasManifestMembers(doc);
  if (t->empty()) {
    if (index_members && manifest_members)
      return refuse(what,
                    "has no mediaType and has both manifests (an image index's member) and config "
                    "or layers (an image manifest's): " +
                        std::string(kBothKindsHint));
    if (index_members) return DocumentKind::kIndex;
    if (manifest_members) return DocumentKind::kManifest;
    return refuse(what,
                  "has no media type and is shaped like neither an image index nor a manifest");
  }
  if (isSchema1Type(*t)) return refuse(what, std::string(kSchema1Hint));
  if (isIndexType(*t) && manifest_members)
    return refuse(what, "says mediaType " + inQuotes(*t) +
                            " (an image index) but has config or layers, members of an image "
                            "manifest: " +
                            std::string(kBothKindsHint));
  if (isManifestType(*t) && index_members)
    return refuse(what, "says mediaType " + inQuotes(*t) +
                            " (an image manifest) but has manifests, the member of an image "
                            "index: " +
                            std::string(kBothKindsHint));
  if (isIndexType(*t)) return DocumentKind::kIndex;
  if (isManifestType(*t)) return DocumentKind::kManifest;
  return refuse(what,
                "mediaType " + inQuotes(*t) + " is not an image index or image manifest type");
}

// An index or a manifest, as its "mediaType" may say, in messages.
struct KindWords {
  DocumentKind kind;
  bool (*is)(std::string_view media_type);
  const char* name;        // "an image index"
  const char* short_name;  // "an index"
  const char* type_name;   // "an image index type"
};
constexpr KindWords kIndexWords{DocumentKind::kIndex, isIndexType, "an image index", "an index",
                                "an image index type"};
constexpr KindWords kManifestWords{DocumentKind::kManifest, isManifestType, "an image manifest",
                                   "a manifest", "an image manifest type"};

// What an index and a manifest check first: a "mediaType" that is absent or
// of `own` kind (schema 1 and the `other` kind named as such), and
// schemaVersion 2.
Result<void> checkDocumentKind(std::string_view what, const json& doc, const KindWords& own,
                               const KindWords& other) {
  auto t = documentMediaType(what, doc);
  if (!t) return tl::unexpected(t.error());
  if (isSchema1Type(*t)) return refuse(what, std::string(kSchema1Hint));
  if (other.is(*t))
    return refuse(what, std::string("is ") + other.name + " (" + *t + "), not " + own.short_name);
  if (!t->empty() && !own.is(*t))
    return refuse(what, "mediaType " + inQuotes(*t) + " is not " + own.type_name);
  if (auto m = checkMembers(what, doc, own.kind); !m) return m;
  return checkSchemaVersion(what, doc);
}

// The required array `key` of `doc`, of at most `max_entries` entries.
Result<const json*> requiredArray(std::string_view what, const json& doc, const char* key,
                                  std::size_t max_entries) {
  const auto a = doc.find(key);
  if (a == doc.end()) return refuse(what, std::string(key) + " is missing");
  if (!a->is_array()) return refuse(what, std::string(key) + " is not an array");
  if (a->size() > max_entries)
    return refuse(what, "has " + std::to_string(a->size()) + " " + key +
                            ", more than the limit of " + std::to_string(max_entries));
  return &*a;
}

Result<ImageIndex> indexFrom(const json& doc) {
  constexpr std::string_view what = "image index";
  if (auto k = checkDocumentKind(what, doc, kIndexWords, kManifestWords); !k)
    return tl::unexpected(k.error());
  auto manifests = requiredArray(what, doc, "manifests", kMaxIndexEntries);
  if (!manifests) return tl::unexpected(manifests.error());
  const json* m = *manifests;
  ImageIndex index;
  index.manifests.reserve(m->size());
  for (std::size_t i = 0; i < m->size(); ++i) {
    auto d = parseDescriptor(what, (*m)[i], "manifests[" + std::to_string(i) + "]", true);
    if (!d) return tl::unexpected(d.error());
    index.manifests.push_back(std::move(*d));
  }
  return index;
}

Result<void> checkLayerType(std::string_view what, const Descriptor& d, const std::string& path) {
  const std::string_view t = d.media_type;
  if (t == kOciLayerTarType || t == kOciLayerGzipType || t == kOciLayerZstdType ||
      t == kDockerLayerGzipType)
    return {};
  if (t == "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" ||
      t.starts_with("application/vnd.oci.image.layer.nondistributable."))
    return refuse(what, path + " is a foreign (non-distributable) layer (" + std::string(t) +
                            "), which is fetched from outside the registry; such images (Windows "
                            "base layers) are not supported");
  return refuse(what, path + " has media type " + inQuotes(t) +
                          ", not a container image layer (tar, tar+gzip or tar+zstd)");
}

Result<ImageManifest> manifestFrom(const json& doc) {
  constexpr std::string_view what = "image manifest";
  if (auto k = checkDocumentKind(what, doc, kManifestWords, kIndexWords); !k)
    return tl::unexpected(k.error());
  ImageManifest manifest;
  const auto c = doc.find("config");
  if (c == doc.end()) return refuse(what, "config is missing");
  auto config = parseDescriptor(what, *c, "config", false);
  if (!config) return tl::unexpected(config.error());
  if (config->media_type != kOciConfigType && config->media_type != kDockerConfigType)
    return refuse(what, "config has media type " + inQuotes(config->media_type) +
                            ", not an image config: the artifact is not a container image");
  if (config->size > static_cast<std::int64_t>(kMaxDocumentBytes))
    return refuse(what, "config is " + std::to_string(config->size) +
                            " bytes, more than the limit of " + std::to_string(kMaxDocumentBytes));
  manifest.config = std::move(*config);
  auto layers = requiredArray(what, doc, "layers", kMaxLayers);
  if (!layers) return tl::unexpected(layers.error());
  const json* l = *layers;
  manifest.layers.reserve(l->size());
  for (std::size_t i = 0; i < l->size(); ++i) {
    const std::string path = "layers[" + std::to_string(i) + "]";
    auto d = parseDescriptor(what, (*l)[i], path, false);
    if (!d) return tl::unexpected(d.error());
    if (auto ok = checkLayerType(what, *d, path); !ok) return tl::unexpected(ok.error());
    manifest.layers.push_back(std::move(*d));
  }
  return manifest;
}

// The optional array `key` of `obj` (`path` in messages): its strings, at
// most `max_entries`, in order, each accepted by `check` (nullopt) or
// refused with the problem it names ("<path>[i] <problem>"). Absent or
// null: none.
Result<std::vector<std::string>> optionalStringArray(
    std::string_view what, const json& obj, const char* key, const std::string& path,
    std::size_t max_entries,
    const std::function<std::optional<std::string>(const std::string&)>& check) {
  std::vector<std::string> out;
  const auto a = obj.find(key);
  if (a == obj.end() || a->is_null()) return out;
  if (!a->is_array()) return refuse(what, path + " is not an array");
  if (a->size() > max_entries)
    return refuse(what, path + " has more than " + std::to_string(max_entries) + " entries");
  for (std::size_t i = 0; i < a->size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    const json& e = (*a)[i];
    if (!e.is_string()) return refuse(what, item + " is not a string");
    const auto& s = e.get_ref<const std::string&>();
    if (auto problem = check(s)) return refuse(what, item + " " + *problem);
    out.push_back(s);
  }
  return out;
}

// "NAME=value" entries with a name given twice reduced to its last one
// (where it stands), as a later assignment replaces an earlier one.
std::vector<std::string> lastOfEachName(std::vector<std::string> env) {
  std::vector<std::string> out;
  std::set<std::string_view> seen;
  for (auto it = env.rbegin(); it != env.rend(); ++it)
    if (seen.insert(std::string_view(*it).substr(0, it->find('='))).second) out.push_back(*it);
  std::reverse(out.begin(), out.end());
  return out;
}

Result<ImageConfig> configFrom(const json& doc) {
  constexpr std::string_view what = "image config";
  ImageConfig out;
  auto os = requiredString(what, doc, "os", "os", kMaxPlatformFieldBytes);
  if (!os) return tl::unexpected(os.error());
  auto arch = requiredString(what, doc, "architecture", "architecture", kMaxPlatformFieldBytes);
  if (!arch) return tl::unexpected(arch.error());
  out.os = std::move(*os);
  out.architecture = std::move(*arch);

  const auto c = doc.find("config");
  if (c != doc.end() && !c->is_null()) {
    if (!c->is_object()) return refuse(what, "config is not an object");
    auto env = optionalStringArray(what, *c, "Env", "config.Env", kMaxEnvEntries,
                                   [](const std::string& s) -> std::optional<std::string> {
                                     if (s.size() > kMaxEnvEntryBytes)
                                       return "is longer than " +
                                              std::to_string(kMaxEnvEntryBytes) + " bytes";
                                     if (s.find('\0') != std::string::npos)
                                       return "contains a NUL byte";
                                     const std::size_t eq = s.find('=');
                                     if (eq == std::string::npos || eq == 0)
                                       return inQuotes(s) + " is not NAME=value";
                                     return std::nullopt;
                                   });
    if (!env) return tl::unexpected(env.error());
    out.env = lastOfEachName(std::move(*env));
    auto user = optionalString(what, *c, "User", "config.User", kMaxConfigStringBytes);
    if (!user) return tl::unexpected(user.error());
    if (*user) out.user = std::move(**user);
    auto wd = optionalString(what, *c, "WorkingDir", "config.WorkingDir", kMaxConfigStringBytes);
    if (!wd) return tl::unexpected(wd.error());
    if (*wd) out.working_dir = std::move(**wd);
  }

  const auto r = doc.find("rootfs");
  if (r != doc.end() && !r->is_null()) {
    if (!r->is_object()) return refuse(what, "rootfs is not an object");
    auto ids =
        optionalStringArray(what, *r, "diff_ids", "rootfs.diff_ids", kMaxLayers,
                            [](const std::string& s) -> std::optional<std::string> {
                              if (isDigest(s)) return std::nullopt;
                              return inQuotes(s) + " is not sha256: and 64 lowercase hex digits";
                            });
    if (!ids) return tl::unexpected(ids.error());
    out.diff_ids = std::move(*ids);
  }
  return out;
}

// Runs a parse step with the module's promise: nothing escapes as an
// exception (nlohmann's accessors and allocation can throw).
template <class T, class F>
Result<T> guarded(std::string_view what, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return refuse(what, "out of memory while parsing");
  } catch (const std::exception& e) {
    return refuse(what, std::string("could not be parsed: ") + e.what());
  }
}

}  // namespace

std::string mediaTypeOf(std::string_view content_type) {
  const std::size_t semi = content_type.find(';');
  std::string_view t = content_type.substr(0, semi);
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  std::string out(t);
  for (char& ch : out)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  return out;
}

std::string toString(const Platform& platform) {
  std::string out = platform.os + "/" + platform.architecture;
  if (!platform.variant.empty()) out += "/" + platform.variant;
  return out;
}

Result<DocumentKind> classifyDocument(std::string_view media_type, std::string_view json_text) {
  constexpr std::string_view what = "registry document";
  return guarded<DocumentKind>(what, [&]() -> Result<DocumentKind> {
    const std::string header = mediaTypeOf(media_type);
    std::optional<DocumentKind> header_kind;
    if (isIndexType(header)) {
      header_kind = DocumentKind::kIndex;
    } else if (isManifestType(header)) {
      header_kind = DocumentKind::kManifest;
    } else if (isSchema1Type(header)) {
      return refuse(what, std::string(kSchema1Hint));
    } else if (!isGenericType(header)) {
      return refuse(
          what, "media type " + inQuotes(header) + " is not an image index or image manifest type");
    }
    auto doc = parseObject(what, json_text);
    if (!doc) return tl::unexpected(doc.error());
    const auto version = doc->find("schemaVersion");
    if (version != doc->end() && *version == 1) return refuse(what, std::string(kSchema1Hint));
    // The kind is the bytes' own; the Content-Type only has to agree.
    auto kind = kindOfBytes(what, *doc);
    if (!kind) return kind;
    if (header_kind && *header_kind != *kind)
      return refuse(what,
                    "the registry's Content-Type " + inQuotes(header) + " and the document (" +
                        (*kind == DocumentKind::kIndex ? "an image index" : "an image manifest") +
                        " by its own bytes) disagree");
    return *kind;
  });
}

Result<ImageIndex> parseImageIndex(std::string_view json_text) {
  return guarded<ImageIndex>("image index", [&]() -> Result<ImageIndex> {
    auto doc = parseObject("image index", json_text);
    if (!doc) return tl::unexpected(doc.error());
    return indexFrom(*doc);
  });
}

Result<ImageManifest> parseImageManifest(std::string_view json_text) {
  return guarded<ImageManifest>("image manifest", [&]() -> Result<ImageManifest> {
    auto doc = parseObject("image manifest", json_text);
    if (!doc) return tl::unexpected(doc.error());
    return manifestFrom(*doc);
  });
}

Result<ImageConfig> parseImageConfig(std::string_view json_text) {
  return guarded<ImageConfig>("image config", [&]() -> Result<ImageConfig> {
    auto doc = parseObject("image config", json_text);
    if (!doc) return tl::unexpected(doc.error());
    return configFrom(*doc);
  });
}

Result<Descriptor> selectPlatform(const ImageIndex& index, std::string_view os,
                                  std::string_view arch) {
  return guarded<Descriptor>("image index", [&]() -> Result<Descriptor> {
    const Descriptor* with_variant = nullptr;
    for (const auto& d : index.manifests) {
      if (!isManifestType(d.media_type) || !d.platform) continue;
      if (d.platform->os != os || d.platform->architecture != arch) continue;
      if (d.platform->variant.empty()) return d;
      if (with_variant == nullptr) with_variant = &d;
    }
    if (with_variant != nullptr) return *with_variant;
    std::string there;
    for (const auto& d : index.manifests) {
      if (!there.empty()) there += ", ";
      if (d.platform) {
        there += quoteForMessage(toString(*d.platform), 64);
      } else {
        there += "(no platform)";
      }
      if (!isManifestType(d.media_type)) there += " (" + quoteForMessage(d.media_type, 64) + ")";
      if (there.size() > 2000) {
        there += ", ...";
        break;
      }
    }
    if (there.empty()) there = "no entries at all";
    return refuse("image index", "has no " + std::string(os) + "/" + std::string(arch) +
                                     " image; it has " + there);
  });
}

}  // namespace airlock::images
