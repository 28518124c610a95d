// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A real etcd for tests (/usr/bin/etcd, Debian etcd-server 3.4): one member on free loopback
// ports, its data in a fresh directory on /dev/shm (etcd 3.4 has no --unsafe-no-fsync), raft
// timers short enough that a 1 s lease TTL is allowed. Started with fork/exec; only its own pid
// is ever signalled, and it dies with the thread that started it (PR_SET_PDEATHSIG), so a
// crashed test leaves no etcd behind.
#pragma once

#include <sys/types.h>

#include <string>

namespace stepwatch::test {

inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";

// Whether /usr/bin/etcd is installed. Tests fail, never skip, without it: etcd is a declared
// dependency (scripts/setup-deps.sh); EtcdServer's constructor throws kEtcdMissing.
bool etcd_available();
inline constexpr const char* kEtcdMissing =
    "/usr/bin/etcd not found: install etcd-server (scripts/setup-deps.sh)";

class EtcdServer {
 public:
  // Starts etcd and waits until GET /health says true (at most 10 s); throws std::runtime_error
  // naming the cause and the tail of etcd's log otherwise. A port taken between choosing it and
  // etcd's bind is retried with new ports.
  EtcdServer();
  // Stops etcd and removes its directory.
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  std::string endpoint() const;  // "http://127.0.0.1:PORT"
  int port() const { return client_port_; }
  pid_t pid() const { return pid_; }  // 0 while stopped
  const std::string& dir() const { return dir_; }

  void kill();     // SIGKILL and reap: a crash
  void stop();     // SIGTERM and reap (SIGKILL after 5 s)
  void restart();  // stops it if running, then starts it on the same data and ports
  void wipe();     // SIGKILL, its data removed, then started empty on the same ports: data loss

  // Turns authentication on (user root with `password`, role root) and returns a token for it,
  // which the client sends as its Authorization header. Throws std::runtime_error on failure.
  std::string enable_auth(const std::string& password);

  // The last `bytes` of etcd's stdout and stderr.
  std::string log_tail(size_t bytes = 2000) const;

 private:
  void spawn();
  // "" once healthy; else why not (etcd exited, or the deadline passed).
  std::string wait_healthy();

  std::string dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace stepwatch::test
