// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one ack handler (the agent's API and the supervisor's endpoint both serve it) and the
// supervisor's endpoint. httplib and nlohmann-json stay in this .cpp (STYLE rule 11).
#include "src/serve/ack_routes.h"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "src/common/log.h"
#include "src/serve/http_server.h"
#include "src/serve/json_views.h"

namespace stepwatch::serve {

namespace {
constexpr size_t kMaxBody = 16 * 1024;
constexpr const char* kJobAckPattern = R"(/api/v1/jobs/([A-Za-z0-9._-]{1,63})/ack)";
}  // namespace

void serve_ack(const httplib::Request& req, httplib::Response& res, const std::string& job,
               const AckGate& gate, const AckFn& ack, const std::string& name) {
  // The bearer token, when configured, was checked before the body was read (HttpListener).
  auto body = parse_ack_body(req.body);
  if (!body) return error_reply(res, 400, body.error().message);
  AckRequest a{job,
               std::move(body->by),
               std::move(body->note),
               req.remote_addr,
               req.remote_port,
               req.local_addr,
               req.local_port};
  if (gate) {
    if (auto refused = gate(a)) return error_reply(res, refused->status, refused->message);
  }
  if (a.by.empty()) a.by = fmt::format("api {}", req.remote_addr);
  AckResult r = ack ? ack(a) : AckResult(std::nullopt);
  if (!r) return error_reply(res, 500, r.error().message);
  if (!*r) return json_reply(res, 404, no_incident_json(job));
  log_info("{}: incident {} of job {} acked by {} from {}", name, (*r)->id, job, a.by,
           req.remote_addr);
  json_reply(res, 200, ack_reply_json(**r, a.by));
}

struct AckServer::Impl {
  AckServerConfig config;
  HttpListener listener{"ack server"};

  void ack_job(const httplib::Request& req, httplib::Response& res) {
    std::string id = req.matches[1];
    if (id != config.job)
      return error_reply(res, 404,
                         fmt::format("no job {} here (this endpoint acks {})", id,
                                     config.job.empty() ? "none" : config.job));
    serve_ack(req, res, config.job, {}, config.on_ack, "ack server");
  }

  void routes(httplib::Server& s) {
    s.Post("/ack", guarded("ack server", [this](const auto& req, auto& res) {
             serve_ack(req, res, config.job, {}, config.on_ack, "ack server");
           }));
    s.Post(kJobAckPattern,
           guarded("ack server", [this](const auto& req, auto& res) { ack_job(req, res); }));
    s.Get("/status", guarded("ack server", [this](const auto&, auto& res) {
            std::string body = config.status ? config.status() : std::string("{}");
            res.status = 200;
            res.set_content(body + "\n", "application/json");
          }));
    s.Get("/healthz", guarded("ack server", [](const auto&, auto& res) {
            res.set_content("ok\n", "text/plain");
          }));
    for (const char* path : {"/ack", kJobAckPattern})
      refuse_other_methods(s, path, "POST", "ack server");
    for (const char* path : {"/status", "/healthz"})
      refuse_other_methods(s, path, "GET", "ack server");
    set_json_error_handler(s);
  }
};

AckServer::AckServer(AckServerConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
}

AckServer::~AckServer() {
  stop();
}

Status AckServer::start() {
  return impl_->listener.start([this](httplib::Server& s) { impl_->routes(s); }, impl_->config.host,
                               impl_->config.port, impl_->config.threads, kMaxBody,
                               impl_->config.bearer_token);
}

void AckServer::stop() {
  impl_->listener.stop();
}
bool AckServer::running() const {
  return impl_->listener.running();
}
int AckServer::port() const {
  return impl_->listener.port();
}
std::string AckServer::address() const {
  return format_address(impl_->config.host, port());
}

}  // namespace stepwatch::serve
