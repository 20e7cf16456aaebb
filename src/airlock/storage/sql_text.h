// SQL text that can only come from a string literal: the rule of every
// statement the storage layer runs (spec 000 "Artifacts": metadata in a real
// database, values bound, never spliced). The constructor is consteval, so a
// runtime string (a value that could carry caller data) does not compile as
// SQL; values travel separately as storage::Value (sql_value.h).
#pragma once

#include <cstddef>

namespace airlock::storage {

class SqlText {
 public:
  // No statement, for a table of statements where a backend needs none
  // (check empty() first: running it is a bug).
  constexpr SqlText() noexcept = default;
  template <std::size_t N>
  consteval SqlText(const char (&literal)[N]) : text_(literal) {}  // NOLINT: implicit on purpose
  const char* c_str() const noexcept { return text_; }
  bool empty() const noexcept { return text_ == nullptr; }

 private:
  const char* text_ = nullptr;
};

}  // namespace airlock::storage
