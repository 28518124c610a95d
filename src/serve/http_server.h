// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The pieces every stepwatch HTTP endpoint shares (the supervisor's ack endpoint, the agent's
// API): a server on its own thread with the same socket and timeout settings, handlers that
// never let an exception out, JSON error replies, and a constant-time token comparison.
// Include only from the .cpp that serves (httplib is a heavy header, STYLE rule 11).
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <thread>

#include "src/common/result.h"
#include "src/serve/ack_routes.h"
#include "src/serve/first_byte_gate.h"

namespace stepwatch::serve {

// "127.0.0.1:9465", "[::1]:9465".
std::string format_address(const std::string& host, int port);

// Equal-time comparison, so a token cannot be guessed byte by byte from response times.
bool same_secret(const std::string& a, const std::string& b);

// Whether `req` carries exactly one "Authorization: Bearer <token>" header with this token
// (the scheme in any case, RFC 7235; compared in equal time).
bool bearer_ok(const httplib::Request& req, const std::string& token);

// {"error": message} with the status.
void error_reply(httplib::Response& res, int status, const std::string& message);
// `body` as one line of JSON (dump_json), with the status.
void json_reply(httplib::Response& res, int status, const nlohmann::json& body);

// Every error httplib answers itself (404 no such path, 400, 413...) as a JSON error.
void set_json_error_handler(httplib::Server& s);

// The one ack handler (src/serve/ack_routes.cpp), served by the agent's API and the
// supervisor's endpoint alike: parses the body (400), asks `gate` (its refusal), names an
// anonymous acker "api <peer>", calls `ack` (500 on error), and replies with the acked incident
// (200) or that `job` has none open (404). `name` is the server's, for the log.
void serve_ack(const httplib::Request& req, httplib::Response& res, const std::string& job,
               const AckGate& gate, const AckFn& ack, const std::string& name);

// Wraps a handler so that no exception leaves it: 500 with a JSON error, logged with `name`.
using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
httplib::Server::Handler guarded(const std::string& name, Handler h);

// Answers every method but `allow` ("GET" or "POST") on `pattern` with 405 and an Allow
// header: the wrong method on a known path is not a 404. Register after the real route.
void refuse_other_methods(httplib::Server& s, const std::string& pattern, const std::string& allow,
                          const std::string& name);

// Runs one httplib::Server on its own thread.
class HttpListener {
 public:
  explicit HttpListener(std::string name) : name_(std::move(name)) {}
  ~HttpListener() { stop(); }
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  using Routes = std::function<void(httplib::Server&)>;
  // Registers `routes` on a server with the shared settings (SO_REUSEADDR only: httplib's
  // SO_REUSEPORT would let a second process share the port; one request per connection; 5 s
  // read and write timeouts), binds host:port (0: any free port) and serves until stop().
  // Returns once the accept loop runs, because httplib's stop() does nothing before that.
  // A connection waits for its first byte in a FirstByteGate (`limits`: closed after 1 s of
  // silence, 256 silent ones per peer at most), holding no thread; then it is served on a
  // thread of its own, `threads` at most at once, the rest waiting. Before any body is read: a
  // chunked body is refused (411: every body here is a small JSON with a Content-Length, and
  // httplib would buffer a chunked one whole), and with a `bearer_token` every request but GET
  // and HEAD must carry it (401), so an unauthenticated client can neither send a body nor learn
  // how it would be validated. Served on loopback, a request whose Host is not a loopback
  // address is refused (403, DNS rebinding); any request but GET and HEAD with an Origin that is
  // not a loopback page is refused (403, CSRF).
  Status start(const Routes& routes, const std::string& host, int port, int threads,
               size_t max_body, std::string bearer_token = {}, SilenceLimits limits = {});
  // Closes silent connections and requests still being read at once; waits for the requests
  // being answered.
  void stop();
  bool running() const;
  int port() const { return port_.load(); }

 private:
  std::string name_;
  mutable std::mutex mu_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<int> port_{0};
};

}  // namespace stepwatch::serve
