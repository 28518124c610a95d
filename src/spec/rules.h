// The rules a spec must satisfy, free of toml++: name and range checks, RE2 patterns, URLs,
// command placeholders and the cross-field rules. spec.cpp turns TOML into a JobSpec (types,
// durations, unknown keys); validate_spec() then applies every rule here, in one place.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/spec/spec.h"

namespace stepwatch::spec {

// Where each key the file set was written: "runbook.pager[0].url" -> 14. A key the file did
// not set is absent: the rules use it to tell explicit values from defaults.
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

  std::vector<SpecIssue> take_errors() { return std::move(errors_); }
  std::vector<SpecIssue> take_warnings() { return std::move(warnings_); }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  const KeyLines* lines_;
  std::vector<SpecIssue> errors_;
  std::vector<SpecIssue> warnings_;
};

std::optional<LogPreset> parse_log_preset(std::string_view name);
std::optional<PagerKind> parse_pager_kind(std::string_view name);
std::optional<CheckpointSource> parse_checkpoint_source(std::string_view name);
inline constexpr std::string_view kLogPresetNames[] = {"none",      "plain",     "huggingface",
                                                       "lightning", "megatron",  "torchtitan",
                                                       "nemo",      "deepspeed", "auto"};
inline constexpr std::string_view kPagerKindNames[] = {"webhook", "alertmanager", "command"};
inline constexpr std::string_view kCheckpointSourceNames[] = {"marker", "beacon"};

// "one of a, b or c" for messages.
std::string one_of(std::span<const std::string_view> names);

// The candidate closest to a misspelt `word` (small edit distance or a shared prefix), or "".
std::string closest(std::string_view word, std::span<const std::string_view> candidates);

// An empty string when `name` is acceptable, else what is wrong with it.
std::string job_id_problem(std::string_view name);
std::string phase_name_problem(std::string_view name);

// Applies every rule to a spec read from the file; issues go to `sink`.
void validate_spec(const JobSpec& spec, const KeyLines& lines, IssueSink& sink);

}  // namespace stepwatch::spec
