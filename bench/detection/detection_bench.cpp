// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Detection quality on the labeled scenario corpus: stepwatch against three baselines, on the
// same observations. Prints one markdown table; --traces DIR also writes every scenario as a
// replayable trace (stepwatch replay DIR/NAME.jsonl).
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "src/common/duration.h"
#include "tests/support/scenarios/scenarios.h"
#include "tests/support/scenarios/score.h"

using namespace stepwatch;

namespace {

std::string latency_text(const bench::Score& s) {
  if (s.missed) return "missed";
  if (!s.latency_ns) return "-";
  return format_duration(*s.latency_ns);
}

std::string intervals_text(const bench::Score& s, const bench::Scenario& sc) {
  if (!s.latency_ns || sc.truth.interval_ns <= 0) return "-";
  return fmt::format(
      "{:.1f}", static_cast<double>(*s.latency_ns) / static_cast<double>(sc.truth.interval_ns));
}

int write_traces(const std::vector<bench::Scenario>& scenarios, const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& s : scenarios) {
    std::string path = fmt::format("{}/{}.jsonl", dir, s.name);
    std::filesystem::remove(path);
    if (auto st = bench::write_trace(s, path); !st) {
      fmt::print(stderr, "{}\n", st.error().message);
      return 1;
    }
  }
  fmt::print("wrote {} traces to {}\n", scenarios.size(), dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string traces;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--traces") == 0 && i + 1 < argc)
      traces = argv[++i];
    else {
      fmt::print(stderr, "usage: detection_bench [--traces DIR]\n");
      return 2;
    }
  }
  auto scenarios = bench::make_scenarios();
  if (!traces.empty()) return write_traces(scenarios, traces);

  fmt::print(
      "## Detection quality: {} scenarios, stepwatch vs baselines (GPU-minutes for a {}-GPU "
      "job)\n\n",
      scenarios.size(), bench::kGpus);
  fmt::print(
      "| scenario | truth | detector | false page | latency | in intervals | culprit | GPU-min "
      "burned | verdict |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|\n");
  int sw_false = 0, sw_missed = 0, sw_late = 0, sw_culprit_wrong = 0, stalls = 0;
  // Index 0 of the others: stepwatch's step-time rule alone; then the three baselines.
  constexpr int kOthers = 4;
  int base_false[kOthers] = {}, base_missed[kOthers] = {};
  double sw_gpu = 0, base_gpu[kOthers] = {};
  std::string base_names[kOthers];
  for (const auto& s : scenarios) {
    auto sw = bench::score_stepwatch(s);
    if (!sw) {
      fmt::print(stderr, "scenario {}: {}\n", s.name, sw.error().message);
      return 1;
    }
    auto step_only = bench::score_stepwatch(s, /*early=*/false);
    if (!step_only) {
      fmt::print(stderr, "scenario {}: {}\n", s.name, step_only.error().message);
      return 1;
    }
    std::vector<bench::Score> rows{*sw, *step_only};
    auto base = bench::score_baselines(s);
    rows.insert(rows.end(), base.begin(), base.end());
    std::string truth = s.truth.stall ? "stall" : "no stall";
    if (s.truth.stall) ++stalls;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::string culprit = !r.culprit_ok ? "-" : (*r.culprit_ok ? "right" : "WRONG");
      std::string gpu =
          s.truth.stall ? fmt::format("{}{:.0f}", r.missed ? ">" : "", r.gpu_minutes) : "-";
      fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", i == 0 ? s.name : "",
                 i == 0 ? truth : "", r.detector, r.false_page ? "**yes**" : "no", latency_text(r),
                 intervals_text(r, s), culprit, gpu, r.verdict.empty() ? "" : r.verdict);
      if (i == 0) {
        sw_false += r.false_page;
        sw_missed += r.missed;
        sw_late += s.truth.stall && !r.missed && !r.within_target;
        sw_culprit_wrong += r.culprit_ok.has_value() && !*r.culprit_ok;
        sw_gpu += r.gpu_minutes;
      } else {
        base_names[i - 1] = r.detector;
        base_false[i - 1] += r.false_page;
        base_missed[i - 1] += r.missed;
        base_gpu[i - 1] += r.gpu_minutes;
      }
    }
  }
  fmt::print(
      "\n| detector | false pages | stalls missed (of {}) | GPU-minutes burned, all stalls "
      "|\n|---|---|---|---|\n",
      stalls);
  fmt::print("| stepwatch | {} | {} | {:.0f} |\n", sw_false, sw_missed, sw_gpu);
  for (int i = 0; i < kOthers; ++i) {
    fmt::print("| {} | {} | {} | {:.0f}{} |\n", base_names[i], base_false[i], base_missed[i],
               base_gpu[i], base_missed[i] ? " (missed stalls counted to trace end)" : "");
  }
  bool ok = sw_false == 0 && sw_missed == 0 && sw_late == 0 && sw_culprit_wrong == 0 &&
            sw_gpu <= bench::kGpuMinutesTarget;
  fmt::print(
      "\nstepwatch targets (zero false pages; every stall within its allowance: grace x interval "
      "or budget + 1 poll, and 60 s + 1 poll for the early rule's; culprits right; at most {:.0f} "
      "GPU-minutes burned): {}\n",
      bench::kGpuMinutesTarget,
      ok ? "MET"
         : fmt::format(
               "NOT MET (false {}, missed {}, late {}, wrong culprits {}, GPU-minutes {:.0f})",
               sw_false, sw_missed, sw_late, sw_culprit_wrong, sw_gpu));
  return ok ? 0 : 1;
}
