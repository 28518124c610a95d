#include "src/supervise/child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace stepwatch::supervise {

namespace {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // the reader went away: keep draining the job's pipe regardless
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
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

 private:
  Stream stream_;
  LineSink* sink_;
  std::string buf_;
};

}  // namespace

Result<std::unique_ptr<Child>> Child::start(const LaunchSpec& spec, LineSink sink) {
  if (spec.argv.empty()) return Error{Errc::kInvalidArgument, "no command to run"};
  int out[2], err[2], exec_err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(exec_err, O_CLOEXEC) != 0) {
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
  c->output_ = std::thread([rd_out, rd_err, stop, out_fd, err_fd, done, sink = std::move(sink)]() mutable {
    Splitter so(Stream::kStdout, &sink), se(Stream::kStderr, &sink);
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
          (i == 0 ? so : se).flush();
          continue;
        }
        // Passthrough first, unchanged: the watchdog never holds the job's output back.
        write_all(i == 0 ? out_fd : err_fd, buf, static_cast<size_t>(n));
        (i == 0 ? so : se).feed(buf, static_cast<size_t>(n));
        any = true;
      }
      if (stopping && !any) break;
    }
    so.flush();
    se.flush();
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
