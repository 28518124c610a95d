// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The trace module's one translation unit that includes nlohmann/json (STYLE rule 11).
#include "src/trace/codec.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "src/common/json_fields.h"
#include "src/contract/names.h"

namespace stepwatch::trace {

namespace {

using json = nlohmann::json;
using contract::RankSnapshot;
using detect::Cause;
using detect::Evidence;
using detect::GpuFacts;
using detect::IntervalSource;
using detect::LogFacts;
using detect::Observation;
using detect::ProcessFacts;
using detect::RankVerdict;
using detect::State;
using detect::Verdict;

json stamp_json(const Stamp& s) {
  return json::array({s.wall_ns, s.mono_ns});
}

// The field readers throw FieldError, caught once in parse_trace_line and verdict_from_json.
using json_fields::as_bool;
using json_fields::as_int;
using json_fields::as_num;
using json_fields::as_str;
using json_fields::FieldError;
using json_fields::need;
using json_fields::opt;

Stamp as_stamp(const json& v, const char* key) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer()) {
    throw FieldError{Errc::kParse,
                     fmt::format("field \"{}\" must be [wall_ns, mono_ns], got {}", key, v.dump())};
  }
  return Stamp{v[0].get<int64_t>(), v[1].get<int64_t>()};
}

json rank_json(const RankSnapshot& r) {
  json j = {{"rank", r.rank},
            {"world_size", r.world_size},
            {"local_rank", r.local_rank},
            {"job", r.job},
            {"host", r.host},
            {"pid", r.pid},
            {"pid_start_ticks", r.pid_start_ticks},
            {"incarnation", r.incarnation},
            {"status", contract::rank_status_name(r.status)},
            {"source", contract::source_name(r.source)},
            {"created", stamp_json(r.created)},
            {"step_count", r.step_count},
            {"phase", r.phase},
            {"phase_since", stamp_json(r.phase_since)},
            {"phase_count", r.phase_count},
            {"beat_count", r.beat_count}};
  if (r.step) {
    j["step"] = *r.step;
    j["step_at"] = stamp_json(r.step_at);
  }
  if (r.beat_at) j["beat_at"] = stamp_json(*r.beat_at);
  if (r.checkpoint) {
    j["checkpoint"] = {{"id", r.checkpoint->id},
                       {"step", r.checkpoint->step},
                       {"at", stamp_json(r.checkpoint->at)}};
  }
  if (r.loss) {
    j["loss"] = std::isfinite(*r.loss)
                    ? json(*r.loss)
                    : json(std::isnan(*r.loss) ? "nan" : (*r.loss > 0 ? "inf" : "-inf"));
    j["loss_at"] = stamp_json(r.loss_at);
  }
  json recent = json::array();
  for (const auto& m : r.recent) recent.push_back({m.step, m.mono_ns});
  j["recent"] = recent;
  if (r.sample) {
    const contract::Sample& x = *r.sample;
    // The hash as 16 hex digits: a JSON number past 2^53 does not survive JavaScript or jq.
    j["sample"] = {{"count", x.count},
                   {"at", stamp_json(x.at)},
                   {"moved_at", stamp_json(x.moved_at)},
                   {"hash", fmt::format("{:016x}", x.hash)},
                   {"wait", contract::wait_kind_name(x.wait)},
                   {"where", x.where}};
  }
  return j;
}

contract::Sample sample_from_json(const json& j) {
  if (!j.is_object()) throw FieldError{Errc::kParse, "field \"sample\" must be an object"};
  contract::Sample x;
  x.count = static_cast<uint64_t>(as_int(need(j, "count"), "sample.count"));
  x.at = as_stamp(need(j, "at"), "sample.at");
  x.moved_at = as_stamp(need(j, "moved_at"), "sample.moved_at");
  std::string hash = as_str(need(j, "hash"), "sample.hash");
  auto [end, ec] = std::from_chars(hash.data(), hash.data() + hash.size(), x.hash, 16);
  if (hash.empty() || hash.size() > 16 || ec != std::errc() || end != hash.data() + hash.size())
    throw FieldError{Errc::kParse, fmt::format("field \"sample.hash\" must be up to 16 hex "
                                               "digits, got \"{}\"",
                                               hash)};
  std::string wait = as_str(need(j, "wait"), "sample.wait");
  bool known = false;
  for (auto w : contract::kAllWaitKinds) {
    if (wait == contract::wait_kind_name(w)) {
      x.wait = w;
      known = true;
    }
  }
  if (!known)
    throw FieldError{Errc::kParse,
                     fmt::format("field \"sample.wait\" is \"{}\": none, collective, device or "
                                 "store",
                                 wait)};
  opt(j, "where", x.where, as_str);
  return x;
}

RankSnapshot rank_from_json(const json& j) {
  if (!j.is_object()) throw FieldError{Errc::kParse, "a rank must be an object"};
  RankSnapshot r;
  r.rank = static_cast<int>(as_int(need(j, "rank"), "rank"));
  r.job = as_str(need(j, "job"), "job");
  if (auto st = contract::validate_job_id(r.job); !st)
    throw FieldError{Errc::kParse, st.error().message};
  opt(j, "world_size", r.world_size,
      [](const json& v, const char* k) { return static_cast<int>(as_int(v, k)); });
  opt(j, "local_rank", r.local_rank,
      [](const json& v, const char* k) { return static_cast<int>(as_int(v, k)); });
  if (r.world_size < 1 || r.rank < 0 || r.rank >= r.world_size) {
    throw FieldError{Errc::kParse,
                     fmt::format("rank {} outside world_size {}", r.rank, r.world_size)};
  }
  opt(j, "host", r.host, as_str);
  opt(j, "pid", r.pid, [](const json& v, const char* k) { return static_cast<int>(as_int(v, k)); });
  opt(j, "pid_start_ticks", r.pid_start_ticks,
      [](const json& v, const char* k) { return static_cast<uint64_t>(as_int(v, k)); });
  opt(j, "incarnation", r.incarnation,
      [](const json& v, const char* k) { return static_cast<uint32_t>(as_int(v, k)); });
  std::string status = "running";
  opt(j, "status", status, as_str);
  if (status == "finished")
    r.status = contract::RankStatus::kFinished;
  else if (status == "failed")
    r.status = contract::RankStatus::kFailed;
  else if (status != "running")
    throw FieldError{Errc::kParse,
                     fmt::format("status \"{}\" is not running, finished or failed", status)};
  std::string source = "beacon";
  opt(j, "source", source, as_str);
  r.source = source == "jsonl" ? contract::Source::kJsonl
             : source == "log" ? contract::Source::kLog
                               : contract::Source::kBeacon;
  opt(j, "created", r.created, as_stamp);
  opt(j, "step_count", r.step_count,
      [](const json& v, const char* k) { return static_cast<uint64_t>(as_int(v, k)); });
  if (j.contains("step")) {
    r.step = as_int(j["step"], "step");
    r.step_at = as_stamp(need(j, "step_at"), "step_at");
  }
  opt(j, "phase", r.phase, as_str);
  if (auto st = contract::validate_phase(r.phase); !st)
    throw FieldError{Errc::kParse, st.error().message};
  opt(j, "phase_since", r.phase_since, as_stamp);
  opt(j, "phase_count", r.phase_count,
      [](const json& v, const char* k) { return static_cast<uint64_t>(as_int(v, k)); });
  if (j.contains("beat_at")) r.beat_at = as_stamp(j["beat_at"], "beat_at");
  opt(j, "beat_count", r.beat_count,
      [](const json& v, const char* k) { return static_cast<uint64_t>(as_int(v, k)); });
  if (j.contains("checkpoint")) {
    const json& c = j["checkpoint"];
    r.checkpoint = contract::CheckpointMark{as_str(need(c, "id"), "checkpoint.id"),
                                            as_int(need(c, "step"), "checkpoint.step"),
                                            as_stamp(need(c, "at"), "checkpoint.at")};
  }
  if (j.contains("loss")) {
    const json& l = j["loss"];
    if (l.is_string()) {
      std::string s = l.get<std::string>();
      r.loss = s == "inf" ? INFINITY : s == "-inf" ? -INFINITY : NAN;
    } else {
      r.loss = as_num(l, "loss");
    }
    opt(j, "loss_at", r.loss_at, as_stamp);
  }
  if (j.contains("recent")) {
    const json& rec = j["recent"];
    if (!rec.is_array()) throw FieldError{Errc::kParse, "field \"recent\" must be an array"};
    for (const auto& m : rec) {
      if (!m.is_array() || m.size() != 2)
        throw FieldError{Errc::kParse, "field \"recent\" holds [step, mono_ns] pairs"};
      r.recent.push_back({as_int(m[0], "recent.step"), as_int(m[1], "recent.mono_ns")});
    }
  }
  if (j.contains("sample")) r.sample = sample_from_json(j["sample"]);
  return r;
}

json verdict_json_impl(const Verdict& v) {
  json ranks = json::array();
  for (const auto& r : v.ranks) {
    json rj = {{"rank", r.rank},
               {"state", detect::state_name(r.state)},
               {"cause", detect::cause_name(r.cause)},
               {"step_age_seconds", r.step_age_ns / 1e9},
               {"phase", r.phase},
               {"phase_age_seconds", r.phase_age_ns / 1e9},
               {"note", r.note}};
    rj["step"] = r.step ? json(*r.step) : json(nullptr);
    rj["budget_seconds"] = r.budget_ns ? json(*r.budget_ns / 1e9) : json(nullptr);
    ranks.push_back(rj);
  }
  json culprits = json::array();
  for (const auto& c : v.culprits) {
    json cj = {{"rank", c.rank}, {"reason", c.reason}};
    if (!c.host.empty()) cj["host"] = c.host;
    culprits.push_back(cj);
  }
  json evidence = json::array();
  for (const auto& e : v.evidence) {
    json ej = {{"name", e.name}, {"value", e.value}};
    ej["rank"] = e.rank >= 0 ? json(e.rank) : json(nullptr);
    ej["age_seconds"] = e.age_ns >= 0 ? json(e.age_ns / 1e9) : json(nullptr);
    evidence.push_back(ej);
  }
  json j = {
      {"state", detect::state_name(v.state)},
      {"cause", detect::cause_name(v.cause)},
      {"since_unix", v.since_wall_ns / 1e9},
      {"last_step", v.last_step ? json(*v.last_step) : json(nullptr)},
      {"last_step_age_seconds",
       v.last_step_age_ns >= 0 ? json(v.last_step_age_ns / 1e9) : json(nullptr)},
      {"expected_interval_seconds",
       v.expected_interval_ns > 0 ? json(v.expected_interval_ns / 1e9) : json(nullptr)},
      {"interval_source", detect::interval_source_name(v.interval_source)},
      {"phase", v.phase},
      {"phase_budget_seconds", v.phase_budget_ns ? json(*v.phase_budget_ns / 1e9) : json(nullptr)},
      {"ranks", ranks},
      {"culprits", culprits},
      {"evidence", evidence},
      {"summary", v.summary}};
  return j;
}

}  // namespace

std::string header_to_json(const TraceHeader& h) {
  json j = {{"type", "header"},
            {"version", h.version},
            {"job", h.job},
            {"local_host", h.local_host},
            {"poll_ns", h.poll_ns}};
  if (!h.scenario.empty()) j["scenario"] = h.scenario;
  if (h.spec_toml) j["spec_toml"] = *h.spec_toml;
  if (h.truth) {
    j["truth"] = {
        {"stall", h.truth->stall},           {"stall_start_wall_ns", h.truth->stall_start_wall_ns},
        {"allowed_ns", h.truth->allowed_ns}, {"interval_ns", h.truth->interval_ns},
        {"culprits", h.truth->culprits},     {"note", h.truth->note}};
  }
  return j.dump();
}

std::string observation_to_json(const Observation& o) {
  json ranks = json::array();
  for (const auto& r : o.ranks) ranks.push_back(rank_json(r));
  json j = {{"type", "obs"}, {"now", stamp_json(o.now)}, {"ranks", ranks}};
  if (!o.local_host.empty()) j["local_host"] = o.local_host;
  if (o.world_size > 0) j["world_size"] = o.world_size;
  if (!o.procs.empty()) {
    json ps = json::array();
    for (const auto& p : o.procs) {
      json pj = {{"rank", p.rank},
                 {"alive", p.alive},
                 {"same_process", p.same_process},
                 {"state", std::string(1, p.state)},
                 {"threads_in_d", p.threads_in_d},
                 {"wchan", p.wchan}};
      if (p.exit_code) pj["exit_code"] = *p.exit_code;
      if (p.cpu_delta_ns) pj["cpu_delta_ns"] = *p.cpu_delta_ns;
      if (p.io_delta_bytes) pj["io_delta_bytes"] = *p.io_delta_bytes;
      if (p.main_cpu_delta_ns) pj["main_cpu_delta_ns"] = *p.main_cpu_delta_ns;
      if (p.ctx_switches_delta) pj["ctx_switches_delta"] = *p.ctx_switches_delta;
      ps.push_back(pj);
    }
    j["procs"] = ps;
  }
  if (!o.gpus.empty()) {
    json gs = json::array();
    for (const auto& g : o.gpus) {
      json gj = {{"rank", g.rank}};
      if (g.sm_util_pct) gj["sm_util_pct"] = *g.sm_util_pct;
      if (g.power_w) gj["power_w"] = *g.power_w;
      if (g.mem_used_bytes) gj["mem_used_bytes"] = *g.mem_used_bytes;
      gs.push_back(gj);
    }
    j["gpus"] = gs;
  }
  if (o.log) {
    json lj = {{"last_line_wall_ns", o.log->last_line_wall_ns},
               {"lines_total", o.log->lines_total},
               {"last_step_line_wall_ns", o.log->last_step_line_wall_ns}};
    if (o.log->last_step) lj["last_step"] = *o.log->last_step;
    j["log"] = lj;
  }
  if (o.job_exit_code) j["job_exit_code"] = *o.job_exit_code;
  // Written only when set, so a single-node trace reads as before.
  if (o.one_clock) j["one_clock"] = true;
  if (!o.lapsed_hosts.empty()) j["lapsed_hosts"] = o.lapsed_hosts;
  return j.dump();
}

std::string verdict_to_json(const Verdict& v, std::string_view job) {
  json j = verdict_json_impl(v);
  if (!job.empty()) j["job"] = std::string(job);
  return j.dump();
}

namespace {

template <class E, size_t N>
E enum_of(const json& v, const char* key, const E (&all)[N], const char* (*name)(E)) {
  std::string text = as_str(v, key);
  for (E e : all) {
    if (text == name(e)) return e;
  }
  throw FieldError{Errc::kParse, fmt::format("field \"{}\": unknown value \"{}\"", key, text)};
}

constexpr const auto& kStates = detect::kAllStates;
constexpr const auto& kCauses = detect::kAllCauses;
constexpr IntervalSource kSources[] = {IntervalSource::kSpec, IntervalSource::kLearned,
                                       IntervalSource::kLearning};

// Seconds (a JSON number, or null) back to ns; `none` for null or absent.
int64_t ns_of(const json& o, const char* key, int64_t none) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return none;
  return static_cast<int64_t>(std::llround(as_num(*it, key) * 1e9));
}

// An "obs" object into `o`; throws a FieldError (or a json exception) naming the field.
void read_observation(const json& j, Observation& o) {
  o.now = as_stamp(need(j, "now"), "now");
  opt(j, "local_host", o.local_host, as_str);
  opt(j, "world_size", o.world_size,
      [](const json& v, const char* k) { return static_cast<int>(as_int(v, k)); });
  const json& ranks = need(j, "ranks");
  if (!ranks.is_array()) throw FieldError{Errc::kParse, "field \"ranks\" must be an array"};
  for (const auto& r : ranks) o.ranks.push_back(rank_from_json(r));
  if (j.contains("procs")) {
    for (const auto& pj : j["procs"]) {
      ProcessFacts p;
      p.rank = static_cast<int>(as_int(need(pj, "rank"), "procs.rank"));
      opt(pj, "alive", p.alive, as_bool);
      opt(pj, "same_process", p.same_process, as_bool);
      std::string st = "?";
      opt(pj, "state", st, as_str);
      p.state = st.empty() ? '?' : st[0];
      opt(pj, "threads_in_d", p.threads_in_d,
          [](const json& v, const char* k) { return static_cast<int>(as_int(v, k)); });
      opt(pj, "wchan", p.wchan, as_str);
      if (pj.contains("exit_code"))
        p.exit_code = static_cast<int>(as_int(pj["exit_code"], "exit_code"));
      if (pj.contains("cpu_delta_ns")) p.cpu_delta_ns = as_int(pj["cpu_delta_ns"], "cpu_delta_ns");
      if (pj.contains("io_delta_bytes"))
        p.io_delta_bytes = as_int(pj["io_delta_bytes"], "io_delta_bytes");
      if (pj.contains("main_cpu_delta_ns"))
        p.main_cpu_delta_ns = as_int(pj["main_cpu_delta_ns"], "main_cpu_delta_ns");
      if (pj.contains("ctx_switches_delta"))
        p.ctx_switches_delta = as_int(pj["ctx_switches_delta"], "ctx_switches_delta");
      o.procs.push_back(p);
    }
  }
  if (j.contains("gpus")) {
    for (const auto& gj : j["gpus"]) {
      GpuFacts g;
      g.rank = static_cast<int>(as_int(need(gj, "rank"), "gpus.rank"));
      if (gj.contains("sm_util_pct")) g.sm_util_pct = as_num(gj["sm_util_pct"], "sm_util_pct");
      if (gj.contains("power_w")) g.power_w = as_num(gj["power_w"], "power_w");
      if (gj.contains("mem_used_bytes"))
        g.mem_used_bytes = as_int(gj["mem_used_bytes"], "mem_used_bytes");
      o.gpus.push_back(g);
    }
  }
  if (j.contains("log")) {
    const json& lj = j["log"];
    LogFacts l;
    opt(lj, "last_line_wall_ns", l.last_line_wall_ns, as_int);
    opt(lj, "lines_total", l.lines_total,
        [](const json& v, const char* k) { return static_cast<uint64_t>(as_int(v, k)); });
    opt(lj, "last_step_line_wall_ns", l.last_step_line_wall_ns, as_int);
    if (lj.contains("last_step")) l.last_step = as_int(lj["last_step"], "log.last_step");
    o.log = l;
  }
  if (j.contains("job_exit_code"))
    o.job_exit_code = static_cast<int>(as_int(j["job_exit_code"], "job_exit_code"));
  opt(j, "one_clock", o.one_clock, as_bool);
  if (j.contains("lapsed_hosts")) {
    const json& lh = j["lapsed_hosts"];
    if (!lh.is_object())
      throw FieldError{Errc::kParse, "field \"lapsed_hosts\" must be an object of node: ns"};
    for (const auto& [node, ns] : lh.items()) o.lapsed_hosts[node] = as_int(ns, "lapsed_hosts");
  }
}

}  // namespace

Result<Verdict> verdict_from_json(std::string_view text) {
  auto j = json_fields::parse_bounded(text, "");
  if (!j) return j.error();
  return verdict_from_value(*j);
}

Result<Verdict> verdict_from_value(const json& j) {
  if (!j.is_object()) return Error{Errc::kParse, "a verdict must be a JSON object"};
  try {
    Verdict v;
    v.state = enum_of(need(j, "state"), "state", kStates, detect::state_name);
    v.cause = enum_of(need(j, "cause"), "cause", kCauses, detect::cause_name);
    v.since_wall_ns = ns_of(j, "since_unix", 0);
    if (j.contains("last_step") && !j["last_step"].is_null())
      v.last_step = as_int(j["last_step"], "last_step");
    v.last_step_age_ns = ns_of(j, "last_step_age_seconds", -1);
    v.expected_interval_ns = ns_of(j, "expected_interval_seconds", 0);
    if (j.contains("interval_source"))
      v.interval_source =
          enum_of(j["interval_source"], "interval_source", kSources, detect::interval_source_name);
    opt(j, "phase", v.phase, as_str);
    if (int64_t b = ns_of(j, "phase_budget_seconds", -1); b >= 0) v.phase_budget_ns = b;
    opt(j, "summary", v.summary, as_str);
    for (const auto& rj : need(j, "ranks")) {
      RankVerdict r;
      r.rank = static_cast<int>(as_int(need(rj, "rank"), "ranks.rank"));
      r.state = enum_of(need(rj, "state"), "ranks.state", kStates, detect::state_name);
      r.cause = enum_of(need(rj, "cause"), "ranks.cause", kCauses, detect::cause_name);
      if (rj.contains("step") && !rj["step"].is_null()) r.step = as_int(rj["step"], "ranks.step");
      r.step_age_ns = ns_of(rj, "step_age_seconds", -1);
      opt(rj, "phase", r.phase, as_str);
      r.phase_age_ns = ns_of(rj, "phase_age_seconds", -1);
      if (int64_t b = ns_of(rj, "budget_seconds", -1); b >= 0) r.budget_ns = b;
      opt(rj, "note", r.note, as_str);
      v.ranks.push_back(std::move(r));
    }
    if (j.contains("culprits")) {
      for (const auto& cj : j["culprits"]) {
        std::string host;
        opt(cj, "host", host, as_str);
        v.culprits.emplace_back(static_cast<int>(as_int(need(cj, "rank"), "culprits.rank")),
                                as_str(need(cj, "reason"), "culprits.reason"), host);
      }
    }
    if (j.contains("evidence")) {
      for (const auto& ej : j["evidence"]) {
        Evidence e;
        e.name = as_str(need(ej, "name"), "evidence.name");
        e.value = as_str(need(ej, "value"), "evidence.value");
        if (ej.contains("rank") && !ej["rank"].is_null())
          e.rank = static_cast<int>(as_int(ej["rank"], "evidence.rank"));
        e.age_ns = ns_of(ej, "age_seconds", -1);
        v.evidence.push_back(std::move(e));
      }
    }
    return v;
  } catch (const FieldError& e) {
    return json_fields::to_error(e);
  } catch (const std::exception& e) {
    return Error{Errc::kParse, fmt::format("not a verdict: {}", e.what())};
  }
}

Result<detect::Observation> observation_from_value(const json& j) {
  if (!j.is_object()) return Error{Errc::kParse, "an observation must be a JSON object"};
  Observation o;
  try {
    read_observation(j, o);
  } catch (const FieldError& e) {
    return json_fields::to_error(e);
  } catch (const json::exception& e) {
    return Error{Errc::kParse, e.what()};
  }
  return o;
}

Result<TraceLine> parse_trace_line(std::string_view line) {
  if (json_fields::nesting_depth(line) > json_fields::kMaxDepth)
    return Error{Errc::kParse, fmt::format("nested deeper than {} levels: refused unparsed",
                                           json_fields::kMaxDepth)};
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{Errc::kParse, "not valid JSON"};
  if (!j.is_object()) return Error{Errc::kParse, "not a JSON object"};
  TraceLine out;
  try {
    std::string type = as_str(need(j, "type"), "type");
    if (type == "header") {
      out.kind = TraceLine::kHeader;
      TraceHeader& h = out.header;
      h.version = static_cast<int>(as_int(need(j, "version"), "version"));
      if (h.version != kTraceVersion) {
        return Error{Errc::kUnknownVersion, fmt::format("trace version {}, this stepwatch reads {}",
                                                        h.version, kTraceVersion)};
      }
      opt(j, "job", h.job, as_str);
      opt(j, "local_host", h.local_host, as_str);
      opt(j, "poll_ns", h.poll_ns, as_int);
      opt(j, "scenario", h.scenario, as_str);
      if (j.contains("spec_toml")) h.spec_toml = as_str(j["spec_toml"], "spec_toml");
      if (j.contains("truth")) {
        const json& t = j["truth"];
        Truth tr;
        tr.stall = as_bool(need(t, "stall"), "truth.stall");
        opt(t, "stall_start_wall_ns", tr.stall_start_wall_ns, as_int);
        opt(t, "allowed_ns", tr.allowed_ns, as_int);
        opt(t, "interval_ns", tr.interval_ns, as_int);
        opt(t, "note", tr.note, as_str);
        if (t.contains("culprits")) {
          for (const auto& c : t["culprits"])
            tr.culprits.push_back(static_cast<int>(as_int(c, "truth.culprits")));
        }
        h.truth = tr;
      }
    } else if (type == "verdict") {
      out.kind = TraceLine::kVerdict;
    } else if (type == "obs") {
      out.kind = TraceLine::kObservation;
      read_observation(j, out.obs);
    } else {
      return Error{Errc::kParse,
                   fmt::format("unknown line type \"{}\" (header, obs or verdict)", type)};
    }
  } catch (const FieldError& e) {
    return json_fields::to_error(e);
  } catch (const json::exception& e) {
    return Error{Errc::kParse, e.what()};
  }
  return out;
}

}  // namespace stepwatch::trace
