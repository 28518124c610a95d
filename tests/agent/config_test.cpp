// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// agent.toml: defaults, values, and errors that name file:line: key.
#include "src/agent/config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "src/common/host.h"

namespace stepwatch::agent {
namespace {

namespace fs = std::filesystem;

TEST(AgentConfig, EmptyFileIsEveryDefault) {
  auto c = parse_agent_config("", "agent.toml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->beacon_roots, std::vector<std::string>{"/dev/shm/stepwatch"});
  EXPECT_EQ(c->poll_interval_ns, kNsPerSec);
  EXPECT_EQ(c->listen_host, "127.0.0.1");
  EXPECT_EQ(c->listen_port, 9465);
  EXPECT_EQ(c->retire_after_ns, 600 * kNsPerSec);
  EXPECT_TRUE(c->token_file.empty());
}

TEST(AgentConfig, ReadsEveryKey) {
  auto c = parse_agent_config(R"(
beacon_roots = ["/dev/shm/stepwatch", "/run/stepwatch"]
poll_interval = "500ms"
state_dir = "/var/lib/sw"
listen = "[::1]:0"
specs_dir = "/etc/sw/jobs"
retire_after = "2m"
gpu = false
nvml_lib = "/opt/libnvidia-ml.so.1"
proc_root = "/fake/proc"
max_jobs_per_user = 8
incidents_per_user_per_hour = 5
log_lines_per_user_per_minute = 30
keep_history = "7d"
max_store_size = "64MiB"
)",
                              "agent.toml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->beacon_roots.size(), 2u);
  EXPECT_EQ(c->poll_interval_ns, 500 * kNsPerMs);
  EXPECT_EQ(c->listen_host, "::1");
  EXPECT_EQ(c->listen_port, 0);
  EXPECT_EQ(c->retire_after_ns, 120 * kNsPerSec);
  EXPECT_FALSE(c->gpu);
  EXPECT_EQ(c->specs_dir, "/etc/sw/jobs");
  EXPECT_EQ(c->proc_root, "/fake/proc");
  EXPECT_EQ(c->max_jobs_per_user, 8);
  EXPECT_EQ(c->incidents_per_user_per_hour, 5);
  EXPECT_EQ(c->log_lines_per_user_per_minute, 30);
  EXPECT_EQ(c->keep_history_ns, 7 * 86400 * kNsPerSec);
  EXPECT_EQ(c->max_store_size, 64LL << 20);
}

struct BadCase {
  const char* text;
  const char* expected;  // a substring of the error
};

TEST(AgentConfig, ErrorsNameFileLineAndKey) {
  const BadCase cases[] = {
      {"\npoll_interval = \"soon\"\n", "agent.toml:2: poll_interval:"},
      {"poll_interval = \"1ms\"\n", "agent.toml:1: poll_interval: must be at least 10ms"},
      {"\n\nlisten = \"localhost\"\n", "agent.toml:3: listen:"},
      {"listen = \"127.0.0.1:70000\"\n", "agent.toml:1: listen:"},
      {"beacon_roots = \"/dev/shm\"\n", "agent.toml:1: beacon_roots: must be an array"},
      {"beacon_roots = [\"relative\"]\n",
       "agent.toml:1: beacon_roots[0]: must be an absolute path"},
      {"# comment\npolling = \"1s\"\n", "agent.toml:2: polling: unknown key"},
      {"gpu = \"yes\"\n", "agent.toml:1: gpu: must be true or false"},
      {"state_dir = 7\n", "agent.toml:1: state_dir: must be a string"},
      {"listen = \"0.0.0.0:9465\"\n",
       "agent.toml:1: listen: listening on 0.0.0.0 (beyond loopback) needs token_file"},
      {"listen = [\n", "agent.toml:1"},
      {"preempt_jobs = \"all\"\n", "agent.toml:1: preempt_jobs: must be an array"},
      {"\npreempt_jobs = [\"ok-*\", \"../etc\"]\n",
       "agent.toml:2: preempt_jobs[1]: must be a job id or a pattern"},
      {"max_jobs_per_user = 0\n",
       "agent.toml:1: max_jobs_per_user: must be a whole number from 1 to 1000000"},
      {"incidents_per_user_per_hour = \"many\"\n",
       "agent.toml:1: incidents_per_user_per_hour: must be a whole number"},
      {"log_lines_per_user_per_minute = 1.5\n",
       "agent.toml:1: log_lines_per_user_per_minute: must be a whole number"},
      {"keep_history = \"10m\"\n", "agent.toml:1: keep_history: must be at least 1h, got 10m00s"},
      {"max_store_size = \"1KiB\"\n", "agent.toml:1: max_store_size: must be at least 1MiB"},
      {"max_store_size = 1000\n", "agent.toml:1: max_store_size: must be a size such as"},
      {"max_store_size = \"5M\"\n", "agent.toml:1: max_store_size:"},
  };
  for (const auto& c : cases) {
    auto r = parse_agent_config(c.text, "agent.toml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(c.expected), std::string::npos) << r.error().message;
  }
}

// The same reader as the job spec (src/spec/toml_reader.h): a near miss gets "did you mean",
// a wrong type says what was found, and a syntax error names line and column.
TEST(AgentConfig, UnknownKeysAndTypesAreExplained) {
  const BadCase cases[] = {
      {"\npol_interval = \"1s\"\n",
       "agent.toml:2: pol_interval: unknown key; did you mean \"poll_interval\"?"},
      {"state_dirs = \"/x\"\n",
       "agent.toml:1: state_dirs: unknown key; did you mean \"state_dir\"?"},
      {"# c\n\nkeep_histroy = \"2h\"\n",
       "agent.toml:3: keep_histroy: unknown key; did you mean \"keep_history\"?"},
      {"colour = 1\n", "agent.toml:1: colour: unknown key; allowed: beacon_roots, poll_interval"},
      {"state_dir = 7\n", "agent.toml:1: state_dir: must be a string, got an integer"},
      {"gpu = \"yes\"\n", "agent.toml:1: gpu: must be true or false, got a string"},
      {"\nbeacon_roots = \"/dev/shm\"\n",
       "agent.toml:2: beacon_roots: must be an array of directories, e.g. "
       "[\"/dev/shm/stepwatch\"], "
       "got a string"},
      {"max_jobs_per_user = 1.5\n",
       "agent.toml:1: max_jobs_per_user: must be a whole number from 1 to 1000000, got a float"},
      {"max_jobs_per_user = 0\n",
       "agent.toml:1: max_jobs_per_user: must be a whole number from 1 to 1000000, got 0"},
      {"max_store_size = 1000\n",
       "agent.toml:1: max_store_size: must be a size such as \"256MiB\" or \"1GiB\", got an "
       "integer"},
      {"retire_after = true\n",
       "agent.toml:1: retire_after: must be a duration (a string like \"15m\" or a number of "
       "seconds), got a boolean"},
      {"retire_after = -1\n",
       "agent.toml:1: retire_after: must be a non-negative duration, got -1"},
      {"\n\nlisten = [\n", "agent.toml:3:"},
      {"listen = \"a\" x\n", "agent.toml:1:14: malformed TOML: "},
  };
  for (const auto& c : cases) {
    auto r = parse_agent_config(c.text, "agent.toml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(c.expected), std::string::npos) << r.error().message;
  }
  auto zero = parse_agent_config("retire_after = 0\n", "agent.toml");
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  EXPECT_EQ(zero->retire_after_ns, 0) << "0: a finished job is retired at once";
  // Every error, in file order.
  auto many = parse_agent_config("gpu = 1\nstate_dirr = \"/x\"\n", "agent.toml");
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error().message,
            "agent.toml:1: gpu: must be true or false, got an integer\n"
            "agent.toml:2: state_dirr: unknown key; did you mean \"state_dir\"?");
}

TEST(AgentConfig, PreemptJobsDefaultsToNoneAndMatchesPatterns) {
  auto none = parse_agent_config("", "agent.toml");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->preempt_jobs.empty());
  EXPECT_FALSE(may_preempt(*none, "anything")) << "default: observe and page only";
  auto c = parse_agent_config("preempt_jobs = [\"pretrain-*\", \"eval-7\"]\n", "agent.toml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(may_preempt(*c, "pretrain-llama"));
  EXPECT_TRUE(may_preempt(*c, "eval-7"));
  EXPECT_FALSE(may_preempt(*c, "eval-77"));
  EXPECT_FALSE(may_preempt(*c, "finetune-1"));
}

TEST(AgentConfig, ReportsEveryError) {
  auto r = parse_agent_config("poll_interval = \"x\"\nretire_after = \"y\"\n", "a.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("a.toml:1: poll_interval"), std::string::npos);
  EXPECT_NE(r.error().message.find("a.toml:2: retire_after"), std::string::npos);
}

// deploy/agent.toml, the example shipped with the unit, is itself a valid configuration.
TEST(AgentConfig, ShippedExampleIsValid) {
  const char* src = std::getenv("STEPWATCH_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "STEPWATCH_SOURCE_DIR is set by ctest";
  auto c = load_agent_config(std::string(src) + "/deploy/agent.toml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->listen_port, kDefaultPort);
  EXPECT_EQ(c->beacon_roots, std::vector<std::string>{"/dev/shm/stepwatch"});
  EXPECT_FALSE(c->coord.has_value());  // its [coord] is commented out: a single-node agent
  EXPECT_EQ(c->incidents_per_job_per_hour, 12);
  auto m = load_agent_config(std::string(src) + "/deploy/agent-multinode.toml");
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_TRUE(m->coord.has_value());
  EXPECT_EQ(m->coord->endpoints.size(), 3u);
  EXPECT_EQ(m->coord->lease_ttl_ns, 10 * kNsPerSec);
}

class TokenFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("sw-agent-config-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text, mode_t mode) {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }
  fs::path dir_;
};

TEST_F(TokenFile, BeyondLoopbackWithA0600TokenStarts) {
  std::string token = write("token", "s3cret\n", 0600);
  std::string cfg = write(
      "agent.toml", fmt::format("listen = \"0.0.0.0:9465\"\ntoken_file = \"{}\"\n", token), 0644);
  auto c = load_agent_config(cfg);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->token, "s3cret");
  EXPECT_EQ(c->listen_host, "0.0.0.0");
}

TEST_F(TokenFile, ReadableByOthersIsRefused) {
  std::string token = write("token", "s3cret\n", 0644);
  std::string cfg = write(
      "agent.toml", fmt::format("\nlisten = \"0.0.0.0:9465\"\ntoken_file = \"{}\"\n", token), 0644);
  auto c = load_agent_config(cfg);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find(cfg + ":3: token_file:"), std::string::npos)
      << c.error().message;
  EXPECT_NE(c.error().message.find("mode 0644"), std::string::npos) << c.error().message;
}

// D18: what a listen host means is the address it resolves to, not its spelling.
TEST(AgentConfig, LoopbackIsTheResolvedAddressNotAPrefix) {
  for (const char* h : {"127.0.0.1", "127.5.6.7", "::1", "localhost"})
    EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h :
       {"0.0.0.0", "::", "10.0.0.1", "::ffff:127.0.0.1", "127.rt2-test.invalid", "", "127."}) {
    EXPECT_FALSE(is_loopback_host(h)) << h;
  }
  auto c = parse_agent_config("listen = \"127.rt2-test.invalid:9465\"\n", "agent.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("needs token_file"), std::string::npos) << c.error().message;
}

TEST_F(TokenFile, MissingEmptyOrSymlinkedIsRefused) {
  EXPECT_FALSE(read_token_file((dir_ / "nope").string()).ok());
  EXPECT_FALSE(read_token_file(write("empty", " \n", 0600)).ok());
  // A FIFO is refused at once, never waited on (D19).
  std::string fifo = (dir_ / "tokfifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto t = read_token_file(fifo);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("is a FIFO"), std::string::npos) << t.error().message;
  auto cfg = load_agent_config(fifo);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.error().message.find("is a FIFO"), std::string::npos) << cfg.error().message;
  std::string real = write("real", "t", 0600);
  fs::create_symlink(real, dir_ / "link");
  auto r = read_token_file((dir_ / "link").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("symlink"), std::string::npos);
}

TEST_F(TokenFile, MissingConfigFileIsNamed) {
  auto c = load_agent_config((dir_ / "agent.toml").string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("agent.toml"), std::string::npos);
}

TEST_F(TokenFile, AConfigLargerThanAMebibyteIsRefused) {
  std::string cfg = write("agent.toml", std::string((1 << 20) + 1, '#'), 0644);
  auto c = load_agent_config(cfg);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find(cfg + ": larger than 1048576 bytes; not an agent configuration"),
            std::string::npos)
      << c.error().message;
}

TEST(AgentConfig, WithoutCoordIsSingleNode) {
  auto c = parse_agent_config("poll_interval = \"1s\"\n", "agent.toml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->coord.has_value());
}

TEST(AgentConfig, ReadsTheCoordSection) {
  auto c = parse_agent_config(R"(
[coord]
endpoints = ["http://10.0.0.5:2379", "http://10.0.0.6:2379"]
prefix = "/sw/prod"
lease_ttl = "4s"
node_name = "gpu-node-17"
publish_interval = "2s"
request_timeout = "500ms"
restart_wait = "5m"
)",
                              "agent.toml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->coord.has_value());
  EXPECT_EQ(c->coord->endpoints.size(), 2u);
  EXPECT_EQ(c->coord->endpoints[1], "http://10.0.0.6:2379");
  EXPECT_EQ(c->coord->prefix, "/sw/prod");
  EXPECT_EQ(c->coord->lease_ttl_ns, 4 * kNsPerSec);
  EXPECT_EQ(c->coord->node_name, "gpu-node-17");
  EXPECT_EQ(c->coord->publish_interval_ns, 2 * kNsPerSec);
  EXPECT_EQ(c->coord->request_timeout_ns, 500 * kNsPerMs);
  EXPECT_EQ(c->coord->restart_wait_ns, 5 * 60 * kNsPerSec);
}

TEST(AgentConfig, CoordDefaultsNameTheNodeAfterTheHost) {
  auto c = parse_agent_config("[coord]\nendpoints = [\"http://127.0.0.1:2379\"]\n", "agent.toml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->coord->node_name, short_hostname());
  EXPECT_EQ(c->coord->prefix, "/stepwatch/v1");
  EXPECT_EQ(c->coord->lease_ttl_ns, 10 * kNsPerSec);
  EXPECT_EQ(c->coord->restart_wait_ns, kDefaultRestartWaitNs);
}

TEST(AgentConfig, CoordErrorsNameLineAndKey) {
  auto c = parse_agent_config(R"([coord]
endpoints = ["https://10.0.0.5:2379", 7]
prefix = "stepwatch/"
lease_ttl = "1500ms"
node_name = "node 1"
publish_intervall = "2s"
restart_wait = "0s"
)",
                              "agent.toml");
  ASSERT_FALSE(c.ok());
  const std::string& m = c.error().message;
  EXPECT_NE(m.find("agent.toml:2: coord.endpoints[0]: must be an etcd client URL"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("agent.toml:2: coord.endpoints[1]"), std::string::npos) << m;
  EXPECT_NE(m.find("agent.toml:3: coord.prefix: must start with /"), std::string::npos) << m;
  EXPECT_NE(m.find("agent.toml:4: coord.lease_ttl: must be whole seconds"), std::string::npos) << m;
  EXPECT_NE(m.find("agent.toml:5: coord.node_name"), std::string::npos) << m;
  EXPECT_NE(m.find("agent.toml:6: coord.publish_intervall"), std::string::npos) << m;
  EXPECT_NE(m.find("publish_interval"), std::string::npos) << m;  // did you mean
  EXPECT_NE(m.find("agent.toml:7: coord.restart_wait"), std::string::npos) << m;
}

TEST(AgentConfig, CoordNeedsAnEndpoint) {
  auto c = parse_agent_config("[coord]\nnode_name = \"a\"\n", "agent.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("coord.endpoints: must name at least one etcd endpoint"),
            std::string::npos)
      << c.error().message;
}

}  // namespace
}  // namespace stepwatch::agent
