#include "src/cli/incidents.h"

#include <fmt/format.h>
#include <time.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "src/common/clock.h"
#include "src/common/duration.h"
#include "src/store/store.h"

namespace stepwatch::cli {

namespace {

using store::Action;
using store::Incident;

// "2024-05-01T03:12:44Z": UTC, so two on-call engineers in different zones read the same time.
std::string utc(int64_t wall_ns) {
  time_t secs = static_cast<time_t>(wall_ns / kNsPerSec);
  tm t{};
  if (gmtime_r(&secs, &t) == nullptr) return fmt::format("@{}ns", wall_ns);
  char buf[32];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &t);
  return std::string(buf, n);
}

// Stored text comes from trainers, detectors and people typing ack notes: one line, and no
// control characters that could rewrite the reader's terminal.
std::string one_line(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

std::string verdict_text(const Incident& i) {
  return i.cause.empty() ? i.state : fmt::format("{} ({})", i.state, i.cause);
}

std::string paged_line(const Incident& i) {
  if (!i.paged_at_ns)
    return i.page_result.empty() ? "not paged"
                                 : fmt::format("not paged ({})", one_line(i.page_result));
  if (i.page_result == "claimed") {
    return fmt::format("{}  claimed, no outcome recorded (stopped before the page was sent?)",
                       utc(*i.paged_at_ns));
  }
  return fmt::format("{}  {}", utc(*i.paged_at_ns), one_line(i.page_result));
}

void text_incident(const Incident& i, const std::vector<Action>& actions, std::string* out) {
  *out += fmt::format("#{}  {}  {}  {}  incarnation {}\n", i.id, one_line(i.job), i.status(),
                      one_line(verdict_text(i)), i.incarnation);
  *out += fmt::format("  opened   {}\n", utc(i.opened_at_ns));
  if (!i.summary.empty()) *out += fmt::format("  summary  {}\n", one_line(i.summary));
  *out += fmt::format("  paged    {}\n", paged_line(i));
  if (i.acked_at_ns) {
    std::string who = one_line(i.acked_by.empty() ? "someone" : i.acked_by);
    *out += fmt::format("  acked    {}  by {}{}\n", utc(*i.acked_at_ns), who,
                        i.ack_note.empty() ? "" : ": " + one_line(i.ack_note));
  } else if (i.is_open()) {
    *out += "  acked    not yet\n";
  }
  if (i.closed_at_ns) {
    *out += fmt::format("  closed   {}  {} (after {})\n", utc(*i.closed_at_ns),
                        i.resolution.empty() ? "no resolution given" : one_line(i.resolution),
                        format_duration(*i.closed_at_ns - i.opened_at_ns));
  }
  if (actions.empty()) {
    *out += "  actions  none\n";
    return;
  }
  *out += "  actions\n";
  for (const auto& a : actions) {
    *out += fmt::format("    {}  {:<12} {:<6} {}\n", utc(a.at_ns), one_line(a.kind),
                        a.ok ? "ok" : "FAILED", one_line(a.detail));
  }
}

nlohmann::json opt_ns(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}
nlohmann::json opt_utc(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(utc(*v)) : nlohmann::json();
}

nlohmann::json json_incident(const Incident& i, const std::vector<Action>& actions) {
  nlohmann::json acts = nlohmann::json::array();
  for (const auto& a : actions) {
    acts.push_back({{"id", a.id},
                    {"at", utc(a.at_ns)},
                    {"at_ns", a.at_ns},
                    {"kind", a.kind},
                    {"ok", a.ok},
                    {"detail", a.detail}});
  }
  // The verdict is embedded as JSON when it is JSON, else kept as the text that was stored.
  nlohmann::json verdict;
  if (!i.verdict_json.empty()) {
    verdict = nlohmann::json::parse(i.verdict_json, nullptr, /*allow_exceptions=*/false);
    if (verdict.is_discarded()) verdict = i.verdict_json;
  }
  return {{"id", i.id},
          {"job", i.job},
          {"incarnation", i.incarnation},
          {"status", std::string(i.status())},
          {"state", i.state},
          {"cause", i.cause},
          {"summary", i.summary},
          {"verdict", verdict},
          {"opened_at", utc(i.opened_at_ns)},
          {"opened_at_ns", i.opened_at_ns},
          {"paged_at", opt_utc(i.paged_at_ns)},
          {"paged_at_ns", opt_ns(i.paged_at_ns)},
          {"page_result", i.page_result},
          {"acked_at", opt_utc(i.acked_at_ns)},
          {"acked_at_ns", opt_ns(i.acked_at_ns)},
          {"acked_by", i.acked_by},
          {"ack_note", i.ack_note},
          {"closed_at", opt_utc(i.closed_at_ns)},
          {"closed_at_ns", opt_ns(i.closed_at_ns)},
          {"resolution", i.resolution},
          {"actions", acts}};
}

}  // namespace

int incidents_report(const std::string& state_dir, const std::string& job, bool json, int limit,
                     std::string* out, std::string* err) {
  auto fail = [&](const std::string& message) {
    *err += fmt::format("stepwatch incidents: {}\n", message);
    return kIncidentsUnreadable;
  };
  store::OpenOptions options;
  options.create = false;  // reading must not leave an empty state directory behind
  auto st = store::Store::open(state_dir, options);
  if (!st) return fail(st.error().message);
  auto list = st->incidents(job, limit);
  if (!list) return fail(list.error().message);

  nlohmann::json docs = nlohmann::json::array();
  for (const auto& i : *list) {
    auto actions = st->actions(i.id);
    if (!actions) return fail(actions.error().message);
    if (json) {
      docs.push_back(json_incident(i, *actions));
    } else {
      if (&i != &list->front()) *out += "\n";
      text_incident(i, *actions, out);
    }
  }
  if (json) {
    nlohmann::json doc = {{"state_dir", state_dir}, {"job", job}, {"incidents", docs}};
    // replace: stored text is not guaranteed UTF-8, and dump() would throw on it.
    *out += doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else if (list->empty()) {
    *out += job.empty() ? fmt::format("no incidents in {}\n", state_dir)
                        : fmt::format("no incidents for job {} in {}\n", one_line(job), state_dir);
  }
  return kIncidentsOk;
}

int run_incidents(const std::string& state_dir, const std::string& job, bool json, int limit) {
  std::string out;
  std::string err;
  int rc = incidents_report(state_dir, job, json, limit, &out, &err);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  std::fwrite(err.data(), 1, err.size(), stderr);
  return rc;
}

}  // namespace stepwatch::cli
