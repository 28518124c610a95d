// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// agent.toml, read through the spec's TOML reader (src/spec/toml_reader.h). Errors are collected,
// not thrown: a file with three mistakes reports three, each as "FILE:LINE: key: message", an
// unknown key with "did you mean" or the keys there are.
#include "src/agent/config.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <charconv>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/common/text_file.h"
#include "src/contract/names.h"
#include "src/spec/toml_reader.h"

namespace stepwatch::agent {

namespace {

bool valid_job_pattern(const std::string& p) {
  if (p.empty() || p.size() > 63) return false;
  for (char ch : p) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-' || ch == '*' || ch == '?';
    if (!ok) return false;
  }
  return true;
}

constexpr std::string_view kKeys[] = {"beacon_roots",
                                      "poll_interval",
                                      "state_dir",
                                      "listen",
                                      "specs_dir",
                                      "token_file",
                                      "retire_after",
                                      "proc_root",
                                      "gpu",
                                      "nvml_lib",
                                      "preempt_jobs",
                                      "max_jobs_per_user",
                                      "incidents_per_user_per_hour",
                                      "incidents_per_job_per_hour",
                                      "log_lines_per_user_per_minute",
                                      "keep_history",
                                      "max_store_size",
                                      "coord"};

constexpr std::string_view kCoordKeys[] = {"endpoints",  "prefix",           "lease_ttl",
                                           "node_name",  "publish_interval", "request_timeout",
                                           "token_file", "restart_wait"};

using spec::TomlReader;
using spec::TomlType;
using spec::TomlValue;

// A near miss gets "did you mean"; anything else the list of keys there are.
std::string unknown_key(std::string_view key) {
  if (!spec::closest(key, kKeys).empty()) return spec::unknown_key_message(key, kKeys);
  std::string allowed;
  for (auto k : kKeys) allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", k);
  return "unknown key; allowed: " + allowed;
}

// "HOST:PORT" or "[V6]:PORT".
Status split_listen(const std::string& s, std::string* host, int* port) {
  std::string h, p;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      return Error{Errc::kInvalidArgument, fmt::format("\"{}\" is not \"[ADDRESS]:PORT\"", s)};
    }
    h = s.substr(1, close - 1);
    p = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || s.find(':') != colon) {
      return Error{
          Errc::kInvalidArgument,
          fmt::format("\"{}\" is not \"HOST:PORT\" (IPv6 addresses go in brackets: \"[::1]:9465\")",
                      s)};
    }
    h = s.substr(0, colon);
    p = s.substr(colon + 1);
  }
  int v = -1;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (h.empty() || ec != std::errc() || end != p.data() + p.size() || v < 0 || v > 65535) {
    return Error{Errc::kInvalidArgument, fmt::format("\"{}\" needs a host and a port 0..65535", s)};
  }
  *host = h;
  *port = v;
  return {};
}

// Reads the [coord] table.
void read_coord(TomlReader& in, const TomlValue& table, CoordConfig& c) {
  using Zero = TomlReader::Zero;
  in.each_key(
      table, "coord", kCoordKeys,
      [&](std::string_view key, const TomlValue& v, const std::string& k) {
        if (key == "endpoints") {
          if (!v.is(TomlType::kArray)) {
            return in.type_error(v, k, "an array of URLs, e.g. [\"http://10.0.0.5:2379\"]");
          }
          for (size_t i = 0; i < v.items.size(); ++i) {
            const TomlValue& e = v.items[i];
            bool ok =
                e.is(TomlType::kString) && e.string.rfind("http://", 0) == 0 && e.string.size() > 7;
            if (!ok) {
              in.error(e, fmt::format("{}[{}]", k, i),
                       "must be an etcd client URL \"http://HOST:PORT\" (the gateway is "
                       "spoken over plain HTTP; put TLS in front of it)");
              continue;
            }
            c.endpoints.push_back(e.string);
          }
        } else if (key == "prefix") {
          if (!in.get(v, k, &c.prefix)) return;
          if (c.prefix.size() < 2 || c.prefix[0] != '/' || c.prefix.back() == '/') {
            in.error(v, k, "must start with / and not end with one, e.g. \"/stepwatch/v1\"");
          }
        } else if (key == "node_name") {
          if (!in.get(v, k, &c.node_name)) return;
          if (!contract::validate_node_name(c.node_name)) {
            in.error(v, k, "must be 1-63 characters from [A-Za-z0-9._-], not starting with '-'");
          }
        } else if (key == "token_file") {
          in.get(v, k, &c.token_file);
        } else {
          int64_t* out = key == "lease_ttl"          ? &c.lease_ttl_ns
                         : key == "publish_interval" ? &c.publish_interval_ns
                         : key == "restart_wait"     ? &c.restart_wait_ns
                                                     : &c.request_timeout_ns;
          if (!in.get_duration(v, k, out, Zero::kRefuse)) return;
          if (key == "lease_ttl" && (*out < kNsPerSec || *out % kNsPerSec != 0)) {
            in.error(v, k,
                     fmt::format("must be whole seconds, at least 1s (etcd grants leases "
                                 "in seconds), got {}",
                                 format_duration(*out)));
          }
        }
      });
  if (c.endpoints.empty()) {
    in.error(table, "coord.endpoints", "must name at least one etcd endpoint");
  }
}

// Reads one known key of agent.toml into `c`.
void read_key(TomlReader& in, std::string_view key, const TomlValue& v, const std::string& k,
              AgentConfig& c) {
  using Zero = TomlReader::Zero;
  if (key == "beacon_roots") {
    if (!v.is(TomlType::kArray)) {
      return in.type_error(v, k, "an array of directories, e.g. [\"/dev/shm/stepwatch\"]");
    }
    c.beacon_roots.clear();
    for (size_t i = 0; i < v.items.size(); ++i) {
      const TomlValue& e = v.items[i];
      if (!e.is(TomlType::kString) || e.string.empty() || e.string[0] != '/') {
        in.error(e, fmt::format("{}[{}]", k, i), "must be an absolute path");
        continue;
      }
      c.beacon_roots.push_back(e.string);
    }
    if (v.items.empty()) in.error(v, k, "must name at least one directory");
  } else if (key == "preempt_jobs") {
    if (!v.is(TomlType::kArray)) {
      return in.type_error(v, k, "an array of job ids or patterns, e.g. [\"pretrain-*\"]");
    }
    for (size_t i = 0; i < v.items.size(); ++i) {
      const TomlValue& e = v.items[i];
      if (!e.is(TomlType::kString) || !valid_job_pattern(e.string)) {
        in.error(e, fmt::format("{}[{}]", k, i),
                 "must be a job id or a pattern of 1-63 characters from [A-Za-z0-9._-] and * ? "
                 "(e.g. \"pretrain-*\")");
        continue;
      }
      c.preempt_jobs.push_back(e.string);
    }
  } else if (key == "poll_interval") {
    if (in.get_duration(v, k, &c.poll_interval_ns, Zero::kAllow) &&
        c.poll_interval_ns < 10 * kNsPerMs) {
      in.error(v, k,
               fmt::format("must be at least 10ms, got {}", format_duration(c.poll_interval_ns)));
    }
  } else if (key == "retire_after") {
    in.get_duration(v, k, &c.retire_after_ns, Zero::kAllow);
  } else if (key == "keep_history") {
    if (in.get_duration(v, k, &c.keep_history_ns, Zero::kAllow) &&
        c.keep_history_ns < 3600 * kNsPerSec) {
      in.error(v, k,
               fmt::format("must be at least 1h, got {}", format_duration(c.keep_history_ns)));
    }
  } else if (key == "max_jobs_per_user" || key == "incidents_per_user_per_hour" ||
             key == "incidents_per_job_per_hour" || key == "log_lines_per_user_per_minute") {
    int* out = key == "max_jobs_per_user"             ? &c.max_jobs_per_user
               : key == "incidents_per_user_per_hour" ? &c.incidents_per_user_per_hour
               : key == "incidents_per_job_per_hour"  ? &c.incidents_per_job_per_hour
                                                      : &c.log_lines_per_user_per_minute;
    in.get_int(v, k, out, 1, 1'000'000, "a whole number from 1 to 1000000");
  } else if (key == "max_store_size") {
    int64_t size = 0;
    if (!v.is(TomlType::kString)) {  // a bare number would be bytes: too easy to get wrong here
      in.type_error(v, k, "a size such as \"256MiB\" or \"1GiB\"");
    } else if (!in.get_size(v, k, &size)) {
      // reported
    } else if (size < (int64_t{1} << 20)) {
      in.error(v, k, "must be at least 1MiB");
    } else {
      c.max_store_size = size;
    }
  } else if (key == "gpu") {
    in.get(v, k, &c.gpu);
  } else if (key == "coord") {
    if (const TomlValue* t = in.table(v, k)) read_coord(in, *t, c.coord.emplace());
  } else {
    std::string s;
    if (!in.get(v, k, &s)) return;
    if (key == "listen") c.listen = s;
    if (key == "nvml_lib") c.nvml_lib = s;
    if (key == "token_file") c.token_file = s;
    if (key == "state_dir" || key == "specs_dir" || key == "proc_root") {
      if (s.empty()) return in.error(v, k, "must not be empty");
      (key == "state_dir" ? c.state_dir : key == "specs_dir" ? c.specs_dir : c.proc_root) = s;
    }
  }
}

Result<AgentConfig> parse_impl(std::string_view text, const std::string& source_name,
                               bool read_token) {
  AgentConfig c;
  c.source = source_name;
  const std::string file = source_name.empty() ? "<agent.toml>" : source_name;
  spec::KeyLines lines;
  spec::IssueSink sink(file, &lines);
  TomlReader in(&sink, &lines, TomlReader::Wording::kMustBe);
  try {
    spec::TomlDocument doc = spec::parse_toml(text, file);
    if (doc.syntax_error) return Error{Errc::kParse, doc.syntax_error->text()};
    in.each_key(
        doc.root, "", kKeys,
        [&](std::string_view key, const TomlValue& v, const std::string& k) {
          read_key(in, key, v, k, c);
        },
        unknown_key);
    bool listen_ok = true;
    if (auto st = split_listen(c.listen, &c.listen_host, &c.listen_port); !st) {
      sink.error("listen", st.error().message);
      listen_ok = false;
    }
    if (listen_ok && !is_loopback_host(c.listen_host) && c.token_file.empty()) {
      sink.error("listen",
                 fmt::format(
                     "listening on {} (beyond loopback) needs token_file: anyone who can reach the "
                     "port could ack incidents; set token_file or listen on 127.0.0.1",
                     c.listen_host));
    }
    if (c.coord && c.coord->node_name.empty()) c.coord->node_name = short_hostname();
    if (read_token && c.coord && !c.coord->token_file.empty()) {
      auto t = read_token_file(c.coord->token_file);
      if (!t) {
        sink.error("coord.token_file", t.error().message);
      } else {
        c.coord->token = std::move(*t);
      }
    }
    if (read_token && !c.token_file.empty()) {
      auto t = read_token_file(c.token_file);
      if (!t) {
        sink.error("token_file", t.error().message);
      } else {
        c.token = std::move(*t);
      }
    }
  } catch (const std::exception& e) {  // the boundary: nothing thrown leaves the loader
    sink.error(0, "", fmt::format("internal error while reading the configuration: {}", e.what()));
  }
  if (sink.has_errors()) {
    std::string msg;
    for (const auto& e : sink.take_errors()) msg += (msg.empty() ? "" : "\n") + e.text();
    return Error{Errc::kInvalidArgument, msg};
  }
  return c;
}

}  // namespace

Result<AgentConfig> parse_agent_config(std::string_view text, const std::string& source_name) {
  return parse_impl(text, source_name, false);
}

Result<std::string> read_token_file(const std::string& path) {
  auto f = read_text_file(path, 64 << 10, Symlinks::kRefuse);
  if (!f) return f.error();
  if ((f->mode & 077) != 0) {
    return Error{Errc::kPermission,
                 fmt::format("{}: mode {:04o} lets others read or change the token; chmod 600 it",
                             path, f->mode & 07777)};
  }
  std::string& token = f->text;
  size_t b = token.find_first_not_of(" \t\r\n");
  size_t e = token.find_last_not_of(" \t\r\n");
  token = b == std::string::npos ? "" : token.substr(b, e - b + 1);
  if (token.empty())
    return Error{Errc::kInvalidArgument, fmt::format("{}: the token is empty", path)};
  return token;
}

Result<AgentConfig> load_agent_config(const std::string& path) {
  auto text = spec::read_toml_file(path, 1 << 20, "an agent configuration");
  if (!text) return text.error();
  return parse_impl(*text, path, true);
}

bool may_preempt(const AgentConfig& config, const std::string& job) {
  for (const auto& p : config.preempt_jobs) {
    if (::fnmatch(p.c_str(), job.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace stepwatch::agent
