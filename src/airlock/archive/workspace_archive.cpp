#include "airlock/archive/workspace_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"

namespace airlock::archive {

namespace {

// Untrusted names are escaped (newlines, invalid UTF-8) inside messages.
std::string quoted(std::string_view path) {
  return quoteForMessage(path, 512);
}

// One member is read into memory whole, because WorkspaceHandle::write
// takes the file's bytes at once; this cap bounds that memory. Streaming
// writes through the handle are future work.
constexpr std::int64_t kMaxArchiveMemberBytes = std::int64_t{64} << 20;
constexpr std::int64_t kMaxArchiveMembers = 1'000'000;

struct ArchiveFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveFree>;

std::string archiveError(struct archive* a) {
  const char* text = archive_error_string(a);
  return text != nullptr ? quoteForMessage(text, 256) : std::string("unknown libarchive error");
}

// Reads the archive from its start (an fd is rewound). Only the tar and
// zip formats are enabled (with every decompression filter libarchive has).
Result<ArchivePtr> openArchive(const ArchiveInput& in, const std::string& ctx) {
  if (in.fd >= 0 && ::lseek(in.fd, 0, SEEK_SET) != 0) {
    return failErrno(ErrorCode::kToolValidationError, ctx + ": rewind " + in.what, errno);
  }
  ArchivePtr a(archive_read_new());
  if (!a) return fail(ErrorCode::kExecutionUnavailable, ctx + ": archive_read_new failed");
  archive_read_support_format_tar(a.get());
  archive_read_support_format_zip(a.get());
  // Only filters libarchive implements itself: filter_all would also run
  // external programs (lrzip, lzop, grzip) when a build lacks them.
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_bzip2(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_filter_lz4(a.get());
  const int opened = in.fd >= 0
                         ? archive_read_open_fd(a.get(), in.fd, 64 * 1024)
                         : archive_read_open_memory(a.get(), in.bytes.data(), in.bytes.size());
  if (opened != ARCHIVE_OK) {
    return fail(ErrorCode::kToolValidationError, ctx + ": " + in.what +
                                                     " is not a readable tar or zip archive (" +
                                                     archiveError(a.get()) + ")");
  }
  return a;
}

enum class MemberKind { kFile, kDirectory, kRoot };

struct CheckedMember {
  std::string name;  // workspace-relative, checked
  MemberKind kind = MemberKind::kFile;
};

// The member's workspace path, or ToolValidationError naming it as the
// archive spells it.
Result<CheckedMember> checkMember(struct archive_entry* entry, const std::string& ctx) {
  const char* raw_name = archive_entry_pathname(entry);
  if (raw_name == nullptr) raw_name = archive_entry_pathname_utf8(entry);
  if (raw_name == nullptr) {
    return fail(ErrorCode::kToolValidationError, ctx + ": an archive member has no readable name");
  }
  const std::string spelled = raw_name;
  auto refuse = [&](const std::string& why) {
    return fail(ErrorCode::kToolValidationError,
                ctx + ": archive member " + quoted(spelled) + " " + why);
  };
  if (archive_entry_hardlink(entry) != nullptr) {
    return refuse("is a hard link; only regular files and directories are copied");
  }
  const auto type = archive_entry_filetype(entry);
  CheckedMember out;
  switch (type) {
    case AE_IFREG:
      out.kind = MemberKind::kFile;
      break;
    case AE_IFDIR:
      out.kind = MemberKind::kDirectory;
      break;
    case AE_IFLNK:
      return refuse("is a symlink; only regular files and directories are copied");
    case AE_IFCHR:
    case AE_IFBLK:
      return refuse("is a device; only regular files and directories are copied");
    case AE_IFIFO:
      return refuse("is a FIFO; only regular files and directories are copied");
    case AE_IFSOCK:
      return refuse("is a socket; only regular files and directories are copied");
    default:
      return refuse("is not a regular file or directory");
  }
  if (!spelled.empty() && spelled.front() == '/') {
    return refuse("leaves the workspace (absolute path)");
  }
  // Exactly one leading "./" and one trailing "/" are removed; nothing else
  // is normalized: whatever checkRelativePath refuses is refused.
  std::string name = spelled;
  if (name.rfind("./", 0) == 0) name.erase(0, 2);
  if (!name.empty() && name.back() == '/') name.pop_back();
  if (name.empty()) {
    if (out.kind == MemberKind::kDirectory && !spelled.empty()) {
      out.kind = MemberKind::kRoot;  // "./": the workspace itself, nothing to create
      return out;
    }
    return refuse("has an empty name");
  }
  auto rel = checkRelativePath(name);
  if (!rel) return refuse("leaves the workspace (" + rel.error().context + ")");
  if (rel->empty()) return refuse("has an empty name");
  out.name = std::move(*rel);
  if (out.kind == MemberKind::kFile && archive_entry_size_is_set(entry) &&
      archive_entry_size(entry) > kMaxArchiveMemberBytes) {
    return refuse("is larger than the 64 MiB per-member limit");
  }
  return out;
}

// Reads the current member's data, at most kMaxArchiveMemberBytes.
Result<std::string> readMember(struct archive* a, const std::string& spelled,
                               const std::string& ctx) {
  std::string data;
  char buf[64 * 1024];
  for (;;) {
    la_ssize_t n = archive_read_data(a, buf, sizeof buf);
    if (n == 0) return data;
    if (n < 0) {
      return fail(ErrorCode::kToolValidationError, ctx + ": archive member " + quoted(spelled) +
                                                       " cannot be read (" + archiveError(a) + ")");
    }
    if (static_cast<std::int64_t>(data.size()) + n > kMaxArchiveMemberBytes) {
      return fail(ErrorCode::kToolValidationError,
                  ctx + ": archive member " + quoted(spelled) +
                      " is larger than the 64 MiB per-member limit");
    }
    data.append(buf, static_cast<std::size_t>(n));
  }
}

// One pass over the archive: the check pass validates every member (and
// that no member lies below one that is a file); the copy pass validates
// again (the file can change between passes) and extracts.
Result<void> archivePass(const ArchiveInput& in, const ExtractOptions& options,
                         WorkspaceHandle* workspace) {
  const std::string& ctx = options.context;
  auto a = openArchive(in, ctx);
  if (!a) return tl::unexpected(a.error());
  std::map<std::string, MemberKind> seen;
  std::int64_t count = 0;
  for (;;) {
    struct archive_entry* entry = nullptr;
    int rc = archive_read_next_header(a->get(), &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc == ARCHIVE_FATAL || (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)) {
      return fail(ErrorCode::kToolValidationError, ctx + ": " + in.what +
                                                       " is not a readable tar or zip archive (" +
                                                       archiveError(a->get()) + ")");
    }
    if (++count > kMaxArchiveMembers) {
      return fail(ErrorCode::kToolValidationError,
                  ctx + ": " + in.what + " has more than 1000000 members");
    }
    auto member = checkMember(entry, ctx);
    if (!member) return tl::unexpected(member.error());
    if (member->kind == MemberKind::kRoot) continue;
    if (!options.into.empty()) member->name = options.into + "/" + member->name;
    const char* raw_name = archive_entry_pathname(entry);
    if (raw_name == nullptr) raw_name = archive_entry_pathname_utf8(entry);
    const std::string spelled = raw_name != nullptr ? raw_name : "";
    if (workspace == nullptr) {
      // Every ancestor must be (implicitly) a directory, and a name must
      // not be both a file and a directory.
      for (std::size_t slash = member->name.find('/'); slash != std::string::npos;
           slash = member->name.find('/', slash + 1)) {
        auto it = seen.find(member->name.substr(0, slash));
        if (it != seen.end() && it->second == MemberKind::kFile) {
          return fail(ErrorCode::kToolValidationError,
                      ctx + ": archive member " + quoted(spelled) + " lies below a file member");
        }
        seen.emplace(member->name.substr(0, slash), MemberKind::kDirectory);
      }
      auto [it, inserted] = seen.emplace(member->name, member->kind);
      if (!inserted && it->second != member->kind) {
        return fail(ErrorCode::kToolValidationError,
                    ctx + ": archive member " + quoted(spelled) +
                        " is both a file and a directory in the archive");
      }
      continue;
    }
    if (member->kind == MemberKind::kDirectory) {
      if (auto r = workspace->mkdir(member->name); !r) return r;
      continue;
    }
    auto data = readMember(a->get(), spelled, ctx);
    if (!data) return tl::unexpected(data.error());
    if (auto r = workspace->placeFile(member->name, *data); !r) return r;
  }
  return {};
}

}  // namespace

Result<void> extractArchive(const ArchiveInput& input, WorkspaceHandle& workspace,
                            const ExtractOptions& options) {
  // The check pass refuses a bad member before anything is written.
  if (auto r = archivePass(input, options, nullptr); !r) return r;
  if (!options.into.empty()) {
    if (auto r = workspace.mkdir(options.into); !r) return r;
  }
  return archivePass(input, options, &workspace);
}

}  // namespace airlock::archive
