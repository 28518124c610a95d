// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Who listens on the rendezvous port: /proc/net/tcp and tcp6 parsed for LISTEN sockets, and the
// socket inodes mapped to their owning processes through /proc/<pid>/fd links. A restarted job
// whose MASTER_PORT is still held by the previous incarnation hangs at init (background 003).
// Every reader takes a proc root so tests can run on a checked-in fake tree.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/clock.h"
#include "src/common/result.h"
#include "src/probe/proc_fs.h"

namespace stepwatch::probe {

struct Listener {
  std::string address;  // "127.0.0.1", "::", "::ffff:10.0.0.1"
  int port = 0;
  uint64_t inode = 0;  // 0: the kernel did not say (a socket being torn down)
  uint32_t uid = 0;
  bool v6 = false;
};

// The LISTEN sockets of one /proc/net/tcp or tcp6 text. Malformed lines are skipped and counted.
std::vector<Listener> parse_proc_net_tcp(std::string_view text, bool v6, int* malformed = nullptr);

// The uid that owns the connected TCP socket of a loopback client, as a server sees its peer:
// the ESTABLISHED socket whose local end is address:port (request.remote_addr, remote_port)
// and whose remote end is the server's own server_address:server_port (request.local_addr,
// local_port), from <proc_root>/net/tcp and tcp6. The whole 4-tuple, and the state, matter: a
// client port is reused at once for other destinations, and a TIME_WAIT socket of an earlier
// connection on it is listed as uid 0. "::ffff:127.0.0.1" and "127.0.0.1" are the same address.
// nullopt when no such socket is listed (gone, or not on this host).
std::optional<uint32_t> connected_socket_uid(const std::string& proc_root,
                                             const std::string& address, int port,
                                             const std::string& server_address, int server_port);

// LISTEN sockets on `port` from <proc_root>/net/tcp and tcp6. A missing file (no IPv6) is no
// socket; kNotFound only when neither file exists.
Result<std::vector<Listener>> listeners_on_port(const std::string& proc_root, int port);

struct SocketOwner {
  int pid = 0;
  uint64_t start_ticks = 0;
  std::string comm;
  uint64_t inode = 0;
};

struct OwnerScan {
  std::vector<SocketOwner> owners;  // one per (pid, inode); several processes may share a socket
  int unreadable = 0;               // processes whose fd table could not be read (permission)
};

// Maps socket inodes to processes by reading every <proc_root>/<pid>/fd/* link ("socket:[N]").
// Best effort: processes whose fds are not readable are counted, not fatal.
OwnerScan socket_owners(const std::string& proc_root, const std::vector<uint64_t>& inodes);

// Waits, polling every `poll_ns`, until nothing listens on `port` or `timeout_ns` has passed
// (a socket can outlive its killed owner for a moment, in a child that inherited it). Returns
// the listeners still there at the end: empty when the port is free. `sleep` waits that many
// ns on `clock`'s time (tests pass a ManualClock and a sleep that advances it).
Result<std::vector<Listener>> wait_port_free(const std::string& proc_root, int port,
                                             int64_t timeout_ns, const Clock& clock,
                                             const std::function<void(int64_t)>& sleep,
                                             int64_t poll_ns = 100 * kNsPerMs);

// The rendezvous port named by a launch command: MASTER_PORT=N, --master_port N, --master-port=N,
// --rdzv_endpoint host:N, --rdzv-endpoint=host:N. nullopt when none is named.
std::optional<int> port_from_command(const std::vector<std::string>& argv);

}  // namespace stepwatch::probe
