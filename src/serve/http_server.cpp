// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/serve/http_server.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "src/common/host.h"
#include "src/common/log.h"
#include "src/serve/gated_server.h"
#include "src/serve/json_views.h"

namespace stepwatch::serve {

std::string format_address(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

namespace {

// "127.0.0.1:9465" -> "127.0.0.1", "[::1]:9465" -> "[::1]", "localhost" -> "localhost".
std::string host_of(const std::string& authority) {
  if (!authority.empty() && authority.front() == '[') {
    size_t end = authority.find(']');
    return end == std::string::npos ? authority : authority.substr(0, end + 1);
  }
  return authority.substr(0, authority.find(':'));
}

// Whether an Origin ("http://127.0.0.1:9465") is a page served from this machine's loopback.
// "null" (a sandboxed or file: page) and anything else is foreign.
bool loopback_origin(const std::string& origin) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (origin.rfind(scheme, 0) == 0)
      return is_loopback_literal(host_of(origin.substr(scheme.size())));
  }
  return false;
}

}  // namespace

void refuse_other_methods(httplib::Server& s, const std::string& pattern, const std::string& allow,
                          const std::string& name) {
  auto refuse = guarded(name, [allow](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", allow);
    error_reply(res, 405,
                fmt::format("{} is not allowed on {}; use {}", req.method, req.path, allow));
  });
  if (allow != "GET") s.Get(pattern, refuse);
  if (allow != "POST") s.Post(pattern, refuse);
  s.Put(pattern, refuse);
  s.Patch(pattern, refuse);
  s.Delete(pattern, refuse);
  s.Options(pattern, refuse);
}

bool bearer_ok(const httplib::Request& req, const std::string& token) {
  if (req.get_header_value_count("Authorization") != 1) return false;
  const std::string auth = req.get_header_value("Authorization");
  constexpr std::string_view kScheme = "bearer ";
  if (auth.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(auth[i])) != kScheme[i]) return false;
  }
  return same_secret(auth.substr(kScheme.size()), token);
}

void error_reply(httplib::Response& res, int status, const std::string& message) {
  json_reply(res, status, {{"error", message}});
}

void json_reply(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body) + "\n", "application/json");
}

void set_json_error_handler(httplib::Server& s) {
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (res.body.empty()) {
          error_reply(res, res.status,
                      res.status == 404 ? fmt::format("no such path {} {}", req.method, req.path)
                                        : fmt::format("HTTP {}", res.status));
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
}

httplib::Server::Handler guarded(const std::string& name, Handler h) {
  return [name, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    try {
      h(req, res);
    } catch (const std::exception& e) {
      log_error("{}: {} {} failed: {}", name, req.method, req.path, e.what());
      error_reply(res, 500, fmt::format("internal error: {}", e.what()));
    } catch (...) {
      log_error("{}: {} {} failed with a non-standard exception", name, req.method, req.path);
      error_reply(res, 500, "internal error");
    }
  };
}

Status HttpListener::start(const Routes& routes, const std::string& host, int port, int threads,
                           size_t max_body, std::string bearer_token, SilenceLimits limits) {
  std::lock_guard lock(mu_);
  if (server_)
    return Error{Errc::kInvalidArgument, fmt::format("{} already listening on {}", name_,
                                                     format_address(host, port_.load()))};
  auto made = make_gated_server(static_cast<size_t>(threads > 0 ? threads : 1), limits, name_);
  if (!made) return made.error();
  std::unique_ptr<httplib::Server> server = std::move(*made);
  httplib::Server& s = *server;
  routes(s);
  s.set_exception_handler(
      [name = name_](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        log_error("{}: {} {} failed inside the HTTP library", name, req.method, req.path);
        error_reply(res, 500, "internal error");
      });
  auto listening = std::make_shared<socket_t>(INVALID_SOCKET);
  s.set_socket_options([listening](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *listening = sock;
  });
  s.set_payload_max_length(max_body);
  bool loopback = is_loopback_host(host);
  s.set_pre_routing_handler([name = name_, token = std::move(bearer_token), loopback](
                                const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    std::string te = req.get_header_value("Transfer-Encoding");
    std::transform(te.begin(), te.end(), te.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (te.find("chunked") != std::string::npos) {
      error_reply(
          res, 411,
          fmt::format("{} {}: send the body with a Content-Length (chunked bodies are refused)",
                      req.method, req.path));
      return R::Handled;
    }
    // Served on loopback, a request must name a loopback host: a foreign Host is a page of
    // another site whose name was rebound to 127.0.0.1 (DNS rebinding), and a foreign Origin on
    // a request that changes something is another site's form or script (CSRF).
    bool reads = req.method == "GET" || req.method == "HEAD";
    if (loopback && req.has_header("Host") &&
        !is_loopback_literal(host_of(req.get_header_value("Host")))) {
      error_reply(res, 403,
                  fmt::format("Host \"{}\" is not this server's: it serves loopback only",
                              req.get_header_value("Host")));
      return R::Handled;
    }
    if (!reads && req.has_header("Origin") && !loopback_origin(req.get_header_value("Origin"))) {
      log_warn("{}: {} {} refused: Origin {}", name, req.method, req.path,
               req.get_header_value("Origin"));
      error_reply(res, 403,
                  fmt::format("{} {} from Origin \"{}\" is refused: not this server's page",
                              req.method, req.path, req.get_header_value("Origin")));
      return R::Handled;
    }
    if (!token.empty() && !reads && !bearer_ok(req, token)) {
      res.set_header("WWW-Authenticate", "Bearer realm=\"stepwatch\"");
      log_warn("{}: {} {} from {} without a valid bearer token", name, req.method, req.path,
               req.remote_addr);
      error_reply(
          res, 401,
          fmt::format("{} {} needs \"Authorization: Bearer <token>\"", req.method, req.path));
      return R::Handled;
    }
    return R::Unhandled;
  });
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);

  errno = 0;
  bool bound = port == 0 ? (port = s.bind_to_any_port(host)) > 0 : s.bind_to_port(host, port);
  if (!bound) {
    int e = errno;
    bool known = e == EADDRINUSE || e == EACCES || e == EADDRNOTAVAIL;
    return Error{
        Errc::kIo,
        fmt::format("{}: cannot listen on {}: {}", name_, format_address(host, port),
                    known ? std::strerror(e) : "bind failed (address in use or not available)")};
  }
  // httplib listens with a backlog of 5: a burst of connections (idle ones, a slowloris) then
  // overflows it and even a real client's handshake waits for SYN retransmits, seconds. Linux
  // takes a second listen() on a listening socket as a new backlog.
  if (*listening != INVALID_SOCKET) ::listen(*listening, SOMAXCONN);
  port_ = port;
  httplib::Server* raw = server.get();
  auto exited = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([raw, exited, name = name_, address = format_address(host, port)] {
    try {
      if (!raw->listen_after_bind()) log_warn("{} on {} stopped with an error", name, address);
    } catch (const std::exception& e) {
      log_error("{} on {}: {}", name, address, e.what());
    }
    exited->store(true);
  });
  while (!raw->is_running() && !exited->load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_ = std::move(server);
  log_info("{} listening on {}", name_, format_address(host, port));
  return {};
}

void HttpListener::stop() {
  std::lock_guard lock(mu_);
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();  // closes the silent connections, waits for the requests in flight
  port_ = 0;
}

bool HttpListener::running() const {
  std::lock_guard lock(mu_);
  return server_ != nullptr;
}

}  // namespace stepwatch::serve
