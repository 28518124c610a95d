// The only translation unit with cpp-httplib server code in the runbook (STYLE rule 11).
#include "src/runbook/ack_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "src/common/log.h"

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

void error_reply(httplib::Response& res, int status, const std::string& message) {
  reply(res, status, {{"error", message}});
}

// Equal-time comparison, so the token cannot be guessed byte by byte from response times.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

std::string format_address(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
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
  mutable std::mutex mu;  // start/stop
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  std::atomic<int> port{0};

  // Every handler goes through here: no exception leaves it (STYLE rule 4).
  httplib::Server::Handler guarded(
      std::function<void(const httplib::Request&, httplib::Response&)> h) {
    return [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
      try {
        h(req, res);
      } catch (const std::exception& e) {
        log_error("ack server: {} {} failed: {}", req.method, req.path, e.what());
        error_reply(res, 500, fmt::format("internal error: {}", e.what()));
      } catch (...) {
        log_error("ack server: {} {} failed with a non-standard exception", req.method, req.path);
        error_reply(res, 500, "internal error");
      }
    };
  }

  void handle_ack(const httplib::Request& req, httplib::Response& res) {
    if (!config.bearer_token.empty()) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string kPrefix = "Bearer ";
      if (auth.compare(0, kPrefix.size(), kPrefix) != 0 ||
          !same_secret(auth.substr(kPrefix.size()), config.bearer_token)) {
        res.set_header("WWW-Authenticate", "Bearer realm=\"stepwatch\"");
        log_warn("ack server: POST /ack from {} without a valid bearer token", req.remote_addr);
        return error_reply(res, 401, "POST /ack needs \"Authorization: Bearer <token>\"");
      }
    }
    auto parsed = parse_ack_body(req.body);
    if (!parsed) return error_reply(res, 400, parsed.error().message);
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
    // The wrong method on a known path is 405 with Allow, not httplib's default 404.
    auto not_allowed = [this](const char* allow) {
      return guarded([allow](const httplib::Request& req, httplib::Response& res) {
        res.set_header("Allow", allow);
        error_reply(res, 405,
                    fmt::format("{} is not allowed on {}; use {}", req.method, req.path, allow));
      });
    };
    s.Get("/ack", not_allowed("POST"));
    for (const char* path : {"/ack", "/status", "/healthz"}) {
      const char* allow = std::string_view(path) == "/ack" ? "POST" : "GET";
      if (std::string_view(allow) != "POST") s.Post(path, not_allowed(allow));
      s.Put(path, not_allowed(allow));
      s.Patch(path, not_allowed(allow));
      s.Delete(path, not_allowed(allow));
      s.Options(path, not_allowed(allow));
    }
    s.set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
          if (res.body.empty()) {
            error_reply(res, res.status,
                        res.status == 404 ? fmt::format("no such path {}", req.path)
                                          : fmt::format("HTTP {}", res.status));
          }
          return httplib::Server::HandlerResponse::Handled;
        }));
    s.set_exception_handler(
        [](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
          log_error("ack server: {} {} failed inside the HTTP library", req.method, req.path);
          error_reply(res, 500, "internal error");
        });
    // httplib's default also sets SO_REUSEPORT, which lets a second supervisor bind the same
    // port and silently take half of the acks; SO_REUSEADDR alone only allows a quick restart.
    s.set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    s.set_payload_max_length(kMaxBody);
    // One request per connection and a short idle wait: stop() never waits on an idle client.
    s.set_keep_alive_max_count(1);
    s.set_keep_alive_timeout(1);
    s.set_read_timeout(5, 0);
    s.set_write_timeout(5, 0);
    int threads = config.threads > 0 ? config.threads : 1;
    s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  }
};

AckServer::AckServer(AckServerConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
}

AckServer::~AckServer() {
  stop();
}

Status AckServer::start() {
  Impl& d = *impl_;
  std::lock_guard lock(d.mu);
  if (d.server)
    return Error{Errc::kInvalidArgument,
                 fmt::format("ack server already listening on {}", address())};
  auto server = std::make_unique<httplib::Server>();
  d.routes(*server);
  const std::string& host = d.config.host;
  errno = 0;
  int port = d.config.port;
  bool bound =
      port == 0 ? (port = server->bind_to_any_port(host)) > 0 : server->bind_to_port(host, port);
  if (!bound) {
    int e = errno;
    bool known = e == EADDRINUSE || e == EACCES || e == EADDRNOTAVAIL;
    return Error{
        Errc::kIo,
        fmt::format("ack server: cannot listen on {}: {}", format_address(host, d.config.port),
                    known ? std::strerror(e) : "bind failed (address in use or not available)")};
  }
  d.port = port;
  httplib::Server* s = server.get();
  auto exited = std::make_shared<std::atomic<bool>>(false);
  d.thread = std::thread([s, exited, address = format_address(host, port)] {
    try {
      if (!s->listen_after_bind()) log_warn("ack server on {} stopped with an error", address);
    } catch (const std::exception& e) {
      log_error("ack server on {}: {}", address, e.what());
    }
    exited->store(true);
  });
  // httplib's stop() is a no-op until the accept loop has begun, so a stop() right after start()
  // would leave the thread listening forever: wait for the loop (connections queue meanwhile).
  while (!s->is_running() && !exited->load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  d.server = std::move(server);
  log_info("ack server listening on {}", format_address(host, port));
  return {};
}

void AckServer::stop() {
  Impl& d = *impl_;
  std::lock_guard lock(d.mu);
  if (!d.server) return;
  d.server->stop();
  if (d.thread.joinable()) d.thread.join();  // listen_after_bind drains its workers first
  d.server.reset();
  d.port = 0;
}

bool AckServer::running() const {
  std::lock_guard lock(impl_->mu);
  return impl_->server != nullptr;
}

int AckServer::port() const {
  return impl_->port.load();
}

std::string AckServer::address() const {
  return format_address(impl_->config.host, port());
}

}  // namespace stepwatch::runbook
