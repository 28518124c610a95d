// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The only file that includes toml++ (STYLE rule 11): it turns toml++'s tree into TomlValue
// once, and everything else reads TomlValue.
#include "src/spec/toml_reader.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "src/common/clock.h"
#include "src/common/duration.h"
#include "src/common/text_file.h"
#include "src/spec/size.h"

namespace stepwatch::spec {

namespace {

int line_of(const toml::node& v) {
  return static_cast<int>(v.source().begin.line);
}

TomlValue convert(const toml::node& n) {
  TomlValue out;
  out.line = line_of(n);
  if (const auto* t = n.as_table()) {
    out.type = TomlType::kTable;
    out.entries.reserve(t->size());
    for (auto&& [k, v] : *t) {
      int line = static_cast<int>(k.source().begin.line);
      out.entries.push_back(
          TomlEntry{std::string(k.str()), line > 0 ? line : line_of(v), convert(v)});
    }
  } else if (const auto* a = n.as_array()) {
    out.type = TomlType::kArray;
    out.items.reserve(a->size());
    for (const auto& e : *a) out.items.push_back(convert(e));
  } else if (const auto* s = n.as_string()) {
    out.type = TomlType::kString;
    out.string = s->get();
  } else if (const auto* i = n.as_integer()) {
    out.type = TomlType::kInteger;
    out.integer = i->get();
  } else if (const auto* f = n.as_floating_point()) {
    out.type = TomlType::kFloat;
    out.floating = f->get();
  } else if (const auto* b = n.as_boolean()) {
    out.type = TomlType::kBoolean;
    out.boolean = b->get();
  } else if (n.is_date()) {
    out.type = TomlType::kDate;
  } else if (n.is_time()) {
    out.type = TomlType::kTime;
  } else {
    out.type = TomlType::kDateTime;
  }
  return out;
}

// Edits (insert, delete, substitute, swap two neighbours) from a to b: "jbo" is one from "job".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::vector<FileIssue> by_line(std::vector<FileIssue> issues) {
  std::stable_sort(issues.begin(), issues.end(), [](const FileIssue& a, const FileIssue& b) {
    return (a.line == 0 ? INT_MAX : a.line) < (b.line == 0 ? INT_MAX : b.line);
  });
  return issues;
}

}  // namespace

std::string FileIssue::where() const {
  std::string out = file.empty() ? "<spec>" : file;
  if (line > 0) out += fmt::format(":{}", line);
  if (line > 0 && column > 0) out += fmt::format(":{}", column);
  return out;
}

std::string FileIssue::text() const {
  std::string out = where() + ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

const char* type_name(TomlType type) {
  switch (type) {
    case TomlType::kTable:
      return "a table";
    case TomlType::kArray:
      return "an array";
    case TomlType::kString:
      return "a string";
    case TomlType::kInteger:
      return "an integer";
    case TomlType::kFloat:
      return "a float";
    case TomlType::kBoolean:
      return "a boolean";
    case TomlType::kDate:
      return "a date";
    case TomlType::kTime:
      return "a time";
    case TomlType::kDateTime:
      return "a date-time";
  }
  return "nothing";
}

bool TomlValue::is_array_of_tables() const {
  return type == TomlType::kArray && !items.empty() &&
         std::all_of(items.begin(), items.end(),
                     [](const TomlValue& v) { return v.is(TomlType::kTable); });
}

const TomlValue* TomlValue::find(std::string_view key) const {
  for (const auto& e : entries) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

TomlDocument parse_toml(std::string_view text, const std::string& source_name) {
  TomlDocument doc;
  try {
    doc.root = convert(toml::parse(text, source_name));
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    doc.syntax_error =
        FileIssue{source_name, static_cast<int>(at.line), static_cast<int>(at.column), "",
                  fmt::format("malformed TOML: {}", e.description())};
  }
  return doc;
}

Result<std::string> read_toml_file(const std::string& path, size_t max_bytes,
                                   std::string_view what) {
  auto f = read_text_file(path, max_bytes);
  if (!f) {
    Error e = f.error();
    if (e.message.ends_with("bytes")) e.message += fmt::format("; not {}", what);
    return e;
  }
  return std::move(f->text);
}

std::string closest(std::string_view word, std::span<const std::string_view> candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, std::min<size_t>(3, word.size() / 3)) + 1;
  for (auto c : candidates) {
    size_t d = edit_distance(word, c);
    // "grace" for "grace_intervals": a shared prefix of 3+ characters is as good as a typo.
    bool prefix =
        std::min(word.size(), c.size()) >= 3 && (c.starts_with(word) || word.starts_with(c));
    if (prefix) d = std::min<size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string unknown_key_message(std::string_view key, std::span<const std::string_view> known) {
  auto near = closest(key, known);
  return near.empty() ? "unknown key" : fmt::format("unknown key; did you mean \"{}\"?", near);
}

int KeyLines::line(std::string_view path) const {
  auto it = lines_.find(path);
  return it == lines_.end() ? 0 : it->second;
}

void IssueSink::error(int line, std::string key, std::string message) {
  errors_.push_back(FileIssue{file_, line, 0, std::move(key), std::move(message)});
}

void IssueSink::warning(std::string key, std::string message) {
  int line = lines_->line(key);
  warnings_.push_back(FileIssue{file_, line, 0, std::move(key), std::move(message)});
}

std::vector<FileIssue> IssueSink::take_errors() {
  return by_line(std::move(errors_));
}
std::vector<FileIssue> IssueSink::take_warnings() {
  return by_line(std::move(warnings_));
}

std::string TomlReader::join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

bool TomlReader::contains(std::span<const std::string_view> known, std::string_view key) {
  return std::find(known.begin(), known.end(), key) != known.end();
}

void TomlReader::type_error(const TomlValue& v, const std::string& key, std::string_view expected) {
  const char* verb = wording_ == Wording::kExpected ? "expected" : "must be";
  sink_.error(v.line, key, fmt::format("{} {}, got {}", verb, expected, type_name(v.type)));
}

void TomlReader::error(const TomlValue& v, const std::string& key, std::string message) {
  sink_.error(v.line, key, std::move(message));
}

const TomlValue* TomlReader::table(const TomlValue& v, const std::string& key) {
  if (v.is(TomlType::kTable)) return &v;
  type_error(v, key, fmt::format("a table ([{}])", key));
  return nullptr;
}

bool TomlReader::get(const TomlValue& v, const std::string& key, std::string* out) {
  if (!v.is(TomlType::kString)) {
    type_error(v, key, "a string");
    return false;
  }
  *out = v.string;
  return true;
}

bool TomlReader::get(const TomlValue& v, const std::string& key, bool* out) {
  if (!v.is(TomlType::kBoolean)) {
    type_error(v, key, "true or false");
    return false;
  }
  *out = v.boolean;
  return true;
}

bool TomlReader::get_int(const TomlValue& v, const std::string& key, int* out, int64_t lo,
                         int64_t hi, std::string_view expected) {
  lo = std::max<int64_t>(lo, INT_MIN);
  hi = std::min<int64_t>(hi, INT_MAX);
  if (!v.is(TomlType::kInteger)) {
    type_error(v, key, expected.empty() ? "an integer" : expected);
    return false;
  }
  if (v.integer < lo || v.integer > hi) {
    if (expected.empty()) {
      error(v, key, fmt::format("{} is out of range", v.integer));
    } else {
      const char* verb = wording_ == Wording::kExpected ? "expected" : "must be";
      error(v, key, fmt::format("{} {}, got {}", verb, expected, v.integer));
    }
    return false;
  }
  *out = static_cast<int>(v.integer);
  return true;
}

bool TomlReader::get_number(const TomlValue& v, const std::string& key, double* out) {
  if (v.is(TomlType::kInteger)) {
    *out = static_cast<double>(v.integer);
  } else if (v.is(TomlType::kFloat)) {
    *out = v.floating;
  } else {
    type_error(v, key, "a number");
    return false;
  }
  return true;
}

bool TomlReader::get_duration(const TomlValue& v, const std::string& key, int64_t* out, Zero zero) {
  int64_t ns = 0;
  std::string shown;
  if (v.is(TomlType::kString)) {
    auto parsed = parse_duration(v.string);
    if (!parsed) {
      error(v, key, parsed.error().message);
      return false;
    }
    ns = *parsed;
    shown = fmt::format("\"{}\"", v.string);
  } else if (v.is_number()) {
    double seconds = v.is(TomlType::kInteger) ? static_cast<double>(v.integer) : v.floating;
    shown = fmt::format("{:g}", seconds);
    if (!std::isfinite(seconds) || std::fabs(seconds) > 9e9) {
      error(v, key, fmt::format("{} seconds is out of range", shown));
      return false;
    }
    ns = std::llround(seconds * static_cast<double>(kNsPerSec));
  } else {
    type_error(v, key, "a duration (a string like \"15m\" or a number of seconds)");
    return false;
  }
  if (ns < 0 || (ns == 0 && zero == Zero::kRefuse)) {
    error(v, key,
          fmt::format("must be a {} duration, got {}",
                      zero == Zero::kRefuse ? "positive" : "non-negative", shown));
    return false;
  }
  *out = ns;
  return true;
}

bool TomlReader::get_size(const TomlValue& v, const std::string& key, int64_t* out) {
  if (v.is(TomlType::kInteger)) {
    *out = v.integer;
    return true;
  }
  if (!v.is(TomlType::kString)) {
    type_error(v, key, "a size (a string like \"64MiB\" or a number of bytes)");
    return false;
  }
  auto parsed = parse_size(v.string);
  if (!parsed) {
    error(v, key, parsed.error().message);
    return false;
  }
  *out = *parsed;
  return true;
}

bool TomlReader::get_strings(const TomlValue& v, const std::string& key,
                             std::vector<std::string>* out) {
  if (!v.is(TomlType::kArray)) {
    type_error(v, key, "an array of strings");
    return false;
  }
  out->clear();
  bool ok = true;
  for (size_t i = 0; i < v.items.size(); ++i) {
    const TomlValue& e = v.items[i];
    std::string element = fmt::format("{}[{}]", key, i);
    lines_.set(element, e.line);
    if (e.is(TomlType::kString)) {
      out->push_back(e.string);
    } else {
      type_error(e, element, "a string");
      ok = false;
    }
  }
  return ok;
}

}  // namespace stepwatch::spec
