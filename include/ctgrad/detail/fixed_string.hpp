// A string usable as a template argument, so kernel and func names travel in
// types and show up in compiler diagnostics.
#pragma once
#include <cstddef>
#include <string_view>

namespace ctg::detail {

template <std::size_t N>
struct fixed_string {
  char chars[N]{};
  constexpr fixed_string(char const (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) chars[i] = s[i];
  }
  constexpr std::string_view view() const { return {chars, N - 1}; }
  constexpr char const* c_str() const { return chars; }
};

}  // namespace ctg::detail
