// Loading a spec from a file, and the Result-shaped API over check_spec(). No toml++ here.
#include <fmt/format.h>

#include "src/common/text_file.h"
#include "src/spec/spec.h"

namespace stepwatch::spec {

namespace {

// A spec is a page of text; anything larger is a wrong path, not a spec.
constexpr size_t kMaxSpecBytes = size_t{1} << 20;

Result<std::string> read_text(const std::string& path) {
  auto f = read_text_file(path, kMaxSpecBytes);
  if (!f) {
    Error e = f.error();
    if (e.message.ends_with("bytes")) e.message += "; not a job spec";
    return e;
  }
  return std::move(f->text);
}

Error as_error(const SpecCheck& check) {
  std::string message;
  for (const auto& e : check.errors) message += (message.empty() ? "" : "\n") + e.text();
  return Error{check.syntax_error ? Errc::kParse : Errc::kInvalidField, message};
}

}  // namespace

Result<SpecCheck> check_spec_file(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  return check_spec(*text, path);
}

Result<JobSpec> parse_spec(std::string_view text, const std::string& source_name) {
  SpecCheck check = check_spec(text, source_name);
  if (!check.ok()) return as_error(check);
  return std::move(check.spec);
}

Result<JobSpec> load_spec_file(const std::string& path) {
  auto check = check_spec_file(path);
  if (!check) return check.error();
  if (!check->ok()) return as_error(*check);
  return std::move(check->spec);
}

}  // namespace stepwatch::spec
