// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/spec/command_template.h"

#include <fmt/format.h>

namespace stepwatch::spec {

namespace {

bool ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool ident_char(char c) {
  return ident_start(c) || (c >= '0' && c <= '9');
}

// Walks `arg` once, calling on_text for literal text and on_name for each placeholder.
template <class OnText, class OnName>
void scan(std::string_view arg, OnText on_text, OnName on_name) {
  size_t i = 0;
  while (i < arg.size()) {
    char c = arg[i];
    if ((c == '{' || c == '}') && i + 1 < arg.size() && arg[i + 1] == c) {
      on_text(std::string_view(&arg[i], 1));
      i += 2;
      continue;
    }
    if (c == '{' && (i == 0 || arg[i - 1] != '$') && i + 1 < arg.size() &&
        ident_start(arg[i + 1])) {
      size_t j = i + 1;
      while (j < arg.size() && ident_char(arg[j])) ++j;
      if (j < arg.size() && arg[j] == '}') {
        on_name(arg.substr(i + 1, j - i - 1), arg.substr(i, j - i + 1));
        i = j + 1;
        continue;
      }
    }
    on_text(arg.substr(i, 1));
    ++i;
  }
}

}  // namespace

std::vector<std::string> template_placeholders(std::string_view arg) {
  std::vector<std::string> names;
  scan(
      arg, [](std::string_view) {},
      [&](std::string_view name, std::string_view) { names.emplace_back(name); });
  return names;
}

Status check_template(std::string_view arg, std::span<const std::string_view> allowed) {
  for (const auto& name : template_placeholders(arg)) {
    bool known = false;
    for (auto a : allowed) known = known || a == name;
    if (!known) {
      std::string list;
      for (auto a : allowed) list += fmt::format("{}{{{}}}", list.empty() ? "" : ", ", a);
      return Error{
          Errc::kInvalidArgument,
          fmt::format(
              "unknown placeholder {{{}}} in \"{}\"; allowed here: {} (write {{{{ and }}}} for "
              "literal braces)",
              name, arg, list)};
    }
  }
  return {};
}

std::string expand_template(std::string_view arg, const TemplateValues& values) {
  std::string out;
  scan(
      arg, [&](std::string_view text) { out += text; },
      [&](std::string_view name, std::string_view written) {
        auto it = values.find(name);
        out += it == values.end() ? written : std::string_view(it->second);
      });
  return out;
}

std::vector<std::string> expand_command(const std::vector<std::string>& argv,
                                        const TemplateValues& values) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (const auto& a : argv) out.push_back(expand_template(a, values));
  return out;
}

Status check_template_value(std::string_view what, std::string_view value) {
  auto safe = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("._:+=,@%/-").find(c) != std::string_view::npos;
  };
  if (value.empty()) return Error{Errc::kInvalidArgument, fmt::format("{} is empty", what)};
  for (char c : value) {
    if (!safe(c)) {
      return Error{
          Errc::kInvalidArgument,
          fmt::format(
              "{} \"{}\" holds '{}': only letters, digits and ._:+=,@%/- are substituted into a "
              "command (a shell would run the rest)",
              what, value, c)};
    }
  }
  return {};
}

}  // namespace stepwatch::spec
