// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Splitting fuzz input into fields and lines, shared by the targets.
#pragma once

#include <string_view>
#include <vector>

namespace stepwatch::fuzz {

// The pieces of `s` between separators; n separators give n + 1 pieces (empty ones kept).
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    out.push_back(
        s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace stepwatch::fuzz
