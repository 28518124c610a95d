// agent.toml, and the only agent file that includes toml++ (STYLE rule 11). Errors are collected,
// not thrown: a file with three mistakes reports three, each as "FILE:LINE: key: message".
#include "src/agent/config.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <toml++/toml.h>

#include <charconv>
#include <map>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/common/text_file.h"
#include "src/spec/size.h"

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

constexpr const char* kKeys[] = {"beacon_roots",
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
                                 "log_lines_per_user_per_minute",
                                 "keep_history",
                                 "max_store_size"};

struct Sink {
  std::string source;
  std::vector<std::string> errors;
  void error(int line, std::string_view key, const std::string& message) {
    std::string where = source.empty() ? "<agent.toml>" : source;
    if (line > 0) where += fmt::format(":{}", line);
    errors.push_back(key.empty() ? fmt::format("{}: {}", where, message)
                                 : fmt::format("{}: {}: {}", where, key, message));
  }
};

int line_of(const toml::node& v) {
  return static_cast<int>(v.source().begin.line);
}

bool read_string(const toml::node& v, std::string_view key, Sink& sink, std::string* out) {
  const auto* s = v.as_string();
  if (s == nullptr) {
    sink.error(line_of(v), key, "must be a string");
    return false;
  }
  *out = s->get();
  return true;
}

bool read_duration(const toml::node& v, std::string_view key, Sink& sink, int64_t* out) {
  if (const auto* s = v.as_string()) {
    auto d = parse_duration(s->get());
    if (!d) {
      sink.error(line_of(v), key, d.error().message);
      return false;
    }
    *out = *d;
    return true;
  }
  if (v.is_integer() || v.is_floating_point()) {
    double seconds =
        v.is_integer() ? static_cast<double>(v.as_integer()->get()) : v.as_floating_point()->get();
    if (!(seconds >= 0) || seconds > 1e9) {
      sink.error(line_of(v), key,
                 fmt::format("must be a non-negative number of seconds, got {}", seconds));
      return false;
    }
    *out = static_cast<int64_t>(seconds * static_cast<double>(kNsPerSec));
    return true;
  }
  sink.error(line_of(v), key, "must be a duration such as \"1s\", \"500ms\" or \"10m\"");
  return false;
}

bool read_int(const toml::node& v, std::string_view key, Sink& sink, int64_t lo, int64_t hi,
              int* out) {
  const auto* i = v.as_integer();
  if (i == nullptr || i->get() < lo || i->get() > hi) {
    sink.error(line_of(v), key, fmt::format("must be a whole number from {} to {}", lo, hi));
    return false;
  }
  *out = static_cast<int>(i->get());
  return true;
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

Result<AgentConfig> parse_impl(std::string_view text, const std::string& source_name,
                               bool read_token) {
  AgentConfig c;
  c.source = source_name;
  Sink sink{source_name, {}};
  std::map<std::string, int, std::less<>> lines;
  try {
    toml::table root;
    try {
      root = toml::parse(text, source_name);
    } catch (const toml::parse_error& e) {
      const auto& at = e.source().begin;
      return Error{Errc::kParse, fmt::format("{}:{}:{}: malformed TOML: {}", source_name, at.line,
                                             at.column, e.description())};
    }
    for (auto&& [k, v] : root) {
      std::string key(k.str());
      int line = static_cast<int>(k.source().begin.line);
      if (line <= 0) line = line_of(v);
      lines[key] = line;
      bool known = false;
      for (const char* kk : kKeys) known = known || key == kk;
      if (!known) {
        std::string allowed;
        for (const char* kk : kKeys) allowed += (allowed.empty() ? "" : ", ") + std::string(kk);
        sink.error(line, key, "unknown key; allowed: " + allowed);
        continue;
      }
      if (key == "beacon_roots") {
        const auto* arr = v.as_array();
        if (arr == nullptr) {
          sink.error(line, key, "must be an array of directories, e.g. [\"/dev/shm/stepwatch\"]");
          continue;
        }
        c.beacon_roots.clear();
        for (size_t i = 0; i < arr->size(); ++i) {
          const auto* s = (*arr)[i].as_string();
          std::string item = fmt::format("{}[{}]", key, i);
          if (s == nullptr || s->get().empty() || s->get()[0] != '/') {
            sink.error(line_of((*arr)[i]) > 0 ? line_of((*arr)[i]) : line, item,
                       "must be an absolute path");
            continue;
          }
          c.beacon_roots.push_back(s->get());
        }
        if (arr->empty()) sink.error(line, key, "must name at least one directory");
      } else if (key == "preempt_jobs") {
        const auto* arr = v.as_array();
        if (arr == nullptr) {
          sink.error(line, key, "must be an array of job ids or patterns, e.g. [\"pretrain-*\"]");
          continue;
        }
        for (size_t i = 0; i < arr->size(); ++i) {
          const auto* s = (*arr)[i].as_string();
          std::string item = fmt::format("{}[{}]", key, i);
          int at = line_of((*arr)[i]) > 0 ? line_of((*arr)[i]) : line;
          if (s == nullptr || !valid_job_pattern(s->get())) {
            sink.error(
                at, item,
                "must be a job id or a pattern of 1-63 characters from [A-Za-z0-9._-] and * ? "
                "(e.g. \"pretrain-*\")");
            continue;
          }
          c.preempt_jobs.push_back(s->get());
        }
      } else if (key == "poll_interval") {
        if (read_duration(v, key, sink, &c.poll_interval_ns) &&
            c.poll_interval_ns < 10 * kNsPerMs) {
          sink.error(
              line, key,
              fmt::format("must be at least 10ms, got {}", format_duration(c.poll_interval_ns)));
        }
      } else if (key == "retire_after") {
        read_duration(v, key, sink, &c.retire_after_ns);
      } else if (key == "max_jobs_per_user") {
        read_int(v, key, sink, 1, 1'000'000, &c.max_jobs_per_user);
      } else if (key == "incidents_per_user_per_hour") {
        read_int(v, key, sink, 1, 1'000'000, &c.incidents_per_user_per_hour);
      } else if (key == "log_lines_per_user_per_minute") {
        read_int(v, key, sink, 1, 1'000'000, &c.log_lines_per_user_per_minute);
      } else if (key == "keep_history") {
        if (read_duration(v, key, sink, &c.keep_history_ns) && c.keep_history_ns < 3600 * kNsPerSec)
          sink.error(
              line, key,
              fmt::format("must be at least 1h, got {}", format_duration(c.keep_history_ns)));
      } else if (key == "max_store_size") {
        const auto* s = v.as_string();
        auto size =
            s ? spec::parse_size(s->get()) : Result<int64_t>(Error{Errc::kInvalidArgument, ""});
        if (!size) {
          sink.error(line, key,
                     s ? size.error().message
                       : std::string("must be a size such as \"256MiB\" or \"1GiB\""));
        } else if (*size < (1LL << 20)) {
          sink.error(line, key, "must be at least 1MiB");
        } else {
          c.max_store_size = *size;
        }
      } else if (key == "gpu") {
        if (const auto* b = v.as_boolean()) {
          c.gpu = b->get();
        } else {
          sink.error(line, key, "must be true or false");
        }
      } else {
        std::string s;
        if (!read_string(v, key, sink, &s)) continue;
        if (key == "listen") c.listen = s;
        if (key == "nvml_lib") c.nvml_lib = s;
        if (key == "token_file") c.token_file = s;
        if (key == "state_dir" || key == "specs_dir" || key == "proc_root") {
          if (s.empty()) {
            sink.error(line, key, "must not be empty");
            continue;
          }
          (key == "state_dir" ? c.state_dir : key == "specs_dir" ? c.specs_dir : c.proc_root) = s;
        }
      }
    }
    auto line = [&](const char* key) {
      auto it = lines.find(key);
      return it == lines.end() ? 0 : it->second;
    };
    bool listen_ok = true;
    if (auto st = split_listen(c.listen, &c.listen_host, &c.listen_port); !st) {
      sink.error(line("listen"), "listen", st.error().message);
      listen_ok = false;
    }
    if (listen_ok && !is_loopback_host(c.listen_host) && c.token_file.empty()) {
      sink.error(line("listen"), "listen",
                 fmt::format(
                     "listening on {} (beyond loopback) needs token_file: anyone who can reach the "
                     "port could ack incidents; set token_file or listen on 127.0.0.1",
                     c.listen_host));
    }
    if (read_token && !c.token_file.empty()) {
      auto t = read_token_file(c.token_file);
      if (!t) {
        sink.error(line("token_file"), "token_file", t.error().message);
      } else {
        c.token = std::move(*t);
      }
    }
  } catch (const std::exception& e) {  // the boundary: nothing thrown leaves the loader
    sink.error(0, "", fmt::format("internal error while reading the configuration: {}", e.what()));
  }
  if (!sink.errors.empty()) {
    std::string msg;
    for (const auto& e : sink.errors) msg += (msg.empty() ? "" : "\n") + e;
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
  auto f = read_text_file(path, 1 << 20);
  if (!f) return f.error();
  return parse_impl(f->text, path, true);
}

bool may_preempt(const AgentConfig& config, const std::string& job) {
  for (const auto& p : config.preempt_jobs) {
    if (::fnmatch(p.c_str(), job.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace stepwatch::agent
