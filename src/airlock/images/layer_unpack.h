// The safe unpacker of OCI image layers: applies one layer (a tar stream,
// uncompressed, gzip or zstd) onto an image root directory, as the OCI image
// specification's layer chapter describes in "Applying Changesets" and
// "Whiteouts", without ever creating, writing, changing or following
// anything outside the root.
//
// libarchive only parses the stream (tar formats, gzip and zstd filters in
// process, never an external program); every filesystem operation is made
// here through directory fds: each entry's parent is reached one component
// at a time beneath the root (workspace::openBeneath with O_NOFOLLOW), then
// the entry is made with mkdirat / openat(O_CREAT | O_EXCL | O_NOFOLLOW) /
// symlinkat / linkat / unlinkat relative to that parent. mknod is never
// called, so running as root changes nothing of what follows.
#pragma once

#include <cstdint>

#include "airlock/core/error.h"

namespace airlock::images {

// Caps over the whole image (all its layers), checked against the running
// UnpackTally plus what the current layer has made so far.
struct UnpackLimits {
  // Regular-file bytes written (the entries' data, holes of sparse files
  // included as the zeros written for them).
  std::int64_t max_bytes = 8LL << 30;
  // Names created: directories (implicit parents included), regular files,
  // symlinks and hard links. Whiteouts, dropped entries and the image root's
  // own entry create nothing and are not counted.
  std::int64_t max_entries = 1'000'000;
};

// Running totals across the layers of one image; the caller starts it at
// zero and passes the same tally to each applyLayer call in layer order.
// Removals (whiteouts, replacements) do not decrease it: the caps bound the
// work done, not the size of the result.
struct UnpackTally {
  std::int64_t bytes = 0;
  std::int64_t entries = 0;
};

// What one layer did.
struct LayerStats {
  std::int64_t entries = 0;          // names created (as UnpackLimits::max_entries counts)
  std::int64_t bytes = 0;            // regular-file bytes written
  std::int64_t whiteouts = 0;        // ".wh.NAME" and ".wh..wh..opq" entries applied
  std::int64_t dropped_devices = 0;  // character / block devices, FIFOs, sockets skipped
  std::int64_t cleared_setid = 0;    // entries whose setuid / setgid / sticky bits were cleared
};

// Applies one layer read from `layer_fd` (borrowed, read sequentially from
// its current offset to the end; not closed) onto the directory `root_dirfd`
// (borrowed; any open mode, O_PATH included). The compression (none, gzip,
// zstd) is detected from the bytes. Entries are applied in stream order,
// following "Applying Changesets":
//
// * Names: a leading "/" is stripped (as tar does), empty and "."
//   components are dropped. A name with a ".." component is refused, as is
//   a name longer than 4095 bytes. The root's own entry ("./", "/") is
//   skipped when it is a directory (the root keeps its mode and mtime) and
//   refused otherwise.
// * Parents: every parent component is opened without following symlinks; a
//   missing one is created (mode 0755, counted as an entry). A symlink as a
//   parent of a later entry is refused, even one whose target lies inside
//   the root, as is a parent that is not a directory.
// * Replacement: a later entry replaces what is at its name. A directory
//   over a directory keeps it (and its contents) and takes the new mode and
//   mtime; anything else removes what was there first (a directory tree
//   recursively, through fds, never following a link).
// * Regular files are written to a new inode (O_EXCL); symlinks are made
//   with their target as given (a target may point anywhere: it is resolved
//   later inside the sandbox, where "/" is the image root, and never here).
// * Hard links: the target name is checked like an entry name and resolved
//   beneath the root without following symlinks; it must already exist and
//   be a regular file. Anything else is refused.
// * "Whiteouts": ".wh.NAME" removes NAME from the lower layers (a same-layer
//   NAME is kept); ".wh..wh..opq" removes every lower-layer entry of its
//   directory and keeps what this layer has put there. A whiteout of "",
//   "." or ".." is refused, as is a ".wh." name as a parent component.
//   Other ".wh..wh." names (aufs metadata) are skipped. A whiteout whose
//   directory does not exist removes nothing.
// * Character and block devices, FIFOs and sockets are dropped (counted in
//   LayerStats::dropped_devices). Ownership and xattrs are not applied:
//   everything belongs to the calling uid. Permission bits and mtimes are
//   applied less setuid, setgid and sticky (counted in cleared_setid) and
//   less group and other write (at most 0755): the root is shared by every
//   sandbox of the image, and nobody but its owner may change it.
//   Directory modes and mtimes are applied when the layer ends (deepest
//   first), so a read-only directory can still receive its entries; a
//   directory declared twice takes the later mode. An opaque whiteout
//   applies once per directory and layer.
// * Work: a layer may hold at most 4 * max_entries entries of any kind
//   (whiteouts and repeated directories included), else ExecutionRejected.
//
// On success `tally` has grown by the returned stats. On failure it is
// unchanged and the root is left partially applied: the caller must delete
// the whole root (this layer's and the lower layers' content alike); it is
// not to be used.
//
// Errors:
// * ExecutionRejected, refusing the layer at its first bad entry, with a
//   message naming the entry ("layer entry \"a/../../etc/x\": climbs out of
//   the image root"): a refused name, parent, hard link or whiteout as above,
//   an entry type libarchive cannot tell, or a name the filesystem refuses
//   (too long, too many links). Also for a stream that is not a tar archive
//   in a supported compression, or is truncated or corrupt ("layer stream:
//   ...", naming the last entry read when there is one), and when a cap would be exceeded ("...
//   exceeds the image's byte cap (max_bytes N)" / "entry cap (max_entries N)").
// * ExecutionUnavailable with errno: the host failed (out of space or fds,
//   an I/O error, reading layer_fd), or libarchive could not be set up.
Result<LayerStats> applyLayer(int root_dirfd, int layer_fd, const UnpackLimits& limits,
                              UnpackTally& tally);

}  // namespace airlock::images
