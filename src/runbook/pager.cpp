// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/pager.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <exception>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/common/log.h"
#include "src/runbook/page_sink.h"

namespace stepwatch::runbook {

using json = nlohmann::json;

namespace {

// dump() that never throws on invalid UTF-8 (log lines and reasons are untrusted text).
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json seconds_or_null(int64_t ns, bool known) {
  if (!known) return nullptr;
  return std::round(static_cast<double>(ns) / 1e6) / 1e3;  // millisecond precision
}

json verdict_or_null(const PageMessage& m) {
  if (m.verdict_json.empty()) return nullptr;
  json v = json::parse(m.verdict_json, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) {
    log_warn("page for job {}: verdict is not valid JSON; sent as null", m.job);
    return nullptr;
  }
  return v;
}

std::string shell_word(const std::string& s) {
  bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string ack_hint(const PageMessage& m) {
  if (!m.ack_command.empty()) return m.ack_command;
  return m.job.empty() ? "stepwatch ack" : "stepwatch ack " + shell_word(m.job);
}

std::string page_evidence_line(std::string_view name, std::string_view value, int rank,
                               int64_t age_ns) {
  std::string out = rank >= 0 ? fmt::format("rank {} {} = {}", rank, name, value)
                              : fmt::format("{} = {}", name, value);
  if (age_ns >= 0) out += fmt::format(" ({} ago)", format_duration(age_ns));
  return out;
}

std::string page_text(const PageMessage& m) {
  std::string out = m.summary.empty() ? fmt::format("job {} is {}", m.job, m.state) : m.summary;
  out += fmt::format("\njob {} on {}, incarnation {}, incident {}", m.job,
                     m.host.empty() ? "?" : m.host, m.incarnation,
                     m.incident_id.empty() ? "-" : m.incident_id);
  bool has_cause = !m.cause.empty() && m.cause != "none";
  out += fmt::format("\nstate {}{}", m.state, has_cause ? " (" + m.cause + ")" : "");
  if (m.last_step) {
    out += fmt::format("; last step {}", *m.last_step);
    if (m.last_step_age_ns >= 0)
      out += fmt::format(", {} ago", format_duration(m.last_step_age_ns));
  } else {
    out += "; no step yet";
  }
  out += m.expected_interval_ns > 0
             ? fmt::format("; expected interval {}", format_duration(m.expected_interval_ns))
             : std::string("; expected interval still being learned");
  if (!m.culprits.empty()) {
    out += "\nculprits:";
    for (const auto& c : m.culprits) {
      out += c.host.empty() ? fmt::format("\n  rank {}: {}", c.rank, c.reason)
                            : fmt::format("\n  rank {} on {}: {}", c.rank, c.host, c.reason);
    }
  }
  if (!m.evidence.empty()) {
    out += "\nevidence:";
    for (const auto& e : m.evidence) out += "\n  " + e;
  }
  for (const auto& h : m.suspects) {
    out += fmt::format("\nsuspect host {}:", h.host);
    for (const auto& e : h.evidence) out += "\n  " + e;
    if (!h.exclude_hint.empty()) out += "\n  hint: " + h.exclude_hint;
  }
  out += "\nack with: " + ack_hint(m);
  return out;
}

std::string page_json(const PageMessage& m) {
  json culprits = json::array();
  for (const auto& c : m.culprits) {
    json cj = {{"rank", c.rank}, {"reason", c.reason}};
    if (!c.host.empty()) cj["host"] = c.host;
    culprits.push_back(cj);
  }
  json j = {
      {"version", 1},
      {"job", m.job},
      {"owner", m.owner},
      {"state", m.state},
      {"cause", m.cause},
      {"summary", m.summary},
      {"last_step", m.last_step ? json(*m.last_step) : json(nullptr)},
      {"last_step_age_seconds", seconds_or_null(m.last_step_age_ns, m.last_step_age_ns >= 0)},
      {"expected_interval_seconds",
       seconds_or_null(m.expected_interval_ns, m.expected_interval_ns > 0)},
      {"culprits", culprits},
      {"evidence", m.evidence},
      {"incident_id", m.incident_id},
      {"incarnation", m.incarnation},
      {"host", m.host},
      {"started_at", format_utc(m.started_wall_ns > 0 ? m.started_wall_ns : wall_now_ns(),
                                UtcPrecision::kMillis)},
      {"ack_command", ack_hint(m)},
      {"verdict", verdict_or_null(m)},
      {"severity", m.severity},
  };
  json suspects = json::array();
  for (const auto& h : m.suspects) {
    suspects.push_back(
        {{"host", h.host}, {"evidence", h.evidence}, {"exclude_hint", h.exclude_hint}});
  }
  j["suspect_hosts"] = suspects;
  return dump(j);
}

std::string alertmanager_json(const PageMessage& m) {
  // Label values identify the alert (Alertmanager deduplicates on them); an empty value means
  // "no label", so empty ones are left out and cause is "none" rather than "".
  const char* alertname = m.state == "dead"              ? "StepwatchRankDead"
                          : m.state == "restart-storm"   ? "StepwatchRestartStorm"
                          : m.state == "restart-blocked" ? "StepwatchRestartBlocked"
                                                         : "StepwatchJobStalled";
  json labels = {{"alertname", alertname},
                 {"job_id", m.job},
                 {"state", m.state},
                 {"cause", m.cause.empty() ? "none" : m.cause},
                 {"severity", m.severity}};
  if (!m.owner.empty()) labels["owner"] = m.owner;
  json annotations = {
      {"summary", m.summary.empty() ? fmt::format("job {} is {}", m.job, m.state) : m.summary},
      {"description", page_text(m)},
      {"incident_id", m.incident_id},
      {"incarnation", std::to_string(m.incarnation)},
      {"host", m.host},
      {"ack_command", ack_hint(m)},
      {"last_step", m.last_step ? std::to_string(*m.last_step) : std::string("none")},
  };
  if (!m.suspects.empty()) {
    std::string hosts;
    for (const auto& h : m.suspects) hosts += (hosts.empty() ? "" : ",") + h.host;
    annotations["suspect_hosts"] = hosts;
  }
  json alert = {
      {"labels", labels},
      {"annotations", annotations},
      {"startsAt", format_utc(m.started_wall_ns > 0 ? m.started_wall_ns : wall_now_ns(),
                              UtcPrecision::kMillis)},
  };
  if (m.ended_wall_ns > 0) alert["endsAt"] = format_utc(m.ended_wall_ns, UtcPrecision::kMillis);
  return dump(json::array({alert}));
}

std::string alertmanager_alerts_url(const std::string& base_url) {
  constexpr std::string_view kPath = "/api/v2/alerts";
  std::string url = base_url;
  if (url.size() >= kPath.size() &&
      url.compare(url.size() - kPath.size(), kPath.size(), kPath) == 0)
    return url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url + std::string(kPath);
}

// ---- retries ------------------------------------------------------------------------------

int64_t backoff_ns(const PagerOptions& options, int attempt) {
  int64_t wait = std::max<int64_t>(options.first_backoff_ns, 0);
  for (int i = 1; i < attempt && wait < options.max_backoff_ns; ++i) wait *= 2;
  return std::min(wait, options.max_backoff_ns);
}

namespace {

// Up to 1 + target.retries attempts through the sink, with backoff between them; the last
// attempt's outcome goes into r.
void attempt_all(PageSink& sink, const spec::Pager& target, const PageMessage& page,
                 const PagerOptions& options, PageResult& r) {
  const int64_t timeout = target.timeout_ns > 0 ? target.timeout_ns : spec::Pager{}.timeout_ns;
  const int total = 1 + std::max(target.retries, 0);
  for (int i = 1; i <= total; ++i) {
    Attempt a = sink.deliver(page, timeout);
    r.attempts = i;
    r.ok = a.ok;
    r.http_status = a.http_status;
    r.exit_code = a.exit_code;
    r.detail = std::move(a.detail);
    if (a.ok || a.permanent || i == total) break;
    int64_t wait = backoff_ns(options, i);
    log_warn("page {} for job {}: attempt {}/{} failed: {}; retrying in {}", r.target, page.job, i,
             total, r.detail, format_duration(wait));
    bool go_on = options.sleep
                     ? options.sleep(wait)
                     : (std::this_thread::sleep_for(std::chrono::nanoseconds(wait)), true);
    if (!go_on) {
      r.detail += " (no further attempts: stopping)";
      break;
    }
  }
}

}  // namespace

PageResult page_one(const spec::Pager& target, const PageMessage& m, const PagerOptions& options) {
  PageResult r;
  r.kind = target.kind;
  r.target = spec::pager_kind_name(target.kind);
  const int64_t start = mono_now_ns();
  try {
    // Every attempt sends the same page: a start of "now" is fixed once, before the first.
    PageMessage page = m;
    if (page.started_wall_ns <= 0) page.started_wall_ns = wall_now_ns();
    if (std::unique_ptr<PageSink> sink = make_page_sink(target, options)) {
      r.target += " " + sink->destination(page);
      attempt_all(*sink, target, page, options, r);
    } else {
      r.detail = fmt::format("no sink for pager kind {}", static_cast<int>(target.kind));
    }
  } catch (const std::exception& e) {
    r.ok = false;
    r.detail = fmt::format("page {} failed: {}", r.target, e.what());
  }
  r.elapsed_ns = mono_now_ns() - start;
  if (r.ok) {
    log_info("paged {} for job {} (incident {}) after {} attempt(s)", r.target, m.job,
             m.incident_id, r.attempts);
  } else {
    log_error("page {} for job {} (incident {}) failed after {} attempt(s): {}", r.target, m.job,
              m.incident_id, r.attempts, r.detail);
  }
  return r;
}

std::vector<PageResult> page_all(const std::vector<spec::Pager>& targets, const PageMessage& m,
                                 const PagerOptions& options) {
  std::vector<PageResult> results(targets.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < targets.size(); ++i) {
    auto work = [&, i] { results[i] = page_one(targets[i], m, options); };
    if (i + 1 == targets.size()) {
      work();  // the last one on the caller's thread
      continue;
    }
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      work();  // no thread to be had: page this target in turn
    }
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace stepwatch::runbook
