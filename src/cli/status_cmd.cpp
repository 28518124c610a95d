// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/cli/status_cmd.h"

#include <fmt/format.h>
#include <unistd.h>

#include <thread>

#include "src/cli/agent_client.h"
#include "src/cli/status_view.h"
#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/contract/job_scan.h"
#include "src/contract/names.h"
#include "src/detect/detector.h"
#include "src/detect/spec_adapter.h"
#include "src/probe/nvml.h"
#include "src/watch/job_watch.h"

namespace stepwatch::cli {

int run_status(const StatusArgs& a) {
  if (!a.dir_given) {
    auto agent = find_agent(a.agent);
    if (!agent) {
      fmt::print(stderr, "stepwatch status: {}\n", agent.error().message);
      return 2;
    }
    if (*agent) return status_from_agent(**agent, a.job);
  }
  std::vector<contract::JobView> views;
  if (!a.job.empty()) {
    if (auto st = contract::validate_job_id(a.job); !st) {
      fmt::print(stderr, "stepwatch status: {}\n", st.error().message);
      return 2;
    }
    views.push_back(contract::scan_job(a.dir, a.job));
    if (views.back().ranks.empty() && !views.back().problems.empty()) {
      fmt::print(stderr, "stepwatch status: {}\n", views.back().problems.front().message);
      return 1;
    }
  } else {
    std::vector<Error> skipped;
    auto jobs = contract::list_jobs(a.dir, &skipped);
    if (!jobs) {
      fmt::print(stderr, "stepwatch status: {}\n", jobs.error().message);
      return 1;
    }
    for (const auto& j : *jobs) views.push_back(contract::scan_job(a.dir, j));
    for (const auto& s : skipped) fmt::print(stderr, "stepwatch status: {}\n", s.message);
  }
  auto sample = parse_duration(a.sample);
  if (!sample) {
    fmt::print(stderr, "stepwatch status: --sample: {}\n", sample.error().message);
    return 2;
  }
  spec::JobSpec spec = spec::default_spec();
  if (!a.spec_path.empty()) {
    auto s = spec::load_spec_file(a.spec_path);
    if (!s) {
      fmt::print(stderr, "stepwatch status: {}\n", s.error().message);
      return 2;
    }
    spec = std::move(*s);
  }
  std::string host = short_hostname();
  std::map<std::string, JobEvidence> evidence;
  if (*sample > 0 && !views.empty()) {
    std::shared_ptr<probe::GpuProbe> gpu;
    if (auto nvml = probe::Nvml::open(a.nvml_lib)) {
      gpu = std::make_shared<probe::GpuProbe>(std::shared_ptr<probe::Nvml>(std::move(*nvml)),
                                              [](const std::string&) {});
    }
    // Two polls a sample apart: rates need two readings. Every job is sampled in the same window.
    std::vector<std::unique_ptr<watch::JobWatch>> watches;
    for (const auto& v : views) {
      watch::ObserverConfig oc;
      oc.beacon_root = a.dir;
      oc.job = v.job;
      oc.local_host = host;
      oc.gpu = gpu;
      watches.push_back(std::make_unique<watch::JobWatch>(oc, detect::config_from_spec(spec)));
      (void)watches.back()->look(SystemClock::instance().now());
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(*sample));
    for (size_t i = 0; i < views.size(); ++i) {
      watch::Look look = watches[i]->look(SystemClock::instance().now());
      JobEvidence ev;
      ev.verdict = std::move(look.verdict);
      ev.procs = std::move(look.observation.procs);
      ev.gpus = std::move(look.observation.gpus);
      ev.sample_ns = *sample;
      evidence[views[i].job] = std::move(ev);
      views[i] = contract::scan_job(a.dir, views[i].job);  // the records as of the second poll
    }
  }
  fmt::print("{}", render_status(views, SystemClock::instance().now(), host,
                                 evidence.empty() ? nullptr : &evidence));
  return 0;
}

}  // namespace stepwatch::cli
