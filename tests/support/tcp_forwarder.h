// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A TCP forwarder on 127.0.0.1 for partition tests: a client that reaches etcd through it loses
// etcd on cut() and finds it again on restore(), while other clients of the same etcd go on.
// One thread polls every socket; connections are forwarded both ways, half-closes included.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace stepwatch::test {

class TcpForwarder {
 public:
  enum class Cut {
    kReset,      // open connections closed, new ones closed once accepted: calls fail at once
    kBlackhole,  // open and new connections go silent (read, never answered): calls time out
  };

  // Listens on 127.0.0.1:0 and forwards to 127.0.0.1:target_port; throws std::runtime_error
  // when it cannot listen.
  explicit TcpForwarder(int target_port);
  ~TcpForwarder();  // stops the thread and closes every socket
  TcpForwarder(const TcpForwarder&) = delete;
  TcpForwarder& operator=(const TcpForwarder&) = delete;

  int port() const { return port_; }
  // Both return once the forwarding thread has acted on them.
  void cut(Cut how = Cut::kReset);
  void restore();  // forwards again; silent connections are closed, so clients reconnect

 private:
  enum class Mode { kForward, kReset, kBlackhole };
  void set_mode(Mode mode);
  void loop();

  int target_port_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: a mode change or stop

  std::mutex mu_;
  std::condition_variable cv_;
  Mode wanted_ = Mode::kForward;
  bool stopping_ = false;
  bool dead_ = false;  // the thread ended (stop, or poll failed)
  uint64_t requested_ = 0;
  uint64_t applied_ = 0;
  std::thread thread_;
};

}  // namespace stepwatch::test
