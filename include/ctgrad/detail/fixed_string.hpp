// A string usable as a template argument, so kernel and func names travel in
// types and show up in compiler diagnostics.
#pragma once
#include <cstddef>
#include <string_view>

namespace ctg::detail {

constexpr std::size_t length(char const* s) {
  std::size_t n = 0;
  while (s[n]) ++n;
  return n;
}

template <std::size_t N>
struct fixed_string {
  char chars[N]{};
  constexpr fixed_string(char const (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) chars[i] = s[i];
  }
  // The first N - 1 characters of s (which must have that many).
  static constexpr fixed_string from(char const* s) {
    fixed_string f{};
    for (std::size_t i = 0; i + 1 < N; ++i) f.chars[i] = s[i];
    return f;
  }

 private:
  constexpr fixed_string() = default;

 public:
  constexpr std::string_view view() const { return {chars, N - 1}; }
  constexpr char const* c_str() const { return chars; }
};

}  // namespace ctg::detail
