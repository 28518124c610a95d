// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/serve/json_views.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "src/common/duration.h"
#include "src/contract/names.h"
#include "src/detect/stamps.h"
#include "src/trace/codec.h"

namespace stepwatch::serve {

using json = nlohmann::json;

namespace {

json seconds_or_null(int64_t ns) {
  return ns >= 0 ? json(static_cast<double>(ns) / 1e9) : json(nullptr);
}
json utc_or_null(const std::optional<int64_t>& ns) {
  return ns ? json(format_utc(*ns)) : json(nullptr);
}
json ns_or_null(const std::optional<int64_t>& ns) {
  return ns ? json(*ns) : json(nullptr);
}
template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
json text_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

// A multi-node job's coordination as this node sees it; nodes sorted by name, ranks ascending.
json cluster_json(const watch::ClusterState& c) {
  std::vector<const watch::NodeState*> sorted;
  for (const auto& n : c.nodes) sorted.push_back(&n);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto* a, const auto* b) { return a->node < b->node; });
  json nodes = json::array();
  for (const watch::NodeState* n : sorted) {
    std::vector<int> ranks = n->ranks;
    std::sort(ranks.begin(), ranks.end());
    nodes.push_back({{"node", n->node},
                     {"leader", n->leader},
                     {"lapsed", n->lapsed},
                     {"summary_age_seconds", seconds_or_null(n->summary_age_ns)},
                     {"ranks", ranks}});
  }
  return {{"node", c.node},
          {"leader", text_or_null(c.leader)},
          {"leads", c.leads},
          {"connected", c.connected},
          {"nodes", std::move(nodes)}};
}

}  // namespace

std::string dump_json(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

json incident_json(const store::Incident& i, const std::vector<store::Action>* actions) {
  // The verdict is embedded as JSON when it is JSON, else kept as the text that was stored.
  json verdict = nullptr;
  if (!i.verdict_json.empty()) {
    verdict = json::parse(i.verdict_json, nullptr, /*allow_exceptions=*/false);
    if (verdict.is_discarded()) verdict = i.verdict_json;
  }
  json out = {{"id", i.id},
              {"job_id", i.job},
              {"incarnation", i.incarnation},
              {"status", std::string(i.status())},
              {"state", i.state},
              {"cause", i.cause},
              {"summary", i.summary},
              {"verdict", verdict},
              {"opened_at", format_utc(i.opened_at_ns)},
              {"opened_at_ns", i.opened_at_ns},
              {"paged_at", utc_or_null(i.paged_at_ns)},
              {"paged_at_ns", ns_or_null(i.paged_at_ns)},
              {"page_result", i.page_result},
              {"delivered_at", utc_or_null(i.delivered_at_ns)},
              {"delivered_at_ns", ns_or_null(i.delivered_at_ns)},
              {"acked_at", utc_or_null(i.acked_at_ns)},
              {"acked_at_ns", ns_or_null(i.acked_at_ns)},
              {"acked_by", i.acked_by},
              {"ack_note", i.ack_note},
              {"closed_at", utc_or_null(i.closed_at_ns)},
              {"closed_at_ns", ns_or_null(i.closed_at_ns)},
              {"resolution", i.resolution}};
  if (actions != nullptr) {
    json list = json::array();
    for (const auto& a : *actions) {
      list.push_back({{"id", a.id},
                      {"at", format_utc(a.at_ns)},
                      {"at_ns", a.at_ns},
                      {"kind", a.kind},
                      {"ok", a.ok},
                      {"detail", a.detail}});
    }
    out["actions"] = std::move(list);
  }
  return out;
}

json job_summary_json(const watch::JobState& s) {
  const detect::Verdict& v = s.verdict;
  json j = {{"job_id", s.job},
            {"state", detect::state_name(v.state)},
            {"cause", detect::cause_name(v.cause)},
            {"owner", s.owner},
            {"class", s.job_class},
            {"host", s.host},
            {"last_step", or_null(v.last_step)},
            {"last_step_age_seconds", seconds_or_null(v.last_step_age_ns)},
            {"expected_interval_seconds",
             v.expected_interval_ns > 0 ? seconds_or_null(v.expected_interval_ns) : json(nullptr)},
            {"phase", v.phase},
            {"ranks", s.observation.ranks.size()},
            {"retired", s.retired},
            {"summary", v.summary}};
  // Absent on a single node: its answer stays what it was before multi-node.
  if (s.cluster) j["cluster"] = cluster_json(*s.cluster);
  return j;
}

json job_detail_json(const watch::JobState& s) {
  json j = json::parse(trace::verdict_to_json(s.verdict, s.job));
  j["job_id"] = s.job;
  j["owner"] = s.owner;
  j["owner_uid"] = or_null(s.owner_uid);
  j["class"] = s.job_class;
  j["host"] = s.host;
  j["retired"] = s.retired;
  j["first_seen"] = format_utc(s.first_seen_wall_ns, UtcPrecision::kMillis);
  j["last_poll"] = s.last_poll_wall_ns
                       ? json(format_utc(s.last_poll_wall_ns, UtcPrecision::kMillis))
                       : json(nullptr);
  j["incidents_total"] = s.incidents_total;
  j["actions_total"] = s.actions_total;
  json intervals = json::array();
  for (int64_t ns : s.recent_intervals_ns) intervals.push_back(static_cast<double>(ns) / 1e9);
  j["recent_intervals_seconds"] = intervals;
  if (s.cluster) j["cluster"] = cluster_json(*s.cluster);
  // Each rank's verdict, beside what its beacon, its process and its GPU said.
  for (auto& rj : j["ranks"]) {
    int rank = rj.value("rank", -1);
    rj["beacon"] = nullptr;
    rj["process"] = nullptr;
    rj["gpu"] = nullptr;
    for (const auto& r : s.observation.ranks) {
      if (r.rank != rank) continue;
      rj["beacon"] = {
          {"source", contract::source_name(r.source)},
          {"status", contract::rank_status_name(r.status)},
          {"host", r.host},
          {"pid", r.pid},
          {"incarnation", r.incarnation},
          {"world_size", r.world_size},
          {"loss", r.loss && std::isfinite(*r.loss) ? json(*r.loss) : json(nullptr)},
          {"checkpoint", r.checkpoint ? json{{"id", r.checkpoint->id}, {"step", r.checkpoint->step}}
                                      : json(nullptr)}};
      // Where its main thread is, as its progress sampler last said (null: no sampler).
      rj["beacon"]["sample"] = nullptr;
      if (r.sample) {
        bool here = detect::on_this_clock(r, s.observation);
        rj["beacon"]["sample"] = {
            {"wait", contract::wait_kind_name(r.sample->wait)},
            {"where", r.sample->where},
            {"age_seconds", detect::age_of(r.sample->at, s.observation.now, here) / 1e9},
            {"unchanged_seconds",
             detect::age_of(r.sample->moved_at, s.observation.now, here) / 1e9}};
      }
    }
    for (const auto& p : s.observation.procs) {
      if (p.rank != rank) continue;
      rj["process"] = {
          {"alive", p.alive},
          {"same_process", p.same_process},
          {"state", std::string(1, p.state)},
          {"threads_in_d", p.threads_in_d},
          {"cpu_seconds_delta", p.cpu_delta_ns ? json(*p.cpu_delta_ns / 1e9) : json(nullptr)},
          {"io_bytes_delta", or_null(p.io_delta_bytes)},
          {"main_thread_cpu_seconds_delta",
           p.main_cpu_delta_ns ? json(*p.main_cpu_delta_ns / 1e9) : json(nullptr)},
          {"main_thread_switches_delta", or_null(p.ctx_switches_delta)},
          {"wchan", p.wchan}};
    }
    for (const auto& g : s.observation.gpus) {
      if (g.rank != rank) continue;
      rj["gpu"] = {{"sm_util_pct", or_null(g.sm_util_pct)},
                   {"power_w", or_null(g.power_w)},
                   {"mem_used_bytes", or_null(g.mem_used_bytes)}};
    }
  }
  return j;
}

json node_fault_json(const JobNodeFault& nf) {
  json suspects = json::array();
  for (const auto& s : nf.suspects) {
    suspects.push_back({{"host", s.host},
                        {"evidence", s.evidence},
                        {"exclude_hint", text_or_null(s.exclude_hint)}});
  }
  json storm = nullptr;
  if (nf.storm) {
    storm = {{"incarnations", nf.storm->incarnations},
             {"window_seconds", seconds_or_null(nf.storm->window_ns)},
             {"evidence", nf.storm->evidence}};
  }
  json incarnations = json::array();
  for (const auto& r : nf.incarnations) {
    incarnations.push_back(
        {{"incarnation", r.incarnation},
         {"started_at", format_utc(r.started_ns, UtcPrecision::kMillis)},
         {"ended_at",
          r.ended_ns ? json(format_utc(*r.ended_ns, UtcPrecision::kMillis)) : json(nullptr)},
         {"end_reason", text_or_null(r.end_reason)},
         {"cause", r.cause.empty() ? "none" : r.cause},
         {"culprit_ranks", r.culprit_ranks},
         {"culprit_hosts", r.culprit_hosts},
         {"hosts", r.hosts},
         {"checkpoint_step", or_null(r.checkpoint_step)},
         {"scheduler_id", text_or_null(r.scheduler_id)}});
  }
  return {{"suspect_hosts", std::move(suspects)},
          {"restart_storm", std::move(storm)},
          {"incarnations", std::move(incarnations)}};
}

json hosts_json(const NodeFaultSnapshot& snapshot) {
  json hosts = json::array();
  for (const auto& h : snapshot.hosts) {
    hosts.push_back({{"host", h.host},
                     {"jobs_implicated", h.jobs_implicated},
                     {"implications", h.implications},
                     {"suspect", h.suspect},
                     {"evidence", h.evidence}});
  }
  return {{"window_seconds",
           snapshot.window_ns > 0 ? seconds_or_null(snapshot.window_ns) : json(nullptr)},
          {"hosts", std::move(hosts)}};
}

bool agent_failing(const watch::AgentHealth& h) {
  return h.consecutive_poll_failures >= watch::kPollFailuresUnhealthy || !h.store_error.empty();
}

json agent_health_json(const watch::AgentHealth& h, size_t jobs, int64_t last) {
  json j = {{"status", agent_failing(h)      ? "failing"
                       : watch::poll_lags(h) ? "lagging"
                                             : "ok"},
            {"poll_age_seconds", seconds_or_null(h.poll_age_ns)},
            {"store_error", text_or_null(h.store_error)},
            {"store_errors_total", h.store_errors_total},
            {"consecutive_poll_failures", h.consecutive_poll_failures},
            {"job_poll_failures_total", h.job_poll_failures_total},
            {"polls_total", h.polls_total},
            {"jobs", jobs},
            {"last_poll", last ? json(format_utc(last, UtcPrecision::kMillis)) : json(nullptr)},
            {"last_poll_duration_seconds", static_cast<double>(h.last_poll_duration_ns) / 1e9},
            {"beacons_read_total", h.beacons_read_total},
            {"read_errors_total", h.read_errors_total},
            {"started_at", format_utc(h.started_wall_ns, UtcPrecision::kMillis)}};
  if (h.coord) {
    const watch::CoordHealth& c = *h.coord;
    j["coord"] = {
        {"node", c.node},
        {"connected", c.connected},
        {"error", text_or_null(c.error)},
        {"lease_age_seconds", seconds_or_null(c.lease_age_ns)},
        {"lease_ttl_seconds", c.lease_ttl_ns > 0 ? seconds_or_null(c.lease_ttl_ns) : json(nullptr)},
        {"losses_total", c.losses_total},
        {"summaries_published_total", c.puts_total},
        {"jobs_led", c.jobs_led}};
  }
  return j;
}

Result<AckBody> parse_ack_body(std::string_view body) {
  AckBody r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Error{Errc::kParse,
                 "the body must be empty or a JSON object {\"by\": \"name\", \"note\": \"text\"}"};
  }
  for (const char* key : {"by", "note"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_string())
      return Error{Errc::kParse, fmt::format("\"{}\" must be a string", key)};
    std::string v = j[key].get<std::string>();
    if (v.size() > kMaxAckField) {
      return Error{Errc::kParse, fmt::format("\"{}\" is longer than {} bytes", key, kMaxAckField)};
    }
    (std::string_view(key) == "by" ? r.by : r.note) = std::move(v);
  }
  return r;
}

json ack_reply_json(const store::Incident& i, const std::string& by) {
  return {{"acked", true},
          {"incident", incident_json(i)},
          {"incident_id", i.id},
          {"by", by},
          {"message", fmt::format("incident {} of job {} acked by {}", i.id, i.job, by)}};
}

json no_incident_json(const std::string& job) {
  return {{"acked", false}, {"error", fmt::format("job {} has no open incident", job)}};
}

}  // namespace stepwatch::serve
