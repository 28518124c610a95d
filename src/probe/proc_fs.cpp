// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/proc_fs.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "src/common/text_file.h"

namespace stepwatch::probe {

namespace {

bool numeric(const char* s) {
  if (*s == '\0') return false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
  }
  return true;
}

Error dir_error(const std::string& path, int err) {
  Errc code = (err == ENOENT || err == ESRCH)   ? Errc::kNotFound
              : (err == EACCES || err == EPERM) ? Errc::kPermission
                                                : Errc::kIo;
  return Error{code, fmt::format("{}: {}", path, std::strerror(err))};
}

// The numeric entries of a directory.
Result<std::vector<int>> numeric_entries(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return dir_error(path, errno);
  std::vector<int> out;
  while (dirent* e = ::readdir(d)) {
    if (numeric(e->d_name)) out.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  return out;
}

std::string_view next_line(std::string_view& text) {
  size_t nl = text.find('\n');
  std::string_view line = text.substr(0, nl);
  text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  return line;
}

// A status or maps file of a big process runs to megabytes at most.
constexpr size_t kMapsMaxBytes = size_t{64} << 20;
constexpr size_t kEnvironMaxBytes = size_t{1} << 20;

}  // namespace

ProcStatus parse_proc_status(const std::string& text) {
  ProcStatus out;
  // Both keys are never the first line (Name: is), so they are looked up after a newline.
  if (size_t at = text.find("\nUid:"); at != std::string::npos) {
    const char* p = text.data() + at + 5;
    const char* end = text.data() + text.size();
    ProcessUids u;
    bool ok = true;
    for (uint32_t* f : {&u.real, &u.effective}) {
      while (p < end && (*p == '\t' || *p == ' ')) ++p;
      auto [next, ec] = std::from_chars(p, end, *f);
      if (ec != std::errc()) ok = false;
      p = next;
    }
    if (ok) out.uids = u;
  }
  if (size_t at = text.find("\nSigCgt:"); at != std::string::npos)
    out.caught_signals = std::strtoull(text.c_str() + at + 8, nullptr, 16);
  if (size_t at = text.find("\nCapEff:"); at != std::string::npos)
    out.effective_caps = std::strtoull(text.c_str() + at + 8, nullptr, 16);
  auto decimal = [&](std::string_view key) -> std::optional<uint64_t> {
    size_t at = text.find(key);
    if (at == std::string::npos) return std::nullopt;
    const char* p = text.data() + at + key.size();
    const char* end = text.data() + text.size();
    while (p < end && (*p == '\t' || *p == ' ')) ++p;
    uint64_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc()) return std::nullopt;
    return v;
  };
  auto voluntary = decimal("\nvoluntary_ctxt_switches:");
  auto involuntary = decimal("\nnonvoluntary_ctxt_switches:");
  if (voluntary && involuntary) out.ctx_switches = *voluntary + *involuntary;
  return out;
}

ProcFs::ProcFs(std::string root) : root_(std::move(root)) {}

std::string ProcFs::path(int pid, std::string_view name) const {
  return fmt::format("{}/{}/{}", root_, pid, name);
}

Result<std::string> ProcFs::read(int pid, std::string_view name, size_t max_bytes) const {
  return read_small(path(pid, name), max_bytes);
}

Result<ProcStat> ProcFs::stat(int pid) const {
  return read_proc_stat(root_, pid);
}

Result<ProcStat> ProcFs::task_stat(int pid, int tid) const {
  return read_proc_stat(fmt::format("{}/{}/task", root_, pid), tid);
}

Result<std::vector<int>> ProcFs::tasks(int pid) const {
  auto tids = numeric_entries(path(pid, "task"));
  if (tids) std::sort(tids->begin(), tids->end());
  return tids;
}

Result<ProcStatus> ProcFs::status(int pid) const {
  auto text = read(pid, "status", 64 << 10);
  if (!text) return text.error();
  return parse_proc_status(*text);
}

Result<std::vector<std::string>> ProcFs::environ(int pid) const {
  auto text = read(pid, "environ", kEnvironMaxBytes);
  if (!text) return text.error();
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\0', start);
    if (end == std::string::npos) end = text->size();
    out.emplace_back(text->substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Result<bool> ProcFs::maps_file(int pid, dev_t dev, ino_t ino) const {
  auto text = read(pid, "maps", kMapsMaxBytes);
  if (!text) return text.error();
  std::string_view rest = *text;
  while (!rest.empty()) {
    // address perms offset dev(major:minor, hex) inode path
    std::string_view line = next_line(rest);
    std::string_view f[5];
    size_t i = 0;
    for (auto& field : f) {
      while (i < line.size() && line[i] == ' ') ++i;
      size_t j = line.find(' ', i);
      if (j == std::string_view::npos) j = line.size();
      field = line.substr(i, j - i);
      i = j;
    }
    unsigned long long inode = 0;
    auto in = std::from_chars(f[4].data(), f[4].data() + f[4].size(), inode);
    if (in.ec != std::errc() || f[4].empty() || inode != ino) continue;
    size_t colon = f[3].find(':');
    if (colon == std::string_view::npos) continue;
    unsigned int major_no = 0, minor_no = 0;
    auto a = std::from_chars(f[3].data(), f[3].data() + colon, major_no, 16);
    auto b = std::from_chars(f[3].data() + colon + 1, f[3].data() + f[3].size(), minor_no, 16);
    if (a.ec != std::errc() || b.ec != std::errc()) continue;
    if (major_no == major(dev) && minor_no == minor(dev)) return true;
  }
  return false;
}

Result<std::vector<uint64_t>> ProcFs::socket_inodes(int pid) const {
  std::string fd_dir = path(pid, "fd");
  DIR* fds = ::opendir(fd_dir.c_str());
  if (fds == nullptr) return dir_error(fd_dir, errno);
  std::vector<uint64_t> out;
  while (dirent* fe = ::readdir(fds)) {
    if (!numeric(fe->d_name)) continue;
    char target[64];
    ssize_t n = ::readlink((fd_dir + "/" + fe->d_name).c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    std::string_view link(target, static_cast<size_t>(n));
    if (link.substr(0, 8) != "socket:[" || link.back() != ']') continue;
    uint64_t inode = 0;
    std::string_view digits = link.substr(8, link.size() - 9);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), inode);
    if (ec == std::errc() && p == digits.data() + digits.size()) out.push_back(inode);
  }
  ::closedir(fds);
  return out;
}

Result<std::vector<int>> ProcFs::pids() const {
  return numeric_entries(root_);
}

Result<std::string> ProcFs::net_tcp(bool v6) const {
  return read_small(root_ + (v6 ? "/net/tcp6" : "/net/tcp"), kMapsMaxBytes);
}

Result<int64_t> ProcFs::btime() const {
  auto text = read_small(root_ + "/stat", size_t{4} << 20);
  if (!text) return text.error();
  std::string_view rest = *text;
  while (!rest.empty()) {
    std::string_view line = next_line(rest);
    if (!line.starts_with("btime ")) continue;
    line.remove_prefix(6);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec == std::errc()) return v;
    break;
  }
  return Error{Errc::kParse, fmt::format("{}/stat: no btime line", root_)};
}

std::optional<bool> catches_signal(const ProcFs& proc, int pid, int sig) {
  if (sig < 1 || sig > 64) return std::nullopt;
  auto st = proc.status(pid);
  if (!st || !st->caught_signals) return std::nullopt;
  return (*st->caught_signals >> (sig - 1)) & 1u;
}

}  // namespace stepwatch::probe
