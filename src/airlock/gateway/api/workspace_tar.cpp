#include "airlock/gateway/api/workspace_tar.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "airlock/core/encoding.h"

namespace airlock::gateway {
namespace {

constexpr std::size_t kChunkBytes = 64 * 1024;

class TarSource final : public sys::ByteSource {
 public:
  TarSource(std::shared_ptr<WorkspaceHandle> workspace, std::string dir)
      : ws_(std::move(workspace)), a_(archive_write_new()) {
    pending_dirs_.push_back({std::move(dir), ""});
  }
  ~TarSource() override {
    if (a_ != nullptr) archive_write_free(a_);
  }
  TarSource(const TarSource&) = delete;
  TarSource& operator=(const TarSource&) = delete;

  Result<void> open() {
    if (a_ == nullptr) return fail(ErrorCode::kExecutionUnavailable, "archive: out of memory");
    archive_write_set_format_pax_restricted(a_);
    if (archive_write_open2(a_, this, nullptr, &TarSource::collect, nullptr, nullptr) != ARCHIVE_OK)
      return archiveFailed("open the tar writer");
    return {};
  }

  Result<std::size_t> read(char* buffer, std::size_t size) override {
    while (taken_ == out_.size()) {
      out_.clear();
      taken_ = 0;
      if (closed_) return std::size_t{0};
      if (auto step = advance(); !step) return tl::unexpected(step.error());
    }
    const std::size_t n = std::min(size, out_.size() - taken_);
    std::memcpy(buffer, out_.data() + taken_, n);
    taken_ += n;
    return n;
  }

 private:
  struct Dir {
    std::string path;    // workspace path ("" or "." for the root)
    std::string member;  // its name in the tar ("" for the top)
  };
  struct Pending {
    std::string path;
    std::string member;
    WorkspaceEntry::Type type;
  };

  static la_ssize_t collect(struct archive*, void* self, const void* data, size_t n) {
    static_cast<TarSource*>(self)->out_.append(static_cast<const char*>(data), n);
    return static_cast<la_ssize_t>(n);
  }

  tl::unexpected<Error> archiveFailed(const std::string& what) {
    const char* text = archive_error_string(a_);
    return fail(ErrorCode::kExecutionUnavailable,
                "archive: " + what + ": " + (text != nullptr ? text : "libarchive error"));
  }

  static std::string join(const std::string& dir, const std::string& name) {
    return dir.empty() || dir == "." ? name : dir + "/" + name;
  }

  // One step: a chunk of the current file, the next entry's header, the next
  // directory's listing, or the end of the tar.
  Result<void> advance() {
    if (file_) return copyChunk();
    if (!entries_.empty()) {
      Pending next = std::move(entries_.back());
      entries_.pop_back();
      return writeEntry(next);
    }
    if (!pending_dirs_.empty()) {
      Dir dir = std::move(pending_dirs_.back());
      pending_dirs_.pop_back();
      auto listed = ws_->listdir(dir.path);
      if (!listed) return tl::unexpected(listed.error());
      // Reversed, so that popping from the back visits them in listing order.
      for (auto it = listed->rbegin(); it != listed->rend(); ++it) {
        entries_.push_back(Pending{join(dir.path, it->name),
                                   dir.member.empty() ? it->name : dir.member + "/" + it->name,
                                   it->type});
      }
      return {};
    }
    if (archive_write_close(a_) != ARCHIVE_OK) return archiveFailed("finish the tar");
    closed_ = true;
    return {};
  }

  Result<void> writeEntry(const Pending& entry) {
    const bool is_dir = entry.type == WorkspaceEntry::Type::kDirectory;
    if (!is_dir && entry.type != WorkspaceEntry::Type::kFile) return {};  // left out
    auto st = ws_->stat(entry.path);
    if (!st) return tl::unexpected(st.error());
    if (st->type != entry.type) {
      return fail(ErrorCode::kToolValidationError,
                  "archive: " + quoteForMessage(entry.path, 512) + " changed while it was read");
    }
    std::int64_t size = 0;
    if (!is_dir) {
      auto opened = ws_->openExport(entry.path, kMaxTarFileBytes);
      if (!opened) return tl::unexpected(opened.error());
      size = opened->size_bytes;
      file_ = std::move(opened->reader);
    }
    std::unique_ptr<struct archive_entry, void (*)(struct archive_entry*)> e(archive_entry_new(),
                                                                             archive_entry_free);
    archive_entry_set_pathname(e.get(), (is_dir ? entry.member + "/" : entry.member).c_str());
    archive_entry_set_filetype(e.get(), is_dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e.get(), static_cast<mode_t>(st->mode & 07777));
    archive_entry_set_size(e.get(), is_dir ? 0 : static_cast<la_int64_t>(size));
    archive_entry_set_mtime(e.get(), static_cast<time_t>(st->mtime_ns / 1'000'000'000),
                            static_cast<long>(st->mtime_ns % 1'000'000'000));
    if (archive_write_header(a_, e.get()) < ARCHIVE_WARN)  // WARN: a name kept as bytes
      return archiveFailed("header of " + quoteForMessage(entry.path, 512));
    if (is_dir) pending_dirs_.push_back(Dir{entry.path, entry.member});
    return {};
  }

  Result<void> copyChunk() {
    char chunk[kChunkBytes];
    auto n = file_->read(chunk, sizeof chunk);
    if (!n) return tl::unexpected(n.error());
    if (*n == 0) {
      file_.reset();
      return {};
    }
    if (archive_write_data(a_, chunk, *n) != static_cast<la_ssize_t>(*n))
      return archiveFailed("write a file's bytes");
    return {};
  }

  std::shared_ptr<WorkspaceHandle> ws_;
  struct archive* a_;
  std::string out_;        // what libarchive has written and read() has not taken
  std::size_t taken_ = 0;  // of out_
  bool closed_ = false;    // the tar's end is in out_
  std::vector<Dir> pending_dirs_;
  std::vector<Pending> entries_;  // of the directory being visited, next at the back
  std::unique_ptr<sys::ByteSource> file_;
};

}  // namespace

Result<std::unique_ptr<sys::ByteSource>> workspaceTar(std::shared_ptr<WorkspaceHandle> workspace,
                                                      std::string dir) {
  auto source = std::make_unique<TarSource>(std::move(workspace), std::move(dir));
  if (auto opened = source->open(); !opened) return tl::unexpected(opened.error());
  return std::unique_ptr<sys::ByteSource>(std::move(source));
}

}  // namespace airlock::gateway
