// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The agent's HTTP API (STYLE rule 11: httplib and nlohmann-json stay in the .cpp). Handlers read
// the JobSource's snapshots; nothing here polls anything.
#include "src/serve/agent_api.h"

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <charconv>
#include <cstddef>
#include <nlohmann/json.hpp>

#include "src/common/log.h"
#include "src/contract/names.h"
#include "src/probe/ports.h"
#include "src/serve/http_server.h"
#include "src/serve/job_source.h"
#include "src/serve/json_views.h"
#include "src/serve/metrics.h"

namespace stepwatch::serve {

using json = nlohmann::json;

// src/serve/dashboard.html, compiled in by src/serve/http.cmake (dashboard_html.cpp).
extern const unsigned char kDashboardHtml[];
extern const std::size_t kDashboardHtmlSize;

namespace {

constexpr size_t kMaxBody = 16 * 1024;
constexpr const char* kJobPattern = R"(/api/v1/jobs/([A-Za-z0-9._-]{1,63}))";

}  // namespace

struct ApiServer::Impl {
  JobSource* source = nullptr;
  ApiConfig config;
  HttpListener listener{"agent api"};

  static httplib::Server::Handler guarded(Handler h) {
    return serve::guarded("agent api", std::move(h));
  }

  void jobs(const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const auto& s : source->jobs()) list.push_back(job_summary_json(s));
    json_reply(res, 200, {{"jobs", list}});
  }

  void job(const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    auto s = source->job(id);
    if (!s) return error_reply(res, 404, fmt::format("no job {} on this agent", id));
    json j = job_detail_json(*s);
    if (auto nf = source->node_faults()) {
      auto it = nf->jobs.find(id);
      j["node_fault"] = node_fault_json(it != nf->jobs.end() ? it->second : JobNodeFault{});
    }
    json_reply(res, 200, j);
  }

  void hosts(const httplib::Request&, httplib::Response& res) {
    auto nf = source->node_faults();
    json_reply(res, 200, hosts_json(nf ? *nf : NodeFaultSnapshot{}));
  }

  void incidents(const httplib::Request& req, httplib::Response& res) {
    std::string job = req.has_param("job") ? req.get_param_value("job") : "";
    if (!job.empty()) {
      if (auto v = contract::validate_job_id(job); !v)
        return error_reply(res, 400, v.error().message);
    }
    int limit = 100;
    if (req.has_param("limit")) {
      std::string l = req.get_param_value("limit");
      auto [p, ec] = std::from_chars(l.data(), l.data() + l.size(), limit);
      if (ec != std::errc() || p != l.data() + l.size() || limit < 1) {
        return error_reply(res, 400,
                           fmt::format("limit must be a positive integer, got \"{}\"", l));
      }
    }
    auto list = source->incidents(job, limit);
    if (!list) return error_reply(res, 500, list.error().message);
    json out = json::array();
    for (const auto& i : *list) out.push_back(incident_json(i));
    json_reply(res, 200, {{"incidents", out}});
  }

  // Before an ack: the job must be known here; without a token (a loopback agent) an ack is
  // taken from the job directory's owner, root or the agent's own user, known by the uid of the
  // client's socket. Anyone else needs the token.
  std::optional<AckRefusal> may_ack(const AckRequest& a) const {
    auto job = source->job(a.job);
    if (!job) return AckRefusal{404, fmt::format("no job {} on this agent", a.job)};
    if (!config.bearer_token.empty()) return std::nullopt;
    auto peer = probe::connected_socket_uid(source->proc_root(), a.remote_addr, a.remote_port,
                                            a.local_addr, a.local_port);
    const uint32_t me = ::geteuid();
    if (peer && (*peer == 0 || *peer == me || (job->owner_uid && *peer == *job->owner_uid)))
      return std::nullopt;
    log_warn("agent api: ack of job {} from {}:{} (uid {}) refused: not the job's owner", a.job,
             a.remote_addr, a.remote_port, peer ? std::to_string(*peer) : "unknown");
    return AckRefusal{
        403, peer ? fmt::format("uid {} may not ack job {}: only its owner (uid {}) or root may, "
                                "or whoever holds the agent's token (token_file)",
                                *peer, a.job,
                                job->owner_uid ? std::to_string(*job->owner_uid) : "unknown")
                  : fmt::format("the owner of this connection ({}:{}) cannot be told: only the "
                                "job's owner or root may ack job {} without the agent's token",
                                a.remote_addr, a.remote_port, a.job)};
  }

  void ack(const httplib::Request& req, httplib::Response& res) {
    serve_ack(
        req, res, req.matches[1], [this](const AckRequest& a) { return may_ack(a); },
        [this](const AckRequest& a) { return source->ack(a.job, a.by, a.note); }, "agent api");
  }

  void healthz(const httplib::Request&, httplib::Response& res) {
    watch::AgentHealth h = source->health();
    json_reply(res, agent_failing(h) ? 503 : 200,
               agent_health_json(h, source->jobs().size(), source->last_poll_wall_ns()));
  }

  void routes(httplib::Server& s) {
    s.Get("/api/v1/jobs", guarded([this](const auto& req, auto& res) { jobs(req, res); }));
    s.Get(kJobPattern, guarded([this](const auto& req, auto& res) { job(req, res); }));
    s.Post(std::string(kJobPattern) + "/ack",
           guarded([this](const auto& req, auto& res) { ack(req, res); }));
    s.Get("/api/v1/hosts", guarded([this](const auto& req, auto& res) { hosts(req, res); }));
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
              res.set_content(config.metrics(), kMetricsContentType);
            }));
    }
    for (const char* path : {"/api/v1/jobs", kJobPattern, "/api/v1/hosts", "/api/v1/incidents",
                             "/healthz", "/", "/metrics"}) {
      refuse_other_methods(s, path, "GET", "agent api");
    }
    refuse_other_methods(s, std::string(kJobPattern) + "/ack", "POST", "agent api");
    set_json_error_handler(s);
  }
};

ApiServer::ApiServer(JobSource& source, ApiConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->source = &source;
  impl_->config = std::move(config);
}

ApiServer::~ApiServer() {
  stop();
}

Status ApiServer::start() {
  return impl_->listener.start([this](httplib::Server& s) { impl_->routes(s); }, impl_->config.host,
                               impl_->config.port, impl_->config.threads, kMaxBody,
                               impl_->config.bearer_token);
}

void ApiServer::stop() {
  impl_->listener.stop();
}
int ApiServer::port() const {
  return impl_->listener.port();
}
std::string ApiServer::address() const {
  return format_address(impl_->config.host, port());
}

}  // namespace stepwatch::serve
