// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What reporting progress costs a trainer, and what reading it costs the watchdog.
//
// Writer side, per call: stepwatch_step through libstepwatch.so (the C ABI), the C++ Handle,
// step with loss, beat; and for comparison what a trainer would otherwise do each step in C:
// fprintf + fflush of a line to a file, or a JSON line appended with write(2).
// Reader side, per 10,000 beacons: cold (open + map + read + validate + unmap each file) and
// warm (re-read through 10,000 kept mappings). The beacons are created before timing starts.
//
//   build/release/bench/contract_bench --benchmark_repetitions=5
//   /usr/bin/python3 bench/report.py --build-dir build/release     (the table with targets)
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/contract/beacon_reader.h"
#include "src/contract/beacon_writer.h"
#include "src/contract/names.h"
#include "stepwatch/stepwatch.h"
#include "stepwatch/stepwatch.hpp"

namespace {

constexpr int kReaderBeacons = 10'000;
int g_errors = 0;  // benchmarks that could not run; main() exits non-zero

// A temporary directory under `parent`, removed at exit.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent) {
    std::string tmpl = parent + "/stepwatch-bench-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror(("mkdtemp " + tmpl).c_str());
      std::exit(1);
    }
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Beacons live on tmpfs in production; the comparison files in an ordinary temp dir.
const ScratchDir& beacon_dir() {
  static ScratchDir d(::access("/dev/shm", W_OK) == 0
                          ? "/dev/shm"
                          : std::filesystem::temp_directory_path().string());
  return d;
}
const ScratchDir& file_dir() {
  static ScratchDir d(std::filesystem::temp_directory_path().string());
  return d;
}

stepwatch_options bench_options(const char* job) {
  stepwatch_options o;
  stepwatch_options_init(&o);
  o.dir = beacon_dir().path().c_str();
  o.job = job;
  o.rank = 0;
  o.world_size = 1;
  return o;
}

void fail(benchmark::State& state, const std::string& why) {
  ++g_errors;
  state.SkipWithError(why.c_str());
}

// --- writer side --------------------------------------------------------------------------

void BM_c_step(benchmark::State& state) {
  stepwatch_options o = bench_options("bench-c");
  stepwatch_t* sw = nullptr;
  if (stepwatch_open(&o, &sw) != STEPWATCH_OK) return fail(state, stepwatch_last_error());
  int64_t n = 0;
  int bad = 0;
  for (auto _ : state) bad |= stepwatch_step(sw, n++);
  if (bad != 0) fail(state, "stepwatch_step failed");
  stepwatch_close(sw);
}
BENCHMARK(BM_c_step);

void BM_c_step_loss(benchmark::State& state) {
  stepwatch_options o = bench_options("bench-c-loss");
  stepwatch_t* sw = nullptr;
  if (stepwatch_open(&o, &sw) != STEPWATCH_OK) return fail(state, stepwatch_last_error());
  int64_t n = 0;
  int bad = 0;
  for (auto _ : state) {
    bad |= stepwatch_step_loss(sw, n, 1.0 / static_cast<double>(n + 1));
    ++n;
  }
  if (bad != 0) fail(state, "stepwatch_step_loss failed");
  stepwatch_close(sw);
}
BENCHMARK(BM_c_step_loss);

void BM_c_beat(benchmark::State& state) {
  stepwatch_options o = bench_options("bench-c-beat");
  stepwatch_t* sw = nullptr;
  if (stepwatch_open(&o, &sw) != STEPWATCH_OK) return fail(state, stepwatch_last_error());
  int bad = 0;
  for (auto _ : state) bad |= stepwatch_beat(sw);
  if (bad != 0) fail(state, "stepwatch_beat failed");
  stepwatch_close(sw);
}
BENCHMARK(BM_c_beat);

// The progress sampler's call, and a step while another thread samples a thousand times a second
// (the real sampler samples once a second): the two take separate locks on separate cache lines,
// so the step must not get slower. (Sampling nonstop instead measures two hyperthreads sharing a
// core, not the beacon.)
void BM_c_sample(benchmark::State& state) {
  stepwatch_options o = bench_options("bench-c-sample");
  stepwatch_t* sw = nullptr;
  if (stepwatch_open(&o, &sw) != STEPWATCH_OK) return fail(state, stepwatch_last_error());
  uint64_t hash = 1;
  int bad = 0;
  for (auto _ : state)
    bad |= stepwatch_sample(sw, hash++ >> 4, STEPWATCH_WAIT_NONE, "forward (m.py:1)");
  if (bad != 0) fail(state, "stepwatch_sample failed");
  stepwatch_close(sw);
}
BENCHMARK(BM_c_sample);

// A step with another thread waking 1000 times a second; `sample` says whether it samples
// (the control: the same wakeups, no sample).
void step_beside_thread(benchmark::State& state, bool sample) {
  stepwatch_options o = bench_options(sample ? "bench-c-sampled" : "bench-c-woken");
  stepwatch_t* sw = nullptr;
  if (stepwatch_open(&o, &sw) != STEPWATCH_OK) return fail(state, stepwatch_last_error());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> samples{0};
  std::thread other([&] {
    uint64_t hash = 1;
    while (!stop.load(std::memory_order_relaxed)) {
      if (sample &&
          stepwatch_sample(sw, hash++, STEPWATCH_WAIT_COLLECTIVE, "all_reduce (c10d.py:1)") == 0)
        samples.fetch_add(1, std::memory_order_relaxed);
      ::usleep(1000);
    }
  });
  int64_t n = 0;
  int bad = 0;
  for (auto _ : state) bad |= stepwatch_step(sw, n++);
  stop = true;
  other.join();
  if (bad != 0) fail(state, "stepwatch_step failed (busy) beside the other thread");
  if (sample) state.counters["samples"] = static_cast<double>(samples.load());
  stepwatch_close(sw);
}
void BM_c_step_while_sampling(benchmark::State& state) {
  step_beside_thread(state, true);
}
BENCHMARK(BM_c_step_while_sampling);
void BM_c_step_beside_a_waking_thread(benchmark::State& state) {
  step_beside_thread(state, false);
}
BENCHMARK(BM_c_step_beside_a_waking_thread);

void BM_cpp_step(benchmark::State& state) {
  stepwatch::Handle h = stepwatch::Handle::open(bench_options("bench-cpp"));
  if (!h) return fail(state, h.open_error());
  int64_t n = 0;
  int bad = 0;
  for (auto _ : state) bad |= h.step(n++);
  if (bad != 0) fail(state, "Handle::step failed");
}
BENCHMARK(BM_cpp_step);

void BM_cpp_step_loss(benchmark::State& state) {
  stepwatch::Handle h = stepwatch::Handle::open(bench_options("bench-cpp-loss"));
  if (!h) return fail(state, h.open_error());
  int64_t n = 0;
  int bad = 0;
  for (auto _ : state) {
    bad |= h.step(n, 0.5);
    ++n;
  }
  if (bad != 0) fail(state, "Handle::step(n, loss) failed");
}
BENCHMARK(BM_cpp_step_loss);

// What the step call costs at least: the writer reads the monotonic clock once (the wall clock
// only once a second).
void BM_clock_gettime(benchmark::State& state) {
  timespec a;
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC, &a);
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(BM_clock_gettime);

// The usual alternative: a progress line in the trainer's log, flushed so a watcher sees it.
void BM_c_fprintf_fflush(benchmark::State& state) {
  std::string path = file_dir().path() + "/fprintf.log";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return fail(state, "cannot open " + path);
  long long n = 0;
  int bad = 0;
  for (auto _ : state) {
    bad |= std::fprintf(f, "step %lld\n", n++) < 0;
    bad |= std::fflush(f);
  }
  std::fclose(f);
  if (bad != 0) fail(state, "fprintf/fflush failed");
}
BENCHMARK(BM_c_fprintf_fflush);

// The JSONL contract written by hand: format one line with a timestamp, append with write(2).
void BM_c_jsonl_write(benchmark::State& state) {
  std::string path = file_dir().path() + "/progress.jsonl";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return fail(state, "cannot open " + path);
  char line[256];
  long long n = 0;
  int bad = 0;
  for (auto _ : state) {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    int len = std::snprintf(line, sizeof line,
                            "{\"job\":\"bench\",\"rank\":0,\"time\":%lld.%09ld,\"step\":%lld}\n",
                            static_cast<long long>(t.tv_sec), t.tv_nsec, n++);
    bad |= ::write(fd, line, static_cast<size_t>(len)) != len;
  }
  ::close(fd);
  if (bad != 0) fail(state, "write failed");
}
BENCHMARK(BM_c_jsonl_write);

// --- reader side --------------------------------------------------------------------------

// 10,000 beacons of one job, written by the real writer once (outside any timing).
const std::vector<std::string>& reader_beacons() {
  static const std::vector<std::string> paths = [] {
    std::vector<std::string> out;
    stepwatch::contract::Identity id;
    id.dir = beacon_dir().path();
    id.job = "bench-readers";
    id.host = "bench";
    id.world_size = kReaderBeacons;
    for (int r = 0; r < kReaderBeacons; ++r) {
      id.rank = r;
      id.local_rank = r;
      auto w = stepwatch::contract::BeaconWriter::create(id);
      if (!w) {
        std::fprintf(stderr, "contract_bench: %s\n", w.error().message.c_str());
        std::exit(1);
      }
      (*w)->phase_begin("data");
      for (int64_t s = 0; s < 20; ++s) (*w)->step_loss(s, 0.5);
      (*w)->phase_end();
      (*w)->checkpoint_committed("ckpt-10", 10);
      out.push_back((*w)->path());
    }
    return out;
  }();
  return paths;
}

void BM_read_10k_cold(benchmark::State& state) {
  const auto& paths = reader_beacons();
  stepwatch::contract::ReadOptions opts;
  opts.expected_job = "bench-readers";
  size_t bad = 0;
  for (auto _ : state) {
    for (const auto& p : paths) {
      auto s = stepwatch::contract::read_beacon_file(p, opts);
      bad += !s.ok();
      benchmark::DoNotOptimize(s);
    }
  }
  if (bad != 0) fail(state, std::to_string(bad) + " reads failed");
  state.SetItemsProcessed(state.iterations() * kReaderBeacons);
}
BENCHMARK(BM_read_10k_cold)->Unit(benchmark::kMillisecond);

void BM_read_10k_warm(benchmark::State& state) {
  const auto& paths = reader_beacons();
  std::vector<stepwatch::contract::BeaconMapping> maps;
  maps.reserve(paths.size());
  for (const auto& p : paths) {
    auto m = stepwatch::contract::BeaconMapping::open(p);
    if (!m) return fail(state, m.error().message);
    maps.push_back(std::move(*m));
  }
  stepwatch::contract::ReadOptions opts;
  opts.expected_job = "bench-readers";
  size_t bad = 0;
  for (auto _ : state) {
    for (const auto& m : maps) {
      auto s = m.read(opts);
      bad += !s.ok();
      benchmark::DoNotOptimize(s);
    }
  }
  if (bad != 0) fail(state, std::to_string(bad) + " reads failed");
  state.SetItemsProcessed(state.iterations() * kReaderBeacons);
}
BENCHMARK(BM_read_10k_warm)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_errors != 0)
    std::fprintf(stderr, "contract_bench: %d benchmark(s) could not run\n", g_errors);
  return g_errors == 0 ? 0 : 1;
}
