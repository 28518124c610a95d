// The agent's HTTP API, and the only agent file that includes cpp-httplib and nlohmann-json
// (STYLE rule 11). Handlers read the agent's snapshots; nothing here polls anything.
#include "src/agent/api.h"

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>

#include "src/agent/agent.h"
#include "src/common/log.h"
#include "src/contract/names.h"
#include "src/detect/trace.h"
#include "src/probe/ports.h"
#include "src/runbook/pager.h"
#include "src/serve/http_server.h"

namespace stepwatch::agent {

using json = nlohmann::json;

// src/agent/dashboard.html, compiled in by src/agent/CMakeLists.txt (dashboard_html.cpp).
extern const unsigned char kDashboardHtml[];
extern const std::size_t kDashboardHtmlSize;

namespace {

constexpr size_t kMaxBody = 16 * 1024;
constexpr size_t kMaxField = 1024;
constexpr const char* kJobPattern = R"(/api/v1/jobs/([A-Za-z0-9._-]{1,63}))";

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body) + "\n", "application/json");
}

json seconds_or_null(int64_t ns) {
  return ns >= 0 ? json(static_cast<double>(ns) / 1e9) : json(nullptr);
}
json time_or_null(const std::optional<int64_t>& ns) {
  return ns ? json(runbook::rfc3339_utc(*ns)) : json(nullptr);
}

json job_summary(const serve::JobState& s) {
  const detect::Verdict& v = s.verdict;
  return {{"job_id", s.job},
          {"state", detect::state_name(v.state)},
          {"cause", detect::cause_name(v.cause)},
          {"owner", s.owner},
          {"class", s.job_class},
          {"host", s.host},
          {"last_step", v.last_step ? json(*v.last_step) : json(nullptr)},
          {"last_step_age_seconds", seconds_or_null(v.last_step_age_ns)},
          {"expected_interval_seconds",
           v.expected_interval_ns > 0 ? seconds_or_null(v.expected_interval_ns) : json(nullptr)},
          {"phase", v.phase},
          {"ranks", s.observation.ranks.size()},
          {"retired", s.retired},
          {"summary", v.summary}};
}

json job_detail(const serve::JobState& s) {
  json j = json::parse(detect::verdict_to_json(s.verdict, s.job));
  j["job_id"] = s.job;
  j["owner"] = s.owner;
  j["owner_uid"] = s.owner_uid ? json(*s.owner_uid) : json(nullptr);
  j["class"] = s.job_class;
  j["host"] = s.host;
  j["retired"] = s.retired;
  j["first_seen"] = runbook::rfc3339_utc(s.first_seen_wall_ns);
  j["last_poll"] =
      s.last_poll_wall_ns ? json(runbook::rfc3339_utc(s.last_poll_wall_ns)) : json(nullptr);
  j["incidents_total"] = s.incidents_total;
  j["actions_total"] = s.actions_total;
  json intervals = json::array();
  for (int64_t ns : s.recent_intervals_ns) intervals.push_back(static_cast<double>(ns) / 1e9);
  j["recent_intervals_seconds"] = intervals;
  // Each rank's verdict, beside what its beacon, its process and its GPU said.
  for (auto& rj : j["ranks"]) {
    int rank = rj.value("rank", -1);
    rj["beacon"] = nullptr;
    rj["process"] = nullptr;
    rj["gpu"] = nullptr;
    for (const auto& r : s.observation.ranks) {
      if (r.rank != rank) continue;
      rj["beacon"] = {
          {"source", contract::source_name(r.source)},
          {"status", contract::rank_status_name(r.status)},
          {"host", r.host},
          {"pid", r.pid},
          {"incarnation", r.incarnation},
          {"world_size", r.world_size},
          {"loss", r.loss && std::isfinite(*r.loss) ? json(*r.loss) : json(nullptr)},
          {"checkpoint", r.checkpoint ? json{{"id", r.checkpoint->id}, {"step", r.checkpoint->step}}
                                      : json(nullptr)}};
    }
    for (const auto& p : s.observation.procs) {
      if (p.rank != rank) continue;
      rj["process"] = {
          {"alive", p.alive},
          {"same_process", p.same_process},
          {"state", std::string(1, p.state)},
          {"threads_in_d", p.threads_in_d},
          {"cpu_seconds_delta", p.cpu_delta_ns ? json(*p.cpu_delta_ns / 1e9) : json(nullptr)},
          {"io_bytes_delta", p.io_delta_bytes ? json(*p.io_delta_bytes) : json(nullptr)},
          {"wchan", p.wchan}};
    }
    for (const auto& g : s.observation.gpus) {
      if (g.rank != rank) continue;
      rj["gpu"] = {{"sm_util_pct", g.sm_util_pct ? json(*g.sm_util_pct) : json(nullptr)},
                   {"power_w", g.power_w ? json(*g.power_w) : json(nullptr)},
                   {"mem_used_bytes", g.mem_used_bytes ? json(*g.mem_used_bytes) : json(nullptr)}};
    }
  }
  return j;
}

json incident_json(const store::Incident& i) {
  json verdict = nullptr;
  if (!i.verdict_json.empty()) {
    verdict = json::parse(i.verdict_json, nullptr, /*allow_exceptions=*/false);
    if (verdict.is_discarded()) verdict = nullptr;
  }
  return {{"id", i.id},
          {"job_id", i.job},
          {"incarnation", i.incarnation},
          {"status", std::string(i.status())},
          {"state", i.state},
          {"cause", i.cause},
          {"summary", i.summary},
          {"opened_at", runbook::rfc3339_utc(i.opened_at_ns)},
          {"paged_at", time_or_null(i.paged_at_ns)},
          {"page_result", i.page_result},
          {"acked_at", time_or_null(i.acked_at_ns)},
          {"acked_by", i.acked_by},
          {"ack_note", i.ack_note},
          {"closed_at", time_or_null(i.closed_at_ns)},
          {"resolution", i.resolution},
          {"verdict", verdict}};
}

}  // namespace

struct ApiServer::Impl {
  Agent* agent = nullptr;
  ApiConfig config;
  serve::HttpListener listener{"agent api"};

  httplib::Server::Handler guarded(serve::Handler h) {
    return serve::guarded("agent api", std::move(h));
  }

  void jobs(const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const auto& s : agent->jobs()) list.push_back(job_summary(s));
    reply(res, 200, {{"jobs", list}});
  }

  void job(const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    auto s = agent->job(id);
    if (!s) return serve::error_reply(res, 404, fmt::format("no job {} on this agent", id));
    reply(res, 200, job_detail(*s));
  }

  void incidents(const httplib::Request& req, httplib::Response& res) {
    std::string job = req.has_param("job") ? req.get_param_value("job") : "";
    if (!job.empty()) {
      if (auto v = contract::validate_job_id(job); !v)
        return serve::error_reply(res, 400, v.error().message);
    }
    int limit = 100;
    if (req.has_param("limit")) {
      std::string l = req.get_param_value("limit");
      auto [p, ec] = std::from_chars(l.data(), l.data() + l.size(), limit);
      if (ec != std::errc() || p != l.data() + l.size() || limit < 1) {
        return serve::error_reply(res, 400,
                                  fmt::format("limit must be a positive integer, got \"{}\"", l));
      }
    }
    auto list = agent->incidents(job, limit);
    if (!list) return serve::error_reply(res, 500, list.error().message);
    json out = json::array();
    for (const auto& i : *list) out.push_back(incident_json(i));
    reply(res, 200, {{"incidents", out}});
  }

  void ack(const httplib::Request& req, httplib::Response& res) {
    // The bearer token, when configured, was checked before the body was read (HttpListener).
    std::string id = req.matches[1];
    std::string by, note;
    if (req.body.find_first_not_of(" \t\r\n") != std::string::npos) {
      json j = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        return serve::error_reply(
            res, 400,
            "the body must be empty or a JSON object {\"by\": \"name\", \"note\": \"text\"}");
      }
      for (const char* key : {"by", "note"}) {
        if (!j.contains(key) || j[key].is_null()) continue;
        if (!j[key].is_string())
          return serve::error_reply(res, 400, fmt::format("\"{}\" must be a string", key));
        std::string v = j[key].get<std::string>();
        if (v.size() > kMaxField)
          return serve::error_reply(res, 400,
                                    fmt::format("\"{}\" is longer than {} bytes", key, kMaxField));
        (std::string_view(key) == "by" ? by : note) = std::move(v);
      }
    }
    auto job = agent->job(id);
    if (!job) return serve::error_reply(res, 404, fmt::format("no job {} on this agent", id));
    if (config.bearer_token.empty()) {
      // No token (a loopback agent): an ack is taken from the job directory's owner, root or the
      // agent's own user, known by the uid of the client's socket. Anyone else needs the token.
      auto peer =
          probe::connected_socket_uid(agent->config().proc_root, req.remote_addr, req.remote_port);
      const uint32_t me = ::geteuid();
      bool allowed =
          peer && (*peer == 0 || *peer == me || (job->owner_uid && *peer == *job->owner_uid));
      if (!allowed) {
        log_warn("agent api: ack of job {} from {}:{} (uid {}) refused: not the job's owner", id,
                 req.remote_addr, req.remote_port, peer ? std::to_string(*peer) : "unknown");
        return serve::error_reply(
            res, 403,
            peer ? fmt::format("uid {} may not ack job {}: only its owner (uid {}) or root may, or "
                               "whoever holds the "
                               "agent's token (token_file)",
                               *peer, id,
                               job->owner_uid ? std::to_string(*job->owner_uid) : "unknown")
                 : fmt::format("the owner of this connection ({}:{}) cannot be told: only the "
                               "job's owner or root "
                               "may ack job {} without the agent's token",
                               req.remote_addr, req.remote_port, id));
      }
    }
    if (by.empty()) by = fmt::format("api {}", req.remote_addr);
    auto r = agent->ack(id, by, note);
    if (!r) return serve::error_reply(res, 500, r.error().message);
    if (!*r)
      return reply(res, 404,
                   {{"acked", false}, {"error", fmt::format("job {} has no open incident", id)}});
    log_info("agent api: incident {} of job {} acked by {}", (*r)->id, id, by);
    reply(res, 200, {{"acked", true}, {"incident", incident_json(**r)}});
  }

  void healthz(const httplib::Request&, httplib::Response& res) {
    serve::AgentHealth h = agent->health();
    int64_t last = agent->last_poll_wall_ns();
    bool failing = h.consecutive_poll_failures >= serve::kPollFailuresUnhealthy;
    reply(res, failing ? 503 : 200,
          {{"status", failing ? "failing" : "ok"},
           {"consecutive_poll_failures", h.consecutive_poll_failures},
           {"job_poll_failures_total", h.job_poll_failures_total},
           {"polls_total", h.polls_total},
           {"jobs", agent->jobs().size()},
           {"last_poll", last ? json(runbook::rfc3339_utc(last)) : json(nullptr)},
           {"last_poll_duration_seconds", static_cast<double>(h.last_poll_duration_ns) / 1e9},
           {"beacons_read_total", h.beacons_read_total},
           {"read_errors_total", h.read_errors_total},
           {"started_at", runbook::rfc3339_utc(h.started_wall_ns)}});
  }

  void routes(httplib::Server& s) {
    s.Get("/api/v1/jobs", guarded([this](const auto& req, auto& res) { jobs(req, res); }));
    s.Get(kJobPattern, guarded([this](const auto& req, auto& res) { job(req, res); }));
    s.Post(std::string(kJobPattern) + "/ack",
           guarded([this](const auto& req, auto& res) { ack(req, res); }));
    s.Get("/api/v1/incidents",
          guarded([this](const auto& req, auto& res) { incidents(req, res); }));
    s.Get("/healthz", guarded([this](const auto& req, auto& res) { healthz(req, res); }));
    s.Get("/", guarded([](const auto&, auto& res) {
            res.set_header("Cache-Control", "no-cache");
            res.set_content(reinterpret_cast<const char*>(kDashboardHtml), kDashboardHtmlSize,
                            "text/html; charset=utf-8");
          }));
    if (config.metrics) {
      s.Get("/metrics", guarded([this](const auto&, auto& res) {
              res.set_content(config.metrics(), "text/plain; version=0.0.4");
            }));
    }
    for (const char* path :
         {"/api/v1/jobs", kJobPattern, "/api/v1/incidents", "/healthz", "/", "/metrics"}) {
      serve::refuse_other_methods(s, path, "GET", "agent api");
    }
    serve::refuse_other_methods(s, std::string(kJobPattern) + "/ack", "POST", "agent api");
    s.set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
          if (res.body.empty()) {
            serve::error_reply(res, res.status,
                               res.status == 404
                                   ? fmt::format("no such path {} {}", req.method, req.path)
                                   : fmt::format("HTTP {}", res.status));
          }
          return httplib::Server::HandlerResponse::Handled;
        }));
  }
};

ApiServer::ApiServer(Agent& agent, ApiConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->agent = &agent;
  impl_->config = std::move(config);
}

ApiServer::~ApiServer() {
  stop();
}

Status ApiServer::start() {
  auto server = std::make_unique<httplib::Server>();
  impl_->routes(*server);
  return impl_->listener.start(std::move(server), impl_->config.host, impl_->config.port,
                               impl_->config.threads, kMaxBody, impl_->config.bearer_token);
}

void ApiServer::stop() {
  impl_->listener.stop();
}
int ApiServer::port() const {
  return impl_->listener.port();
}
std::string ApiServer::address() const {
  return serve::format_address(impl_->config.host, port());
}

}  // namespace stepwatch::agent
