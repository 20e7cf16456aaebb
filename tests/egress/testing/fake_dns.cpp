#include "fake_dns.h"

#include <cstring>
#include <stdexcept>

namespace airlock::egress::testing {

void FakeDns::add(const std::string& name, std::vector<std::string> addresses) {
  addSequence(name, {std::move(addresses)});
}

void FakeDns::addSequence(const std::string& name, std::vector<std::vector<std::string>> answers) {
  std::lock_guard lock(mu_);
  answers_[name] = std::move(answers);
}

void FakeDns::fail(const std::string& name, int eai) {
  std::lock_guard lock(mu_);
  failures_[name] = eai;
}

void FakeDns::setDefault(std::vector<std::string> addresses) {
  std::lock_guard lock(mu_);
  default_ = std::move(addresses);
}

std::vector<std::string> FakeDns::queries() const {
  std::lock_guard lock(mu_);
  return queries_;
}

std::size_t FakeDns::lookupCount() const {
  std::lock_guard lock(mu_);
  return queries_.size();
}

std::optional<std::vector<std::string>> FakeDns::answerFor(const std::string& name) {
  auto it = answers_.find(name);
  if (it == answers_.end()) return std::nullopt;
  std::size_t& n = served_[name];
  const auto& seq = it->second;
  const auto& answer = seq[n < seq.size() ? n : seq.size() - 1];
  ++n;
  return answer;
}

int FakeDns::lookup(const char* node, const addrinfo*, addrinfo** result) {
  std::lock_guard lock(mu_);
  const std::string name(node);
  queries_.push_back(name);
  *result = nullptr;

  std::vector<std::string> candidates;
  const bool fqdn = !name.empty() && name.back() == '.';
  std::size_t dots = 0;
  for (char c : name) dots += c == '.';
  if (!fqdn && !search_domain_.empty() && dots < 5)
    candidates.push_back(name + "." + search_domain_ + ".");
  candidates.push_back(fqdn ? name : name + ".");

  for (const auto& candidate : candidates) {
    if (auto f = failures_.find(candidate); f != failures_.end()) return f->second;
    std::optional<std::vector<std::string>> answer = answerFor(candidate);
    if (!answer && candidate == candidates.back()) answer = default_;
    if (!answer) continue;
    addrinfo* head = nullptr;
    addrinfo** tail = &head;
    for (const auto& text : *answer) {
      auto a = IpAddress::parse(text);
      if (!a) throw std::logic_error("fake DNS: bad address " + text);
      auto* ai = new addrinfo{};
      auto* ss = new sockaddr_storage{};
      ai->ai_addrlen = a->toSockaddr(0, *ss);
      ai->ai_addr = reinterpret_cast<sockaddr*>(ss);
      ai->ai_family = a->isV4() ? AF_INET : AF_INET6;
      ai->ai_socktype = SOCK_STREAM;
      *tail = ai;
      tail = &ai->ai_next;
    }
    *result = head;
    return head == nullptr ? EAI_NODATA : 0;
  }
  return EAI_NONAME;
}

GetaddrinfoResolver::Backend FakeDns::backend() {
  return GetaddrinfoResolver::Backend{
      [this](const char* node, const addrinfo* hints, addrinfo** result) {
        return lookup(node, hints, result);
      },
      [](addrinfo* list) {
        while (list != nullptr) {
          addrinfo* next = list->ai_next;
          delete reinterpret_cast<sockaddr_storage*>(list->ai_addr);
          delete list;
          list = next;
        }
      },
  };
}

}  // namespace airlock::egress::testing
