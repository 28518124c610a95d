// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/ports.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace stepwatch::probe {

namespace {

constexpr std::string_view kListenState = "0A";       // TCP_LISTEN in /proc/net/tcp
constexpr std::string_view kEstablishedState = "01";  // TCP_ESTABLISHED

bool parse_hex32(std::string_view s, uint32_t* out) {
  if (s.size() != 8) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

// The kernel prints each 32-bit word of the address in host byte order ("%08X" of the raw u32).
std::optional<std::string> decode_address(std::string_view hex, bool v6) {
  unsigned char bytes[16];
  size_t words = v6 ? 4 : 1;
  if (hex.size() != words * 8) return std::nullopt;
  for (size_t w = 0; w < words; ++w) {
    uint32_t v;
    if (!parse_hex32(hex.substr(w * 8, 8), &v)) return std::nullopt;
    std::memcpy(bytes + w * 4, &v, 4);  // back to the in-memory (network) order on this host
  }
  char text[INET6_ADDRSTRLEN];
  if (::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, text, sizeof text) == nullptr)
    return std::nullopt;
  return std::string(text);
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

template <class T>
bool number(std::string_view s, T* out, int base = 10) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

std::optional<int> parse_port(std::string_view s) {
  int v = 0;
  if (!number(s, &v) || v <= 0 || v > 65535) return std::nullopt;
  return v;
}

}  // namespace

namespace {

// One socket line of /proc/net/tcp or tcp6: "sl local rem st tx:rx tr:when retrnsmt uid timeout
// inode ...". nullopt for a malformed one.
struct SocketLine {
  Listener local;  // address, port, uid, inode, v6
  std::string remote_address;
  int remote_port = 0;
  std::string state;
};

std::optional<SocketLine> parse_socket_line(std::string_view line, bool v6) {
  auto f = fields(line);
  if (f.size() < 10 || f[0].back() != ':') return std::nullopt;
  size_t colon = f[1].rfind(':');
  SocketLine s;
  s.local.v6 = v6;
  auto addr =
      colon == std::string_view::npos ? std::nullopt : decode_address(f[1].substr(0, colon), v6);
  // The kernel prints the port as %04X: four hex digits, never a sign.
  std::string_view port =
      colon == std::string_view::npos ? std::string_view() : f[1].substr(colon + 1);
  uint16_t port_value = 0;
  if (!addr || port.size() != 4 || !number(port, &port_value, 16) || !number(f[7], &s.local.uid) ||
      !number(f[9], &s.local.inode)) {
    return std::nullopt;
  }
  s.local.port = port_value;
  s.local.address = *addr;
  s.state = std::string(f[3]);
  size_t rcolon = f[2].rfind(':');
  if (rcolon != std::string_view::npos) {
    auto raddr = decode_address(f[2].substr(0, rcolon), v6);
    uint16_t rport = 0;
    std::string_view rp = f[2].substr(rcolon + 1);
    if (raddr && rp.size() == 4 && number(rp, &rport, 16)) {
      s.remote_address = *raddr;
      s.remote_port = rport;
    }
  }
  return s;
}

// Calls on_line for every socket line of the text (the header skipped); returns the malformed
// count.
template <class OnLine>
int each_socket_line(std::string_view text, bool v6, OnLine&& on_line) {
  int bad = 0;
  bool header = true;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (header) {  // "  sl  local_address rem_address   st ..."
      header = false;
      continue;
    }
    if (fields(line).empty()) continue;
    if (auto s = parse_socket_line(line, v6)) {
      on_line(std::move(*s));
    } else {
      ++bad;
    }
  }
  return bad;
}

std::string_view without_v4_mapping(std::string_view address) {
  constexpr std::string_view kMapped = "::ffff:";
  if (address.size() > kMapped.size() && address.substr(0, kMapped.size()) == kMapped &&
      address.find('.') != std::string_view::npos)
    address.remove_prefix(kMapped.size());
  return address;
}

}  // namespace

std::vector<Listener> parse_proc_net_tcp(std::string_view text, bool v6, int* malformed) {
  std::vector<Listener> out;
  int bad = each_socket_line(text, v6, [&](SocketLine s) {
    if (s.state == kListenState) out.push_back(std::move(s.local));
  });
  if (malformed) *malformed = bad;
  return out;
}

std::optional<uint32_t> connected_socket_uid(const std::string& proc_root,
                                             const std::string& address, int port,
                                             const std::string& server_address, int server_port) {
  const std::string_view want = without_v4_mapping(address);
  const std::string_view server = without_v4_mapping(server_address);
  std::optional<uint32_t> uid;
  for (bool v6 : {false, true}) {
    auto text = ProcFs(proc_root).net_tcp(v6);
    if (!text) continue;
    each_socket_line(*text, v6, [&](SocketLine s) {
      if (uid || s.state != kEstablishedState || s.local.port != port ||
          s.remote_port != server_port)
        return;
      if (without_v4_mapping(s.local.address) == want &&
          without_v4_mapping(s.remote_address) == server)
        uid = s.local.uid;
    });
  }
  return uid;
}

Result<std::vector<Listener>> listeners_on_port(const std::string& proc_root, int port) {
  std::vector<Listener> out;
  bool any = false;
  for (bool v6 : {false, true}) {
    auto text = ProcFs(proc_root).net_tcp(v6);
    if (!text) continue;
    any = true;
    for (auto& l : parse_proc_net_tcp(*text, v6)) {
      if (l.port == port) out.push_back(std::move(l));
    }
  }
  if (!any) return Error{Errc::kNotFound, fmt::format("{}/net/tcp: not readable", proc_root)};
  return out;
}

Result<std::vector<Listener>> wait_port_free(const std::string& proc_root, int port,
                                             int64_t timeout_ns, const Clock& clock,
                                             const std::function<void(int64_t)>& sleep,
                                             int64_t poll_ns) {
  int64_t deadline = clock.now().mono_ns + timeout_ns;
  for (;;) {
    auto held = listeners_on_port(proc_root, port);
    if (!held || held->empty()) return held;
    int64_t left = deadline - clock.now().mono_ns;
    if (left <= 0) return held;
    sleep(std::min(poll_ns, left));
  }
}

OwnerScan socket_owners(const std::string& proc_root, const std::vector<uint64_t>& inodes) {
  OwnerScan scan;
  if (inodes.empty()) return scan;
  const ProcFs proc(proc_root);
  auto pids = proc.pids();
  if (!pids) return scan;
  for (int pid : *pids) {
    auto held = proc.socket_inodes(pid);
    if (!held) {
      if (held.error().code == Errc::kPermission) ++scan.unreadable;
      continue;  // kNotFound: the process went away since the listing
    }
    for (uint64_t inode : *held) {
      if (std::find(inodes.begin(), inodes.end(), inode) == inodes.end()) continue;
      SocketOwner o;
      o.pid = pid;
      o.inode = inode;
      if (auto st = proc.stat(o.pid)) {
        o.start_ticks = st->start_ticks;
        o.comm = st->comm;
      }
      bool dup = std::any_of(scan.owners.begin(), scan.owners.end(), [&](const SocketOwner& x) {
        return x.pid == o.pid && x.inode == o.inode;
      });
      if (!dup) scan.owners.push_back(std::move(o));
    }
  }
  return scan;
}

std::optional<int> port_from_command(const std::vector<std::string>& argv) {
  auto endpoint_port = [](std::string_view v) -> std::optional<int> {
    size_t colon = v.rfind(':');
    return colon == std::string_view::npos ? std::nullopt : parse_port(v.substr(colon + 1));
  };
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string_view a = argv[i];
    std::string_view next =
        i + 1 < argv.size() ? std::string_view(argv[i + 1]) : std::string_view();
    // Inside a shell command line ("sh -c 'MASTER_PORT=1 torchrun ...'") the words are split here.
    for (std::string_view word : fields(a)) {
      if (word.substr(0, 12) == "MASTER_PORT=") {
        if (auto p = parse_port(word.substr(12))) return p;
      }
      for (std::string_view flag :
           {"--master_port", "--master-port", "--rdzv_endpoint", "--rdzv-endpoint"}) {
        bool endpoint = flag.find("rdzv") != std::string_view::npos;
        std::string_view value;
        if (word == flag && word == a)
          value = next;
        else if (word.size() > flag.size() && word.substr(0, flag.size()) == flag &&
                 word[flag.size()] == '=') {
          value = word.substr(flag.size() + 1);
        } else
          continue;
        if (auto p = endpoint ? endpoint_port(value) : parse_port(value)) return p;
      }
    }
  }
  return std::nullopt;
}

}  // namespace stepwatch::probe
