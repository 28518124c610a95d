// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/text_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace stepwatch {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "is a directory";
  if (S_ISFIFO(m)) return "is a FIFO, not a regular file";
  if (S_ISSOCK(m)) return "is a socket, not a regular file";
  if (S_ISCHR(m) || S_ISBLK(m)) return "is a device, not a regular file";
  return "not a regular file";
}

// ESRCH: a /proc file whose process exited between open and read.
Error errno_error(const std::string& path, const char* what, int err) {
  Errc code = (err == ENOENT || err == ESRCH)   ? Errc::kNotFound
              : (err == EACCES || err == EPERM) ? Errc::kPermission
                                                : Errc::kIo;
  return Error{code, fmt::format("{}: {}: {}", path, what, std::strerror(err))};
}

// The one read loop: appends to out from `offset` (pread) or the current position (offset < 0)
// until EOF or until out holds `limit` bytes. Returns 0 or the errno of the failed read.
int read_into(int fd, std::string& out, size_t limit, int64_t offset = -1) {
  char buf[8192];
  while (out.size() < limit) {
    size_t want = std::min(sizeof buf, limit - out.size());
    ssize_t n = offset < 0 ? ::read(fd, buf, want)
                           : ::pread(fd, buf, want,
                                     static_cast<off_t>(offset) + static_cast<off_t>(out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

Result<TextFile> read_text_file(const std::string& path, size_t max_bytes, Symlinks symlinks) {
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (symlinks == Symlinks::kRefuse ? O_NOFOLLOW : 0);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    if (errno == ELOOP && symlinks == Symlinks::kRefuse) {
      return Error{Errc::kInvalidArgument, fmt::format("{}: cannot open: is a symlink", path)};
    }
    return errno_error(path, "cannot read", errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return errno_error(path, "cannot read", e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{Errc::kInvalidArgument, fmt::format("{}: {}", path, kind_of(st.st_mode))};
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Error{Errc::kInvalidArgument, fmt::format("{}: larger than {} bytes", path, max_bytes)};
  }
  TextFile out;
  out.mode = st.st_mode;
  out.uid = st.st_uid;
  int e = read_into(fd, out.text, max_bytes + 1);
  ::close(fd);
  if (e != 0) return errno_error(path, "cannot read", e);
  if (out.text.size() > max_bytes) {  // it grew while we read
    return Error{Errc::kInvalidArgument, fmt::format("{}: larger than {} bytes", path, max_bytes)};
  }
  return out;
}

Result<std::string> read_small(const std::string& path, size_t max_bytes, bool* truncated) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return errno_error(path, "cannot read", errno);
  std::string out;
  // One byte past the limit tells a file of exactly max_bytes from a longer one.
  int e = read_into(fd, out, max_bytes + 1);
  ::close(fd);
  if (e != 0) return errno_error(path, "cannot read", e);
  bool cut = out.size() > max_bytes;
  if (cut) out.resize(max_bytes);
  if (truncated) *truncated = cut;
  return out;
}

Result<std::string> read_range(const std::string& path, uint64_t offset, uint64_t length) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return errno_error(path, "cannot read", errno);
  std::string out;
  int e = read_into(fd, out, static_cast<size_t>(length), static_cast<int64_t>(offset));
  ::close(fd);
  if (e != 0) return errno_error(path, "cannot read", e);
  return out;
}

namespace {

Status write_fd(int fd, const std::string& path, std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return errno_error(path, "cannot write", n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace

Status write_all(const std::string& path, std::string_view text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return errno_error(path, "cannot create", errno);
  Status st = write_fd(fd, path, text);
  if (::close(fd) != 0 && st) return errno_error(path, "cannot write", errno);
  return st;
}

Status write_private_file(const std::string& path, std::string_view text) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return errno_error(path, "cannot replace", errno);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno_error(path, "cannot create", errno);
  if (Status st = write_fd(fd, path, text); !st) {
    ::close(fd);
    ::unlink(path.c_str());
    return st;
  }
  if (::close(fd) != 0) return errno_error(path, "cannot write", errno);
  return {};
}

Result<std::string> random_token() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{Errc::kIo, fmt::format("getrandom: {}", std::strerror(errno))};
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace stepwatch
