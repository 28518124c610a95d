// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "tests/support/scenarios/score.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "src/detect/baselines.h"
#include "src/detect/detector.h"
#include "src/detect/spec_adapter.h"
#include "src/spec/spec.h"

namespace stepwatch::bench {

namespace {

// Fills the timing fields once the fire time (or none) is known.
void judge(const Scenario& s, Score& sc) {
  const auto& t = s.truth;
  int64_t end = s.observations.empty() ? 0 : s.observations.back().now.wall_ns;
  if (sc.fired && (!t.stall || sc.fired_wall_ns < t.stall_start_wall_ns)) sc.false_page = true;
  if (t.stall) {
    if (sc.fired && !sc.false_page) {
      sc.latency_ns = sc.fired_wall_ns - t.stall_start_wall_ns;
      sc.within_target = *sc.latency_ns <= t.allowed_ns;
      sc.gpu_minutes = kGpus * static_cast<double>(*sc.latency_ns) / (60.0 * kNsPerSec);
    } else if (!sc.fired) {
      sc.missed = true;
      sc.within_target = false;
      sc.gpu_minutes =
          kGpus * static_cast<double>(end - t.stall_start_wall_ns) / (60.0 * kNsPerSec);
    }
  }
}

}  // namespace

Result<Score> score_stepwatch(const Scenario& s, bool early) {
  auto spec = spec::parse_spec(s.spec_toml, "scenario " + s.name);
  if (!spec) return spec.error();
  detect::Config config = detect::config_from_spec(*spec);
  config.early = config.early && early;
  detect::Detector d(config);
  Score sc;
  sc.scenario = s.name;
  sc.detector = early ? "stepwatch" : "step time only";
  for (const auto& o : s.observations) {
    detect::Verdict v = d.observe(o);
    if (v.state == detect::State::kStalled || v.state == detect::State::kDead) {
      sc.fired = true;
      sc.fired_wall_ns = o.now.wall_ns;
      sc.verdict = fmt::format("{}/{}", detect::state_name(v.state), detect::cause_name(v.cause));
      std::set<int> named;
      for (const auto& c : v.culprits) named.insert(c.rank);
      if (!named.empty()) sc.verdict += fmt::format(" culprits {}", fmt::join(named, ","));
      if (!s.truth.culprits.empty()) {
        std::set<int> truth(s.truth.culprits.begin(), s.truth.culprits.end());
        sc.culprit_ok = named == truth;
      } else if (!named.empty() && s.truth.stall) {
        sc.culprit_ok = std::nullopt;  // the truth names nobody; naming someone is not scored
      }
      break;
    }
  }
  judge(s, sc);
  return sc;
}

std::vector<Score> score_baselines(const Scenario& s) {
  std::vector<std::unique_ptr<detect::Baseline>> detectors;
  detectors.push_back(detect::make_fixed_timeout());
  detectors.push_back(detect::make_calculated_timeout());
  detectors.push_back(detect::make_sm_idle());
  std::vector<Score> out;
  for (auto& d : detectors) {
    Score sc;
    sc.scenario = s.name;
    sc.detector = d->name();
    for (const auto& o : s.observations) {
      if (d->observe(o)) {
        sc.fired = true;
        sc.fired_wall_ns = o.now.wall_ns;
        break;
      }
    }
    judge(s, sc);
    out.push_back(sc);
  }
  return out;
}

}  // namespace stepwatch::bench
