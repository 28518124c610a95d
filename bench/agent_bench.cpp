// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What the node agent costs, printed as two tables against the targets:
//   - CPU and wall time of one Agent::poll_once for 1 to 10,000 ranks across 1 to 1,000 jobs
//     (target: 10,000 ranks polled once a second within 5% of one core),
//   - GET /api/v1/jobs and GET /metrics latency and size with 10,000 ranks,
//   - GET /healthz latency while 0, 100 and 1,000 idle connections are held open, each
//     re-opened as soon as the server closes it (target: under 100 ms, a liveness probe's margin).
// Beacons are real files written by BeaconWriter (one step each) under /dev/shm when it exists;
// every rank names this process, which is alive. No GPU, no specs, a temporary store.
// Usage: agent_bench [--polls N] [--requests N] [--idle-requests N] [--shape JOBSxRANKS[q]]
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/agent/agent.h"
#include "src/common/limits.h"
#include "src/common/log.h"
#include "src/contract/beacon_writer.h"
#include "src/serve/agent_api.h"
#include "src/serve/metrics.h"

using namespace stepwatch;
namespace fs = std::filesystem;

namespace {

struct Shape {
  int jobs, ranks;     // ranks per job
  bool quiet = false;  // no rank steps between polls: every rank's details are due
};

struct PollRow {
  Shape shape;
  double cpu_ms = 0, cpu_p90_ms = 0, wall_ms = 0;
};

struct ApiRow {
  std::string what;
  double median_ms = 0, p90_ms = 0;
  size_t bytes = 0;
};

struct IdleRow {
  int idle = 0;
  double median_ms = 0, p90_ms = 0, max_ms = 0;
  int failed = 0;
  long reopened = 0;  // idle connections the server closed (and the crowd opened again)
};

int64_t cpu_now_ns() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double p90(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() * 9 / 10];
}

// Writes jobs x ranks beacons under root, one step each; the writers stay open so that each
// poll can be preceded by a step of every rank.
bool write_beacons(const std::string& root, Shape s,
                   std::vector<std::unique_ptr<contract::BeaconWriter>>& writers) {
  for (int j = 0; j < s.jobs; ++j) {
    for (int r = 0; r < s.ranks; ++r) {
      contract::Identity id;
      id.dir = root;
      id.job = fmt::format("job-{:04d}", j);
      id.host = "bench";
      id.rank = r;
      id.local_rank = r;
      id.world_size = s.ranks;
      auto w = contract::BeaconWriter::create(id);
      if (!w) {
        fmt::print(stderr, "agent_bench: {}\n", w.error().message);
        return false;
      }
      (*w)->step(1);
      writers.push_back(std::move(*w));
    }
  }
  return true;
}

// A blocking TCP connection to 127.0.0.1:port, or -1.
int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One plain HTTP/1.1 GET on loopback (Connection: close); the body size, or 0 on failure.
size_t http_get(int port, const std::string& path) {
  int fd = connect_loopback(port);
  if (fd < 0) return 0;
  size_t body = 0;
  std::string req =
      fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
  if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    std::string resp;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
    size_t head = resp.find("\r\n\r\n");
    if (resp.starts_with("HTTP/1.1 200") && head != std::string::npos)
      body = resp.size() - head - 4;
  }
  ::close(fd);
  return body;
}

ApiRow time_get(int port, const std::string& path, int requests, const std::string& label) {
  ApiRow row;
  row.what = label;
  row.bytes = http_get(port, path);  // warm up
  std::vector<double> ms;
  for (int i = 0; i < requests; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    size_t b = http_get(port, path);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (b == 0) row.bytes = 0;
  }
  row.median_ms = median(ms);
  row.p90_ms = p90(ms);
  return row;
}

// N connections that never send a byte, each opened again as soon as the server closes it: the
// review's idle.py (a slowloris that sends nothing, or a crowd of speculative browser sockets).
class IdleCrowd {
 public:
  IdleCrowd(int port, int n) : port_(port) {
    for (int i = 0; i < n; ++i) fds_.push_back({connect_loopback(port), POLLIN, 0});
    thread_ = std::thread([this] { run(); });
  }
  ~IdleCrowd() {
    stop_ = true;
    thread_.join();
    for (const pollfd& p : fds_)
      if (p.fd >= 0) ::close(p.fd);
  }
  long reopened() const { return reopened_.load(); }

 private:
  void run() {
    while (!stop_) {
      if (::poll(fds_.data(), fds_.size(), 50) <= 0) continue;
      for (pollfd& p : fds_) {
        if (p.revents == 0 && p.fd >= 0) continue;
        char c;
        if (p.fd >= 0 && ::recv(p.fd, &c, 1, MSG_DONTWAIT) > 0) continue;  // not closed
        if (p.fd >= 0) ::close(p.fd);
        p.fd = connect_loopback(port_);
        p.revents = 0;
        ++reopened_;
      }
    }
  }
  int port_;
  std::vector<pollfd> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<long> reopened_{0};
  std::thread thread_;
};

// GET /healthz, `requests` times 100 ms apart, while `idle` idle connections are held open.
IdleRow time_healthz_with_idle(int port, int idle, int requests) {
  IdleRow row;
  row.idle = idle;
  IdleCrowd crowd(port, idle);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // every one accepted, the queue built
  std::vector<double> ms;
  for (int i = 0; i < requests; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (http_get(port, "/healthz") == 0) ++row.failed;
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  row.median_ms = median(ms);
  row.p90_ms = p90(ms);
  row.max_ms = *std::max_element(ms.begin(), ms.end());
  row.reopened = crowd.reopened();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  int polls = 10, requests = 20, idle_requests = 10;
  std::string only;  // --shape JOBSxRANKS[q]: that row alone (for profiling)
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--polls") == 0 && i + 1 < argc)
      polls = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
      requests = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--idle-requests") == 0 && i + 1 < argc)
      idle_requests = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc)
      only = argv[++i];
  }
  raise_fd_limit();                // as the agent does: a pidfd per rank
  set_log_level(LogLevel::kWarn);  // "watching job ..." once per job would swamp the tables
  fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  fs::path tmp = base / fmt::format("sw-agent-bench-{}", ::getpid());
  fs::create_directories(tmp);

  // 1 to 10,000 ranks across 1 to 1,000 jobs; the last four are the 10,000-rank target.
  // Before each timed poll every rank commits a step (untimed): each poll finds every record
  // changed, as with trainers stepping at least once a second. The quiet rows show the other
  // extreme: no rank steps, so every rank is overdue and its process details are due.
  const std::vector<Shape> shapes = {{1, 1},     {1, 100},   {10, 10},          {1, 1000},
                                     {10, 100},  {1000, 1},  {1, 10'000},       {10, 1000},
                                     {100, 100}, {1000, 10}, {1, 10'000, true}, {1000, 10, true}};
  std::vector<PollRow> rows;
  std::vector<ApiRow> api_rows;
  std::vector<IdleRow> idle_rows;
  bool api_done_10 = false, api_done_1000 = false;
  int status = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Shape s = shapes[i];
    if (!only.empty() && only != fmt::format("{}x{}{}", s.jobs, s.ranks, s.quiet ? "q" : ""))
      continue;
    fs::path dir = tmp / fmt::format("shape-{}", i);
    std::string root = (dir / "beacons").string();
    std::vector<std::unique_ptr<contract::BeaconWriter>> writers;
    if (!write_beacons(root, s, writers)) {
      status = 1;
      break;
    }
    agent::AgentConfig cfg;
    cfg.beacon_roots = {root};
    cfg.state_dir = (dir / "state").string();
    cfg.specs_dir = (dir / "specs").string();  // absent: every job judged with defaults
    cfg.gpu = false;
    // Quiet rows: ranks count as overdue (details due) after one poll interval without a change
    // while nothing is learned; a 1 ms interval makes every rank overdue at every timed poll.
    if (s.quiet) cfg.poll_interval_ns = kNsPerMs;
    agent::AgentDeps deps;
    deps.host = "bench";
    auto a = agent::Agent::open(cfg, deps);
    if (!a) {
      fmt::print(stderr, "agent_bench: {}\n", a.error().message);
      status = 1;
      break;
    }
    agent::Agent& agent = **a;
    for (int w = 0; w < 2; ++w)
      (void)agent.poll_once(SystemClock::instance().now());  // start tracking
    std::vector<double> cpu, wall;
    int64_t step = 1;
    for (int p = 0; p < polls; ++p) {
      ++step;
      if (!s.quiet) {
        for (auto& w : writers) w->step(step);
      }
      int64_t c0 = cpu_now_ns();
      auto t0 = std::chrono::steady_clock::now();
      if (auto st = agent.poll_once(SystemClock::instance().now()); !st) {
        fmt::print(stderr, "agent_bench: {}\n", st.error().message);
      }
      wall.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      cpu.push_back(static_cast<double>(cpu_now_ns() - c0) / 1e6);
    }
    rows.push_back({s, median(cpu), p90(cpu), median(wall)});

    if (s.jobs * s.ranks == 1) {  // the smallest agent: /healthz costs the same at any size
      serve::ApiConfig ac;
      ac.port = 0;
      serve::ApiServer server(agent, ac);
      if (auto st = server.start(); !st) {
        fmt::print(stderr, "agent_bench: {}\n", st.error().message);
        status = 1;
      } else {
        for (int idle : {0, 100, 1000})
          idle_rows.push_back(time_healthz_with_idle(server.port(), idle, idle_requests));
      }
      server.stop();
    }

    bool want_api = s.jobs * s.ranks == 10'000 && !s.quiet &&
                    ((s.jobs == 10 && !api_done_10) || (s.jobs == 1000 && !api_done_1000));
    if (want_api) {
      (s.jobs == 10 ? api_done_10 : api_done_1000) = true;
      serve::ApiConfig ac;
      ac.port = 0;
      ac.metrics = [&agent] { return serve::render_metrics(agent.jobs(), agent.health()); };
      serve::ApiServer server(agent, ac);
      if (auto st = server.start(); !st) {
        fmt::print(stderr, "agent_bench: {}\n", st.error().message);
        status = 1;
      } else {
        std::string shape = fmt::format("{} jobs x {} ranks", s.jobs, s.ranks);
        api_rows.push_back(
            time_get(server.port(), "/api/v1/jobs", requests, "GET /api/v1/jobs, " + shape));
        api_rows.push_back(time_get(server.port(), "/metrics", requests, "GET /metrics, " + shape));
      }
      server.stop();
    }
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);

  fmt::print("\n## Agent CPU per poll ({} polls after 2 warm-up, beacons under {}, no GPU)\n\n",
             polls, base.string());
  fmt::print(
      "| jobs x ranks | ranks | ranks step between polls | CPU ms/poll (median) | CPU ms p90 | "
      "wall ms/poll | one core at 1 poll/s | target | met |\n");
  fmt::print("|---|---:|---|---:|---:|---:|---:|---|---|\n");
  for (const auto& r : rows) {
    int ranks = r.shape.jobs * r.shape.ranks;
    double share = r.cpu_ms / 1000.0 * 100.0;
    bool target = ranks == 10'000 && !r.shape.quiet;
    fmt::print("| {} x {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f}% | {} | {} |\n",
               r.shape.jobs, r.shape.ranks, ranks, r.shape.quiet ? "no (all overdue)" : "yes",
               r.cpu_ms, r.cpu_p90_ms, r.wall_ms, share, target ? "< 5%" : "-",
               target ? (share < 5.0 ? "yes" : "**no**") : "-");
  }
  fmt::print(
      "\n## Agent API latency with 10,000 ranks ({} requests each, loopback, new connection "
      "each)\n\n",
      requests);
  fmt::print("| request | median ms | p90 ms | response bytes |\n|---|---:|---:|---:|\n");
  for (const auto& r : api_rows) {
    fmt::print("| {} | {:.2f} | {:.2f} | {} |\n", r.what, r.median_ms, r.p90_ms,
               r.bytes ? std::to_string(r.bytes) : std::string("failed"));
  }
  fmt::print(
      "\n## GET /healthz behind idle connections ({} requests 100 ms apart, loopback; each idle "
      "connection sends nothing and is re-opened when the server closes it)\n\n",
      idle_requests);
  fmt::print(
      "| idle connections | median ms | p90 ms | max ms | failed | idle ones closed by the server "
      "| target | met |\n|---:|---:|---:|---:|---:|---:|---|---|\n");
  for (const auto& r : idle_rows) {
    bool met = r.failed == 0 && r.max_ms < 100;
    fmt::print("| {} | {:.2f} | {:.2f} | {:.2f} | {} | {} | < 100 ms | {} |\n", r.idle, r.median_ms,
               r.p90_ms, r.max_ms, r.failed, r.reopened, met ? "yes" : "**no**");
  }
  return status;
}
