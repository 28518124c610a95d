// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The rendezvous port between two incarnations: after restart hygiene, a port (MASTER_PORT) still
// bound is waited for a moment (a socket can outlive its killed owner, in a child that inherited
// it); still bound then, the holder is named and the launch goes ahead (docs/run.md).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "src/common/clock.h"

namespace stepwatch::supervise {

// How long a launch waits for the rendezvous port to be freed after restart hygiene.
inline constexpr int64_t kPortWaitNs = 5 * kNsPerSec;

// Waits up to kPortWaitNs (through wait_signal) for nothing to listen on `port`; says what it
// found through `say`. Returns the line said when the port is still bound (a leftover the
// new incarnation may hang on), else nullopt.
std::optional<std::string> wait_rendezvous_port(const std::string& proc_root, int port,
                                                const std::function<void(const std::string&)>& say);

}  // namespace stepwatch::supervise
