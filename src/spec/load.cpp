// Loading a spec from a file, and the Result-shaped API over check_spec(). No toml++ here.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "src/spec/spec.h"

namespace stepwatch::spec {

namespace {

// A spec is a page of text; anything larger is a wrong path, not a spec.
constexpr size_t kMaxSpecBytes = size_t{1} << 20;

Error read_error(const std::string& path, int err) {
  Errc code = err == ENOENT                     ? Errc::kNotFound
              : (err == EACCES || err == EPERM) ? Errc::kPermission
                                                : Errc::kIo;
  return Error{code, fmt::format("{}: cannot read: {}", path, std::strerror(err))};
}

Result<std::string> read_text(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return read_error(path, errno);
  if (S_ISDIR(st.st_mode)) {
    return Error{Errc::kInvalidArgument, fmt::format("{}: is a directory", path)};
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return read_error(path, errno);
  std::string text(kMaxSpecBytes + 1, '\0');
  size_t n = std::fread(text.data(), 1, text.size(), f.get());
  if (std::ferror(f.get())) return read_error(path, errno);
  if (n > kMaxSpecBytes) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("{}: larger than {} bytes; not a job spec", path, kMaxSpecBytes)};
  }
  text.resize(n);
  return text;
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
