// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch status` as text: one line per rank, the same table whichever source it reads (the
// beacons and /proc directly, or the node agent's JSON: src/cli/agent_client.h). Each source
// fills a StatusJob; render_jobs is the one renderer.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/common/clock.h"
#include "src/contract/job_scan.h"
#include "src/detect/observation.h"
#include "src/detect/verdict.h"
#include "src/watch/job_state.h"

namespace stepwatch::cli {

// Age of a stamp at `now`: monotonic when the record comes from this host, else wall clock.
// Returns -1 when unknown.
int64_t age_ns(const Stamp& at, const Stamp& now, bool same_host);

// One rank's line. Ages are -1 and optionals empty when the source does not know: "n/a".
struct StatusRank {
  int rank = 0;
  std::string host;  // "" unknown
  int pid = 0;       // 0 unknown
  std::optional<int64_t> step;
  int64_t step_age_ns = -1;
  std::optional<int64_t> expected_ns;  // what the step age is held against
  std::string phase;
  int64_t phase_age_ns = -1;
  std::optional<int64_t> budget_ns;  // what the phase age is held against
  int64_t beat_age_ns = -1;
  std::optional<std::string> checkpoint;  // its id
  int64_t checkpoint_step = 0;
  int64_t checkpoint_age_ns = -1;
  std::optional<double> loss;
  std::string status = "n/a";  // running, finished, failed
  std::string source = "n/a";  // beacon, jsonl
  // Evidence, shown when the job has any (StatusJob::evidence).
  std::optional<detect::ProcessFacts> process;
  std::optional<detect::GpuFacts> gpu;
  std::string verdict;  // the rank's state; "" unknown
  std::string note;     // why
};

// One job: a header line, its verdict, a line per rank, the ranks without a record, culprits
// and problems.
struct StatusJob {
  std::string job;
  // The state of a job watched over time (the agent's), "stalled/io"; empty for a one-off look,
  // whose sampled verdict is shown in the verdict line only.
  std::string state;
  std::string owner;  // "" unknown
  std::string dir;    // "" unknown
  bool retired = false;
  int world_size = 0;
  std::vector<StatusRank> ranks;  // sorted by rank
  std::optional<std::string> verdict_summary;
  bool evidence = false;  // show the process, CPU, I/O, GPU, verdict and note columns
  int64_t sample_ns = 0;  // the window of the CPU and I/O deltas; 0: unknown (n/a)
  std::vector<std::pair<int, std::string>> culprits;  // rank, reason
  std::vector<std::string> problems;
  // A multi-node job (the agent's "cluster"): a line with the leader and one per node with its
  // summary's age. nullopt on a single node, whose lines stay as they were.
  std::optional<watch::ClusterState> cluster;
};

// The one renderer. "no jobs\n" for none.
std::string render_jobs(const std::vector<StatusJob>& jobs);

// What the probes and the detector add to a job's lines: occupancy beside progress.
struct JobEvidence {
  std::optional<detect::Verdict> verdict;   // state, expected interval, per-rank budgets
  std::vector<detect::ProcessFacts> procs;  // process state, CPU and I/O over the sample
  std::vector<detect::GpuFacts> gpus;       // the GPU each rank holds
  int64_t sample_ns = 0;                    // the window of the CPU and I/O deltas
};

// A job read from its beacons here, at `now`; `evidence` (null: none) adds the step age against
// the expected interval, the phase age against its budget, process state, CPU and I/O, the GPU,
// and each rank's verdict.
StatusJob status_job(const contract::JobView& view, const Stamp& now, const std::string& local_host,
                     const JobEvidence* evidence = nullptr);

// status_job for each view (evidence by job id), rendered; absent values are "n/a", never 0.
std::string render_status(const std::vector<contract::JobView>& jobs, const Stamp& now,
                          const std::string& local_host,
                          const std::map<std::string, JobEvidence>* evidence = nullptr);

}  // namespace stepwatch::cli
