// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// How the HTTP listener serves a connection: it waits for its first byte in a FirstByteGate,
// holding no thread, and is then served one request on a thread of its own. Include only from
// the .cpp that serves (httplib is a heavy header, STYLE rule 11).
#pragma once

#include <httplib.h>

#include <cstddef>
#include <memory>
#include <string>

#include "src/common/result.h"
#include "src/serve/first_byte_gate.h"

namespace stepwatch::serve {

// An httplib::Server for routes and settings, whose connections pass through a FirstByteGate
// with `limits` and are then served on at most `threads` threads at once, the rest waiting.
// Destroying it closes the silent connections at once and waits for the requests in flight.
// `name` is the server's, for errors.
Result<std::unique_ptr<httplib::Server>> make_gated_server(size_t threads, SilenceLimits limits,
                                                           const std::string& name);

}  // namespace stepwatch::serve
