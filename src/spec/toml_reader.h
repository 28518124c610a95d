// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one TOML reader under the job spec and the agent configuration: reading the file (bounded,
// never blocking), parsing (toml++ stays inside toml_reader.cpp, STYLE rule 11), and reading
// values with errors that name the file, line and key: "job.toml:4: job: expected a string, got
// an integer", "agent.toml:2: polling: unknown key; did you mean \"poll_interval\"?".
// Errors are collected, not thrown: a file with five mistakes reports five.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::spec {

// One problem found in a file. line 0: not tied to one line (a cross-field rule on defaults).
struct FileIssue {
  std::string file;
  int line = 0;
  int column = 0;   // only for TOML syntax errors
  std::string key;  // "runbook.pager[1].url"; empty for syntax errors
  std::string message;

  // "FILE:LINE" ("FILE:LINE:COLUMN" for syntax errors, "FILE" without a line; "<spec>" for "")
  std::string where() const;
  std::string text() const;  // "FILE:LINE: key: message"
};

enum class TomlType {
  kTable,
  kArray,
  kString,
  kInteger,
  kFloat,
  kBoolean,
  kDate,
  kTime,
  kDateTime
};

// "a string", "an integer", ... as messages say what was found.
const char* type_name(TomlType type);

struct TomlEntry;

// A parsed TOML value with the line it was written on: our own type, so no other file needs
// toml++. Only the member of `type` is set (dates and times keep no value).
struct TomlValue {
  TomlType type = TomlType::kTable;
  int line = 0;
  std::string string;
  int64_t integer = 0;
  double floating = 0;
  bool boolean = false;
  std::vector<TomlValue> items;    // kArray
  std::vector<TomlEntry> entries;  // kTable, ordered by key

  bool is(TomlType t) const { return type == t; }
  bool is_number() const { return type == TomlType::kInteger || type == TomlType::kFloat; }
  bool is_array_of_tables() const;  // a non-empty array whose items are all tables
  const TomlValue* find(std::string_view key) const;  // in a table; nullptr when absent
};

struct TomlEntry {
  std::string key;
  int line = 0;  // where the key was written (the value's line when toml++ has none)
  TomlValue value;
};

// A parsed document: its root table, or the syntax error ("malformed TOML: ..." at line:column).
struct TomlDocument {
  TomlValue root;
  std::optional<FileIssue> syntax_error;
};
TomlDocument parse_toml(std::string_view text, const std::string& source_name);

// The text of a TOML file of at most max_bytes, through read_text_file (a FIFO or device is
// refused, never waited on). A larger file is refused as "...: larger than N bytes; not WHAT".
Result<std::string> read_toml_file(const std::string& path, size_t max_bytes,
                                   std::string_view what);

// The candidate closest to a misspelt `word` (small edit distance or a shared prefix), or "".
std::string closest(std::string_view word, std::span<const std::string_view> candidates);

// "unknown key; did you mean \"x\"?" with the closest of `known`, else "unknown key".
std::string unknown_key_message(std::string_view key, std::span<const std::string_view> known);

// Where each key the file set was written: "runbook.pager[0].url" -> 14. A key the file did
// not set is absent: rules use it to tell explicit values from defaults.
class KeyLines {
 public:
  void set(std::string path, int line) { lines_[std::move(path)] = line; }
  bool has(std::string_view path) const { return lines_.find(path) != lines_.end(); }
  int line(std::string_view path) const;  // 0 when unset

 private:
  std::map<std::string, int, std::less<>> lines_;
};

// Collects the errors and warnings of one file.
class IssueSink {
 public:
  IssueSink(std::string file, const KeyLines* lines) : file_(std::move(file)), lines_(lines) {}

  void error(int line, std::string key, std::string message);
  void error(std::string key, std::string message) {
    int line = lines_->line(key);  // before `key` is moved from
    error(line, std::move(key), std::move(message));
  }
  void warning(std::string key, std::string message);

  // In file order; issues of no single line (cross-field rules on defaults) go last.
  std::vector<FileIssue> take_errors();
  std::vector<FileIssue> take_warnings();
  bool has_errors() const { return !errors_.empty(); }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  const KeyLines* lines_;
  std::vector<FileIssue> errors_;
  std::vector<FileIssue> warnings_;
};

// Reads values out of a parsed document into typed fields, reporting each mistake to the sink
// as "KEY: expected TYPE, got TYPE" (or "KEY: must be TYPE, got TYPE", as the file's own
// messages read). Every getter returns false, and leaves *out alone, on a mistake.
class TomlReader {
 public:
  enum class Wording { kExpected, kMustBe };
  // What a duration may be: > 0 (the spec's budgets) or >= 0 (0: at once).
  enum class Zero { kRefuse, kAllow };
  // The message for a key a table does not hold.
  using UnknownKey = std::function<std::string(std::string_view key)>;

  TomlReader(IssueSink* sink, KeyLines* lines, Wording wording = Wording::kExpected)
      : sink_(*sink), lines_(*lines), wording_(wording) {}

  // Calls on_key(key, value, path) for every key of `table` in `known`, recording its line
  // under path (prefix.key); every other key is reported with `unknown` (default:
  // unknown_key_message over `known`).
  template <class OnKey>
  void each_key(const TomlValue& table, const std::string& prefix,
                std::span<const std::string_view> known, OnKey&& on_key,
                const UnknownKey& unknown = {}) {
    for (const auto& e : table.entries) {
      std::string path = join(prefix, e.key);
      if (!contains(known, e.key)) {
        sink_.error(e.line, path, unknown ? unknown(e.key) : unknown_key_message(e.key, known));
        continue;
      }
      lines_.set(path, e.line);
      on_key(std::string_view(e.key), e.value, path);
    }
  }

  // "KEY: expected EXPECTED, got TYPE" at the value's line.
  void type_error(const TomlValue& v, const std::string& key, std::string_view expected);
  void error(const TomlValue& v, const std::string& key, std::string message);

  // The table `v` is, or nullptr after "expected a table ([KEY])".
  const TomlValue* table(const TomlValue& v, const std::string& key);

  bool get(const TomlValue& v, const std::string& key, std::string* out);
  bool get(const TomlValue& v, const std::string& key, bool* out);  // "true or false"
  // An integer in [lo, hi]; `expected` words both mistakes ("an integer" by default, with
  // "N is out of range" for one outside the bounds).
  bool get_int(const TomlValue& v, const std::string& key, int* out, int64_t lo, int64_t hi,
               std::string_view expected = {});
  bool get_number(const TomlValue& v, const std::string& key, double* out);  // integer or float
  // A string ("15m", "1h30m", "500ms") or a number of seconds.
  bool get_duration(const TomlValue& v, const std::string& key, int64_t* out,
                    Zero zero = Zero::kRefuse);
  // A string ("64MiB") or a number of bytes.
  bool get_size(const TomlValue& v, const std::string& key, int64_t* out);
  // An array of strings; each element's line is recorded as KEY[i].
  bool get_strings(const TomlValue& v, const std::string& key, std::vector<std::string>* out);

  static std::string join(const std::string& prefix, std::string_view key);

 private:
  static bool contains(std::span<const std::string_view> known, std::string_view key);

  IssueSink& sink_;
  KeyLines& lines_;
  Wording wording_;
};

}  // namespace stepwatch::spec
