// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/cli/incidents.h"

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "src/common/duration.h"
#include "src/serve/json_views.h"
#include "src/store/store.h"

namespace stepwatch::cli {

namespace {

using store::Action;
using store::Incident;

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
                       format_utc(*i.paged_at_ns));
  }
  return fmt::format("{}  {}", format_utc(*i.paged_at_ns), one_line(i.page_result));
}

void text_incident(const Incident& i, const std::vector<Action>& actions, std::string* out) {
  *out += fmt::format("#{}  {}  {}  {}  incarnation {}\n", i.id, one_line(i.job), i.status(),
                      one_line(verdict_text(i)), i.incarnation);
  *out += fmt::format("  opened   {}\n", format_utc(i.opened_at_ns));
  if (!i.summary.empty()) *out += fmt::format("  summary  {}\n", one_line(i.summary));
  *out += fmt::format("  paged    {}\n", paged_line(i));
  if (i.acked_at_ns) {
    std::string who = one_line(i.acked_by.empty() ? "someone" : i.acked_by);
    *out += fmt::format("  acked    {}  by {}{}\n", format_utc(*i.acked_at_ns), who,
                        i.ack_note.empty() ? "" : ": " + one_line(i.ack_note));
  } else if (i.is_open()) {
    *out += "  acked    not yet\n";
  }
  if (i.closed_at_ns) {
    *out += fmt::format("  closed   {}  {} (after {})\n", format_utc(*i.closed_at_ns),
                        i.resolution.empty() ? "no resolution given" : one_line(i.resolution),
                        format_duration(*i.closed_at_ns - i.opened_at_ns));
  }
  if (actions.empty()) {
    *out += "  actions  none\n";
    return;
  }
  *out += "  actions\n";
  for (const auto& a : actions) {
    *out += fmt::format("    {}  {:<12} {:<6} {}\n", format_utc(a.at_ns), one_line(a.kind),
                        a.ok ? "ok" : "FAILED", one_line(a.detail));
  }
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
      docs.push_back(serve::incident_json(i, &*actions));
    } else {
      if (&i != &list->front()) *out += "\n";
      text_incident(i, *actions, out);
    }
  }
  if (json) {
    nlohmann::json doc = {{"state_dir", state_dir}, {"job", job}, {"incidents", docs}};
    // replace: stored text is not guaranteed UTF-8, and dump() would throw on it.
    *out += serve::dump_json(doc, 2) + "\n";
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
