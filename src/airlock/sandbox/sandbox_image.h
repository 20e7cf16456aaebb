// What a sandbox sees of its image (spec 000, "EnvironmentSpec":
// image_digest), computed once per image and mounted by every mechanism the
// same way: the linux jail binds each entry into its new root
// (linux/jail_plan.h), the gvisor bundle makes a mount point for it in the
// image's rootfs and binds it there (oci/oci_bundle.h). Everything is
// read-only inside the sandbox.
//
// Two kinds of image:
//   host      the service host's own /usr (MechanismOptions::image_dirs),
//             /bin, /sbin and /lib* as the host has them, and the /etc
//             entries of its packages (image_etc); the embedded default.
//   unpacked  an OCI image's root filesystem, unpacked by the image store
//             (images/image_store.h): every top-level entry of the root
//             except the places each sandbox makes for itself
//             (kSandboxOwnedPaths), then every entry of its /etc except the
//             generated ones (sandbox_baseline.h generatedEtcEntries).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "airlock/core/error.h"

namespace airlock {

struct ImageEntry {
  enum class Kind {
    kDirectory,  // a host directory bound read-only, with everything below it
    kFile,       // a host file bound read-only
    kSymlink,    // a symbolic link made in the sandbox's root
  };
  Kind kind = Kind::kDirectory;
  std::string path;    // inside the sandbox: absolute, no "." or ".." ("/usr", "/etc/ssl/certs")
  std::string source;  // kDirectory, kFile: the absolute host path; kSymlink: the link's text
};

struct SandboxImage {
  std::string digest;  // "sha256:<64 hex>", what an EnvironmentSpec names it by
  // Parents before children; the entries under /etc come after every other
  // one. A parent directory that no entry names is made empty (0755).
  std::vector<ImageEntry> entries;
  // The image config's Env, "NAME=value" (empty for the host image); it
  // joins the platform tier (environment_tiers.h addImageEnvironment).
  std::vector<std::string> env;
};

// Top-level places of the sandbox's root that every mechanism makes itself
// and no image supplies: /proc, /dev, /sys, /tmp, /workspace, /run, /etc
// (made entry by entry) and /.airlock (the gvisor shim's).
const std::vector<std::string>& sandboxOwnedPaths();

// The host image named `digest`. ExecutionUnavailable naming a directory of
// `image_dirs` that is not one; entries of `image_etc` the host lacks are
// left out.
Result<SandboxImage> hostImage(std::string digest, const std::vector<std::string>& image_dirs,
                               const std::vector<std::string>& image_etc);

// The unpacked image at `root_dir` (an absolute host path). Reads the root's
// top level and its /etc; ExecutionUnavailable when the root cannot be read.
// An entry that is neither a directory, a regular file nor a symbolic link
// is left out.
Result<SandboxImage> unpackedImage(std::string digest, const std::string& root_dir,
                                   std::vector<std::string> env);

// Whether a process of any uid can look up `path`: the directory itself
// and each one above it must be searchable by others (o+x); one that does
// not exist is skipped. ExecutionUnavailable naming the directory and its
// mode otherwise. `checked` (may be null) holds directories already found
// searchable, shared across calls.
Result<void> checkSearchableByAll(const std::string& path,
                                  std::set<std::string>* checked = nullptr);

// Whether a process of any uid can look up every bound source of `image`:
// each directory above an entry's source must be searchable by others
// (o+x). The linux jail binds as the sandbox's own user, which is nobody's
// owner on the host. ExecutionUnavailable naming the image, the directory
// and its mode otherwise.
Result<void> checkReachableByAnyUser(const SandboxImage& image);

// "sha256:<hex>" over a canonical manifest of the host image: the bound
// directories and /etc entries, the dpkg package list (name, version,
// architecture) and a stat manifest of /usr/local. Cheap enough to compute
// at every start; cached per (image_dirs, image_etc) for the process's
// life. Thread-safe.
Result<std::string> computeHostImageDigest(const std::vector<std::string>& image_dirs,
                                           const std::vector<std::string>& image_etc);

// A mechanism's images: the host image (hostImage) first, then `others`.
// ExecutionUnavailable as hostImage; ConfigurationError naming a digest that
// is there twice or is not a digest.
Result<std::vector<std::shared_ptr<const SandboxImage>>> mechanismImages(
    std::string host_digest, const std::vector<std::string>& image_dirs,
    const std::vector<std::string>& image_etc, const std::vector<SandboxImage>& others);

}  // namespace airlock
