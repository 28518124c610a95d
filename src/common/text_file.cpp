#include "src/common/text_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

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

Error errno_error(const std::string& path, const char* what, int err) {
  Errc code = err == ENOENT                     ? Errc::kNotFound
              : (err == EACCES || err == EPERM) ? Errc::kPermission
                                                : Errc::kIo;
  return Error{code, fmt::format("{}: {}: {}", path, what, std::strerror(err))};
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
  out.text.resize(max_bytes + 1);
  size_t got = 0;
  while (got < out.text.size()) {
    ssize_t n = ::read(fd, out.text.data() + got, out.text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return errno_error(path, "cannot read", e);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > max_bytes) {  // it grew while we read
    return Error{Errc::kInvalidArgument, fmt::format("{}: larger than {} bytes", path, max_bytes)};
  }
  out.text.resize(got);
  return out;
}

Status write_private_file(const std::string& path, std::string_view text) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return errno_error(path, "cannot replace", errno);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno_error(path, "cannot create", errno);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return errno_error(path, "cannot write", e);
    }
    done += static_cast<size_t>(n);
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
