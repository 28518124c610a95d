// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/host.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace stepwatch {

std::string short_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string h(buf);
  if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  if (h.size() > 63) h.resize(63);
  return h;
}

bool is_loopback_literal(std::string_view host) {
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  std::string h(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, h.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool is_loopback_host(std::string_view host) {
  std::string h(host);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (h.empty() || ::getaddrinfo(h.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    return false;
  bool all = true;
  for (const addrinfo* a = found; a != nullptr && all; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      all = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      all = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      all = false;
    }
  }
  ::freeaddrinfo(found);
  return all;
}

std::string redact_url(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0) return "<not a URL>";
  std::string_view scheme = url.substr(0, sep);
  std::string_view rest = url.substr(sep + 3);
  const size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  if (auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string shown = std::string(scheme) + "://" + std::string(authority);
  if (end != std::string_view::npos && end + 1 < rest.size()) shown += "/\u2026";
  return shown;
}

}  // namespace stepwatch
