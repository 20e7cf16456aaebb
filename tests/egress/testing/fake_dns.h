// A scripted DNS behind GetaddrinfoResolver's Backend seam: it sees the exact
// string passed to getaddrinfo, so tests observe the trailing dot, the
// number of lookups and the names queried, and can emulate resolv.conf
// search-domain expansion for names that are not fully qualified.
#pragma once

#include <netdb.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "airlock/egress/address.h"
#include "airlock/egress/resolver.h"

namespace airlock::egress::testing {

class FakeDns {
 public:
  // Answers for `name` (as queried, e.g. "a.example.com."). Successive
  // lookups take successive answers; the last one repeats.
  void add(const std::string& name, std::vector<std::string> addresses);
  void addSequence(const std::string& name, std::vector<std::vector<std::string>> answers);
  // getaddrinfo returns `eai` for `name`.
  void fail(const std::string& name, int eai);
  // Answer for names with no entry (nullopt: EAI_NONAME).
  void setDefault(std::vector<std::string> addresses);
  // Emulates "search <domain>" with ndots:5: a name without a trailing dot
  // and fewer than 5 dots is tried as name.<domain>. first.
  void setSearchDomain(std::string domain) { search_domain_ = std::move(domain); }

  std::vector<std::string> queries() const;
  std::size_t lookupCount() const;

  GetaddrinfoResolver::Backend backend();

 private:
  int lookup(const char* node, const addrinfo* hints, addrinfo** result);
  std::optional<std::vector<std::string>> answerFor(const std::string& name);

  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::vector<std::string>>> answers_;
  std::map<std::string, std::size_t> served_;
  std::map<std::string, int> failures_;
  std::optional<std::vector<std::string>> default_;
  std::string search_domain_;
  std::vector<std::string> queries_;
};

}  // namespace airlock::egress::testing
