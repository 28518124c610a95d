// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/supervise/child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include "src/supervise/handoff.h"

extern char** environ;

namespace stepwatch::supervise {

namespace {

// How much of the job's output may wait for a slow reader of our stdout/stderr, and for the log
// contract, before it is dropped rather than block the job.
constexpr size_t kPassthroughQueueBytes = 16 << 20;
constexpr size_t kParseQueueBytes = 8 << 20;
// After the job ended, how long a reader that does not read gets before the rest is dropped.
constexpr int64_t kFlushNs = 2'000'000'000;

int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Writes `chunk` to `fd` in pieces of at most PIPE_BUF, each once poll says there is room (so a
// write never blocks for long), until it is written, the reader went away, or `give_up_at`
// (monotonic ns) has passed; what is not written is counted in `lost`.
void write_out(int fd, const std::string& chunk, const std::atomic<int64_t>& give_up_at,
               std::atomic<uint64_t>& lost) {
  size_t off = 0;
  while (off < chunk.size() && mono_ns() < give_up_at.load()) {
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, 100);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    if (r < 0 || (p.revents & (POLLERR | POLLNVAL))) break;
    ssize_t w = ::write(fd, chunk.data() + off, std::min<size_t>(chunk.size() - off, PIPE_BUF));
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;  // the reader went away: keep draining the job's pipe regardless
    }
    off += static_cast<size_t>(w);
  }
  lost += chunk.size() - off;
}

// Says once, without waiting, that output is being dropped: stderr may be the stalled reader.
void notice(int fd, const std::string& text) {
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) (void)!::write(fd, text.data(), text.size());
}

// Splits a stream into lines on '\n' and '\r' (progress bars redraw with '\r' and may not end a
// line for minutes). Lines longer than 64 KiB are handed over in pieces.
class Splitter {
 public:
  Splitter(Stream s, LineSink* sink) : stream_(s), sink_(sink) {}
  void feed(const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      char c = p[i];
      if (c == '\n' || c == '\r') {
        flush();
      } else {
        buf_.push_back(c);
        if (buf_.size() >= 64 * 1024) flush();
      }
    }
  }
  void flush() {
    if (!buf_.empty() && *sink_) (*sink_)(stream_, buf_);
    buf_.clear();
  }
  void discard() { buf_.clear(); }  // a gap in the stream: the half line is not a line

 private:
  Stream stream_;
  LineSink* sink_;
  std::string buf_;
};

}  // namespace

std::map<std::string, std::string> job_environment(const std::string& beacon_root,
                                                   const std::string& job, int64_t incarnation,
                                                   std::optional<int> master_port) {
  std::map<std::string, std::string> env;
  env["STEPWATCH_DIR"] = beacon_root;
  env["STEPWATCH_JOB"] = job;
  env["STEPWATCH_INCARNATION"] = std::to_string(incarnation);
  env["PYTHONUNBUFFERED"] = "1";
  if (master_port) env["MASTER_PORT"] = std::to_string(*master_port);
  return env;
}

Result<std::unique_ptr<Child>> Child::start(const LaunchSpec& spec, LineSink sink) {
  if (spec.argv.empty()) return Error{Errc::kInvalidArgument, "no command to run"};
  int out[2], err[2], exec_err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(exec_err, O_CLOEXEC) != 0) {
    return Error{Errc::kIo, fmt::format("pipe: {}", std::strerror(errno))};
  }
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!spec.env.count(key)) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) return Error{Errc::kIo, fmt::format("fork: {}", std::strerror(errno))};
  if (pid == 0) {
    ::setsid();  // a session and process group of its own: the job, and nothing else
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    (void)!::write(exec_err[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::close(exec_err[1]);
  int child_errno = 0;
  ssize_t got;
  do {
    got = ::read(exec_err[0], &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  ::close(exec_err[0]);
  if (got == sizeof child_errno) {
    ::waitpid(pid, nullptr, 0);
    ::close(out[0]);
    ::close(err[0]);
    return Error{child_errno == ENOENT ? Errc::kNotFound : Errc::kIo,
                 fmt::format("cannot run {}: {}", spec.argv[0], std::strerror(child_errno))};
  }

  std::unique_ptr<Child> c(new Child());
  c->pid_ = pid;
  if (::pipe2(c->stop_, O_CLOEXEC) != 0) c->stop_[0] = c->stop_[1] = -1;
  int out_fd = spec.out_fd, err_fd = spec.err_fd;
  int rd_out = out[0], rd_err = err[0], stop = c->stop_[0];
  auto done = c->output_done_;
  auto lost = c->lost_;
  c->output_ = std::thread([rd_out, rd_err, stop, out_fd, err_fd, done, lost,
                            sink = std::move(sink)]() mutable {
    // The job's pipes are drained here and never wait on anyone: the passthrough to our stdout
    // and stderr and the log contract each take their chunks from a bounded hand-off of their
    // own, and what does not fit is dropped and counted (a reader that does not read must
    // not stall the job, nor a slow pattern its output).
    auto give_up_at = std::make_shared<std::atomic<int64_t>>(INT64_MAX);
    Handoff pass_out(kPassthroughQueueBytes, [out_fd, give_up_at, lost](std::string&& b) {
      write_out(out_fd, b, *give_up_at, lost->passthrough);
    });
    Handoff pass_err(kPassthroughQueueBytes, [err_fd, give_up_at, lost](std::string&& b) {
      write_out(err_fd, b, *give_up_at, lost->passthrough);
    });
    Splitter so(Stream::kStdout, &sink), se(Stream::kStderr, &sink);
    // Chunks for the log contract carry their stream in a first byte; 'G' marks a gap (a
    // dropped chunk), where a half line must not be glued to the next one.
    Handoff parse(kParseQueueBytes, [&so, &se](std::string&& b) {
      if (b[0] == 'G') {
        so.discard();
        se.discard();
      } else {
        (b[0] == 'o' ? so : se).feed(b.data() + 1, b.size() - 1);
      }
    });
    bool gap = false, told = false;
    pollfd fds[3] = {{rd_out, POLLIN, 0}, {rd_err, POLLIN, 0}, {stop, POLLIN, 0}};
    int open_fds = 2;
    bool stopping = false;
    char buf[65536];
    while (open_fds > 0) {
      // Once asked to stop (the job exited but a straggler still holds the pipe), drain what is
      // there without waiting.
      if (::poll(fds, 3, stopping ? 0 : -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[2].fd >= 0 && (fds[2].revents & POLLIN)) {
        stopping = true;
        fds[2].fd = -1;
      }
      bool any = false;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          ::close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
          continue;
        }
        std::string chunk(buf, static_cast<size_t>(n));
        // Passthrough first, unchanged, in order; dropped only when the reader does not read.
        if (!(i == 0 ? pass_out : pass_err).push(chunk) && !told) {
          told = true;
          notice(
              err_fd,
              fmt::format("stepwatch: {} is not being read: dropping the job's output rather than "
                          "blocking the job\n",
                          i == 0 ? "stdout" : "stderr"));
        }
        if (gap && parse.push("G")) gap = false;
        chunk.insert(chunk.begin(), i == 0 ? 'o' : 'e');
        if (!parse.push(std::move(chunk))) gap = true;
        any = true;
      }
      if (stopping && !any) break;
    }
    parse.close();
    so.flush();
    se.flush();
    lost->parse = parse.dropped_bytes();
    *give_up_at = mono_ns() + kFlushNs;
    pass_out.close();
    pass_err.close();
    lost->passthrough += pass_out.dropped_bytes() + pass_err.dropped_bytes();
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0) ::close(fds[i].fd);
    }
    done->store(true);
  });
  return c;
}

Child::~Child() {
  if (!status_ && pid_ > 0) {
    // Never leave the job running unsupervised behind us.
    signal_group(SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  join_output();
}

std::optional<int> Child::poll_exit() {
  if (status_) return status_;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  return status_;
}

void Child::signal_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);
}

int Child::stop(int sig, int64_t grace_ns, const std::function<void(int64_t)>& sleep,
                const std::function<void()>& on_kill) {
  signal_group(sig);  // also when the leader is gone: what is left of its group gets it
  int64_t deadline = mono_ns() + grace_ns;
  while (!poll_exit() && mono_ns() < deadline) sleep(50'000'000);
  if (!poll_exit()) {
    if (on_kill) on_kill();
    signal_group(SIGKILL);
    while (!poll_exit()) sleep(20'000'000);
  }
  return *poll_exit();
}

void Child::join_output() {
  if (!output_.joinable()) return;
  // Give the pipes a moment to reach end of file, then stop waiting for stragglers.
  for (int i = 0; i < 50 && !output_done_->load(); ++i) ::usleep(10'000);
  if (stop_[1] >= 0) (void)!::write(stop_[1], "x", 1);
  output_.join();
  for (int& fd : stop_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

}  // namespace stepwatch::supervise
