// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the agent configuration. Any text through parse_agent_config. Nothing may
// crash or throw; every error line names the file; an accepted configuration obeys
// deploy/agent.toml's rules (absolute roots, a poll of 10ms or more, a port 0..65535, a token
// file beyond loopback, valid preempt patterns) and reads back the same from TOML written from
// its fields.
#include <dlfcn.h>
#include <fmt/format.h>
#include <netdb.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/require.h"
#include "fuzz/toml_text.h"
#include "src/agent/config.h"
#include "src/common/host.h"

// Host names are resolved from numbers (and "localhost") only: a fuzzed listen host must not
// reach DNS, which is slow, differs between machines and is absent on the fuzz machine. The
// agent's loopback rule (is_loopback_host) still runs on what getaddrinfo answers.
extern "C" int getaddrinfo(const char* node, const char* service, const addrinfo* hints,
                           addrinfo** res) {
  using Fn = int (*)(const char*, const char*, const addrinfo*, addrinfo**);
  static const auto real = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, "getaddrinfo"));
  addrinfo numeric = hints != nullptr ? *hints : addrinfo{};
  numeric.ai_flags |= AI_NUMERICHOST;
  if (node != nullptr && std::string_view(node) == "localhost") node = "127.0.0.1";
  return real(node, service, &numeric, res);
}

namespace {

using stepwatch::agent::AgentConfig;

constexpr const char* kSource = "fuzz-agent.toml";

using stepwatch::fuzz::quoted;
using stepwatch::fuzz::strings;

// Every field of `c` as agent.toml, each value in a form that reads back exactly.
std::string to_toml(const AgentConfig& c) {
  return fmt::format(
      "beacon_roots = {}\npoll_interval = \"{}ns\"\nstate_dir = {}\nlisten = {}\nspecs_dir = {}\n"
      "token_file = {}\nretire_after = \"{}ns\"\nproc_root = {}\ngpu = {}\nnvml_lib = {}\n"
      "preempt_jobs = {}\nmax_jobs_per_user = {}\nincidents_per_user_per_hour = {}\n"
      "incidents_per_job_per_hour = {}\nlog_lines_per_user_per_minute = {}\n"
      "keep_history = \"{}ns\"\nmax_store_size = \"{}B\"\n",
      strings(c.beacon_roots), c.poll_interval_ns, quoted(c.state_dir), quoted(c.listen),
      quoted(c.specs_dir), quoted(c.token_file), c.retire_after_ns, quoted(c.proc_root),
      c.gpu ? "true" : "false", quoted(c.nvml_lib), strings(c.preempt_jobs), c.max_jobs_per_user,
      c.incidents_per_user_per_hour, c.incidents_per_job_per_hour, c.log_lines_per_user_per_minute,
      c.keep_history_ns, c.max_store_size);
}

bool job_pattern_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '.' || ch == '_' || ch == '-' || ch == '*' || ch == '?';
}

// A job id that `pattern` matches: * as nothing, ? as one letter.
std::string instance_of(const std::string& pattern) {
  std::string out;
  for (char ch : pattern) {
    if (ch == '?') out += 'x';
    if (ch != '*' && ch != '?') out += ch;
  }
  return out;
}

void check_accepted(const AgentConfig& c) {
  FUZZ_REQUIRE(c.source == kSource);
  FUZZ_REQUIRE(!c.beacon_roots.empty());
  for (const auto& root : c.beacon_roots) FUZZ_REQUIRE(!root.empty() && root.front() == '/');
  FUZZ_REQUIRE(c.poll_interval_ns >= 10 * stepwatch::kNsPerMs);
  FUZZ_REQUIRE(c.retire_after_ns >= 0);
  FUZZ_REQUIRE(!c.state_dir.empty() && !c.specs_dir.empty() && !c.proc_root.empty());
  FUZZ_REQUIRE(!c.listen_host.empty() && c.listen_port >= 0 && c.listen_port <= 65535);
  // `listen` is HOST:PORT or [HOST]:PORT.
  size_t host_at = c.listen.front() == '[' ? 1 : 0;
  FUZZ_REQUIRE(c.listen.compare(host_at, c.listen_host.size(), c.listen_host) == 0);
  FUZZ_REQUIRE(c.listen.at(host_at + c.listen_host.size() + host_at) == ':');
  FUZZ_REQUIRE(stepwatch::is_loopback_host(c.listen_host) || !c.token_file.empty());
  FUZZ_REQUIRE(c.token.empty());  // parse_agent_config never reads the token file
  for (int bound : {c.max_jobs_per_user, c.incidents_per_user_per_hour,
                    c.incidents_per_job_per_hour, c.log_lines_per_user_per_minute}) {
    FUZZ_REQUIRE(bound >= 1 && bound <= 1'000'000);
  }
  FUZZ_REQUIRE(c.keep_history_ns >= 3600 * stepwatch::kNsPerSec);
  FUZZ_REQUIRE(c.max_store_size >= (int64_t{1} << 20));
  for (const auto& p : c.preempt_jobs) {
    FUZZ_REQUIRE(!p.empty() && p.size() <= 63);
    for (char ch : p) FUZZ_REQUIRE(job_pattern_char(ch));
    FUZZ_REQUIRE(stepwatch::agent::may_preempt(c, instance_of(p)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = stepwatch::agent::parse_agent_config(text, kSource);
  if (!parsed) {
    const auto& e = parsed.error();
    FUZZ_REQUIRE(e.code == stepwatch::Errc::kParse || e.code == stepwatch::Errc::kInvalidArgument);
    FUZZ_REQUIRE(!e.message.empty());
    // "FILE[:LINE[:COLUMN]]: ...". Only the first line is checked: messages quote the offending
    // text as written, and a quoted newline starts a line of its own.
    std::string_view source = kSource;
    FUZZ_REQUIRE(e.message.starts_with(source) && e.message.size() > source.size() &&
                 e.message[source.size()] == ':');
    return 0;
  }
  const AgentConfig& c = *parsed;
  check_accepted(c);

  // Written back as TOML, it reads as the same configuration.
  std::string written = to_toml(c);
  auto again = stepwatch::agent::parse_agent_config(written, kSource);
  FUZZ_REQUIRE(again.ok());
  FUZZ_REQUIRE(to_toml(*again) == written);
  FUZZ_REQUIRE(again->listen_host == c.listen_host && again->listen_port == c.listen_port);
  return 0;
}
