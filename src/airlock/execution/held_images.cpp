#include "airlock/execution/held_images.h"

#include <algorithm>

namespace airlock::execution {

Result<HeldImages> holdImages(images::ImageStore& store, const std::vector<std::string>& digests) {
  HeldImages out;
  for (const auto& digest : digests) {
    if (std::any_of(out.images.begin(), out.images.end(),
                    [&](const SandboxImage& i) { return i.digest == digest; }))
      continue;
    auto root = store.use(digest);
    if (!root) return tl::unexpected(root.error());
    auto image = unpackedImage(root->digest, root->root_dir, root->env);
    if (!image) return tl::unexpected(image.error());
    out.images.push_back(std::move(*image));
    out.roots.push_back(std::move(*root));
  }
  return out;
}

}  // namespace airlock::execution
