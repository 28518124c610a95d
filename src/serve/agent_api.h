// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The agent's HTTP endpoints (docs/api.md lists every field; names are stable):
//   GET  /                          the dashboard (src/serve/dashboard.html, embedded at build)
//   GET  /api/v1/jobs               every job the agent watches (retired ones until they expire)
//   GET  /api/v1/jobs/{id}          the verdict, ranks with process and GPU facts, intervals,
//                                   and "node_fault" (suspect hosts, storm, incarnations)
//   GET  /api/v1/hosts              hosts implicated within the cross-job window, suspect or not
//   GET  /api/v1/incidents[?job=ID][&limit=N]   from the incident store, newest first
//   POST /api/v1/jobs/{id}/ack      body {"by", "note"}; Bearer token when one is configured
//                                   (the ack route of src/serve/ack_routes.h)
//   GET  /healthz                   the agent's own health
//   GET  /metrics                   only when ApiConfig::metrics is set (kMetricsContentType)
// Jobs and incidents are rendered by src/serve/json_views.h; what they are comes from a
// JobSource (the agent implements it), so serve/ never includes the agent.
// Errors are JSON objects {"error": "..."}: 404 unknown job or path, 401 missing/wrong token,
// 400 malformed body, 500 anything thrown inside a handler.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "src/common/result.h"

namespace stepwatch::serve {

class JobSource;

struct ApiConfig {
  std::string host = "127.0.0.1";  // from AgentConfig::listen_host
  int port = 9465;                 // 0: an ephemeral port; see ApiServer::port()
  std::string bearer_token;        // set: POST endpoints need "Authorization: Bearer <token>"
  int threads = 128;               // connections served at once (a thread each); more wait
  // Set: GET /metrics serves its text as serve::kMetricsContentType (Prometheus text 0.0.4).
  // Called from handler threads, so it must be thread-safe.
  std::function<std::string()> metrics;
};

class ApiServer {
 public:
  // `source` must outlive the server.
  ApiServer(JobSource& source, ApiConfig config);
  ~ApiServer();  // stop()
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and serves on a thread of its own; the port accepts connections on return.
  // Fails (kIo) naming the address when it cannot bind.
  Status start();
  // Stops accepting, waits for requests in flight, joins every thread. Idempotent.
  void stop();

  int port() const;             // the bound port; 0 before start()
  std::string address() const;  // "127.0.0.1:PORT" ("[::1]:PORT" for IPv6)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepwatch::serve
