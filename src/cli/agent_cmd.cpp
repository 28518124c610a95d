// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/cli/agent_cmd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>

#include "src/agent/agent.h"
#include "src/agent/config.h"
#include "src/common/duration.h"
#include "src/common/limits.h"
#include "src/common/log.h"
#include "src/probe/nvml.h"
#include "src/probe/ports.h"
#include "src/serve/agent_api.h"
#include "src/serve/metrics.h"
#include "src/store/store.h"

namespace stepwatch::cli {

namespace {

std::atomic<bool> g_stop{false};  // lock-free: safe to set from a signal handler

constexpr int64_t kApiRebindNs = 2 * kNsPerSec;

// ": held by uid N" for the sockets listening on the port, when /proc says.
std::string port_holders(int port) {
  auto listeners = probe::listeners_on_port("/proc", port);
  if (!listeners || listeners->empty()) return "";
  std::set<uint32_t> uids;
  for (const auto& l : *listeners) uids.insert(l.uid);
  return fmt::format(" (port {} is held by uid {})", port, fmt::join(uids, ", "));
}

extern "C" void on_stop_signal(int) {
  g_stop.store(true);
}

}  // namespace

int check_agent_config(const std::string& config_path) {
  auto config = agent::load_agent_config(config_path);
  if (!config) {
    fmt::print(stderr, "stepwatch agent: {}\n", config.error().message);
    return kAgentConfigError;
  }
  fmt::print("{}: valid\n", config_path);
  fmt::print("  beacon roots: {}\n", fmt::join(config->beacon_roots, ", "));
  fmt::print("  specs: {}/<job>.toml; state: {}; API on {}\n", config->specs_dir, config->state_dir,
             config->listen);
  fmt::print("  preempts: {}\n", config->preempt_jobs.empty()
                                     ? std::string("nothing (observes and pages only)")
                                     : fmt::format("{}", fmt::join(config->preempt_jobs, ", ")));
  if (const auto& c = config->coord) {
    fmt::print("  multi-node: etcd {} under {}, node {}, lease {}, restart wait {}\n",
               fmt::join(c->endpoints, ", "), c->prefix, c->node_name,
               format_duration(c->lease_ttl_ns), format_duration(c->restart_wait_ns));
  } else {
    fmt::print("  single node (no [coord])\n");
  }
  return kAgentOk;
}

int run_agent(const std::string& config_path, bool new_store) {
  auto config = agent::load_agent_config(config_path);
  if (!config) {
    fmt::print(stderr, "stepwatch agent: {}\n", config.error().message);
    return kAgentConfigError;
  }
  // A pidfd per watched rank (kept above descriptor 1023): thousands of ranks need the hard limit.
  uint64_t fds = raise_fd_limit();
  if (fds < 4096)
    log_warn(
        "agent: open-file limit is {}: ranks beyond it are checked through /proc instead of a "
        "pidfd",
        fds);
  agent::AgentDeps deps;
  if (config->gpu) {
    if (auto nvml = probe::Nvml::open(config->nvml_lib)) {
      deps.gpu = std::make_shared<probe::GpuProbe>(std::shared_ptr<probe::Nvml>(std::move(*nvml)));
    } else {
      log_info("agent: no GPU evidence: {}", nvml.error().message);
    }
  }
  serve::ApiConfig api_config;
  api_config.host = config->listen_host;
  api_config.port = config->listen_port;
  api_config.bearer_token = config->token;
  if (new_store) {  // an empty stepwatch.db becomes a store now; the agent then opens it
    store::OpenOptions fresh;
    fresh.fresh_if_empty = true;
    if (auto st = store::Store::open(config->state_dir, fresh); !st) {
      fmt::print(stderr, "stepwatch agent: {}\n", st.error().message);
      return kAgentStartError;
    }
  }
  auto a = agent::Agent::open(*config, std::move(deps));
  if (!a) {
    fmt::print(stderr, "stepwatch agent: {}\n", a.error().message);
    return kAgentStartError;
  }
  api_config.metrics = [&ag = **a] {
    auto node_faults = ag.node_faults();
    return serve::render_metrics(ag.jobs(), ag.health(), node_faults.get());
  };
  serve::ApiServer api(**a, api_config);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  // A port that is taken (another user may hold it to silence the agent) does not stop the
  // watching and paging: the API is bound again every kApiRebindNs until it can be.
  std::thread rebind;
  if (auto st = api.start(); st) {
    log_info("agent: watching {} root(s), API on {}", config->beacon_roots.size(), api.address());
  } else {
    log_error("agent: {}; watching {} root(s) and paging without the API, binding again every {}{}",
              st.error().message, config->beacon_roots.size(), format_duration(kApiRebindNs),
              port_holders(config->listen_port));
    rebind = std::thread([&api] {
      while (!g_stop.load()) {
        for (int64_t waited = 0; waited < kApiRebindNs && !g_stop.load(); waited += 100 * kNsPerMs)
          ::usleep(100 * 1000);
        if (g_stop.load()) break;
        if (api.start()) {
          log_info("agent: API on {}", api.address());
          break;
        }
      }
    });
  }
  (*a)->run(g_stop);
  log_info("agent: stopping");
  if (rebind.joinable()) rebind.join();
  api.stop();
  return kAgentOk;
}

}  // namespace stepwatch::cli
