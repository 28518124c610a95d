#include "src/serve/metrics.h"
#include "src/cli/agent_cmd.h"

#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <memory>

#include "src/agent/agent.h"
#include "src/agent/api.h"
#include "src/agent/config.h"
#include "src/common/limits.h"
#include "src/common/log.h"
#include "src/probe/nvml.h"

namespace stepwatch::cli {

namespace {

std::atomic<bool> g_stop{false};  // lock-free: safe to set from a signal handler

extern "C" void on_stop_signal(int) {
  g_stop.store(true);
}

}  // namespace

int run_agent(const std::string& config_path) {
  auto config = agent::load_agent_config(config_path);
  if (!config) {
    fmt::print(stderr, "stepwatch agent: {}\n", config.error().message);
    return kAgentConfigError;
  }
  // A pidfd per watched rank (kept above descriptor 1023): thousands of ranks need the hard limit.
  uint64_t fds = raise_fd_limit();
  if (fds < 4096) log_warn("agent: open-file limit is {}: ranks beyond it are checked through /proc instead of a pidfd", fds);
  agent::AgentDeps deps;
  if (config->gpu) {
    if (auto nvml = probe::Nvml::open(config->nvml_lib)) {
      deps.gpu = std::make_shared<probe::GpuProbe>(std::shared_ptr<probe::Nvml>(std::move(*nvml)));
    } else {
      log_info("agent: no GPU evidence: {}", nvml.error().message);
    }
  }
  agent::ApiConfig api_config;
  api_config.host = config->listen_host;
  api_config.port = config->listen_port;
  api_config.bearer_token = config->token;
  auto a = agent::Agent::open(*config, std::move(deps));
  if (!a) {
    fmt::print(stderr, "stepwatch agent: {}\n", a.error().message);
    return kAgentStartError;
  }
  api_config.metrics = [&ag = **a] { return serve::render_metrics(ag.jobs(), ag.health()); };
  agent::ApiServer api(**a, api_config);
  if (auto st = api.start(); !st) {
    fmt::print(stderr, "stepwatch agent: {}\n", st.error().message);
    return kAgentStartError;
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  log_info("agent: watching {} root(s), API on {}", config->beacon_roots.size(), api.address());
  (*a)->run(g_stop);
  log_info("agent: stopping");
  api.stop();
  return kAgentOk;
}

}  // namespace stepwatch::cli
