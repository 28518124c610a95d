// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the /proc text parsers. Byte 0 picks the file kind (modulo 5), the rest is
// its text:
//   0  <pid>/stat      parse_proc_stat (src/common/proc_stat.h)
//   1  a process dir   read_process (src/probe/procfs.h) on a fake tree in /dev/shm; the text
//                      is its files separated by NUL bytes: stat, io, wchan, then up to four
//                      task/<tid>/stat (a part that is not there is a file that is not there)
//   2  net/tcp         parse_proc_net_tcp (src/probe/ports.h), IPv4
//   3  net/tcp6        the same, IPv6
//   4  <pid>/status    catches_signal (src/probe/proc_fs.h), every signal number
// Nothing may crash. stat: the comm is everything between the first '(' and the last ')', any
// comm reads back from a kernel-shaped line, and accepted fields read back when written the
// kernel's way. A process: it reads exactly when its stat parses, with that stat's fields, io
// counters as the kernel prints them, and its threads in D counted. Sockets: valid addresses and
// ports, and every listener reads back from a line written the kernel's way. status: SigCgt
// read as the kernel prints it, no answer for signals outside 1..64.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/require.h"
#include "fuzz/scratch.h"
#include "fuzz/text.h"
#include "src/common/proc_stat.h"
#include "src/probe/ports.h"
#include "src/probe/procfs.h"
#include "src/runbook/artifact.h"

namespace {

using stepwatch::ProcStat;

constexpr int kPid = 4242;
constexpr int kMaxTasks = 4;
constexpr size_t kStatRead = stepwatch::kStatMaxBytes;  // read_proc_stat reads at most this

using stepwatch::fuzz::split;

// A fake proc root for the whole run: <root>/4242/{stat,io,wchan,status,task/<tid>/stat}.
const std::string& proc_root() {
  static const std::string& root = []() -> const std::string& {
    const std::string& r = stepwatch::fuzz::scratch_path("proc");
    std::filesystem::create_directories(fmt::format("{}/{}/task", r, kPid));
    for (int t = 0; t < kMaxTasks; ++t)
      std::filesystem::create_directory(fmt::format("{}/{}/task/{}", r, kPid, kPid + t));
    return r;
  }();
  return root;
}

// Writes the file, or removes it when there is no text.
void put_file(const std::string& path, std::optional<std::string_view> text) {
  if (!text) {
    ::unlink(path.c_str());
    return;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_REQUIRE(fd >= 0);
  std::string_view t = *text;
  while (!t.empty()) {
    ssize_t n = ::write(fd, t.data(), t.size());
    FUZZ_REQUIRE(n > 0);
    t.remove_prefix(static_cast<size_t>(n));
  }
  ::close(fd);
}

std::string kernel_stat(const ProcStat& s) {
  // Fields 1..22 as proc(5) numbers them, the unread ones as a real process shows them.
  return fmt::format(
      "{} ({}) {} {} {} {} 34816 {} 4194560 100 0 0 0 {} {} 0 0 20 0 {} 0 {} 1000000 2000\n", s.pid,
      s.comm, s.state, s.ppid, s.pgrp, s.session, s.pgrp, s.utime_ticks, s.stime_ticks,
      s.num_threads, s.start_ticks);
}

bool same_stat(const ProcStat& a, const ProcStat& b) {
  return a.pid == b.pid && a.comm == b.comm && a.state == b.state && a.ppid == b.ppid &&
         a.pgrp == b.pgrp && a.session == b.session && a.utime_ticks == b.utime_ticks &&
         a.stime_ticks == b.stime_ticks && a.num_threads == b.num_threads &&
         a.start_ticks == b.start_ticks;
}

void fuzz_stat(std::string_view text) {
  auto st = stepwatch::parse_proc_stat(text);
  if (!st) {
    FUZZ_REQUIRE(st.error().code == stepwatch::Errc::kParse &&
                 st.error().message.starts_with("stat: "));
  } else {
    size_t open = text.find('(');
    size_t close = text.rfind(')');
    FUZZ_REQUIRE(st->comm == text.substr(open + 1, close - open - 1));
    auto back = stepwatch::parse_proc_stat(kernel_stat(*st));
    FUZZ_REQUIRE(back.ok() && same_stat(*back, *st));
  }
  // Whatever the name holds (')', spaces, newlines), it reads back whole.
  ProcStat named;
  named.pid = kPid;
  named.comm = std::string(text);
  named.state = 'S';
  named.ppid = 1;
  named.start_ticks = 987654321;
  auto back = stepwatch::parse_proc_stat(kernel_stat(named));
  FUZZ_REQUIRE(back.ok() && same_stat(*back, named));
}

// The io counters, when the text is exactly what the kernel prints (its keys, in its order).
std::optional<std::pair<uint64_t, uint64_t>> kernel_io(std::string_view text) {
  static constexpr std::string_view kKeys[] = {
      "rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes", "cancelled_write_bytes"};
  if (text.size() > 4096) return std::nullopt;  // procfs.cpp reads that much of it
  auto lines = split(text, '\n');
  if (lines.size() != 8 || !lines.back().empty()) return std::nullopt;
  uint64_t values[7];
  for (size_t i = 0; i < 7; ++i) {
    std::string_view l = lines[i];
    if (!l.starts_with(kKeys[i]) || l.substr(kKeys[i].size(), 2) != ": ") return std::nullopt;
    std::string_view digits = l.substr(kKeys[i].size() + 2);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), values[i]);
    if (digits.empty() || digits.front() == '-' || ec != std::errc() ||
        p != digits.data() + digits.size()) {
      return std::nullopt;
    }
  }
  return std::make_pair(values[4], values[5]);
}

void fuzz_process(std::string_view text) {
  const std::string& root = proc_root();
  std::string dir = fmt::format("{}/{}", root, kPid);
  auto parts = split(text, '\0');
  auto part = [&](size_t i) { return i < parts.size() ? std::optional(parts[i]) : std::nullopt; };
  put_file(dir + "/stat", part(0));
  put_file(dir + "/io", part(1));
  put_file(dir + "/wchan", part(2));
  int in_d = 0;
  for (int t = 0; t < kMaxTasks; ++t) {
    auto task = part(3 + static_cast<size_t>(t));
    put_file(fmt::format("{}/task/{}/stat", dir, kPid + t), task);
    if (task) {
      auto st = stepwatch::parse_proc_stat(task->substr(0, kStatRead));
      in_d += !task->empty() && st && st->state == 'D';
    }
  }

  auto p = stepwatch::probe::read_process(root, kPid, true, true, true);
  std::string_view stat_text = parts[0].substr(0, kStatRead);
  auto expected = stepwatch::parse_proc_stat(stat_text);
  FUZZ_REQUIRE(p.ok() == (!stat_text.empty() && expected.ok()));
  if (!p) {
    FUZZ_REQUIRE(p.error().message.starts_with(dir + "/stat: "));
    return;
  }
  FUZZ_REQUIRE(p->pid == expected->pid && p->comm == expected->comm && p->state == expected->state);
  FUZZ_REQUIRE(p->ppid == expected->ppid && p->pgrp == expected->pgrp &&
               p->session == expected->session);
  FUZZ_REQUIRE(p->start_ticks == expected->start_ticks && p->threads == expected->num_threads);
  FUZZ_REQUIRE(p->cpu_ticks == expected->utime_ticks + expected->stime_ticks);
  // The details are read from the directory of the pid the stat names (in /proc, its own).
  bool own = expected->pid == kPid;
  FUZZ_REQUIRE(p->threads_in_d == (own ? in_d : 0));
  if (!own || !part(1)) FUZZ_REQUIRE(!p->read_bytes && !p->write_bytes);
  if (auto io = own && part(1) ? kernel_io(*part(1)) : std::nullopt) {
    FUZZ_REQUIRE(p->read_bytes == io->first && p->write_bytes == io->second);
  }
  if (auto w = part(2); own && w) {
    FUZZ_REQUIRE(!p->wchan.ends_with('\n') && !p->wchan.ends_with(' '));
    FUZZ_REQUIRE(p->wchan.empty() || w->starts_with(p->wchan));
  } else {
    FUZZ_REQUIRE(p->wchan.empty());
  }
}

// The address as /proc/net/tcp prints it: each 32-bit word "%08X" in host order.
std::string kernel_address(const std::string& address, bool v6) {
  unsigned char bytes[16];
  FUZZ_REQUIRE(::inet_pton(v6 ? AF_INET6 : AF_INET, address.c_str(), bytes) == 1);
  std::string out;
  for (size_t w = 0; w < (v6 ? 4u : 1u); ++w) {
    uint32_t word;
    std::memcpy(&word, bytes + w * 4, 4);
    out += fmt::format("{:08X}", word);
  }
  return out;
}

void fuzz_tcp(std::string_view text, bool v6) {
  int malformed = -1;
  auto listeners = stepwatch::probe::parse_proc_net_tcp(text, v6, &malformed);
  FUZZ_REQUIRE(malformed >= 0);
  size_t lines = split(text, '\n').size();
  FUZZ_REQUIRE(listeners.size() + static_cast<size_t>(malformed) + 1 <= std::max<size_t>(lines, 1));
  std::string again =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
      "inode\n";
  for (size_t i = 0; i < listeners.size(); ++i) {
    const auto& l = listeners[i];
    FUZZ_REQUIRE(l.v6 == v6);
    FUZZ_REQUIRE(l.port >= 0 && l.port <= 65535);  // four hex digits, as the kernel prints it
    again += fmt::format(
        "{:4}: {}:{:04X} {}:0000 0A 00000000:00000000 00:00000000 00000000 {:5} 0 {} 1 "
        "0000000000000000 100 0 0 10 "
        "0\n",
        i, kernel_address(l.address, v6), l.port, std::string(v6 ? 32 : 8, '0'), l.uid, l.inode);
  }
  int malformed_again = -1;
  auto back = stepwatch::probe::parse_proc_net_tcp(again, v6, &malformed_again);
  FUZZ_REQUIRE(malformed_again == 0 && back.size() == listeners.size());
  for (size_t i = 0; i < back.size(); ++i) {
    FUZZ_REQUIRE(back[i].address == listeners[i].address && back[i].port == listeners[i].port);
    FUZZ_REQUIRE(back[i].inode == listeners[i].inode && back[i].uid == listeners[i].uid);
  }
}

// SigCgt, when its first line holds it as the kernel prints it: "\nSigCgt:\t" and 16 hex digits.
std::optional<uint64_t> kernel_sigcgt(std::string_view text) {
  constexpr std::string_view kKey = "\nSigCgt:";
  size_t at = text.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view hex = text.substr(at + kKey.size(), 18);
  if (hex.size() < 17 || hex[0] != '\t' || (hex.size() == 18 && hex[17] != '\n'))
    return std::nullopt;
  uint64_t mask = 0;
  auto [p, ec] = std::from_chars(hex.data() + 1, hex.data() + 17, mask, 16);
  if (ec != std::errc() || p != hex.data() + 17) return std::nullopt;
  return mask;
}

void fuzz_status(std::string_view text) {
  const std::string& root = proc_root();
  put_file(fmt::format("{}/{}/status", root, kPid), text);
  auto mask = kernel_sigcgt(text);
  bool has_key = text.find("\nSigCgt:") != std::string_view::npos;
  for (int sig = 0; sig <= 65; ++sig) {
    auto caught = stepwatch::probe::catches_signal(root, kPid, sig);
    if (sig < 1 || sig > 64 || !has_key) {
      FUZZ_REQUIRE(!caught);
    } else {
      FUZZ_REQUIRE(caught.has_value());
      if (mask) FUZZ_REQUIRE(*caught == (((*mask >> (sig - 1)) & 1u) != 0));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      fuzz_stat(text);
      break;
    case 1:
      fuzz_process(text);
      break;
    case 2:
      fuzz_tcp(text, false);
      break;
    case 3:
      fuzz_tcp(text, true);
      break;
    default:
      fuzz_status(text);
      break;
  }
  return 0;
}
