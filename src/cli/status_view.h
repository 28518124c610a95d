// `stepwatch status` as text: one line per rank, readable without any daemon.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/contract/job_scan.h"
#include "src/detect/observation.h"
#include "src/detect/verdict.h"

namespace stepwatch::cli {

// Age of a stamp at `now`: monotonic when the record comes from this host, else wall clock.
// Returns -1 when unknown.
int64_t age_ns(const Stamp& at, const Stamp& now, bool same_host);

// What the probes and the detector add to a job's lines: occupancy beside progress.
struct JobEvidence {
  std::optional<detect::Verdict> verdict;   // state, expected interval, per-rank budgets
  std::vector<detect::ProcessFacts> procs;  // process state, CPU and I/O over the sample
  std::vector<detect::GpuFacts> gpus;       // the GPU each rank holds
  int64_t sample_ns = 0;                    // the window of the CPU and I/O deltas
};

// `evidence` (by job id) adds the step age against the expected interval, the phase age against
// its budget, process state, CPU and I/O, the GPU, and each rank's verdict; absent values are
// "n/a", never 0.
std::string render_status(const std::vector<contract::JobView>& jobs, const Stamp& now,
                          const std::string& local_host,
                          const std::map<std::string, JobEvidence>* evidence = nullptr);

}  // namespace stepwatch::cli
