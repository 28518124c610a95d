// The TOML side of the spec, and the only file that includes toml++ (STYLE rule 11). It checks
// key names, types and durations and records where each key was written; every other rule is
// in rules.cpp. Errors are collected, not thrown: a file with five mistakes reports five.
#include "src/spec/spec.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <span>

#include "src/common/duration.h"
#include "src/spec/keys.h"
#include "src/spec/rules.h"
#include "src/spec/size.h"

namespace stepwatch::spec {

namespace {

constexpr std::string_view kLearn[] = {"learn"};

const char* type_name(const toml::node& v) {
  if (v.is_table()) return "a table";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_integer()) return "an integer";
  if (v.is_floating_point()) return "a float";
  if (v.is_boolean()) return "a boolean";
  if (v.is_date()) return "a date";
  if (v.is_time()) return "a time";
  if (v.is_date_time()) return "a date-time";
  return "nothing";
}

int line_of(const toml::node& v) {
  return static_cast<int>(v.source().begin.line);
}
int line_of(const toml::key& k, const toml::node& v) {
  int line = static_cast<int>(k.source().begin.line);
  return line > 0 ? line : line_of(v);
}

std::string join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

class Reader {
 public:
  Reader(JobSpec* spec, KeyLines* lines, IssueSink* sink)
      : spec_(*spec), lines_(*lines), sink_(*sink) {}

  void root(const toml::table& t) {
    each_key(t, "", Table::kRoot,
             [&](std::string_view k, const toml::node& v, const std::string& p) {
               if (k == "job") read(v, p, &spec_.job);
               if (k == "owner") read(v, p, &spec_.owner);
               if (k == "class") read(v, p, &spec_.job_class);
               if (k == "users") read_strings(v, p, &spec_.users);
               if (k == "world_size") read_int(v, p, &spec_.world_size);
               if (k == "expected_interval") expected_interval(v, p);
               if (k == "grace_intervals") read_number(v, p, &spec_.grace_intervals);
               if (k == "slow_factor") read_number(v, p, &spec_.slow_factor);
               if (k == "exit_grace") read_duration(v, p, &spec_.exit_grace_ns);
               if (k == "poll_interval") {
                 int64_t ns = 0;
                 if (read_duration(v, p, &ns)) spec_.poll_interval_ns = ns;
               }
               if (k == "learn") learn(v, p);
               if (k == "phases") phases(v, p);
               if (k == "auto_preempt") auto_preempt(v, p);
               if (k == "log") log(v, p);
               if (k == "checkpoint") checkpoint(v, p);
               if (k == "runbook") runbook(v, p);
             });
  }

 private:
  // Calls on_key(key, value, path) for every known key of `t`; reports the unknown ones.
  template <class OnKey>
  void each_key(const toml::table& t, const std::string& prefix, Table table, OnKey&& on_key) {
    for (auto&& [k, v] : t) {
      std::string path = join(prefix, k.str());
      if (!is_known_key(table, k.str())) {
        sink_.error(line_of(k, v), path, unknown_key_message(table, k.str()));
        continue;
      }
      lines_.set(path, line_of(k, v));
      on_key(k.str(), v, path);
    }
  }

  void type_error(const toml::node& v, const std::string& path, std::string_view expected) {
    sink_.error(line_of(v), path, fmt::format("expected {}, got {}", expected, type_name(v)));
  }

  const toml::table* table(const toml::node& v, const std::string& path) {
    const auto* t = v.as_table();
    if (t == nullptr) type_error(v, path, fmt::format("a table ([{}])", path));
    return t;
  }

  void read(const toml::node& v, const std::string& path, std::string* out) {
    if (const auto* s = v.as_string()) {
      *out = s->get();
    } else {
      type_error(v, path, "a string");
    }
  }

  void read(const toml::node& v, const std::string& path, bool* out) {
    if (const auto* b = v.as_boolean()) {
      *out = b->get();
    } else {
      type_error(v, path, "true or false");
    }
  }

  template <class Int>
  void read_int(const toml::node& v, const std::string& path, Int* out) {
    const auto* i = v.as_integer();
    if (i == nullptr) return type_error(v, path, "an integer");
    int64_t value = i->get();
    if (value < INT_MIN || value > INT_MAX) {
      sink_.error(line_of(v), path, fmt::format("{} is out of range", value));
      return;
    }
    *out = static_cast<Int>(value);
  }

  void read_number(const toml::node& v, const std::string& path, double* out) {
    if (const auto* i = v.as_integer()) {
      *out = static_cast<double>(i->get());
    } else if (const auto* f = v.as_floating_point()) {
      *out = f->get();
    } else {
      type_error(v, path, "a number");
    }
  }

  // A duration is a string ("15m", "1h30m") or a number of seconds; every duration must be > 0.
  bool read_duration(const toml::node& v, const std::string& path, int64_t* out) {
    int64_t ns = 0;
    std::string shown;
    if (const auto* s = v.as_string()) {
      auto parsed = parse_duration(s->get());
      if (!parsed) {
        sink_.error(line_of(v), path, parsed.error().message);
        return false;
      }
      ns = *parsed;
      shown = fmt::format("\"{}\"", s->get());
    } else if (v.is_integer() || v.is_floating_point()) {
      double seconds = v.is_integer() ? static_cast<double>(v.as_integer()->get())
                                      : v.as_floating_point()->get();
      shown = fmt::format("{:g}", seconds);
      if (!std::isfinite(seconds) || std::fabs(seconds) > 9e9) {
        sink_.error(line_of(v), path, fmt::format("{} seconds is out of range", shown));
        return false;
      }
      ns = std::llround(seconds * static_cast<double>(kNsPerSec));
    } else {
      type_error(v, path, "a duration (a string like \"15m\" or a number of seconds)");
      return false;
    }
    if (ns <= 0) {
      sink_.error(line_of(v), path, fmt::format("must be a positive duration, got {}", shown));
      return false;
    }
    *out = ns;
    return true;
  }

  void read_size(const toml::node& v, const std::string& path, int64_t* out) {
    if (const auto* i = v.as_integer()) {
      *out = i->get();
    } else if (const auto* s = v.as_string()) {
      auto parsed = parse_size(s->get());
      if (parsed) {
        *out = *parsed;
      } else {
        sink_.error(line_of(v), path, parsed.error().message);
      }
    } else {
      type_error(v, path, "a size (a string like \"64MiB\" or a number of bytes)");
    }
  }

  void read_strings(const toml::node& v, const std::string& path, std::vector<std::string>* out) {
    const auto* a = v.as_array();
    if (a == nullptr) return type_error(v, path, "an array of strings");
    out->clear();
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      std::string element = fmt::format("{}[{}]", path, i);
      lines_.set(element, line_of(e));
      if (const auto* s = e.as_string()) {
        out->push_back(s->get());
      } else {
        type_error(e, element, "a string");
      }
    }
  }

  template <class Enum>
  void read_enum(const toml::node& v, const std::string& path,
                 std::span<const std::string_view> names,
                 std::optional<Enum> (*parse)(std::string_view), Enum* out) {
    std::string name;
    const auto* s = v.as_string();
    if (s == nullptr) return type_error(v, path, fmt::format("a string, {}", one_of(names)));
    if (auto e = parse(s->get())) {
      *out = *e;
      return;
    }
    auto near = closest(s->get(), names);
    sink_.error(line_of(v), path,
                fmt::format("unknown value \"{}\"; {}{}", s->get(), one_of(names),
                            near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
  }

  void expected_interval(const toml::node& v, const std::string& path) {
    if (const auto* s = v.as_string(); s != nullptr && s->get() == "learn") {
      spec_.expected_interval_ns.reset();
      return;
    }
    if (const auto* s = v.as_string(); s != nullptr && closest(s->get(), kLearn) == "learn") {
      sink_.error(line_of(v), path,
                  fmt::format("\"{}\" is neither a duration nor \"learn\"", s->get()));
      return;
    }
    int64_t ns = 0;
    if (read_duration(v, path, &ns)) spec_.expected_interval_ns = ns;
  }

  void learn(const toml::node& v, const std::string& path) {
    const auto* t = table(v, path);
    if (t == nullptr) return;
    each_key(*t, path, Table::kLearn,
             [&](std::string_view k, const toml::node& e, const std::string& p) {
               if (k == "warmup_steps") read_int(e, p, &spec_.learn.warmup_steps);
               if (k == "window") read_int(e, p, &spec_.learn.window);
             });
  }

  // Each entry is `name = "10m"` or `name = { budget = "10m", beats_renew = true }`.
  void phases(const toml::node& v, const std::string& path) {
    const auto* t = table(v, path);
    if (t == nullptr) return;
    for (auto&& [k, e] : *t) {
      std::string p = join(path, k.str());
      lines_.set(p, line_of(k, e));
      auto builtin = spec_.phases.find(k.str());
      PhaseBudget budget = builtin != spec_.phases.end() ? builtin->second : PhaseBudget{};
      if (const auto* sub = e.as_table()) {
        bool has_budget = false;
        each_key(*sub, p, Table::kPhase,
                 [&](std::string_view key, const toml::node& x, const std::string& xp) {
                   if (key == "budget") {
                     has_budget = true;  // an invalid budget is reported once, by read_duration
                     read_duration(x, xp, &budget.budget_ns);
                   }
                   if (key == "beats_renew") read(x, xp, &budget.beats_renew);
                 });
        if (!has_budget && builtin == spec_.phases.end()) {
          sink_.error(line_of(k, e), p, "a user-defined phase needs a budget");
          continue;
        }
      } else if (e.is_string() || e.is_integer() || e.is_floating_point()) {
        if (!read_duration(e, p, &budget.budget_ns)) continue;
      } else {
        type_error(e, p, "a duration or a table { budget = \"10m\", beats_renew = false }");
        continue;
      }
      if (budget.budget_ns > 0) spec_.phases[std::string(k.str())] = budget;
    }
  }

  void auto_preempt(const toml::node& v, const std::string& path) {
    const auto* t = table(v, path);
    if (t == nullptr) return;
    each_key(*t, path, Table::kAutoPreempt,
             [&](std::string_view k, const toml::node& e, const std::string& p) {
               if (k == "enabled") read(e, p, &spec_.auto_preempt.enabled);
               if (k == "misses") read_int(e, p, &spec_.auto_preempt.misses);
             });
  }

  void log(const toml::node& v, const std::string& path) {
    const auto* t = table(v, path);
    if (t == nullptr) return;
    auto& l = spec_.log;
    each_key(*t, path, Table::kLog,
             [&](std::string_view k, const toml::node& e, const std::string& p) {
               if (k == "preset")
                 read_enum<LogPreset>(e, p, kLogPresetNames, parse_log_preset, &l.preset);
               if (k == "step_pattern") read(e, p, &l.step_pattern);
               if (k == "phase_start") read(e, p, &l.phase_start);
               if (k == "phase_end") read(e, p, &l.phase_end);
               if (k == "noise") read_strings(e, p, &l.noise);
             });
    // Patterns of your own without a preset: only yours read the log, as they always did.
    bool own = !l.step_pattern.empty() || !l.phase_start.empty() || !l.phase_end.empty();
    if (own && t->get("preset") == nullptr) l.preset = LogPreset::kNone;
  }

  void checkpoint(const toml::node& v, const std::string& path) {
    const auto* t = table(v, path);
    if (t == nullptr) return;
    auto& c = spec_.checkpoint;
    each_key(*t, path, Table::kCheckpoint,
             [&](std::string_view k, const toml::node& e, const std::string& p) {
               if (k == "dir") read(e, p, &c.dir);
               if (k == "marker") read(e, p, &c.marker);
               if (k == "source")
                 read_enum<CheckpointSource>(e, p, kCheckpointSourceNames, parse_checkpoint_source,
                                             &c.source);
             });
    // A catalog to scan is the stronger evidence: only the file system knows a write finished.
    if (!lines_.has("checkpoint.source") && !c.dir.empty()) c.source = CheckpointSource::kMarker;
  }

  void runbook(const toml::node& v, const std::string& path) {
    const auto* t = table(v, path);
    if (t == nullptr) return;
    auto& r = spec_.runbook;
    each_key(*t, path, Table::kRunbook,
             [&](std::string_view k, const toml::node& e, const std::string& p) {
               if (k == "ack_timeout") read_duration(e, p, &r.ack_timeout_ns);
               if (k == "ack_hold_limit") read_duration(e, p, &r.ack_hold_limit_ns);
               if (k == "pager") pagers(e, p);
               if (k == "collect") collect(e, p);
               if (k == "preempt_command") read_strings(e, p, &r.preempt_command);
               if (k == "preempt_grace") read_duration(e, p, &r.preempt_grace_ns);
               if (k == "resume_command") read_strings(e, p, &r.resume_command);
               if (k == "restart_budget") read_int(e, p, &r.restart_budget);
               if (k == "resume") read(e, p, &r.resume);
             });
  }

  void pagers(const toml::node& v, const std::string& path) {
    const auto* a = v.as_array();
    if (a != nullptr && a->empty()) return;
    if (a == nullptr || !a->is_array_of_tables()) {
      return type_error(v, path, "an array of tables ([[runbook.pager]] sections)");
    }
    for (size_t i = 0; i < a->size(); ++i) {
      const auto& t = *a->get(i)->as_table();
      std::string p = fmt::format("{}[{}]", path, i);
      lines_.set(p, line_of(t));
      Pager pager;
      each_key(t, p, Table::kPager,
               [&](std::string_view k, const toml::node& e, const std::string& xp) {
                 if (k == "kind")
                   read_enum<PagerKind>(e, xp, kPagerKindNames, parse_pager_kind, &pager.kind);
                 if (k == "url") read(e, xp, &pager.url);
                 if (k == "command") read_strings(e, xp, &pager.command);
                 if (k == "timeout") read_duration(e, xp, &pager.timeout_ns);
                 if (k == "retries") read_int(e, xp, &pager.retries);
               });
      // Without a kind, the field that is there says which kind is meant.
      if (!lines_.has(p + ".kind") && !pager.command.empty()) pager.kind = PagerKind::kCommand;
      spec_.runbook.pagers.push_back(std::move(pager));
    }
  }

  void collect(const toml::node& v, const std::string& path) {
    const auto* t = table(v, path);
    if (t == nullptr) return;
    auto& c = spec_.runbook.collect;
    each_key(*t, path, Table::kCollect,
             [&](std::string_view k, const toml::node& e, const std::string& p) {
               if (k == "python_stacks") read(e, p, &c.python_stacks);
               if (k == "native_stacks") read(e, p, &c.native_stacks);
               if (k == "gpu") read(e, p, &c.gpu);
               if (k == "log_lines") read_int(e, p, &c.log_lines);
               if (k == "max_bytes") read_size(e, p, &c.max_bytes);
               if (k == "time_limit") read_duration(e, p, &c.time_limit_ns);
             });
  }

  JobSpec& spec_;
  KeyLines& lines_;
  IssueSink& sink_;
};

}  // namespace

SpecCheck check_spec(std::string_view text, const std::string& source_name) {
  SpecCheck out;
  out.spec.source = source_name;
  KeyLines lines;
  IssueSink sink(source_name, &lines);
  try {
    toml::table root;
    try {
      root = toml::parse(text, source_name);
    } catch (const toml::parse_error& e) {
      out.syntax_error = true;
      const auto& at = e.source().begin;
      out.errors.push_back(SpecIssue{source_name, static_cast<int>(at.line),
                                     static_cast<int>(at.column), "",
                                     fmt::format("malformed TOML: {}", e.description())});
      return out;
    }
    Reader(&out.spec, &lines, &sink).root(root);
    validate_spec(out.spec, lines, sink);
  } catch (const std::exception& e) {  // the boundary: nothing thrown leaves the spec loader
    sink.error(0, "", fmt::format("internal error while reading the spec: {}", e.what()));
  }
  out.errors = sink.take_errors();
  out.warnings = sink.take_warnings();
  // File order reads best; issues of no single line (cross-field rules on defaults) go last.
  auto by_line = [](const SpecIssue& a, const SpecIssue& b) {
    return (a.line == 0 ? INT_MAX : a.line) < (b.line == 0 ? INT_MAX : b.line);
  };
  std::stable_sort(out.errors.begin(), out.errors.end(), by_line);
  std::stable_sort(out.warnings.begin(), out.warnings.end(), by_line);
  return out;
}

}  // namespace stepwatch::spec
