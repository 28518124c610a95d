// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/cli/replay.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "src/common/duration.h"
#include "src/detect/detector.h"
#include "src/detect/spec_adapter.h"
#include "src/spec/spec.h"
#include "src/trace/trace_file.h"

namespace stepwatch::cli {

namespace {

std::string offset(int64_t ns) {
  int64_t s = ns / kNsPerSec;
  return fmt::format("+{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

// The spec for one trace: --spec, else the one recorded in the trace, else the defaults.
Result<spec::JobSpec> spec_for(const ReplayOptions& o, const trace::Trace& t, std::string* origin) {
  if (!o.spec_path.empty()) {
    *origin = o.spec_path;
    return spec::load_spec_file(o.spec_path);
  }
  if (t.header.spec_toml) {
    *origin = "recorded in the trace";
    return spec::parse_spec(*t.header.spec_toml, t.path + " (recorded spec)");
  }
  *origin = "defaults (learn the interval)";
  return spec::default_spec();
}

}  // namespace

int run_replay(const ReplayOptions& o) {
  int rc = 0;
  for (const auto& path : o.traces) {
    auto recorded = trace::read_trace(path);
    if (!recorded) {
      fmt::print(stderr, "stepwatch replay: {}\n", recorded.error().message);
      rc = 2;
      continue;
    }
    for (const auto& p : recorded->problems)
      fmt::print(stderr, "stepwatch replay: {}\n", p.message);
    if (!recorded->problems.empty()) rc = std::max(rc, 1);
    std::string origin;
    auto spec = spec_for(o, *recorded, &origin);
    if (!spec) {
      fmt::print(stderr, "stepwatch replay: {}\n", spec.error().message);
      rc = 2;
      continue;
    }
    detect::Detector d(detect::config_from_spec(*spec));
    if (!o.json) {
      fmt::print("{}: job {}, {} observations, spec {}\n", path,
                 recorded->header.job.empty() ? "?" : recorded->header.job,
                 recorded->observations.size(), origin);
    }
    if (recorded->observations.empty()) continue;
    const Stamp start = recorded->observations.front().now;
    auto since_start = [&](const Stamp& now) {
      return now.mono_ns > 0 && start.mono_ns > 0 ? now.mono_ns - start.mono_ns
                                                  : now.wall_ns - start.wall_ns;
    };
    std::string last;
    std::optional<int64_t> fired_at;
    for (const auto& obs : recorded->observations) {
      detect::Verdict v = d.observe(obs);
      std::string key =
          fmt::format("{}/{}", detect::state_name(v.state), detect::cause_name(v.cause));
      if ((v.state == detect::State::kStalled || v.state == detect::State::kDead) && !fired_at) {
        fired_at = since_start(obs.now);
      }
      if (!o.all && key == last) continue;
      last = key;
      if (o.json) {
        nlohmann::json j = {
            {"trace", path},
            {"offset_seconds", since_start(obs.now) / 1e9},
            {"verdict", nlohmann::json::parse(trace::verdict_to_json(v, recorded->header.job))}};
        fmt::print("{}\n", j.dump());
      } else {
        fmt::print("  {}  {}\n", offset(since_start(obs.now)), v.summary);
        for (const auto& rv : v.ranks) {
          if (rv.state == v.state && !rv.note.empty() && v.state != detect::State::kHealthy) {
            fmt::print("             rank {}: {}\n", rv.rank, rv.note);
          }
        }
      }
    }
    if (!o.json && recorded->header.truth) {
      const auto& t = *recorded->header.truth;
      if (t.stall) {
        int64_t stall = t.stall_start_wall_ns - start.wall_ns;
        fmt::print(
            "  truth: stall at {}{}; stepwatch fired {}\n", offset(stall),
            t.culprits.empty() ? "" : fmt::format(" (culprits {})", fmt::join(t.culprits, ",")),
            fired_at ? fmt::format("at {} ({} after)", offset(*fired_at),
                                   format_duration(*fired_at - stall))
                     : "never");
      } else {
        fmt::print("  truth: no stall; stepwatch {}\n",
                   fired_at ? fmt::format("FIRED at {}", offset(*fired_at)) : "never fired");
      }
    }
  }
  return rc;
}

}  // namespace stepwatch::cli
