// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The TOML side of the spec: key names, types and durations through toml_reader.h, recording
// where each key was written; every other rule is in rules.cpp. Errors are collected, not
// thrown: a file with five mistakes reports five.
#include "src/spec/spec.h"

#include <fmt/format.h>

#include <climits>
#include <span>

#include "src/spec/keys.h"
#include "src/spec/rules.h"
#include "src/spec/toml_reader.h"

namespace stepwatch::spec {

namespace {

constexpr std::string_view kLearn[] = {"learn"};

class Reader {
 public:
  Reader(JobSpec* spec, KeyLines* lines, IssueSink* sink)
      : spec_(*spec), lines_(*lines), sink_(*sink), in_(sink, lines) {}

  void root(const TomlValue& t) {
    each_key(t, "", Table::kRoot,
             [&](std::string_view k, const TomlValue& v, const std::string& p) {
               if (k == "job") in_.get(v, p, &spec_.job);
               if (k == "owner") in_.get(v, p, &spec_.owner);
               if (k == "class") in_.get(v, p, &spec_.job_class);
               if (k == "users") in_.get_strings(v, p, &spec_.users);
               if (k == "world_size") read_int(v, p, &spec_.world_size);
               if (k == "expected_interval") expected_interval(v, p);
               if (k == "grace_intervals") in_.get_number(v, p, &spec_.grace_intervals);
               if (k == "slow_factor") in_.get_number(v, p, &spec_.slow_factor);
               if (k == "exit_grace") in_.get_duration(v, p, &spec_.exit_grace_ns);
               if (k == "poll_interval") {
                 int64_t ns = 0;
                 if (in_.get_duration(v, p, &ns)) spec_.poll_interval_ns = ns;
               }
               if (k == "quiet_budget") quiet_budget(v, p);
               if (k == "quiet_floor") in_.get_duration(v, p, &spec_.quiet_floor_ns);
               if (k == "learn") learn(v, p);
               if (k == "phases") phases(v, p);
               if (k == "auto_preempt") auto_preempt(v, p);
               if (k == "log") log(v, p);
               if (k == "checkpoint") checkpoint(v, p);
               if (k == "runbook") runbook(v, p);
               if (k == "slurm") slurm(v, p);
               if (k == "kubernetes") kubernetes(v, p);
               if (k == "node_fault") node_fault(v, p);
             });
  }

 private:
  // Calls on_key(key, value, path) for every known key of `t`; reports the unknown ones, with
  // the table where a misplaced key belongs.
  template <class OnKey>
  void each_key(const TomlValue& t, const std::string& prefix, Table table, OnKey&& on_key) {
    in_.each_key(t, prefix, known_keys(table), on_key,
                 [table](std::string_view key) { return unknown_key_message(table, key); });
  }

  void read_int(const TomlValue& v, const std::string& path, int* out) {
    in_.get_int(v, path, out, INT_MIN, INT_MAX);
  }

  template <class Enum>
  void read_enum(const TomlValue& v, const std::string& path,
                 std::span<const std::string_view> names,
                 std::optional<Enum> (*parse)(std::string_view), Enum* out) {
    if (!v.is(TomlType::kString))
      return in_.type_error(v, path, fmt::format("a string, {}", one_of(names)));
    if (auto e = parse(v.string)) {
      *out = *e;
      return;
    }
    auto near = closest(v.string, names);
    in_.error(v, path,
              fmt::format("unknown value \"{}\"; {}{}", v.string, one_of(names),
                          near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
  }

  void expected_interval(const TomlValue& v, const std::string& path) {
    if (v.is(TomlType::kString) && v.string == "learn") {
      spec_.expected_interval_ns.reset();
      return;
    }
    if (v.is(TomlType::kString) && closest(v.string, kLearn) == "learn") {
      in_.error(v, path, fmt::format("\"{}\" is neither a duration nor \"learn\"", v.string));
      return;
    }
    int64_t ns = 0;
    if (in_.get_duration(v, path, &ns)) spec_.expected_interval_ns = ns;
  }

  void quiet_budget(const TomlValue& v, const std::string& path) {
    constexpr std::string_view kWords[] = {"learn", "off"};
    if (v.is(TomlType::kString) && (v.string == "learn" || v.string == "off")) {
      spec_.quiet_budget_ns.reset();
      spec_.quiet_early = v.string == "learn";
      return;
    }
    if (v.is(TomlType::kString) && !closest(v.string, kWords).empty()) {
      in_.error(v, path,
                fmt::format("\"{}\" is neither a duration, \"learn\" nor \"off\"", v.string));
      return;
    }
    int64_t ns = 0;
    if (in_.get_duration(v, path, &ns)) spec_.quiet_budget_ns = ns;
  }

  void learn(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    each_key(*t, path, Table::kLearn,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "warmup_steps") read_int(e, p, &spec_.learn.warmup_steps);
               if (k == "window") read_int(e, p, &spec_.learn.window);
             });
  }

  // Each entry is `name = "10m"` or `name = { budget = "10m", beats_renew = true }`.
  void phases(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    for (const auto& [k, line, e] : t->entries) {
      std::string p = TomlReader::join(path, k);
      lines_.set(p, line);
      auto builtin = spec_.phases.find(k);
      PhaseBudget budget = builtin != spec_.phases.end() ? builtin->second : PhaseBudget{};
      if (e.is(TomlType::kTable)) {
        bool has_budget = false;
        each_key(e, p, Table::kPhase,
                 [&](std::string_view key, const TomlValue& x, const std::string& xp) {
                   if (key == "budget") {
                     has_budget = true;  // an invalid budget is reported once, by get_duration
                     in_.get_duration(x, xp, &budget.budget_ns);
                   }
                   if (key == "beats_renew") in_.get(x, xp, &budget.beats_renew);
                 });
        if (!has_budget && builtin == spec_.phases.end()) {
          sink_.error(line, p, "a user-defined phase needs a budget");
          continue;
        }
      } else if (e.is(TomlType::kString) || e.is_number()) {
        if (!in_.get_duration(e, p, &budget.budget_ns)) continue;
      } else {
        in_.type_error(e, p, "a duration or a table { budget = \"10m\", beats_renew = false }");
        continue;
      }
      if (budget.budget_ns > 0) spec_.phases[k] = budget;
    }
  }

  void auto_preempt(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    each_key(*t, path, Table::kAutoPreempt,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "enabled") in_.get(e, p, &spec_.auto_preempt.enabled);
               if (k == "misses") read_int(e, p, &spec_.auto_preempt.misses);
             });
  }

  void log(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    auto& l = spec_.log;
    each_key(*t, path, Table::kLog,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "preset")
                 read_enum<LogPreset>(e, p, kLogPresetNames, parse_log_preset, &l.preset);
               if (k == "step_pattern") in_.get(e, p, &l.step_pattern);
               if (k == "phase_start") in_.get(e, p, &l.phase_start);
               if (k == "phase_end") in_.get(e, p, &l.phase_end);
               if (k == "noise") in_.get_strings(e, p, &l.noise);
             });
    // Patterns of your own without a preset: only yours read the log, as they always did.
    bool own = !l.step_pattern.empty() || !l.phase_start.empty() || !l.phase_end.empty();
    if (own && t->find("preset") == nullptr) l.preset = LogPreset::kNone;
  }

  void checkpoint(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    auto& c = spec_.checkpoint;
    each_key(*t, path, Table::kCheckpoint,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "dir") in_.get(e, p, &c.dir);
               if (k == "marker") in_.get(e, p, &c.marker);
               if (k == "source")
                 read_enum<CheckpointSource>(e, p, kCheckpointSourceNames, parse_checkpoint_source,
                                             &c.source);
             });
    // A catalog to scan is the stronger evidence: only the file system knows a write finished.
    if (!lines_.has("checkpoint.source") && !c.dir.empty()) c.source = CheckpointSource::kMarker;
  }

  void runbook(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    auto& r = spec_.runbook;
    each_key(*t, path, Table::kRunbook,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "ack_timeout") in_.get_duration(e, p, &r.ack_timeout_ns);
               if (k == "ack_hold_limit") in_.get_duration(e, p, &r.ack_hold_limit_ns);
               if (k == "pager") pagers(e, p);
               if (k == "collect") collect(e, p);
               if (k == "preempt_command") in_.get_strings(e, p, &r.preempt_command);
               if (k == "preempt_grace") in_.get_duration(e, p, &r.preempt_grace_ns);
               if (k == "resume_command") in_.get_strings(e, p, &r.resume_command);
               if (k == "restart_budget") read_int(e, p, &r.restart_budget);
               if (k == "resume") in_.get(e, p, &r.resume);
               if (k == "resume_owner")
                 read_enum<ResumeOwner>(e, p, kResumeOwnerNames, parse_resume_owner,
                                        &r.resume_owner);
             });
  }

  void slurm(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    auto& s = spec_.slurm;
    each_key(*t, path, Table::kSlurm,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "requeue")
                 read_enum<SlurmRequeue>(e, p, kSlurmRequeueNames, parse_slurm_requeue, &s.requeue);
               if (k == "requeue_exit_code") read_int(e, p, &s.requeue_exit_code);
               if (k == "scontrol") in_.get(e, p, &s.scontrol);
               if (k == "scancel") in_.get(e, p, &s.scancel);
               if (k == "command_timeout") in_.get_duration(e, p, &s.command_timeout_ns);
             });
  }

  void kubernetes(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    each_key(*t, path, Table::kKubernetes,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "requeue_exit_code") read_int(e, p, &spec_.kubernetes.requeue_exit_code);
             });
  }

  void node_fault(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    auto& f = spec_.node_fault;
    each_key(*t, path, Table::kNodeFault,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "storm_incarnations") read_int(e, p, &f.storm_incarnations);
               if (k == "storm_window") in_.get_duration(e, p, &f.storm_window_ns);
               if (k == "suspect_of_last") read_int(e, p, &f.suspect_of_last);
               if (k == "suspect_culprit_min") read_int(e, p, &f.suspect_culprit_min);
               if (k == "short_run_count") read_int(e, p, &f.short_run_count);
               if (k == "short_run") in_.get_duration(e, p, &f.short_run_ns);
               if (k == "cross_job_min") read_int(e, p, &f.cross_job_min);
               if (k == "cross_job_window") in_.get_duration(e, p, &f.cross_job_window_ns);
               if (k == "drain") in_.get(e, p, &f.drain);
             });
  }

  void pagers(const TomlValue& v, const std::string& path) {
    if (v.is(TomlType::kArray) && v.items.empty()) return;
    if (!v.is_array_of_tables()) {
      return in_.type_error(v, path, "an array of tables ([[runbook.pager]] sections)");
    }
    for (size_t i = 0; i < v.items.size(); ++i) {
      const TomlValue& t = v.items[i];
      std::string p = fmt::format("{}[{}]", path, i);
      lines_.set(p, t.line);
      Pager pager;
      each_key(t, p, Table::kPager,
               [&](std::string_view k, const TomlValue& e, const std::string& xp) {
                 if (k == "kind")
                   read_enum<PagerKind>(e, xp, kPagerKindNames, parse_pager_kind, &pager.kind);
                 if (k == "url") in_.get(e, xp, &pager.url);
                 if (k == "command") in_.get_strings(e, xp, &pager.command);
                 if (k == "timeout") in_.get_duration(e, xp, &pager.timeout_ns);
                 if (k == "retries") read_int(e, xp, &pager.retries);
               });
      // Without a kind, the field that is there says which kind is meant.
      if (!lines_.has(p + ".kind") && !pager.command.empty()) pager.kind = PagerKind::kCommand;
      spec_.runbook.pagers.push_back(std::move(pager));
    }
  }

  void collect(const TomlValue& v, const std::string& path) {
    const auto* t = in_.table(v, path);
    if (t == nullptr) return;
    auto& c = spec_.runbook.collect;
    each_key(*t, path, Table::kCollect,
             [&](std::string_view k, const TomlValue& e, const std::string& p) {
               if (k == "python_stacks") in_.get(e, p, &c.python_stacks);
               if (k == "native_stacks") in_.get(e, p, &c.native_stacks);
               if (k == "gpu") in_.get(e, p, &c.gpu);
               if (k == "log_lines") read_int(e, p, &c.log_lines);
               if (k == "max_bytes") in_.get_size(e, p, &c.max_bytes);
               if (k == "time_limit") in_.get_duration(e, p, &c.time_limit_ns);
             });
  }

  JobSpec& spec_;
  KeyLines& lines_;
  IssueSink& sink_;
  TomlReader in_;
};

}  // namespace

SpecCheck check_spec(std::string_view text, const std::string& source_name) {
  SpecCheck out;
  out.spec.source = source_name;
  KeyLines lines;
  IssueSink sink(source_name, &lines);
  try {
    TomlDocument doc = parse_toml(text, source_name);
    if (doc.syntax_error) {
      out.syntax_error = true;
      out.errors.push_back(std::move(*doc.syntax_error));
      return out;
    }
    Reader(&out.spec, &lines, &sink).root(doc.root);
    validate_spec(out.spec, lines, sink);
  } catch (const std::exception& e) {  // the boundary: nothing thrown leaves the spec loader
    sink.error(0, "", fmt::format("internal error while reading the spec: {}", e.what()));
  }
  out.errors = sink.take_errors();  // in file order
  out.warnings = sink.take_warnings();
  return out;
}

}  // namespace stepwatch::spec
