// A tar or zip archive extracted into a workspace through the WorkspaceHandle
// port (spec 000, "WorkspaceHandle"; red-team case B07): the one decoder
// behind `--copy-in ARCHIVE` (workspace/local_workspace.h, the caller's own
// file) and PUT /v1/environments/{id}/archive (the request body, untrusted
// bytes). It only calls the port (mkdir, placeFile), so it serves either
// side of the boundary; libarchive only parses and never touches the
// filesystem (no archive_write_disk).
//
// Every member is checked in a first pass and the archive is read again to
// extract, so a refusal writes nothing. Refused with ToolValidationError
// naming the member as the archive spells it: symlinks, hard links,
// devices, FIFOs, sockets; names checkRelativePath refuses (absolute, "..",
// empty or "." components) after removing one leading "./" and one trailing
// "/", e.g. `copy-in: archive member "../x" leaves the workspace (...)`; a
// member below a member that is a file; a name that is both a file and a
// directory; a member over 64 MiB (each is held in memory whole, as
// placeFile takes it); more than 1,000,000 members. Bytes that libarchive
// cannot read as tar or zip (any of its built-in compression filters) are
// ToolValidationError naming the input. Files land with placeFile, so
// their provenance is UNKNOWN; directories with mkdir. The workspace's own
// limits hold (its errors are returned as they are: a full workspace
// stops the extraction with what was written so far).
#pragma once

#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/port/execution_environment.h"

namespace airlock::archive {

// Where the archive's bytes are: an open file (read from its start, twice)
// or memory (borrowed for the call).
struct ArchiveInput {
  int fd = -1;             // >= 0: this file
  std::string_view bytes;  // used when fd < 0
  std::string what;        // how messages name it, e.g. "\"a.tar\"" or "the archive"
};

struct ExtractOptions {
  std::string context = "copy-in";  // what every message starts with, before ": "
  // The workspace directory members land in ("" the root), already passed
  // through checkRelativePath; created (with its parents) when missing.
  std::string into;
};

Result<void> extractArchive(const ArchiveInput& input, WorkspaceHandle& workspace,
                            const ExtractOptions& options = {});

}  // namespace airlock::archive
