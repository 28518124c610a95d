// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// This machine's short host name ("node12" of "node12.cluster.example"), as beacons record it
// and as readers compare it to decide whether monotonic times are comparable. At most 63 bytes;
// "" when it cannot be read.
//
// Also: whether a host stands for this machine's loopback only, for servers deciding whether a
// token is needed and requests deciding whether their Host or Origin is the server's own; and a
// URL as it may be shown.
#pragma once

#include <string>
#include <string_view>

namespace stepwatch {

std::string short_hostname();

// A literal 127.0.0.0/8 or ::1 address (brackets allowed), or "localhost". Resolves nothing:
// right for a Host header, where resolving the name is what DNS rebinding exploits.
bool is_loopback_literal(std::string_view host);

// The addresses the name resolves to (hosts file, DNS), every one of them 127.0.0.0/8 or ::1:
// "127.evil.example" may resolve to 0.0.0.0. A name that does not resolve is not loopback.
bool is_loopback_host(std::string_view host);

// A URL as pages, logs, the API and check-spec show it: "scheme://host[:port]", then "/…" when
// a path, query or fragment followed (a webhook's secret usually lives there) and without any
// "user:password@". "https://hooks.example/T0/B0/xoxb-SECRET" -> "https://hooks.example/…".
// Text that is not "scheme://..." is shown as "<not a URL>".
std::string redact_url(std::string_view url);

}  // namespace stepwatch
