// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/serve/gated_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

namespace stepwatch::serve {

namespace {

// One thread per connection that has sent its first byte, at most `max` at once; beyond that
// connections wait their turn. Silent connections wait in the FirstByteGate instead, so they
// hold no thread here. Threads hold the state through a shared_ptr: they outlive shutdown().
class ConnectionThreads {
 public:
  explicit ConnectionThreads(size_t max) : state_(std::make_shared<State>()) { state_->max = max; }
  void enqueue(std::function<void()> fn) {
    std::lock_guard lock(state_->mu);
    if (state_->active < state_->max) {
      // Counted once started: a thread that cannot be made must not keep shutdown() waiting.
      std::thread([s = state_, f = std::move(fn)]() mutable { work(s, std::move(f)); }).detach();
      ++state_->active;
    } else {
      state_->queue.push_back(std::move(fn));
    }
  }
  void shutdown() {
    std::unique_lock lock(state_->mu);
    state_->idle.wait(lock, [&] { return state_->active == 0 && state_->queue.empty(); });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable idle;
    std::deque<std::function<void()>> queue;
    size_t active = 0, max = 1;
  };
  static void work(const std::shared_ptr<State>& s, std::function<void()> f) {
    for (;;) {
      f();
      std::lock_guard lock(s->mu);
      if (s->queue.empty()) {
        --s->active;
        s->idle.notify_all();
        return;
      }
      f = std::move(s->queue.front());
      s->queue.pop_front();
    }
  }
  std::shared_ptr<State> state_;
};

// httplib's accept loop hands each connection to a TaskQueue; GatedServer's
// process_and_close_socket only passes it to the gate and returns, so it runs in place.
class InPlace final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// httplib's own socket stream is internal to the library. This one reads and writes a connected
// socket with the same timeouts and the same read-ahead (httplib reads a request byte by byte),
// never raises SIGPIPE, and gives up reading once the gate stops.
class SocketStream final : public httplib::Stream {
 public:
  SocketStream(int fd, int stopping_fd, int read_ms, int write_ms)
      : fd_(fd), stopping_fd_(stopping_fd), read_ms_(read_ms), write_ms_(write_ms) {}

  bool is_readable() const override {
    pollfd p[2] = {{fd_, POLLIN, 0}, {stopping_fd_, POLLIN, 0}};
    return poll_(p, 2, read_ms_) > 0 && p[1].revents == 0;
  }
  bool is_writable() const override {
    pollfd p{fd_, POLLOUT, 0};
    return poll_(&p, 1, write_ms_) > 0 && (p.revents & (POLLERR | POLLHUP)) == 0;
  }
  ssize_t read(char* ptr, size_t size) override {
    if (head_ == buffer_.size()) {
      if (!is_readable()) return -1;
      ssize_t n = retry([&] { return ::recv(fd_, buffer_.data(), kReadAhead, 0); });
      if (n <= 0) return n;
      buffer_.resize(static_cast<size_t>(n));
      head_ = 0;
    }
    size_t n = std::min(size, buffer_.size() - head_);
    std::memcpy(ptr, buffer_.data() + head_, n);
    head_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return retry([&] { return ::send(fd_, ptr, size, MSG_NOSIGNAL); });
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    std::tie(ip, port) = socket_address(fd_, true);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    std::tie(ip, port) = socket_address(fd_, false);
  }
  socket_t socket() const override { return fd_; }

 private:
  static constexpr size_t kReadAhead = 4096;
  template <class F>
  static ssize_t retry(F f) {
    ssize_t n;
    while ((n = f()) < 0 && errno == EINTR) {
    }
    return n;
  }
  static int poll_(pollfd* p, nfds_t n, int ms) {
    return static_cast<int>(retry([&] { return ::poll(p, n, ms); }));
  }
  int fd_, stopping_fd_, read_ms_, write_ms_;
  std::vector<char> buffer_ = std::vector<char>(kReadAhead);
  size_t head_ = kReadAhead;
};

// An httplib::Server whose connections wait for their first byte in a FirstByteGate, then are
// served one request each on ConnectionThreads. Overrides httplib's (virtual)
// process_and_close_socket, the one place where an accepted socket reaches the library.
class GatedServer final : public httplib::Server {
 public:
  explicit GatedServer(size_t threads) : workers_(threads) {
    new_task_queue = [] { return new InPlace; };
  }
  // Closes the silent connections at once and waits for the requests in flight.
  ~GatedServer() override {
    if (gate_) gate_->stop();
    workers_.shutdown();
  }
  Status open_gate(SilenceLimits limits, const std::string& name) {
    auto gate = FirstByteGate::open(
        limits, [this](int fd) { workers_.enqueue([this, fd] { serve(fd); }); }, name);
    if (!gate) return gate.error();
    gate_ = std::move(*gate);
    return {};
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    gate_->admit(sock);
    return true;
  }
  // One request, then the connection is closed; nothing is read once the server stopped.
  void serve(int fd) {
    if (svr_sock_ != INVALID_SOCKET) {
      SocketStream stream(fd, gate_->stopping_fd(),
                          milliseconds(read_timeout_sec_, read_timeout_usec_),
                          milliseconds(write_timeout_sec_, write_timeout_usec_));
      bool closed = false;
      process_request(stream, /*close_connection=*/true, closed, nullptr);
    }
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  }
  static int milliseconds(time_t sec, time_t usec) {
    return static_cast<int>(sec * 1000 + usec / 1000);
  }

  ConnectionThreads workers_;
  std::unique_ptr<FirstByteGate> gate_;
};

}  // namespace

Result<std::unique_ptr<httplib::Server>> make_gated_server(size_t threads, SilenceLimits limits,
                                                           const std::string& name) {
  auto server = std::make_unique<GatedServer>(threads);
  if (auto st = server->open_gate(limits, name); !st) return st.error();
  return std::unique_ptr<httplib::Server>(std::move(server));
}

}  // namespace stepwatch::serve
