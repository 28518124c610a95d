// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The only CLI translation unit with httplib (and nlohmann-json for the agent's answers).
#include "src/cli/agent_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "src/common/host.h"
#include "src/common/http_error.h"
#include "src/common/text_file.h"
#include "src/probe/ports.h"

namespace stepwatch::cli {

namespace {

using json = nlohmann::json;

// The one wording of a client-side HTTP failure (common/http_error.h).
std::string describe(httplib::Error e) {
  return http_error_text(httplib::to_string(e));
}

std::unique_ptr<httplib::Client> client(const std::string& base, int timeout_ms) {
  auto c = std::make_unique<httplib::Client>(base);
  c->set_connection_timeout(0, timeout_ms * 1000);
  c->set_read_timeout(5, 0);
  return c;
}

std::string text(const json& v) {
  if (v.is_null()) return "n/a";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string text_or(const json& v, const std::string& absent) {
  if (v.is_null()) return absent;
  return text(v);
}

std::optional<int64_t> integer(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return static_cast<int64_t>(v.get<double>());
  return std::nullopt;
}

// Seconds as the API writes them, in nanoseconds; nullopt when null or not a number.
std::optional<int64_t> nanos(const json& v) {
  if (!v.is_number()) return std::nullopt;
  return static_cast<int64_t>(std::llround(v.get<double>() * 1e9));
}

// The agent's "cluster" of a multi-node job; nullopt when absent (a single node) or malformed.
std::optional<watch::ClusterState> cluster_from(const json& c) {
  if (!c.is_object()) return std::nullopt;
  watch::ClusterState out;
  out.node = text_or(c.value("node", json()), "");
  out.leader = text_or(c.value("leader", json()), "");
  out.leads = c.value("leads", json()).is_boolean() && c["leads"].get<bool>();
  out.connected = c.value("connected", json()).is_boolean() && c["connected"].get<bool>();
  for (const auto& n : c.value("nodes", json::array())) {
    if (!n.is_object()) continue;
    watch::NodeState node;
    node.node = text_or(n.value("node", json()), "?");
    node.leader = n.value("leader", json()).is_boolean() && n["leader"].get<bool>();
    node.lapsed = n.value("lapsed", json()).is_boolean() && n["lapsed"].get<bool>();
    node.summary_age_ns = nanos(n.value("summary_age_seconds", json())).value_or(-1);
    for (const auto& r : n.value("ranks", json::array())) {
      if (auto rank = integer(r)) node.ranks.push_back(static_cast<int>(*rank));
    }
    out.nodes.push_back(std::move(node));
  }
  return out;
}

}  // namespace

Status agent_listener_trusted(const std::string& url, uint32_t me, const std::string& proc_root) {
  std::string_view rest = url;
  if (auto sep = rest.find("://"); sep != std::string_view::npos) rest.remove_prefix(sep + 3);
  rest = rest.substr(0, rest.find('/'));
  const size_t colon = rest.rfind(':');
  const bool has_port =
      colon != std::string_view::npos && rest.find(']', colon) == std::string_view::npos;
  std::string_view host = has_port ? rest.substr(0, colon) : rest;
  if (!is_loopback_literal(host)) return {};
  int port = 80;
  if (has_port) {
    auto digits = rest.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 65535)
      return Error{Errc::kInvalidArgument, fmt::format("{}: not a port", url)};
  }
  auto listeners = probe::listeners_on_port(proc_root, port);
  if (!listeners)
    return Error{listeners.error().code,
                 fmt::format("cannot check who serves {}: {}", url, listeners.error().message)};
  for (const auto& l : *listeners) {
    if (l.uid == 0 || l.uid == me) continue;
    return Error{
        Errc::kPermission,
        fmt::format("{} is served by a process of uid {}, not by root or you: not the stepwatch "
                    "agent, so nothing is sent to it (is the agent down and its port taken?)",
                    url, l.uid)};
  }
  return {};
}

Result<std::optional<std::string>> find_agent(const std::string& explicit_url,
                                              const std::string& proc_root) {
  std::string url = explicit_url;
  if (url.empty()) {
    const char* e = std::getenv("STEPWATCH_AGENT");
    if (e != nullptr && *e != '\0') url = e;
  }
  bool given = !url.empty();
  if (!given) url = "http://127.0.0.1:9465";
  if (auto trusted = agent_listener_trusted(url, static_cast<uint32_t>(::getuid()), proc_root);
      !trusted)
    return trusted.error();
  auto res = client(url, given ? 2000 : 200)->Get("/healthz");
  if (res && res->status == 200) return std::optional<std::string>(url);
  if (given) {
    return Error{Errc::kNotFound,
                 fmt::format("no stepwatch agent answers at {}: {}", url,
                             res ? fmt::format("HTTP {}", res->status) : describe(res.error()))};
  }
  return std::optional<std::string>{};
}

StatusJob status_job_from_agent(const std::string& summary_json, const std::string& detail_json) {
  json j = json::parse(summary_json, nullptr, false);
  json d = json::parse(detail_json, nullptr, false);
  if (!j.is_object()) j = json::object();
  if (!d.is_object()) d = json::object();
  StatusJob job;
  job.job = j.value("job_id", d.value("job_id", ""));
  std::string state = j.value("state", d.value("state", "?"));
  std::string cause = j.value("cause", d.value("cause", "none"));
  job.state = cause == "none" || cause.empty() ? state : state + "/" + cause;
  job.owner = j.value("owner", d.value("owner", ""));
  job.retired = j.value("retired", d.value("retired", false));
  job.verdict_summary = j.value("summary", d.value("summary", ""));
  job.evidence = true;  // the agent's detector judged every rank; the delta window is its own
  std::optional<int64_t> expected = nanos(d.value("expected_interval_seconds", json()));
  if (expected && *expected <= 0) expected.reset();
  for (const auto& r : d.value("ranks", json::array())) {
    if (!r.is_object()) continue;
    StatusRank row;
    row.rank = integer(r.value("rank", json())).value_or(-1);
    if (auto step = integer(r.value("step", json()))) row.step = step;
    row.step_age_ns = nanos(r.value("step_age_seconds", json())).value_or(-1);
    row.expected_ns = expected;
    row.phase = text_or(r.value("phase", json()), "");
    row.phase_age_ns = nanos(r.value("phase_age_seconds", json())).value_or(-1);
    if (row.phase != "train") row.budget_ns = nanos(r.value("budget_seconds", json()));
    row.verdict = text_or(r.value("state", json()), "");
    row.note = text_or(r.value("note", json()), "");
    const json b = r.value("beacon", json());
    if (b.is_object()) {
      row.host = text_or(b.value("host", json()), "");
      row.pid = static_cast<int>(integer(b.value("pid", json())).value_or(0));
      row.status = text_or(b.value("status", json()), "n/a");
      row.source = text_or(b.value("source", json()), "n/a");
      if (b.value("loss", json()).is_number()) row.loss = b["loss"].get<double>();
      const json c = b.value("checkpoint", json());
      if (c.is_object()) {
        row.checkpoint = text_or(c.value("id", json()), "?");
        row.checkpoint_step = integer(c.value("step", json())).value_or(0);
      }
      job.world_size = std::max(
          job.world_size, static_cast<int>(integer(b.value("world_size", json())).value_or(0)));
    }
    const json p = r.value("process", json());
    if (p.is_object()) {
      detect::ProcessFacts f;
      f.rank = row.rank;
      f.alive = p.value("alive", true);
      f.same_process = p.value("same_process", true);
      std::string st = text_or(p.value("state", json()), "?");
      f.state = st.empty() ? '?' : st[0];
      f.threads_in_d = static_cast<int>(integer(p.value("threads_in_d", json())).value_or(0));
      f.cpu_delta_ns = nanos(p.value("cpu_seconds_delta", json()));
      f.io_delta_bytes = integer(p.value("io_bytes_delta", json()));
      f.wchan = text_or(p.value("wchan", json()), "");
      row.process = f;
    }
    const json g = r.value("gpu", json());
    if (g.is_object()) {
      detect::GpuFacts f;
      f.rank = row.rank;
      if (g.value("sm_util_pct", json()).is_number())
        f.sm_util_pct = g["sm_util_pct"].get<double>();
      if (g.value("power_w", json()).is_number()) f.power_w = g["power_w"].get<double>();
      f.mem_used_bytes = integer(g.value("mem_used_bytes", json()));
      row.gpu = f;
    }
    job.ranks.push_back(std::move(row));
  }
  for (const auto& c : d.value("culprits", json::array())) {
    if (!c.is_object()) continue;
    job.culprits.emplace_back(static_cast<int>(integer(c.value("rank", json())).value_or(-1)),
                              text_or(c.value("reason", json()), ""));
  }
  job.cluster = cluster_from(j.value("cluster", d.value("cluster", json())));
  return job;
}

int status_from_agent(const std::string& base, const std::string& job) {
  auto c = client(base, 2000);
  auto list = c->Get("/api/v1/jobs");
  if (!list || list->status != 200) {
    fmt::print(stderr, "stepwatch status: agent {}: {}\n", base,
               list ? fmt::format("HTTP {}", list->status) : describe(list.error()));
    return 1;
  }
  json jobs = json::parse(list->body, nullptr, false);
  if (jobs.is_discarded() || !jobs.contains("jobs")) {
    fmt::print(stderr, "stepwatch status: agent {}: malformed answer\n", base);
    return 1;
  }
  std::vector<StatusJob> shown;
  for (const auto& j : jobs["jobs"]) {
    std::string id = j.value("job_id", "");
    if (!job.empty() && id != job) continue;
    auto detail = c->Get(fmt::format("/api/v1/jobs/{}", id));
    shown.push_back(
        status_job_from_agent(j.dump(), detail && detail->status == 200 ? detail->body : "{}"));
  }
  if (shown.empty() && !job.empty()) {
    fmt::print(stderr, "stepwatch status: the agent at {} does not watch job {}\n", base, job);
    return 1;
  }
  fmt::print("from the agent at {}\n{}", base, render_jobs(shown));
  return 0;
}

int ack_through_agent(const std::string& base, const std::string& job, const std::string& by,
                      const std::string& note) {
  httplib::Headers headers;
  if (const char* f = std::getenv("STEPWATCH_AGENT_TOKEN_FILE"); f != nullptr && *f != '\0') {
    // A token is one line; a FIFO or a huge file is refused rather than waited for.
    auto file = read_text_file(f, 64 << 10);
    if (!file) {
      fmt::print(stderr, "stepwatch ack: cannot read the token file: {}\n", file.error().message);
      return 2;
    }
    std::string token = file->text.substr(0, file->text.find('\n'));
    if (token.empty()) {
      fmt::print(stderr, "stepwatch ack: the token file {} is empty\n", f);
      return 2;
    }
    headers.emplace("Authorization", "Bearer " + token);
  }
  json body = {{"by", by}, {"note", note}};
  auto res =
      client(base, 2000)
          ->Post(fmt::format("/api/v1/jobs/{}/ack", job), headers, body.dump(), "application/json");
  if (!res) {
    fmt::print(stderr, "stepwatch ack: agent {}: {}\n", base, describe(res.error()));
    return 2;
  }
  json a = json::parse(res->body, nullptr, false);
  std::string err = a.is_object() ? a.value("error", "") : "";
  if (res->status == 200) {
    const json& inc = a.is_object() && a.contains("incident") ? a["incident"] : json();
    fmt::print("acked incident {} of job {} through the agent at {}\n",
               inc.is_object() ? text(inc.value("id", json())) : "?", job, base);
    return 0;
  }
  if (res->status == 404) {
    fmt::print("{}\n", err.empty() ? fmt::format("job {} has no open incident", job) : err);
    return 1;
  }
  fmt::print(stderr, "stepwatch ack: agent {}: HTTP {}{}\n", base, res->status,
             err.empty() ? "" : ": " + err);
  return 2;
}

}  // namespace stepwatch::cli
