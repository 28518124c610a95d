// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What multi-node coordination through etcd costs (docs/multinode.md), printed as one table:
//   - the single-node baseline per poll: one 8-rank summary to JSON, one local
//     Detector::observe on 8 ranks;
//   - NODES simulated nodes x RANKS ranks of one job against one real etcd (tests/support's
//     EtcdServer, loopback): each node its own EtcdClient + NodeSession (lease TTL 10 s) +
//     JobCoord, polled in turn on this one thread for ROUNDS rounds, every node's ranks stepping
//     once a round (a 1 s step job: a changed summary, so a put, every poll): etcd puts/s, wall
//     per round, per-node poll CPU, and the leader's extra CPU per poll (its full range and the
//     parse of every changed summary, merge(), Detector::observe on every rank);
//   - the etcd write load that implies at a 1 s poll.
// Simulated time moves 1 s per round (lease renewals every ttl/3 of it); CPU is this thread's
// (CLOCK_THREAD_CPUTIME_ID), etcd's is read from /proc/<pid>/stat.
// Usage: coord_bench [--nodes N] [--ranks N] [--rounds N]
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/coord/bench_measures.h"
#include "src/common/log.h"
#include "src/coord/etcd_client.h"
#include "src/coord/job_coord.h"
#include "src/coord/session.h"
#include "src/coord/summary.h"
#include "src/detect/detector.h"
#include "src/detect/spec_adapter.h"
#include "tests/detect/sim.h"
#include "tests/support/etcd_server.h"

using namespace stepwatch;
using stepwatch::bench::mean;
using stepwatch::bench::percentile;
using stepwatch::bench::process_cpu_ns;
using stepwatch::bench::thread_cpu_ns;

namespace {

constexpr int64_t kSec = kNsPerSec;
constexpr const char* kJob = "bench";

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One node's ranks of the job: global ranks [first, first + ranks), named by the node.
detect::testing::SimJob node_job(const std::string& node, int first, int ranks, int world) {
  detect::testing::SimJob job(ranks);
  for (int r = 0; r < ranks; ++r) {
    contract::RankSnapshot& s = job.rank(r);
    s.job = kJob;
    s.host = node;
    s.rank = first + r;
    s.world_size = world;
  }
  return job;
}

detect::Observation node_observation(const detect::testing::SimJob& job, const std::string& node,
                                     int world) {
  detect::Observation o = job.observe();
  o.local_host = node;
  o.world_size = world;
  return o;
}

struct SimNode {
  SimNode(const std::string& endpoint, std::string n, int first, int ranks, int world)
      : name(std::move(n)),
        job(node_job(name, first, ranks, world)),
        etcd(coord::EtcdOptions{{endpoint}, "", 2 * kSec}),
        session(etcd, coord::SessionOptions{"/stepwatch/v1", name, 10 * kSec}),
        coord(session, kJob, 5 * kSec) {}

  std::string name;
  detect::testing::SimJob job;
  coord::EtcdClient etcd;
  coord::NodeSession session;
  coord::JobCoord coord;
};

struct Args {
  int nodes = 100;
  int ranks = 8;
  int rounds = 20;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (v < 1) return false;
    if (flag == "--nodes") {
      a.nodes = v;
    } else if (flag == "--ranks") {
      a.ranks = v;
    } else if (flag == "--rounds") {
      a.rounds = v;
    } else {
      return false;
    }
  }
  return argc % 2 == 1;
}

struct Baseline {
  double json_us = 0, parse_us = 0, observe_us = 0;
  size_t json_bytes = 0;
};

// One node alone: its summary to JSON and its local detector pass, per poll.
Baseline single_node(int ranks) {
  constexpr int kPolls = 2000;
  detect::testing::SimJob job = node_job("node000", 0, ranks, ranks);
  detect::Detector detector(bench::detector_config(kSec));
  int64_t json_ns = 0, parse_ns = 0, observe_ns = 0;
  Baseline b;
  for (int i = 0; i < kPolls; ++i) {
    job.advance(kSec);
    job.step_all(i);
    detect::Observation obs = node_observation(job, "node000", ranks);
    int64_t c0 = thread_cpu_ns();
    std::string json =
        summary_to_json(coord::NodeSummary{"node000", uint64_t(i), 0, obs, std::nullopt, false});
    int64_t c1 = thread_cpu_ns();
    detect::Verdict v = detector.observe(obs);
    int64_t c2 = thread_cpu_ns();
    auto back = coord::summary_from_json(json, "bench");
    int64_t c3 = thread_cpu_ns();
    if (!back) throw std::runtime_error(back.error().message);
    json_ns += c1 - c0;
    observe_ns += c2 - c1;
    parse_ns += c3 - c2;
    b.json_bytes = json.size();
  }
  b.json_us = static_cast<double>(json_ns) / kPolls / kNsPerUs;
  b.observe_us = static_cast<double>(observe_ns) / kPolls / kNsPerUs;
  b.parse_us = static_cast<double>(parse_ns) / kPolls / kNsPerUs;
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) {
    fmt::print(stderr, "usage: coord_bench [--nodes N] [--ranks N] [--rounds N]\n");
    return 2;
  }
  set_log_level(LogLevel::kError);  // a new leader's line is not part of the table
  const int world = args.nodes * args.ranks;
  try {
    Baseline base = single_node(args.ranks);

    test::EtcdServer server;
    std::vector<std::unique_ptr<SimNode>> nodes;
    for (int i = 0; i < args.nodes; ++i)
      nodes.push_back(std::make_unique<SimNode>(server.endpoint(), fmt::format("node{:03}", i),
                                                i * args.ranks, args.ranks, world));
    detect::Detector leader_detector(bench::detector_config(kSec));

    std::vector<double> follower_cpu_us, follower_wall_us, leader_poll_us, merge_us, observe_us,
        round_ms;
    int64_t puts = 0, measured_wall_ns = 0, etcd_cpu_ns = 0;
    std::string leader;
    detect::Verdict verdict;
    // Round 0 warms up: leases granted, keys created, the leader found.
    for (int round = 0; round <= args.rounds; ++round) {
      const bool measured = round > 0;
      uint64_t puts_before = 0;
      for (const auto& n : nodes) puts_before += n->coord.puts();
      int64_t etcd_before = process_cpu_ns(server.pid());
      int64_t round_start = wall_ns();
      for (const auto& n : nodes) {
        n->job.advance(kSec);
        n->job.step_all(round);
        Stamp now = n->job.now();
        int64_t c0 = thread_cpu_ns();
        int64_t w0 = wall_ns();
        n->session.tick(now);
        coord::NodeSummary s{
            n->name, uint64_t(round), 0, node_observation(n->job, n->name, world), std::nullopt,
            false};
        // Progress changed (a new signature); not steady: every step is published.
        n->coord.poll(s, coord::PublishCue{uint64_t(round) + 1, 0, false}, now);
        int64_t c1 = thread_cpu_ns();
        int64_t w1 = wall_ns();
        if (!n->session.connected()) {
          fmt::print(stderr, "coord_bench: {}: {}\n", n->name, n->session.last_error());
          return 1;
        }
        if (!measured) continue;
        if (!n->coord.leads()) {
          follower_cpu_us.push_back(static_cast<double>(c1 - c0) / kNsPerUs);
          follower_wall_us.push_back(static_cast<double>(w1 - w0) / kNsPerUs);
          continue;
        }
        leader = n->name;
        leader_poll_us.push_back(static_cast<double>(c1 - c0) / kNsPerUs);
        coord::Merged m = coord::merge(s.observation, n->name, n->coord.remote(), now);
        int64_t c2 = thread_cpu_ns();
        verdict = leader_detector.observe(m.observation);
        int64_t c3 = thread_cpu_ns();
        merge_us.push_back(static_cast<double>(c2 - c1) / kNsPerUs);
        observe_us.push_back(static_cast<double>(c3 - c2) / kNsPerUs);
        if (m.observation.ranks.size() != static_cast<size_t>(world)) {
          fmt::print(stderr, "coord_bench: the leader merged {} ranks, not {}\n",
                     m.observation.ranks.size(), world);
          return 1;
        }
      }
      if (!measured) continue;
      int64_t round_wall = wall_ns() - round_start;
      measured_wall_ns += round_wall;
      round_ms.push_back(static_cast<double>(round_wall) / kNsPerMs);
      etcd_cpu_ns += process_cpu_ns(server.pid()) - etcd_before;
      for (const auto& n : nodes) puts += static_cast<int64_t>(n->coord.puts());
      puts -= static_cast<int64_t>(puts_before);
    }

    const double puts_per_s =
        static_cast<double>(puts) * kSec / static_cast<double>(measured_wall_ns);
    const double follower_us = mean(follower_cpu_us);
    const double range_extra_us = mean(leader_poll_us) - follower_us;
    const double leader_extra_us = range_extra_us + mean(merge_us) + mean(observe_us);
    const double etcd_ms_per_round =
        static_cast<double>(etcd_cpu_ns) / kNsPerMs / static_cast<double>(args.rounds);
    const double per_node_1s = 1.0, per_node_5s = 1.0 / 5.0;

    fmt::print(
        "\n## Coordination cost: {} nodes x {} ranks, one job, one etcd ({}; {} rounds after 1 "
        "warm-up)\n\n",
        args.nodes, args.ranks, server.endpoint(), args.rounds);
    fmt::print(
        "Simulated nodes are polled sequentially on one thread (one etcd client at a time), each "
        "with its own EtcdClient, NodeSession (lease TTL 10 s) and JobCoord; every node's ranks "
        "step each round (a 1 s step job), so every poll puts. CPU is the polling thread's "
        "(CLOCK_THREAD_CPUTIME_ID); etcd's own CPU is counted separately.\n\n");
    fmt::print("| measure | value | what it covers |\n|---|---:|---|\n");
    fmt::print("| single node: summary_to_json, {} ranks | {:.1f} us CPU | per poll ({} bytes) |\n",
               args.ranks, base.json_us, base.json_bytes);
    fmt::print(
        "| single node: summary_from_json, {} ranks | {:.1f} us CPU | what the leader pays per "
        "changed summary |\n",
        args.ranks, base.parse_us);
    fmt::print(
        "| single node: Detector::observe, {} ranks | {:.1f} us CPU | per poll, local only |\n",
        args.ranks, base.observe_us);
    fmt::print(
        "| per-node poll CPU, mean | {:.1f} us | tick + summary + JobCoord::poll (put + leader "
        "read), {} follower polls |\n",
        follower_us, follower_cpu_us.size());
    fmt::print("| per-node poll CPU, p99 | {:.1f} us | |\n", percentile(follower_cpu_us, 0.99));
    fmt::print("| per-node poll wall, mean / p99 | {:.2f} / {:.2f} ms | including etcd's reply |\n",
               mean(follower_wall_us) / 1000, percentile(follower_wall_us, 0.99) / 1000);
    fmt::print(
        "| leader ({}) poll CPU, mean | {:.1f} us | put + full range + parse of {} changed "
        "summaries |\n",
        leader, mean(leader_poll_us), args.nodes - 1);
    fmt::print(
        "| leader extra: full range + parse | {:.1f} us CPU | leader poll - follower mean |\n",
        range_extra_us);
    fmt::print("| leader extra: merge() of {} summaries | {:.1f} us CPU | per poll |\n", args.nodes,
               mean(merge_us));
    fmt::print(
        "| leader extra: Detector::observe, {} ranks | {:.1f} us CPU | per poll (verdict: {}) |\n",
        world, mean(observe_us), detect::state_name(verdict.state));
    fmt::print(
        "| leader extra per poll, total | {:.2f} ms CPU | {:.2f}% of one core at a 1 s poll |\n",
        leader_extra_us / 1000, leader_extra_us / 1e6 * 100);
    fmt::print("| wall per round ({} node polls), mean / p99 | {:.1f} / {:.1f} ms | sequential |\n",
               args.nodes, mean(round_ms), percentile(round_ms, 0.99));
    fmt::print("| etcd puts/s achieved | {:.0f} | {} puts in {:.2f} s, one client at a time |\n",
               puts_per_s, puts, static_cast<double>(measured_wall_ns) / kSec);
    fmt::print("| etcd CPU per round | {:.1f} ms | etcd process utime + stime |\n",
               etcd_ms_per_round);
    fmt::print(
        "| implied load at a 1 s poll: puts/s per node | {:.1f} / {:.1f} | progress changes every "
        "poll / no change (5 s publish interval) |\n",
        per_node_1s, per_node_5s);
    fmt::print(
        "| implied load at a 1 s poll: puts/s, {} nodes | {:.0f} / {:.0f} | the sequential rate "
        "achieved is "
        "{:.1f}x this; plus {} ranges/s and ~{:.0f} keepalives/s |\n",
        args.nodes, per_node_1s * args.nodes, per_node_5s * args.nodes,
        puts_per_s / (per_node_1s * args.nodes), args.nodes, args.nodes / (10.0 / 3.0));
    fmt::print(
        "\nCommand: ./build/release/bench/coord/coord_bench --nodes {} --ranks {} --rounds {}\n",
        args.nodes, args.ranks, args.rounds);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "coord_bench: {}\n", e.what());
    return 1;
  }
}
