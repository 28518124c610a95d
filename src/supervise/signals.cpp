// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/supervise/signals.h"

#include <pthread.h>

#include <ctime>

#include "src/common/clock.h"

namespace stepwatch::supervise {

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  return set;
}

void block_watched_signals() {
  sigset_t set = watched_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int wait_signal(int64_t ns) {
  sigset_t set = watched_signals();
  timespec ts{static_cast<time_t>(ns / kNsPerSec), static_cast<long>(ns % kNsPerSec)};
  int sig = ::sigtimedwait(&set, nullptr, &ts);
  return sig < 0 ? 0 : sig;
}

}  // namespace stepwatch::supervise
