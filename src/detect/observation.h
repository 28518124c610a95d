// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What the detector is given at each poll: the ranks' progress records and, optionally,
// evidence from probes (process, GPU, log). Evidence explains *why* a job is stalled; only the
// early rule (quiet.h) lets its absence (no frame change, no main-thread CPU, no I/O) decide a
// stall sooner than step time would. GPU occupancy and log lines never count as progress.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/contract/snapshot.h"

namespace stepwatch::detect {

struct ProcessFacts {
  int rank = -1;
  bool alive = true;                    // the beacon's process exists
  bool same_process = true;             // and its start time matches the beacon (not a reused pid)
  std::optional<int> exit_code;         // known when a supervisor reaped it
  char state = '?';                     // R S D Z T of the main thread
  int threads_in_d = 0;                 // threads in uninterruptible sleep
  std::optional<int64_t> cpu_delta_ns;  // CPU time used since the previous poll
  std::optional<int64_t> io_delta_bytes;  // read + write bytes since the previous poll
  std::string wchan;                      // where the main thread sleeps in the kernel
  // The main thread alone, since the previous read of its threads: helper threads (NCCL's
  // proxy, pin-memory) spin while the main one hangs, so only its own CPU says it computes.
  std::optional<int64_t> main_cpu_delta_ns;
  std::optional<int64_t> ctx_switches_delta;  // the main thread's context switches
};

struct GpuFacts {
  int rank = -1;
  std::optional<double> sm_util_pct;
  std::optional<double> power_w;
  std::optional<int64_t> mem_used_bytes;
};

struct LogFacts {
  int64_t last_line_wall_ns = 0;  // any line at all
  uint64_t lines_total = 0;
  std::optional<int64_t> last_step;  // from the log contract's step pattern
  int64_t last_step_line_wall_ns = 0;
};

struct Observation {
  Stamp now;
  std::string local_host;  // monotonic times are compared only for records of this host
  std::vector<contract::RankSnapshot> ranks;
  int world_size = 0;  // 0: take it from the records
  std::vector<ProcessFacts> procs;
  std::vector<GpuFacts> gpus;
  std::optional<LogFacts> log;
  std::optional<int> job_exit_code;  // the launcher exited with this status
  // Every monotonic stamp is on this host's clock: a merged multi-node observation, whose
  // remote stamps the job leader rebased onto its own clock (src/coord/summary.h).
  bool one_clock = false;
  // Node name -> ns since its summary lapsed (its etcd key is gone): its ranks are rank-silent.
  std::map<std::string, int64_t> lapsed_hosts;
};

// Whether a rank's monotonic stamps are on the observer's own clock (its host's records, or a
// merged observation the leader rebased): then ages are taken by monotonic time, else by wall.
inline bool on_this_clock(const contract::RankSnapshot& r, const Observation& obs) {
  return obs.one_clock || r.host.empty() || r.host == obs.local_host;
}

}  // namespace stepwatch::detect
