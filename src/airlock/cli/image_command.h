// Images for the front ends (spec 000, "EnvironmentSpec": image_digest is a
// digest, never a tag; docs/images.md): the local image store under the
// state directory, the resolution of what a user or an operator names to
// one digest, and `airlock image pull|import|ls|rm`.
//
// What names an image:
//   a digest       "sha256:<64 hex>": an image already in the store
//   a reference    "127.0.0.1:5000/team/py:3.12" or "...@sha256:<hex>": the
//                  image the store recorded under it (a pull or an import
//                  did), else pulled from its registry now
//   "host"         the embedded default: the service host's own /usr
// Once resolved, only the digest is used: moving the tag in the registry
// changes nothing until `airlock image pull` is run again.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/images/image_store.h"

namespace airlock::cli {

// The name of the embedded default image (the host's).
inline constexpr const char* kHostImageName = "host";

// <state_dir>/images.
std::string imageStoreDirectory(const std::string& state_dir);

// Opens (creating) the store at imageStoreDirectory(state_dir). The errors
// of ImageStore::open.
Result<std::shared_ptr<images::ImageStore>> openImageStore(const std::string& state_dir);

// How a pull reports its bytes: called as they arrive, with the bytes of
// the current blob so far and its size. May be empty.
using PullProgress = std::function<void(std::int64_t done_bytes, std::int64_t total_bytes)>;

// The stored image recorded under `name` as written (a digest, or an
// import's own name for its image) or under the reference it parses to
// ("debian:12" is recorded as "registry-1.docker.io/library/debian:12"),
// with the name as recorded; nullopt when there is none.
std::optional<std::pair<images::StoredImage, std::string>> findNamed(images::ImageStore& store,
                                                                     const std::string& name);

struct ResolvedImage {
  images::StoredImage stored;
  bool pulled = false;  // fetched from the registry now (else it was stored)
};

// The stored image `name` (a digest or a reference, see above) names,
// pulling it when it is a reference the store has not recorded. Errors:
// ExecutionRejected for a name that is neither ("--image: ..."), NotFound
// for a digest the store lacks (the message says how to pull or import
// it), and those of ImageStore::pull.
Result<ResolvedImage> resolveImage(images::ImageStore& store, const std::string& name,
                                   const PullProgress& progress);

// Code mode runs the image's /usr/bin/env and /usr/bin/python3: an image
// (a digest the store holds) without them is ExecutionRejected, naming
// python3 (or env) and the image, before any sandbox starts. Where openat2
// is missing nothing is checked (the sandbox's exec reports it).
Result<void> checkCodeModeImage(images::ImageStore& store, const std::string& digest);

// A progress line for a pull on a terminal: "\rpulling REF: 12 MiB of 40 MiB"
// on standard error, rewritten as bytes arrive and cleared at the end. Empty
// (no progress) when standard error is not a terminal.
PullProgress terminalPullProgress(const std::string& reference);
// Clears what terminalPullProgress wrote, if anything.
void endTerminalPullProgress();

// The subcommands. Each returns the process exit status: 0, or 125 with
// one "airlock: error: ..." line on stderr.
//   pull    prints "<digest> <reference>"
//   import  prints "<digest> <reference or ->"
//   ls      one line per image: digest, size, references (or JSON)
//   rm      prints "removed <digest>" (a reference: "untagged <reference>"
//           while the image keeps other references)
int runImagePull(const std::string& state_dir, const std::string& reference, bool json);
// ref_name: "" or the name of the layout's image to import (--ref).
int runImageImport(const std::string& state_dir, const std::string& path,
                   const std::string& ref_name, bool json);
int runImageList(const std::string& state_dir, bool json);
// What `ls` prints: a header, then per image its digest, its size
// right-aligned ("1023.5 KiB") and its references, two spaces between
// columns whatever the size's width.
std::string formatImageTable(const std::vector<images::StoredImage>& images);
int runImageRemove(const std::string& state_dir, const std::string& name);

}  // namespace airlock::cli
