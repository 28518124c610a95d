// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Where an accepted connection waits for its first byte. One thread watches every silent
// connection (epoll), so a silent one costs a descriptor rather than a worker, and a request is
// served at once however many silent connections are open: 1000 of them, each holding one of
// 128 workers for a second, once kept GET /healthz waiting 7 s (issue 26, E9).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "src/common/result.h"

namespace stepwatch::serve {

// How long a connection may stay silent, and how many silent ones one peer may hold.
struct SilenceLimits {
  // No byte by then: closed. A real client sends its request line as soon as it connects.
  std::chrono::milliseconds first_byte_timeout{1000};
  // One more silent connection from the same address closes that address's oldest: a fresh
  // connection is likelier a real client than one silent for a while, so a crowd of silent
  // connections from 127.0.0.1 cannot lock out a local health probe. Far above what one host
  // opens at once, far below the descriptor limit.
  size_t silent_per_peer = 256;
};

// The numeric address and port of a socket's peer (getpeername) or of its own end (getsockname),
// as httplib reports them ("127.0.0.1", "::1"); {"", 0} when unknown.
std::pair<std::string, int> socket_address(int fd, bool peer);

class FirstByteGate {
 public:
  using Ready = std::function<void(int fd)>;  // takes the connection over
  // Starts the watching thread; `name` is the server's, for errors and the log.
  static Result<std::unique_ptr<FirstByteGate>> open(SilenceLimits limits, Ready ready,
                                                     const std::string& name);
  ~FirstByteGate();
  FirstByteGate(const FirstByteGate&) = delete;
  FirstByteGate& operator=(const FirstByteGate&) = delete;

  // Takes over an accepted connection: to `ready` at once when a byte is already there, else
  // when one comes; closed when none comes in time, when its peer holds too many, or at stop().
  void admit(int fd);
  // Closes every silent connection, and any admitted later; returns once the thread is gone.
  void stop();
  // Readable from the moment stop() begins: a reader that polls it too gives up on a client
  // that has not finished its request, so stopping never waits on one.
  int stopping_fd() const { return wake_fd_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Silent {
    uint32_t id;  // tells this connection from a later one given the same descriptor
    std::string peer;
    Clock::time_point deadline;
    std::list<int>::iterator in_order, in_peer;
  };
  FirstByteGate(SilenceLimits limits, Ready ready, std::string name, int epoll_fd, int wake_fd);
  void run();
  // Gives a connection to `ready_`, or closes it when that fails (no thread to be had).
  void hand_over(int fd);
  // Drops `fd` from every record; the caller closes it or hands it on. Holds mu_.
  void forget(int fd);
  void close_silent(int fd);  // holds mu_
  // Closes the silent connections past their deadline; the wait until the next one, in ms.
  int expire();

  const SilenceLimits limits_;
  const Ready ready_;
  const std::string name_;
  const int epoll_fd_, wake_fd_;
  std::mutex mu_;
  bool stopping_ = false;
  uint32_t next_id_ = 0;
  std::unordered_map<int, Silent> silent_;
  std::list<int> order_;  // arrival order: the front's deadline comes first
  std::unordered_map<std::string, std::list<int>> by_peer_;  // each peer's, oldest first
  std::thread thread_;
};

}  // namespace stepwatch::serve
