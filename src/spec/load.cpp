// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Loading a spec from a file, and the Result-shaped API over check_spec(). No toml++ here.
#include <fmt/format.h>

#include "src/spec/spec.h"
#include "src/spec/toml_reader.h"

namespace stepwatch::spec {

namespace {

// A spec is a page of text; anything larger is a wrong path, not a spec.
constexpr size_t kMaxSpecBytes = size_t{1} << 20;

Error as_error(const SpecCheck& check) {
  std::string message;
  for (const auto& e : check.errors) message += (message.empty() ? "" : "\n") + e.text();
  return Error{check.syntax_error ? Errc::kParse : Errc::kInvalidField, message};
}

}  // namespace

Result<SpecCheck> check_spec_file(const std::string& path) {
  auto text = read_toml_file(path, kMaxSpecBytes, "a job spec");
  if (!text) return text.error();
  return check_spec(*text, path);
}

Result<JobSpec> parse_spec(std::string_view text, const std::string& source_name) {
  SpecCheck check = check_spec(text, source_name);
  if (!check.ok()) return as_error(check);
  return std::move(check.spec);
}

Result<JobSpec> load_spec_file(const std::string& path, std::string* text) {
  auto read = read_toml_file(path, kMaxSpecBytes, "a job spec");
  if (!read) return read.error();
  SpecCheck check = check_spec(*read, path);
  if (!check.ok()) return as_error(check);
  if (text != nullptr) *text = std::move(*read);
  return std::move(check.spec);
}

}  // namespace stepwatch::spec
