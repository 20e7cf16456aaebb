// The workspace archive decoder (src/airlock/archive/workspace_archive.h)
// on arbitrary bytes: the body of PUT /v1/environments/{id}/archive is
// untrusted. Each input is extracted into "into/dir" of a workspace that
// only records what it is asked to do. For every input, accepted or not:
// * the call returns (no crash, no throw), and a refusal is an error with
//   a message;
// * every path the decoder hands the workspace passes checkRelativePath
//   and lies inside "into/dir" (the directory itself for its mkdir), and
//   nothing else of the workspace is asked for.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/archive/workspace_archive.h"
#include "airlock/core/command_validation.h"

namespace {

constexpr const char* kInto = "into/dir";

void check(bool ok) {
  if (!ok) std::abort();
}

// Checks the path of every mkdir and placeFile; refuses nothing.
class CheckingWorkspace final : public airlock::WorkspaceHandle {
 public:
  airlock::Result<void> placeFile(const std::string& path, std::string_view) override {
    checkInside(path, false);
    return {};
  }
  airlock::Result<void> mkdir(const std::string& path) override {
    checkInside(path, true);
    return {};
  }
  airlock::Result<std::string> read(const std::string&) override { return unused(); }
  airlock::Result<void> write(const std::string&, std::string_view) override { return unused(); }
  airlock::Result<std::vector<airlock::WorkspaceEntry>> listdir(const std::string&) override {
    return unused();
  }
  airlock::Result<airlock::WorkspaceProvenance> provenance(const std::string&) override {
    return unused();
  }
  airlock::Result<void> remove(const std::string&, bool) override { return unused(); }
  airlock::Result<void> rename(const std::string&, const std::string&, bool) override {
    return unused();
  }
  airlock::Result<airlock::WorkspaceStat> stat(const std::string&) override { return unused(); }

 private:
  static tl::unexpected<airlock::Error> unused() {
    std::abort();  // the decoder calls only mkdir and placeFile
  }
  static void checkInside(const std::string& path, bool may_be_into) {
    auto rel = airlock::checkRelativePath(path);
    check(rel.has_value() && *rel == path);
    const std::string prefix = std::string(kInto) + "/";
    check(path.compare(0, prefix.size(), prefix) == 0 || (may_be_into && path == kInto));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  CheckingWorkspace workspace;
  const airlock::archive::ArchiveInput input{
      -1, std::string_view(reinterpret_cast<const char*>(data), size), "the input"};
  const airlock::archive::ExtractOptions options{"archive", kInto};
  auto extracted = airlock::archive::extractArchive(input, workspace, options);
  if (!extracted) {
    check(!extracted.error().message().empty());
  }
  return 0;
}
