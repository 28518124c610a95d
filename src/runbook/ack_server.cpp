// The only translation unit with cpp-httplib server code in the runbook (STYLE rule 11).
#include "src/runbook/ack_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>

#include "src/common/log.h"
#include "src/serve/http_server.h"

namespace stepwatch::runbook {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxBody = 16 * 1024;
constexpr size_t kMaxField = 1024;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body) + "\n", "application/json");
}

// Reads {"by": ..., "note": ...}; the message says what is wrong.
Result<AckRequest> parse_ack_body(const std::string& body) {
  AckRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return r;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const char* kShape =
      "the body must be empty or a JSON object {\"by\": \"name\", \"note\": \"text\"}";
  if (j.is_discarded() || !j.is_object()) return Error{Errc::kParse, kShape};
  for (const char* key : {"by", "note"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_string())
      return Error{Errc::kParse, fmt::format("\"{}\" must be a string", key)};
    std::string v = j[key].get<std::string>();
    if (v.size() > kMaxField) {
      return Error{Errc::kParse, fmt::format("\"{}\" is longer than {} bytes", key, kMaxField)};
    }
    (std::string_view(key) == "by" ? r.by : r.note) = std::move(v);
  }
  return r;
}

}  // namespace

struct AckServer::Impl {
  AckServerConfig config;
  serve::HttpListener listener{"ack server"};

  httplib::Server::Handler guarded(serve::Handler h) {
    return serve::guarded("ack server", std::move(h));
  }

  void handle_ack(const httplib::Request& req, httplib::Response& res) {
    // The bearer token, when configured, was checked before the body was read (HttpListener).
    auto parsed = parse_ack_body(req.body);
    if (!parsed) return serve::error_reply(res, 400, parsed.error().message);
    AckRequest ack = std::move(parsed.value());
    ack.remote_addr = req.remote_addr;
    AckOutcome out = config.on_ack ? config.on_ack(ack) : AckOutcome{};
    if (!out.acked) {
      return reply(res, 404,
                   {{"acked", false},
                    {"error", out.message.empty() ? "no open incident to ack" : out.message}});
    }
    json incident = nullptr;
    if (!out.incident_json.empty()) {
      incident = json::parse(out.incident_json, nullptr, /*allow_exceptions=*/false);
      if (incident.is_discarded()) incident = out.incident_json;  // sent as text rather than lost
    }
    log_info("ack server: incident {} acked by {} from {}", out.incident_id,
             ack.by.empty() ? "(unnamed)" : ack.by, ack.remote_addr);
    reply(res, 200,
          {{"acked", true},
           {"incident_id", out.incident_id},
           {"incident", incident},
           {"by", ack.by},
           {"message", out.message}});
  }

  void handle_status(const httplib::Request&, httplib::Response& res) {
    std::string body = config.status ? config.status() : std::string("{}");
    res.status = 200;
    res.set_content(body + "\n", "application/json");
  }

  void routes(httplib::Server& s) {
    s.Post("/ack", guarded([this](const auto& req, auto& res) { handle_ack(req, res); }));
    s.Get("/status", guarded([this](const auto& req, auto& res) { handle_status(req, res); }));
    s.Get("/healthz",
          guarded([](const auto&, auto& res) { res.set_content("ok\n", "text/plain"); }));
    serve::refuse_other_methods(s, "/ack", "POST", "ack server");
    for (const char* path : {"/status", "/healthz"})
      serve::refuse_other_methods(s, path, "GET", "ack server");
    s.set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
          if (res.body.empty()) {
            serve::error_reply(res, res.status,
                               res.status == 404 ? fmt::format("no such path {}", req.path)
                                                 : fmt::format("HTTP {}", res.status));
          }
          return httplib::Server::HandlerResponse::Handled;
        }));
  }
};

AckServer::AckServer(AckServerConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
}

AckServer::~AckServer() {
  stop();
}

Status AckServer::start() {
  auto server = std::make_unique<httplib::Server>();
  impl_->routes(*server);
  return impl_->listener.start(std::move(server), impl_->config.host, impl_->config.port,
                               impl_->config.threads, kMaxBody, impl_->config.bearer_token);
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
  return serve::format_address(impl_->config.host, port());
}

}  // namespace stepwatch::runbook
