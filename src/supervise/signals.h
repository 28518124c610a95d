// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The signals `stepwatch run` waits for instead of sleeping: SIGINT and SIGTERM (stop, passed on
// to the job) and SIGCHLD (the job may have exited). They are blocked in every thread (block
// them before the first thread starts) and taken synchronously, so no handler runs anywhere.
#pragma once

#include <signal.h>

#include <cstdint>

namespace stepwatch::supervise {

sigset_t watched_signals();
// Blocks the watched signals in the calling thread (threads started later inherit the mask).
void block_watched_signals();
// Sleeps up to `ns`, waking early for a watched signal; returns the signal or 0.
int wait_signal(int64_t ns);

}  // namespace stepwatch::supervise
