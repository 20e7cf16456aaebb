// SQL text that can only come from a string literal.
// The constructor is consteval, so a runtime string (a value that could
// carry caller data) does not compile as SQL; values are always bound.
#pragma once

#include <cstddef>

namespace airlock::artifacts {

class SqlText {
 public:
  template <std::size_t N>
  consteval SqlText(const char (&literal)[N]) : text_(literal) {}  // NOLINT: implicit on purpose
  const char* c_str() const noexcept { return text_; }

 private:
  const char* text_;
};

}  // namespace airlock::artifacts
