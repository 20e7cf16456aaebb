// Internal to airlock_gateway_api: a workspace directory as a tar stream
// (GET /v1/environments/{id}/archive), built through the WorkspaceHandle
// port (listdir, stat, openExport) and libarchive's writer, one piece per
// read: a file's header, or one chunk of its bytes. What is held at a time
// is one directory's listing per directory still to visit, one chunk and
// libarchive's output block, never the tar.
//
// Members are named relative to the directory (a directory "d" below it is
// "d/"), in listing order, each directory's header before its entries;
// regular files and directories only: a symlink, FIFO, socket or device in
// the tree is left out (the port reads no link targets). Mode and mtime come
// from stat; owner is 0. A file larger than kMaxTarFileBytes, or one that
// changes while it is read (openExport measures it first), ends the stream
// with an error; so does a listing or stat that fails midway.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "airlock/core/error.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sys/byte_source.h"

namespace airlock::gateway {

inline constexpr std::int64_t kMaxTarFileBytes = std::int64_t{1} << 30;

// The tar of directory `dir` (checked by the caller to be a directory).
// The source keeps `workspace` alive while it is read; a destroyed
// environment ends it with the workspace's error.
Result<std::unique_ptr<sys::ByteSource>> workspaceTar(std::shared_ptr<WorkspaceHandle> workspace,
                                                      std::string dir);

}  // namespace airlock::gateway
