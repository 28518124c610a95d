// The only CLI translation unit with httplib (and nlohmann-json for the agent's answers).
#include "src/cli/agent_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/probe/ports.h"

namespace stepwatch::cli {

namespace {

using json = nlohmann::json;

std::unique_ptr<httplib::Client> client(const std::string& base, int timeout_ms) {
  auto c = std::make_unique<httplib::Client>(base);
  c->set_connection_timeout(0, timeout_ms * 1000);
  c->set_read_timeout(5, 0);
  return c;
}

std::string seconds(const json& v) {
  if (!v.is_number()) return "n/a";
  return format_duration(static_cast<int64_t>(v.get<double>() * 1e9));
}

std::string text(const json& v) {
  if (v.is_null()) return "n/a";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

Status agent_listener_trusted(const std::string& url, uint32_t me, const std::string& proc_root) {
  std::string_view rest = url;
  if (auto sep = rest.find("://"); sep != std::string_view::npos) rest.remove_prefix(sep + 3);
  rest = rest.substr(0, rest.find('/'));
  const size_t colon = rest.rfind(':');
  const bool has_port =
      colon != std::string_view::npos && rest.find(']', colon) == std::string_view::npos;
  std::string_view host = has_port ? rest.substr(0, colon) : rest;
  if (!is_loopback_literal(host)) return {};
  int port = 80;
  if (has_port) {
    auto digits = rest.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 65535)
      return Error{Errc::kInvalidArgument, fmt::format("{}: not a port", url)};
  }
  auto listeners = probe::listeners_on_port(proc_root, port);
  if (!listeners)
    return Error{listeners.error().code,
                 fmt::format("cannot check who serves {}: {}", url, listeners.error().message)};
  for (const auto& l : *listeners) {
    if (l.uid == 0 || l.uid == me) continue;
    return Error{
        Errc::kPermission,
        fmt::format("{} is served by a process of uid {}, not by root or you: not the stepwatch "
                    "agent, so nothing is sent to it (is the agent down and its port taken?)",
                    url, l.uid)};
  }
  return {};
}

Result<std::optional<std::string>> find_agent(const std::string& explicit_url,
                                              const std::string& proc_root) {
  std::string url = explicit_url;
  if (url.empty()) {
    const char* e = std::getenv("STEPWATCH_AGENT");
    if (e != nullptr && *e != '\0') url = e;
  }
  bool given = !url.empty();
  if (!given) url = "http://127.0.0.1:9465";
  if (auto trusted = agent_listener_trusted(url, static_cast<uint32_t>(::getuid()), proc_root);
      !trusted)
    return trusted.error();
  auto res = client(url, given ? 2000 : 200)->Get("/healthz");
  if (res && res->status == 200) return std::optional<std::string>(url);
  if (given) {
    return Error{Errc::kNotFound, fmt::format("no stepwatch agent answers at {}: {}", url,
                                              res ? fmt::format("HTTP {}", res->status)
                                                  : httplib::to_string(res.error()))};
  }
  return std::optional<std::string>{};
}

int status_from_agent(const std::string& base, const std::string& job) {
  auto c = client(base, 2000);
  auto list = c->Get("/api/v1/jobs");
  if (!list || list->status != 200) {
    fmt::print(stderr, "stepwatch status: agent {}: {}\n", base,
               list ? fmt::format("HTTP {}", list->status) : httplib::to_string(list.error()));
    return 1;
  }
  json jobs = json::parse(list->body, nullptr, false);
  if (jobs.is_discarded() || !jobs.contains("jobs")) {
    fmt::print(stderr, "stepwatch status: agent {}: malformed answer\n", base);
    return 1;
  }
  fmt::print("from the agent at {}\n", base);
  int shown = 0;
  for (const auto& j : jobs["jobs"]) {
    std::string id = j.value("job_id", "");
    if (!job.empty() && id != job) continue;
    ++shown;
    fmt::print("job {}  {}{}  owner {}  ranks {}{}\n  verdict: {}\n", id, j.value("state", "?"),
               j.value("cause", "none") == "none" ? "" : "/" + j.value("cause", ""),
               j.value("owner", "").empty() ? "n/a" : j.value("owner", ""), j.value("ranks", 0),
               j.value("retired", false) ? "  (retired)" : "", j.value("summary", ""));
    auto detail = c->Get(fmt::format("/api/v1/jobs/{}", id));
    if (!detail || detail->status != 200) continue;
    json d = json::parse(detail->body, nullptr, false);
    if (d.is_discarded()) continue;
    fmt::print("  {:>4} {:>7} {:>10} {:>17} {:<12} {:<10} {:<22} {:<16} {}\n", "RANK", "PID",
               "STEP", "STEP AGE/BUDGET", "PHASE", "STATE", "PROC", "GPU SM PWR", "NOTE");
    for (const auto& r : d.value("ranks", json::array())) {
      const json& b = r.contains("beacon") ? r["beacon"] : json();
      const json& p = r.contains("process") ? r["process"] : json();
      const json& g = r.contains("gpu") ? r["gpu"] : json();
      std::string proc = p.is_object() ? fmt::format("{}:{}", text(p.value("state", json())),
                                                     text(p.value("wchan", json())))
                                       : "n/a";
      std::string gpu = g.is_object() ? fmt::format("{}% {}W", text(g.value("sm_util_pct", json())),
                                                    text(g.value("power_w", json())))
                                      : "n/a";
      fmt::print("  {:>4} {:>7} {:>10} {:>17} {:<12} {:<10} {:<22} {:<16} {}\n",
                 text(r.value("rank", json())),
                 b.is_object() ? text(b.value("pid", json())) : "n/a",
                 text(r.value("step", json())),
                 fmt::format("{}/{}", seconds(r.value("step_age_seconds", json())),
                             seconds(r.value("budget_seconds", json()))),
                 text(r.value("phase", json())), text(r.value("state", json())), proc.substr(0, 22),
                 gpu, text(r.value("note", json())));
    }
    for (const auto& cu : d.value("culprits", json::array())) {
      fmt::print("  culprit: rank {}: {}\n", text(cu.value("rank", json())),
                 text(cu.value("reason", json())));
    }
  }
  if (shown == 0) {
    if (!job.empty()) {
      fmt::print(stderr, "stepwatch status: the agent at {} does not watch job {}\n", base, job);
      return 1;
    }
    fmt::print("no jobs\n");
  }
  return 0;
}

int ack_through_agent(const std::string& base, const std::string& job, const std::string& by,
                      const std::string& note) {
  httplib::Headers headers;
  if (const char* f = std::getenv("STEPWATCH_AGENT_TOKEN_FILE"); f != nullptr && *f != '\0') {
    std::ifstream in(f);
    std::string token;
    std::getline(in, token);
    if (!in && token.empty()) {
      fmt::print(stderr, "stepwatch ack: cannot read the token file {}\n", f);
      return 2;
    }
    headers.emplace("Authorization", "Bearer " + token);
  }
  json body = {{"by", by}, {"note", note}};
  auto res =
      client(base, 2000)
          ->Post(fmt::format("/api/v1/jobs/{}/ack", job), headers, body.dump(), "application/json");
  if (!res) {
    fmt::print(stderr, "stepwatch ack: agent {}: {}\n", base, httplib::to_string(res.error()));
    return 2;
  }
  json a = json::parse(res->body, nullptr, false);
  std::string err = a.is_object() ? a.value("error", "") : "";
  if (res->status == 200) {
    const json& inc = a.is_object() && a.contains("incident") ? a["incident"] : json();
    fmt::print("acked incident {} of job {} through the agent at {}\n",
               inc.is_object() ? text(inc.value("id", json())) : "?", job, base);
    return 0;
  }
  if (res->status == 404) {
    fmt::print("{}\n", err.empty() ? fmt::format("job {} has no open incident", job) : err);
    return 1;
  }
  fmt::print(stderr, "stepwatch ack: agent {}: HTTP {}{}\n", base, res->status,
             err.empty() ? "" : ": " + err);
  return 2;
}

}  // namespace stepwatch::cli
