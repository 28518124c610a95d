// The stepwatch binary: parses the command line and hands off to one subcommand.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "src/cli/check_spec.h"
#include "src/cli/replay.h"
#include "src/cli/status_view.h"
#include "src/common/clock.h"
#include "src/contract/job_scan.h"
#include "src/contract/names.h"

namespace {

std::string default_dir() {
  const char* d = std::getenv("STEPWATCH_DIR");
  return d != nullptr && *d != '\0' ? d : stepwatch::contract::kDefaultDir;
}

std::string local_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string h(buf);
  if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  return h;
}

int run_status(const std::string& dir, const std::string& job) {
  using namespace stepwatch;
  std::vector<contract::JobView> views;
  if (!job.empty()) {
    if (auto st = contract::validate_job_id(job); !st) {
      fmt::print(stderr, "stepwatch status: {}\n", st.error().message);
      return 2;
    }
    views.push_back(contract::scan_job(dir, job));
    if (views.back().ranks.empty() && !views.back().problems.empty()) {
      fmt::print(stderr, "stepwatch status: {}\n", views.back().problems.front().message);
      return 1;
    }
  } else {
    std::vector<Error> skipped;
    auto jobs = contract::list_jobs(dir, &skipped);
    if (!jobs) {
      fmt::print(stderr, "stepwatch status: {}\n", jobs.error().message);
      return 1;
    }
    for (const auto& j : *jobs) views.push_back(contract::scan_job(dir, j));
    for (const auto& s : skipped) fmt::print(stderr, "stepwatch status: {}\n", s.message);
  }
  fmt::print("{}", cli::render_status(views, SystemClock::instance().now(), local_host()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stepwatch: is this training job still making progress?"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stepwatch 0.1.0");

  std::string dir = default_dir();
  std::string job;
  auto* status = app.add_subcommand("status", "Show every rank's step, step age, phase, beat, checkpoint and loss");
  status->add_option("--dir", dir, "Beacon root (default $STEPWATCH_DIR or /dev/shm/stepwatch)");
  status->add_option("job", job, "Only this job");

  std::vector<std::string> spec_files;
  bool spec_json = false;
  auto* check = app.add_subcommand("check-spec", "Validate job specs and show the values that will apply");
  check->add_option("files", spec_files, "Spec files (TOML)")->required();
  check->add_flag("--json", spec_json, "Machine-readable output");

  stepwatch::cli::ReplayOptions replay_opts;
  auto* replay = app.add_subcommand("replay", "Run the detector over recorded traces and print the verdict timeline");
  replay->add_option("traces", replay_opts.traces, "Trace files (JSONL, docs/replay.md)")->required();
  replay->add_option("--spec", replay_opts.spec_path, "Judge with this spec instead of the recorded one");
  replay->add_flag("--json", replay_opts.json, "One JSON object per verdict");
  replay->add_flag("--all", replay_opts.all, "Every poll, not only changes of state");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (status->parsed()) return run_status(dir, job);
    if (check->parsed()) return stepwatch::cli::run_check_spec(spec_files, spec_json);
    if (replay->parsed()) return stepwatch::cli::run_replay(replay_opts);
  } catch (const std::exception& e) {
    fmt::print(stderr, "stepwatch: internal error: {}\n", e.what());
    return 70;
  }
  return 2;
}
