// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "tests/support/scenarios/scenarios.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "src/trace/trace_file.h"
#include "tests/support/scenarios/world.h"

namespace stepwatch::bench {

namespace {

constexpr int64_t kSec = kNsPerSec;
constexpr int64_t kMin = 60 * kSec;
constexpr int kRanks = 4;

// The spec most scenarios run under: 2 s steps, grace 2, budgets of a mid-sized job.
std::string spec_2s(const std::string& interval = "\"2s\"") {
  return fmt::format(R"(job = "scenario"
expected_interval = {}
grace_intervals = 2
slow_factor = 1.5
[phases]
init = "5m"
compile = "15m"
compile_warm = "5m"
data = "2m"
eval = {{ budget = "5m", beats_renew = false }}
checkpoint = "10m"
)",
                     interval);
}

// Trains `n` steps of `interval(i)` on every rank.
void train(World& w, int n, const std::function<int64_t(int)>& interval) {
  for (int i = 0; i < n; ++i) {
    w.activity_all(Activity::kCompute);
    w.advance(interval(i));
    w.step_all();
  }
}
void train(World& w, int n, int64_t interval) {
  train(w, n, [interval](int) { return interval; });
}

// Launch to first step: imports and model building (the main thread computes), then a short
// rendezvous once every rank is up.
void start(World& w, int64_t init = 20 * kSec) {
  int64_t rendezvous = std::min<int64_t>(init, 10 * kSec);
  w.activity_all(Activity::kImport);
  w.advance(init - rendezvous);
  w.activity_all(Activity::kInitWait);
  w.advance(rendezvous);
  w.step_all();
}

Scenario finish(std::string name, std::string description, std::string spec, int64_t poll, World& w,
                trace::Truth truth) {
  Scenario s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.spec_toml = std::move(spec);
  s.poll_ns = poll;
  s.truth = std::move(truth);
  s.observations = w.observations();
  return s;
}

trace::Truth no_stall(int64_t interval) {
  trace::Truth t;
  t.interval_ns = interval;
  return t;
}

trace::Truth stall_at(const World& w, int64_t allowed, int64_t interval, std::vector<int> culprits,
                      std::string note) {
  trace::Truth t;
  t.stall = true;
  t.stall_start_wall_ns = w.now().wall_ns;
  t.allowed_ns = allowed;
  t.interval_ns = interval;
  t.culprits = std::move(culprits);
  t.note = std::move(note);
  return t;
}

}  // namespace

std::vector<Scenario> make_scenarios(unsigned seed) {
  std::vector<Scenario> out;
  std::mt19937_64 rng(seed);
  const int64_t poll = kSec;

  {  // 1. Steady training.
    World w(kRanks, poll);
    start(w);
    train(w, 900, 2 * kSec);
    w.finish_all();
    w.advance(5 * kSec);
    out.push_back(finish("steady", "2 s steps for 30 min", spec_2s(), poll, w, no_stall(2 * kSec)));
  }
  {  // 2. Heavy-tailed step times (learned interval). The job class knows its tail and gives it
     // more grace: with grace 2, the first 3x spike (step ~80, before any was seen) would page.
    World w(kRanks, poll);
    start(w);
    std::lognormal_distribution<double> body(std::log(2.0), 0.35);
    std::uniform_real_distribution<double> u(0, 1);
    train(w, 1500, [&](int) {
      double s = body(rng);
      if (u(rng) < 0.01) s *= 3;  // one step in a hundred hits a slow allreduce
      return static_cast<int64_t>(s * kSec);
    });
    std::string spec = spec_2s("\"learn\"");
    spec.replace(spec.find("grace_intervals = 2"), 19, "grace_intervals = 4");
    out.push_back(finish("heavy-tail",
                         "lognormal steps (median 2 s, sigma 0.35), 1% 3x spikes; learn, grace 4",
                         spec, poll, w, no_stall(2 * kSec)));
  }
  {  // 3. A labeled eval 30x the step time, every 300 steps, beating per batch.
    World w(kRanks, poll);
    start(w);
    for (int round = 0; round < 4; ++round) {
      train(w, 300, 2 * kSec);
      w.phase_all("eval");
      for (int b = 0; b < 60; ++b) {
        w.activity_all(Activity::kCompute);
        w.advance(kSec);
        w.beat_all();
      }
      w.phase_all("train");
    }
    out.push_back(finish("long-eval", "a labeled 60 s eval (30x the step) every 300 steps",
                         spec_2s(), poll, w, no_stall(2 * kSec)));
  }
  {  // 4. A cold compile of 8 minutes before the first step.
    World w(kRanks, poll);
    w.activity_all(Activity::kInitWait);
    w.advance(15 * kSec);
    w.phase_all("compile");
    w.activity_all(Activity::kCompute);
    w.advance(8 * kMin);
    w.step_all();
    w.phase_all("train");
    train(w, 300, 2 * kSec);
    out.push_back(finish("cold-compile", "8 min compile (budget 15m) on a cold cache", spec_2s(),
                         poll, w, no_stall(2 * kSec)));
  }
  {  // 5. A warm restart whose compile overruns its (shorter) budget.
    World w(kRanks, poll, /*incarnation=*/1);
    w.activity_all(Activity::kInitWait);
    w.advance(15 * kSec);
    w.phase_all("compile");
    w.activity_all(Activity::kDeadlock);
    w.advance(5 * kMin);
    trace::Truth t = stall_at(w, poll, 2 * kSec, {0, 1, 2, 3}, "warm compile past its 5m budget");
    w.advance(25 * kMin);
    out.push_back(finish("warm-compile-overrun", "restart's compile hangs; warm budget 5m",
                         spec_2s(), poll, w, t));
  }
  {  // 6. Checkpoint saves on rank 0 only while the others wait in the next collective.
    World w(kRanks, poll);
    start(w);
    for (int round = 0; round < 4; ++round) {
      train(w, 200, 2 * kSec);
      w.phase(0, "checkpoint");
      w.activity(0, Activity::kCheckpointWrite);
      for (int r = 1; r < kRanks; ++r) w.activity(r, Activity::kWaitGpu);
      w.advance(90 * kSec);
      w.phase(0, "train");
      w.checkpoint_all(fmt::format("step_{}", w.next_step() - 1));
    }
    out.push_back(finish("checkpoint-rank0", "rank 0 saves for 90 s every 200 steps, others wait",
                         spec_2s(), poll, w, no_stall(2 * kSec)));
  }
  {  // 7. I/O-bound: storage degrades, steps take up to 5x longer but complete.
    World w(kRanks, poll);
    start(w);
    train(w, 150, 2 * kSec);
    int64_t interval = 2 * kSec;
    for (int i = 0; i < 200; ++i) {
      interval = std::min<int64_t>(10 * kSec, interval * 5 / 4);
      w.activity_all(Activity::kIoBound);
      w.advance(interval);
      w.step_all();
    }
    out.push_back(finish("io-bound-slow", "steps slow from 2 s to 10 s (5x) and keep completing",
                         spec_2s(), poll, w, no_stall(2 * kSec)));
  }
  {  // 8. Collective hang: rank 2 stuck in its data loader, the others block in allreduce.
    World w(kRanks, poll);
    start(w);
    train(w, 300, 2 * kSec);
    w.advance(kSec / 2);
    w.phase(2, "data");
    w.activity(2, Activity::kDataWait);
    for (int r : {0, 1, 3}) w.activity(r, Activity::kWaitGpu);
    trace::Truth t =
        stall_at(w, 2 * kMin + poll, 2 * kSec, {2}, "rank 2 never leaves data (budget 2m)");
    w.advance(30 * kMin);
    out.push_back(finish("collective-hang-data",
                         "rank 2 hangs in data; NCCL keeps the other GPUs busy", spec_2s(), poll, w,
                         t));
  }
  {  // 9. One rank's beacon goes silent while its process lives and training goes on.
    World w(kRanks, poll);
    start(w);
    train(w, 300, 2 * kSec);
    w.freeze_beacon(3);
    trace::Truth t = stall_at(w, 4 * kSec + poll, 2 * kSec, {3}, "rank 3 stops reporting");
    train(w, 300, 2 * kSec);
    out.push_back(finish("rank-silent", "rank 3's beacon stops, its process keeps training",
                         spec_2s(), poll, w, t));
  }
  {  // 10. A rank dies; the others hang in the collective until gloo/NCCL times out.
    World w(kRanks, poll);
    start(w);
    train(w, 300, 2 * kSec);
    w.advance(kSec);
    w.kill(1, 137);
    for (int r : {0, 2, 3}) w.activity(r, Activity::kWaitGpu);
    trace::Truth t = stall_at(w, 4 * kSec + poll, 2 * kSec, {1}, "rank 1 killed (OOM)");
    w.advance(30 * kMin);
    out.push_back(finish("rank-dies", "rank 1 is killed; the others wait in allreduce", spec_2s(),
                         poll, w, t));
  }
  {  // 11. A restart hung at init: the old incarnation still holds the port.
    World w(kRanks, poll, /*incarnation=*/1);
    w.activity_all(Activity::kInitWait);
    trace::Truth t =
        stall_at(w, kMin + poll, 2 * kSec, {0, 1, 2, 3}, "never reaches the first step");
    w.advance(40 * kMin);
    out.push_back(finish("restart-hung-init", "incarnation 1 waits for rendezvous forever",
                         spec_2s(), poll, w, t));
  }
  {  // 12. The log keeps printing while steps stopped (a progress bar redraws, NCCL warns).
    World w(kRanks, poll);
    start(w);
    train(w, 300, 2 * kSec);
    w.advance(kSec);
    w.activity_all(Activity::kWaitCpu);
    w.log_lines_per_sec(20);
    trace::Truth t =
        stall_at(w, 4 * kSec + poll, 2 * kSec, {}, "all ranks hang; log still printing");
    w.advance(30 * kMin);
    out.push_back(
        finish("log-noise-hang", "hang with 20 log lines/s still arriving", spec_2s(), poll, w, t));
  }
  {  // 13. The wall clock jumps forward an hour, then back 30 minutes.
    World w(kRanks, poll);
    start(w);
    train(w, 300, 2 * kSec);
    w.jump_wall(3600 * kSec);
    train(w, 300, 2 * kSec);
    w.jump_wall(-1800 * kSec);
    train(w, 300, 2 * kSec);
    out.push_back(finish("clock-jump", "NTP steps the wall clock +1h then -30m", spec_2s(), poll, w,
                         no_stall(2 * kSec)));
  }
  // What `stepwatch run` polls an 18-minute-step job at: interval / 4, at most 10 s while the
  // early rule is on (30 s without it).
  const int64_t poll_18m = 10 * kSec;
  const std::string spec_18m = R"(job = "scenario"
expected_interval = "18m"
grace_intervals = 2
[phases]
init = "30m"
)";
  {  // 14. 18-minute steps.
    World w(kRanks, poll_18m);
    start(w, 2 * kMin);
    train(w, 6, 18 * kMin);
    out.push_back(finish("18min-steps", "huge batches: one step every 18 minutes", spec_18m,
                         poll_18m, w, no_stall(18 * kMin)));
  }
  // The early rule's target: a verdict at most a minute after the last progress (+ 1 poll).
  const int64_t early = kMin + poll_18m;
  {  // 15. 18-minute steps, then a hang: every rank sits in the same all-reduce.
    World w(kRanks, poll_18m);
    start(w, 2 * kMin);
    train(w, 3, 18 * kMin);
    w.activity_all(Activity::kWaitGpu);
    trace::Truth t = stall_at(w, early, 18 * kMin, {}, "hang after 3 steps");
    w.advance(90 * kMin);
    out.push_back(finish("18min-steps-hang", "18-minute steps, then a collective hang", spec_18m,
                         poll_18m, w, t));
  }
  {  // 16. Every rank in uninterruptible I/O: a dead NFS mount.
    World w(kRanks, poll);
    start(w);
    train(w, 300, 2 * kSec);
    w.advance(kSec);
    w.activity_all(Activity::kIoStall);
    trace::Truth t = stall_at(w, 4 * kSec + poll, 2 * kSec, {}, "storage hangs");
    w.advance(20 * kMin);
    out.push_back(
        finish("io-stall", "every rank in D state, no bytes moving", spec_2s(), poll, w, t));
  }
  {  // 17. A single-process job deadlocks on the host.
    World w(1, poll);
    start(w);
    train(w, 300, 2 * kSec);
    w.advance(kSec);
    w.activity_all(Activity::kDeadlock);
    trace::Truth t = stall_at(w, 4 * kSec + poll, 2 * kSec, {}, "lock-order deadlock");
    w.advance(20 * kMin);
    out.push_back(
        finish("host-deadlock", "1 process, asleep on a futex, GPU idle", spec_2s(), poll, w, t));
  }
  {  // 18. 18-minute steps; 3 minutes into step 4, rank 2 hangs in its data loader and the
     // others reach the all-reduce 20 s later.
    World w(kRanks, poll_18m);
    start(w, 2 * kMin);
    train(w, 3, 18 * kMin);
    w.activity_all(Activity::kCompute);
    w.advance(3 * kMin);
    w.activity(2, Activity::kDataWait);
    trace::Truth t = stall_at(w, early, 18 * kMin, {2}, "rank 2 hangs in DataLoader.__next__");
    w.advance(20 * kSec);
    for (int r : {0, 1, 3}) w.activity(r, Activity::kWaitGpu);
    w.advance(60 * kMin);
    out.push_back(finish("18min-hang-in-step",
                         "rank 2 hangs in its data loader 3 min into an 18-minute step", spec_18m,
                         poll_18m, w, t));
  }
  {  // 19. Healthy 18-minute steps that each end in a 45 s all-reduce in which nothing moves.
    World w(kRanks, poll_18m);
    start(w, 2 * kMin);
    for (int i = 0; i < 6; ++i) {
      w.activity_all(Activity::kCompute);
      w.advance(18 * kMin - 45 * kSec);
      w.activity_all(Activity::kWaitGpu);
      w.advance(45 * kSec);
      w.step_all();
    }
    out.push_back(finish("18min-quiet-allreduce",
                         "18-minute steps, each ending in a 45 s all-reduce with no rank moving",
                         spec_18m, poll_18m, w, no_stall(18 * kMin)));
  }
  {  // 20. Rank 0 writes a 4-minute checkpoint it did not label; the others wait in all-reduce.
    World w(kRanks, poll_18m);
    start(w, 2 * kMin);
    train(w, 3, 18 * kMin);
    w.activity(0, Activity::kCheckpointWrite);
    for (int r : {1, 2, 3}) w.activity(r, Activity::kWaitGpu);
    w.advance(4 * kMin);
    train(w, 3, 18 * kMin);
    out.push_back(finish("18min-unlabeled-checkpoint",
                         "rank 0 saves for 4 min (bytes moving, frames still), unlabeled", spec_18m,
                         poll_18m, w, no_stall(18 * kMin)));
  }
  {  // 21. A C extension holds the GIL and hangs: rank 1's own sampler stops.
    World w(kRanks, poll_18m);
    start(w, 2 * kMin);
    train(w, 3, 18 * kMin);
    w.activity_all(Activity::kCompute);
    w.advance(5 * kMin);
    w.activity(1, Activity::kGilHeld);
    trace::Truth t = stall_at(w, early, 18 * kMin, {1}, "rank 1 hangs holding the GIL");
    w.advance(kMin);
    for (int r : {0, 2, 3}) w.activity(r, Activity::kWaitGpu);
    w.advance(60 * kMin);
    out.push_back(finish("gil-held-hang", "rank 1 hangs inside a C extension that holds the GIL",
                         spec_18m, poll_18m, w, t));
  }
  {  // 22. A first start hung at init: every rank up and waiting in the store (init budget 30m).
    World w(kRanks, poll_18m);
    w.activity_all(Activity::kImport);
    w.advance(90 * kSec);
    w.activity_all(Activity::kInitWait);
    trace::Truth t = stall_at(w, early, 18 * kMin, {0, 1, 2, 3}, "rendezvous never completes");
    w.advance(40 * kMin);
    out.push_back(finish("hung-at-init", "every rank waits in init_process_group; init budget 30m",
                         spec_18m, poll_18m, w, t));
  }
  {  // 23. A slow rendezvous: three ranks wait 3 minutes for a fourth that still imports.
    World w(kRanks, poll_18m);
    w.activity_all(Activity::kImport);
    w.advance(30 * kSec);
    for (int r : {0, 1, 2}) w.activity(r, Activity::kInitWait);
    w.advance(3 * kMin);
    w.activity(3, Activity::kInitWait);
    w.advance(5 * kSec);
    w.step_all();
    train(w, 3, 18 * kMin);
    out.push_back(finish("slow-rendezvous",
                         "ranks 0-2 wait 3 min in the store while rank 3 is still importing",
                         spec_18m, poll_18m, w, no_stall(18 * kMin)));
  }
  {  // 24. A slow rank that still moves: ranks 0-2 wait 5 minutes per step for rank 3.
    World w(kRanks, poll_18m);
    start(w, 2 * kMin);
    for (int i = 0; i < 5; ++i) {
      w.activity_all(Activity::kCompute);
      w.advance(15 * kMin);
      for (int r : {0, 1, 2}) w.activity(r, Activity::kWaitGpu);
      w.advance(5 * kMin);
      w.step_all();
    }
    out.push_back(finish("slow-rank-moves",
                         "rank 3 takes 20 min a step while the others wait 5 min in all-reduce",
                         spec_18m, poll_18m, w, no_stall(18 * kMin)));
  }
  return out;
}

Status write_trace(const Scenario& s, const std::string& path) {
  trace::TraceHeader h;
  h.job = "scenario";
  h.local_host = "node1";
  h.poll_ns = s.poll_ns;
  h.scenario = s.name;
  h.spec_toml = s.spec_toml;
  h.truth = s.truth;
  auto w = trace::TraceWriter::open(path, h);
  if (!w) return w.error();
  for (const auto& o : s.observations) {
    if (auto st = w->write_observation(o); !st) return st;
  }
  return {};
}

}  // namespace stepwatch::bench
