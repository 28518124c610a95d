// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The forwarder's one thread: poll() over the listener, an eventfd for mode changes and both
// sockets of every connection; see tcp_forwarder.h.
#include "tests/support/tcp_forwarder.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <list>
#include <stdexcept>
#include <string>
#include <vector>

namespace stepwatch::test {

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// A blocking connect (on loopback it is answered at once), then non-blocking; -1 when refused.
int connect_target(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// One forwarded connection. Direction d reads fd[d] into buf[d] and writes it to fd[1 - d]; a
// direction reads again only once its buffer is written, so neither side can outrun the other.
struct Conn {
  int fd[2] = {-1, -1};  // 0: the client's, 1: the target's
  std::string buf[2];
  bool eof[2] = {false, false};
  bool broken = false;

  bool done() const { return broken || (eof[0] && eof[1] && buf[0].empty() && buf[1].empty()); }
  void close_all() {
    for (int& f : fd) {
      if (f >= 0) ::close(f);
      f = -1;
    }
  }

  // fd[s] reported `revents`: read from it, write to it what the other side sent.
  void pump(int s, short revents) {
    if ((revents & (POLLIN | POLLHUP | POLLERR)) && !eof[s] && buf[s].empty()) {
      char chunk[65536];
      ssize_t n = ::recv(fd[s], chunk, sizeof chunk, 0);
      if (n > 0) {
        buf[s].assign(chunk, static_cast<size_t>(n));
      } else if (n == 0) {
        eof[s] = true;
        ::shutdown(fd[1 - s], SHUT_WR);  // the half-close travels on
      } else if (errno != EAGAIN && errno != EINTR) {
        broken = true;
      }
    }
    if ((revents & (POLLOUT | POLLHUP | POLLERR)) && !buf[1 - s].empty()) {
      ssize_t n = ::send(fd[s], buf[1 - s].data(), buf[1 - s].size(), MSG_NOSIGNAL);
      if (n > 0) {
        buf[1 - s].erase(0, static_cast<size_t>(n));
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        broken = true;
      }
    }
    // A reset, or a socket shut both ways with nothing left to read: poll would report it again
    // and again, so the connection ends here.
    if ((revents & (POLLERR | POLLNVAL)) || ((revents & POLLHUP) && !(revents & POLLIN))) {
      broken = true;
    }
  }
};

}  // namespace

TcpForwarder::TcpForwarder(int target_port) : target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw std::runtime_error("TcpForwarder: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(addr.sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    ::close(listen_fd_);
    throw std::runtime_error("TcpForwarder: eventfd failed");
  }
  thread_ = std::thread([this] { loop(); });
}

TcpForwarder::~TcpForwarder() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void TcpForwarder::cut(Cut how) {
  set_mode(how == Cut::kReset ? Mode::kReset : Mode::kBlackhole);
}

void TcpForwarder::restore() {
  set_mode(Mode::kForward);
}

void TcpForwarder::set_mode(Mode mode) {
  std::unique_lock lock(mu_);
  wanted_ = mode;
  const uint64_t gen = ++requested_;
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  cv_.wait(lock, [&] { return applied_ >= gen || dead_; });
}

void TcpForwarder::loop() {
  std::list<Conn> conns;
  std::vector<int> silent;  // blackholed clients: read and dropped, never answered
  Mode mode = Mode::kForward;
  auto close_silent = [&] {
    for (int fd : silent) ::close(fd);
    silent.clear();
  };
  while (true) {
    std::vector<pollfd> pfds = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Conn& c : conns) {
      for (int s = 0; s < 2; ++s) {
        short events = 0;
        if (!c.eof[s] && c.buf[s].empty()) events |= POLLIN;
        if (!c.buf[1 - s].empty()) events |= POLLOUT;
        pfds.push_back({c.fd[s], events, 0});
      }
    }
    for (int fd : silent) pfds.push_back({fd, POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }

    size_t k = 2;
    for (Conn& c : conns) {
      for (int s = 0; s < 2; ++s) c.pump(s, pfds[k++].revents);
    }
    for (int& fd : silent) {
      if (pfds[k++].revents == 0) continue;
      char chunk[4096];
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        ::close(fd);
        fd = -1;
      }
    }
    std::erase(silent, -1);
    conns.remove_if([](Conn& c) {
      if (c.done()) c.close_all();
      return c.fd[0] < 0;
    });

    if (pfds[1].revents & POLLIN) {
      while (true) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (mode == Mode::kBlackhole) {
          silent.push_back(fd);
          continue;
        }
        int target = mode == Mode::kForward ? connect_target(target_port_) : -1;
        if (target < 0) {
          ::close(fd);  // cut, or the target is down: the client sees the connection end
          continue;
        }
        Conn c;
        c.fd[0] = fd;
        c.fd[1] = target;
        conns.push_back(std::move(c));
      }
    }

    if (pfds[0].revents & POLLIN) {
      uint64_t count = 0;
      (void)!::read(wake_fd_, &count, sizeof count);
      uint64_t gen = 0;
      {
        std::lock_guard lock(mu_);
        if (stopping_) break;
        mode = wanted_;
        gen = requested_;
      }
      if (mode != Mode::kBlackhole) close_silent();
      if (mode != Mode::kForward) {
        for (Conn& c : conns) {
          if (mode == Mode::kBlackhole) std::swap(c.fd[0], silent.emplace_back(-1));
          c.close_all();
        }
        conns.clear();
      }
      {
        std::lock_guard lock(mu_);
        applied_ = gen;
      }
      cv_.notify_all();
    }
  }
  for (Conn& c : conns) c.close_all();
  close_silent();
  {
    std::lock_guard lock(mu_);
    dead_ = true;
  }
  cv_.notify_all();
}

}  // namespace stepwatch::test
