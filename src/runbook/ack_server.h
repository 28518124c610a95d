// The supervisor's small HTTP endpoint: `stepwatch ack JOB` lands here. It knows nothing of the
// supervisor: what an ack does and what the status is come from callbacks the caller injects.
//
//   POST /ack      body optional: {"by": "name", "note": "..."}
//                  200 {"acked": true, "incident_id", "incident", "by", "message"}
//                  404 {"acked": false, "error"}   no incident is open
//                  400 malformed body · 401 bearer token missing or wrong · 405 other methods
//                  (the supervisor always sets a token: a fresh one per run, in a 0600 file)
//   GET /status    200 the status callback's JSON (the current verdict and incident)
//   GET /healthz   200 "ok"
// Errors are JSON objects {"error": "..."}. Bound to 127.0.0.1 unless configured otherwise.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "src/common/result.h"

namespace stepwatch::runbook {

struct AckRequest {
  std::string by;           // who acks; empty when the body names nobody
  std::string note;         // free text from the acker
  std::string remote_addr;  // the peer's IP address
};

struct AckOutcome {
  bool acked = false;  // false: no open incident (404)
  std::string incident_id;
  std::string incident_json;  // a JSON object describing the acked incident; empty: none
  std::string message;        // one human line: "incident 7 acked by alice; preempt held"
};

struct AckServerConfig {
  std::string host = "127.0.0.1";  // loopback by default: acks come from the same host
  int port = 0;                    // 0: an ephemeral port; see AckServer::port()
  std::string bearer_token;        // set: POST /ack needs "Authorization: Bearer <token>"
  int threads = 128;               // connections served at once (a thread each); more wait
  // Called for each valid POST /ack, from handler threads: must be thread-safe. Unset: 404.
  std::function<AckOutcome(const AckRequest&)> on_ack;
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

}  // namespace stepwatch::runbook
