// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The JSON field readers; one of the few translation units that include nlohmann/json.
#include "src/common/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace stepwatch::json_fields {

namespace {

// A value as an error shows it: its JSON, bounded, since it came from another process.
std::string shown(const Json& v) {
  return fmt::format("{:.80}", v.dump());
}

[[noreturn]] void wrong(const Json& v, const char* key, const char* what) {
  throw FieldError{Errc::kParse,
                   fmt::format("field \"{}\" must be {}, got {}", key, what, shown(v))};
}

}  // namespace

Error to_error(const FieldError& e, std::string_view source) {
  if (source.empty()) return Error{e.code, e.message};
  return Error{e.code, fmt::format("{}: {}", source, e.message)};
}

int nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

Result<Json> parse_bounded(std::string_view text, std::string_view source) {
  if (nesting_depth(text) > kMaxDepth) {
    return to_error({Errc::kSizeMismatch,
                     fmt::format("nested deeper than {} levels: refused unparsed", kMaxDepth)},
                    source);
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return to_error({Errc::kParse, fmt::format("not valid JSON: {:.80}", text)}, source);
  return j;
}

Result<Json> parse_object(std::string_view text, std::string_view source) {
  auto j = parse_bounded(text, source);
  if (j && j->is_object()) return j;
  if (!j && j.error().code == Errc::kSizeMismatch) return j.error();  // too deep: said as such
  return to_error({Errc::kParse, fmt::format("not a JSON object: {:.80}", text)}, source);
}

const Json& need(const Json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end()) throw FieldError{Errc::kParse, fmt::format("field \"{}\" is missing", key)};
  return *it;
}

const Json* present(const Json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

int64_t as_int(const Json& v, const char* key) {
  if (!v.is_number_integer()) wrong(v, key, "an integer");
  return v.get<int64_t>();
}

double as_num(const Json& v, const char* key) {
  if (!v.is_number()) wrong(v, key, "a number");
  return v.get<double>();
}

std::string as_str(const Json& v, const char* key) {
  if (!v.is_string()) wrong(v, key, "a string");
  return v.get<std::string>();
}

bool as_bool(const Json& v, const char* key) {
  if (!v.is_boolean()) wrong(v, key, "true or false");
  return v.get<bool>();
}

std::vector<int64_t> as_ints(const Json& v, const char* key) {
  std::vector<int64_t> out;
  if (!v.is_array()) wrong(v, key, "a list of integers");
  for (const Json& e : v) {
    if (!e.is_number_integer()) wrong(v, key, "a list of integers");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<std::string> as_strs(const Json& v, const char* key) {
  std::vector<std::string> out;
  if (!v.is_array()) wrong(v, key, "a list of strings");
  for (const Json& e : v) {
    if (!e.is_string()) wrong(v, key, "a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Status read_fields(std::string_view text, std::string_view source,
                   const std::function<void(const Json&)>& read) {
  auto j = parse_object(text, source);
  if (!j) return j.error();
  try {
    read(*j);
  } catch (const FieldError& e) {
    return to_error(e, source);
  }
  return {};
}

}  // namespace stepwatch::json_fields
