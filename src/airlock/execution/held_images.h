// Stored images held for a mechanism's life (docs/images.md): while a
// HeldImages lives, each image's unpacked root stays in place and out of the
// image store's garbage collection, and the mechanisms get one SandboxImage
// per root (spec 000, "EnvironmentSpec": a sandbox names its image by
// digest).
#pragma once

#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/images/image_store.h"
#include "airlock/sandbox/sandbox_image.h"

namespace airlock::execution {

// Owns the roots; `images` describes them for MechanismOptions::images,
// one per root, in the same order.
struct HeldImages {
  std::vector<images::ImageRoot> roots;
  std::vector<SandboxImage> images;
};

// Holds the stored images `digests` (ImageStore::use, unpacking a root not
// yet there; a digest named twice is held once) and describes each for the
// mechanisms (unpackedImage). The errors of use() and unpackedImage.
Result<HeldImages> holdImages(images::ImageStore& store, const std::vector<std::string>& digests);

}  // namespace airlock::execution
