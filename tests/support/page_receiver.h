// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A real HTTP page receiver for tests: a webhook (POST /hook) and Alertmanager's v2 alerts
// route (POST /api/v2/alerts) on 127.0.0.1, port 0; it keeps every body it gets, in order.
#pragma once

#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace stepwatch::test {

// A port nothing listens on: bound, then closed.
inline int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A webhook receiver: counts the pages it gets.
class Receiver {
 public:
  Receiver() {
    auto take = [this](const httplib::Request& req, httplib::Response& res) {
      if (int ms = delay_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      std::lock_guard lock(mu_);
      bodies_.push_back(req.body);
      res.set_content("{}", "application/json");
    };
    server_.Post("/hook", take);
    server_.Post("/api/v2/alerts", take);  // as Alertmanager's v2 API
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}/hook", port_); }
  std::string base() const { return fmt::format("http://127.0.0.1:{}", port_); }
  size_t count() {
    std::lock_guard lock(mu_);
    return bodies_.size();
  }
  std::string body(size_t i) {
    std::lock_guard lock(mu_);
    return bodies_.at(i);
  }
  bool wait_for(size_t n) {
    for (int i = 0; i < 500 && count() < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return count() >= n;
  }
  std::atomic<int> delay_ms{0};  // a slow webhook answers after this long

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
};

}  // namespace stepwatch::test
