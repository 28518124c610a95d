// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/serve/first_byte_gate.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include "src/common/log.h"

namespace stepwatch::serve {

namespace {

constexpr uint64_t kWakeKey = ~uint64_t{0};

// An epoll key: the descriptor and the id of the connection that had it when it was added.
uint64_t key_of(int fd, uint32_t id) {
  return (uint64_t{id} << 32) | static_cast<uint32_t>(fd);
}

void close_connection(int fd) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

}  // namespace

std::pair<std::string, int> socket_address(int fd, bool peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len)) != 0) return {"", 0};
  int port = 0;
  if (addr.ss_family == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  else if (addr.ss_family == AF_INET6)
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  else
    return {"", 0};
  std::array<char, NI_MAXHOST> host{};
  if (::getnameinfo(sa, len, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) != 0)
    return {"", 0};
  return {host.data(), port};
}

Result<std::unique_ptr<FirstByteGate>> FirstByteGate::open(SilenceLimits limits, Ready ready,
                                                           const std::string& name) {
  int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  int wake_fd = epoll_fd < 0 ? -1 : ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeKey;
  if (wake_fd < 0 || ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
    int e = errno;
    if (wake_fd >= 0) ::close(wake_fd);
    if (epoll_fd >= 0) ::close(epoll_fd);
    return Error{Errc::kIo,
                 fmt::format("{}: cannot watch connections (epoll): {}", name, std::strerror(e))};
  }
  std::unique_ptr<FirstByteGate> gate(
      new FirstByteGate(limits, std::move(ready), name, epoll_fd, wake_fd));
  gate->thread_ = std::thread([g = gate.get()] { g->run(); });
  return gate;
}

FirstByteGate::FirstByteGate(SilenceLimits limits, Ready ready, std::string name, int epoll_fd,
                             int wake_fd)
    : limits_(limits),
      ready_(std::move(ready)),
      name_(std::move(name)),
      epoll_fd_(epoll_fd),
      wake_fd_(wake_fd) {}

FirstByteGate::~FirstByteGate() {
  stop();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void FirstByteGate::admit(int fd) {
  // The usual case: a real client's request is there by the time it is accepted.
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0) return hand_over(fd);
  std::string peer = socket_address(fd, true).first;
  std::unique_lock lock(mu_);
  if (stopping_ || peer.empty()) {  // stopping, or the peer already gone
    lock.unlock();
    return close_connection(fd);
  }
  if (auto held = by_peer_.find(peer);
      held != by_peer_.end() && held->second.size() >= std::max<size_t>(limits_.silent_per_peer, 1))
    close_silent(held->second.front());
  uint32_t id = next_id_++;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = key_of(fd, id);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    lock.unlock();
    return close_connection(fd);
  }
  std::list<int>& mine = by_peer_[peer];
  mine.push_back(fd);
  order_.push_back(fd);
  silent_[fd] = Silent{id, std::move(peer), Clock::now() + limits_.first_byte_timeout,
                       std::prev(order_.end()), std::prev(mine.end())};
}

void FirstByteGate::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  while (!order_.empty()) close_silent(order_.front());
}

void FirstByteGate::run() {
  std::vector<epoll_event> events(256);
  std::vector<int> ready;
  for (;;) {
    int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), expire());
    std::unique_lock lock(mu_);
    if (stopping_) return;
    for (int i = 0; i < n; ++i) {
      uint64_t key = events[i].data.u64;
      int fd = static_cast<int>(key & 0xffff'ffffu);
      auto it = silent_.find(fd);
      // The wake event, or a connection closed since (over its peer's cap), whose descriptor
      // may already belong to another.
      if (key == kWakeKey || it == silent_.end() || it->second.id != key >> 32) continue;
      forget(fd);
      ready.push_back(fd);
    }
    lock.unlock();
    for (int fd : ready) hand_over(fd);
    ready.clear();
  }
}

int FirstByteGate::expire() {
  std::lock_guard lock(mu_);
  auto now = Clock::now();
  while (!order_.empty() && silent_.at(order_.front()).deadline <= now)
    close_silent(order_.front());
  // With nothing silent, one timeout is soon enough: a connection admitted meanwhile is due
  // no earlier than that.
  auto next =
      order_.empty() ? now + limits_.first_byte_timeout : silent_.at(order_.front()).deadline;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next - now).count());
}

void FirstByteGate::hand_over(int fd) {
  try {
    ready_(fd);
  } catch (const std::exception& e) {  // no thread to be had: this connection goes unserved
    log_warn("{}: connection closed unanswered: {}", name_, e.what());
    close_connection(fd);
  }
}

void FirstByteGate::forget(int fd) {
  auto it = silent_.find(fd);
  if (it == silent_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  order_.erase(it->second.in_order);
  auto peer = by_peer_.find(it->second.peer);
  peer->second.erase(it->second.in_peer);
  if (peer->second.empty()) by_peer_.erase(peer);
  silent_.erase(it);
}

void FirstByteGate::close_silent(int fd) {
  forget(fd);
  close_connection(fd);
}

}  // namespace stepwatch::serve
