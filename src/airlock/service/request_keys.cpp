#include "airlock/service/request_keys.h"

#include <algorithm>
#include <vector>

#include "airlock/core/encoding.h"

namespace airlock::service {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions
// and adjacent transpositions ("netwrok" -> "network" is 1).
std::size_t editDistance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

// Keys longer than this are not compared (the distance table is n*m).
constexpr std::size_t kMaxComparedKey = 64;

}  // namespace

std::optional<std::string_view> closestKey(std::string_view key,
                                           std::initializer_list<std::string_view> known) {
  return closestKey(key, std::span<const std::string_view>(known.begin(), known.size()));
}

std::optional<std::string_view> closestKey(std::string_view key,
                                           std::span<const std::string_view> known) {
  if (key.size() > kMaxComparedKey) return std::nullopt;
  std::optional<std::string_view> best;
  std::size_t best_distance = 0;
  for (std::string_view candidate : known) {
    const std::size_t distance = editDistance(key, candidate);
    const std::size_t allowed =
        std::max<std::size_t>(2, std::max(key.size(), candidate.size()) / 3);
    if (distance > allowed) continue;
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::optional<std::string> unknownKeyMessage(const nlohmann::json& body,
                                             std::initializer_list<std::string_view> known) {
  if (!body.is_object()) return std::nullopt;
  std::vector<std::string> named;  // each unknown key, with its close known key
  bool unmatched = false;          // one has no close known key
  for (const auto& [key, value] : body.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string part = quoteForMessage(key);
    if (auto near = closestKey(key, known)) {
      part += " (did you mean " + quoteForMessage(*near) + "?)";
    } else {
      unmatched = true;
    }
    named.push_back(std::move(part));
  }
  if (named.empty()) return std::nullopt;
  std::string message = named.size() == 1 ? "unknown key " : "unknown keys ";
  for (std::size_t i = 0; i < named.size(); ++i) message += (i == 0 ? "" : ", ") + named[i];
  if (unmatched) {
    message += named.size() == 1 ? " (known keys: " : "; known keys: ";
    bool first = true;
    for (std::string_view k : known) {
      if (!first) message += ", ";
      message += k;
      first = false;
    }
    if (named.size() == 1) message += ")";
  }
  return message;
}

std::optional<HttpResponse> refuseUnknownKeys(const nlohmann::json& body,
                                              std::initializer_list<std::string_view> known) {
  auto message = unknownKeyMessage(body, known);
  if (!message) return std::nullopt;
  return errorResponse(400, "bad_request", *message);
}

}  // namespace airlock::service
