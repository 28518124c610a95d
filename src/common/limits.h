// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Process limits the agent needs at scale: it holds a descriptor per watched rank (a pidfd).
#pragma once

#include <cstdint>

namespace stepwatch {

// Raises the soft limit on open files to the hard limit. Returns the soft limit now in force.
uint64_t raise_fd_limit();

}  // namespace stepwatch
