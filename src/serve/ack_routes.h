// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The ack route, one request and one reply wherever it is served, and the supervisor's small
// HTTP endpoint that serves it (`stepwatch run`). The endpoint knows nothing of the supervisor:
// what an ack does and what the status is come from callbacks the caller injects.
//
//   POST /ack                     the job this endpoint serves (AckServerConfig::job)
//   POST /api/v1/jobs/{id}/ack    the same, as on the agent's API; another id is 404
//                  body optional: {"by": "name", "note": "..."}; "by" defaults to "api <peer>"
//                  200 {"acked": true, "incident": {...}, "incident_id", "by", "message"}
//                  404 {"acked": false, "error": "job J has no open incident"}
//                  400 malformed body · 401 bearer token missing or wrong · 405 other methods
//                  (the supervisor always sets a token: a fresh one per run, in a 0600 file)
//   GET /status    200 the status callback's JSON (the current verdict and incident)
//   GET /healthz   200 "ok"
// The incident is serve::incident_json (src/serve/json_views.h). Errors are JSON objects
// {"error": "..."}. Bound to 127.0.0.1 unless configured otherwise.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "src/common/result.h"
#include "src/store/records.h"

namespace stepwatch::serve {

// One ack, as the route read it.
struct AckRequest {
  std::string job;          // the job whose open incident is acked
  std::string by;           // who acks; "api <peer address>" when the body names nobody
  std::string note;         // free text from the acker
  std::string remote_addr;  // the peer's IP address
  int remote_port = 0;
  std::string local_addr;  // this server's end of the connection
  int local_port = 0;
};

// The acked incident; nullopt when the job has no open incident (404). An error is a 500.
using AckResult = Result<std::optional<store::Incident>>;
using AckFn = std::function<AckResult(const AckRequest&)>;

// A refusal before anything is acked (404 unknown job, 403 not the job's owner).
struct AckRefusal {
  int status = 403;
  std::string message;
};
// Called before the ack with `by` as the body gave it; nullopt lets the ack through.
using AckGate = std::function<std::optional<AckRefusal>(const AckRequest&)>;

struct AckServerConfig {
  std::string host = "127.0.0.1";  // loopback by default: acks come from the same host
  int port = 0;                    // 0: an ephemeral port; see AckServer::port()
  std::string bearer_token;        // set: POST needs "Authorization: Bearer <token>"
  int threads = 128;               // connections served at once (a thread each); more wait
  std::string job;                 // the job this endpoint acks
  // Called for each valid ack, from handler threads: must be thread-safe. Unset: 404.
  AckFn on_ack;
  // GET /status: a JSON object's text. Called from handler threads. Unset: "{}".
  std::function<std::string()> status;
};

class AckServer {
 public:
  explicit AckServer(AckServerConfig config);
  ~AckServer();  // stop()
  AckServer(const AckServer&) = delete;
  AckServer& operator=(const AckServer&) = delete;

  // Binds and starts serving on a thread of its own; the port accepts connections on return.
  // Fails (kIo) naming the address when it cannot bind, e.g. the port is in use.
  Status start();
  // Stops accepting, waits for requests in flight and joins every thread. No callback runs
  // after it returns. Idempotent; start() may be called again afterwards. Never call it from
  // inside a callback (it would wait for itself).
  void stop();

  bool running() const;
  int port() const;             // the bound port; 0 before start()
  std::string address() const;  // "127.0.0.1:PORT" ("[::1]:PORT" for IPv6)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepwatch::serve
