// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Starts and stops a real etcd; see etcd_server.h. cpp-httplib only for /health and the auth
// set-up: the client under test (src/coord) is not used to decide whether etcd is up.
#include "tests/support/etcd_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

extern char** environ;

namespace stepwatch::test {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kHealthDeadline = std::chrono::seconds(10);
constexpr auto kStopDeadline = std::chrono::seconds(5);
constexpr int kPortAttempts = 5;

// Two distinct free loopback ports: both sockets are bound before either is closed.
std::pair<int, int> free_ports() {
  int fds[2] = {-1, -1};
  int ports[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot bind a free loopback port for etcd");
    }
    ports[i] = ntohs(addr.sin_port);
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return {ports[0], ports[1]};
}

// Waits for `pid` until the deadline; true when it was reaped.
bool reap(pid_t pid, std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

bool etcd_available() {
  return ::access(kEtcdBinary, X_OK) == 0;
}

EtcdServer::EtcdServer() {
  if (!etcd_available()) throw std::runtime_error(kEtcdMissing);
  std::error_code ec;
  fs::path base =
      fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
  std::string tmpl = (base / "stepwatch-etcd-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  dir_ = tmpl;
  std::string why;
  for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
    std::tie(client_port_, peer_port_) = free_ports();
    spawn();
    why = wait_healthy();
    if (why.empty()) return;
    const std::string log = log_tail();
    stop();
    // Another process took a port between free_ports() and etcd's bind: new ports, new data.
    if (log.find("address already in use") == std::string::npos) break;
    fs::remove_all(fs::path(dir_) / "data", ec);
    fs::remove(fs::path(dir_) / "log", ec);
  }
  std::string message =
      fmt::format("etcd on {}: {}; its log ends:\n{}", endpoint(), why, log_tail());
  fs::remove_all(dir_, ec);
  throw std::runtime_error(message);
}

EtcdServer::~EtcdServer() {
  stop();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string EtcdServer::endpoint() const {
  return fmt::format("http://127.0.0.1:{}", client_port_);
}

void EtcdServer::spawn() {
  const std::string client = endpoint();
  const std::string peer = fmt::format("http://127.0.0.1:{}", peer_port_);
  std::vector<std::string> args = {kEtcdBinary,
                                   "--name=t",
                                   "--data-dir=" + dir_ + "/data",
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer,
                                   "--initial-advertise-peer-urls=" + peer,
                                   "--initial-cluster=t=" + peer,
                                   "--heartbeat-interval=10",
                                   "--election-timeout=100",
                                   "--log-level=error"};
  // ETCD_* variables would be taken as flags (and a duplicate of a flag refused).
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).rfind("ETCD_", 0) != 0) env.emplace_back(*e);
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  for (auto& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const std::string log = dir_ + "/log";
  const pid_t parent = ::getpid();

  // Only async-signal-safe calls between fork and exec (the test process has threads).
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed for etcd");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || in < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    // No test socket may live on in etcd (a forwarder's cut must really close its connections).
    ::close_range(3, ~0u, 0);
    ::execve(kEtcdBinary, argv.data(), envp.data());
    ::_exit(127);
  }
  pid_ = pid;
}

std::string EtcdServer::wait_healthy() {
  const auto deadline = Clock::now() + kHealthDeadline;
  httplib::Client cli(endpoint());
  cli.set_connection_timeout(std::chrono::milliseconds(200));
  cli.set_read_timeout(std::chrono::milliseconds(500));
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return WIFEXITED(status) ? fmt::format("etcd exited with status {}", WEXITSTATUS(status))
                               : fmt::format("etcd died of signal {}", WTERMSIG(status));
    }
    auto res = cli.Get("/health");
    if (res && res->status == 200 && res->body.find("\"health\":\"true\"") != std::string::npos) {
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return fmt::format("GET /health not true within {} s", kHealthDeadline.count());
}

void EtcdServer::kill() {
  if (pid_ == 0) return;
  ::kill(pid_, SIGKILL);
  reap(pid_, std::chrono::milliseconds(kStopDeadline));
  pid_ = 0;
}

void EtcdServer::stop() {
  if (pid_ == 0) return;
  ::kill(pid_, SIGTERM);
  if (!reap(pid_, std::chrono::milliseconds(kStopDeadline))) {
    ::kill(pid_, SIGKILL);
    reap(pid_, std::chrono::milliseconds(kStopDeadline));
  }
  pid_ = 0;
}

void EtcdServer::restart() {
  stop();
  spawn();
  if (std::string why = wait_healthy(); !why.empty()) {
    throw std::runtime_error(
        fmt::format("etcd restart on {}: {}; its log ends:\n{}", endpoint(), why, log_tail()));
  }
}

void EtcdServer::wipe() {
  kill();
  std::error_code ec;
  fs::remove_all(fs::path(dir_) / "data", ec);
  spawn();
  if (std::string why = wait_healthy(); !why.empty()) {
    throw std::runtime_error(fmt::format("etcd restart (empty) on {}: {}; its log ends:\n{}",
                                         endpoint(), why, log_tail()));
  }
}

std::string EtcdServer::enable_auth(const std::string& password) {
  httplib::Client cli(endpoint());
  cli.set_read_timeout(std::chrono::seconds(5));
  auto post = [&](const char* path, const std::string& body) {
    auto res = cli.Post(path, body, "application/json");
    // A refused request has a trailer cpp-httplib 0.11.4 cannot read: no reply at all here.
    if (!res || res->status != 200) {
      throw std::runtime_error(fmt::format("etcd {}{}: {}", endpoint(), path,
                                           res ? res->body : httplib::to_string(res.error())));
    }
    return res->body;
  };
  const std::string user = fmt::format(R"({{"name":"root","password":"{}"}})", password);
  post("/v3/auth/user/add", user);
  post("/v3/auth/role/add", R"({"name":"root"})");
  post("/v3/auth/user/grant", R"({"user":"root","role":"root"})");
  post("/v3/auth/enable", "{}");
  const std::string body = post("/v3/auth/authenticate", user);
  // {"header":{...},"token":"..."}: a token has no quotes or backslashes.
  const std::string key = "\"token\":\"";
  auto at = body.find(key);
  auto end = at == std::string::npos ? at : body.find('"', at + key.size());
  if (end == std::string::npos) throw std::runtime_error("etcd authenticate: no token in " + body);
  return body.substr(at + key.size(), end - at - key.size());
}

std::string EtcdServer::log_tail(size_t bytes) const {
  std::ifstream in(dir_ + "/log", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

}  // namespace stepwatch::test
