// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// TOML written back from parsed values, for the round-trip properties of the spec and agent
// config targets.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

namespace stepwatch::fuzz {

// A TOML basic string holding exactly `s` (valid UTF-8: toml++ parsed it).
inline std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04X}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A TOML array of basic strings.
inline std::string strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? ", " : "") + quoted(v[i]);
  return out + "]";
}

}  // namespace stepwatch::fuzz
