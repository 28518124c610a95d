// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/liveness.h"

namespace stepwatch::probe {

const char* liveness_name(Liveness l) {
  switch (l) {
    case Liveness::kAlive:
      return "alive";
    case Liveness::kZombie:
      return "zombie";
    case Liveness::kGone:
      return "gone";
    case Liveness::kReused:
      return "reused";
    case Liveness::kUnknown:
      return "unknown";
  }
  return "?";
}

bool ended(Liveness l) {
  return l == Liveness::kGone || l == Liveness::kReused || l == Liveness::kZombie;
}

ProcessState inspect(const ProcFs& proc, ProcessId id) {
  ProcessState out;
  auto st = proc.stat(id.pid);
  if (!st) {
    out.liveness = st.error().code == Errc::kNotFound ? Liveness::kGone : Liveness::kUnknown;
    return out;
  }
  if (id.start_ticks == 0 || st->start_ticks != id.start_ticks) {
    out.liveness = id.start_ticks == 0 ? Liveness::kUnknown : Liveness::kReused;
    return out;
  }
  out.state = st->state;
  out.ppid = st->ppid;
  out.pgrp = st->pgrp;
  out.comm = st->comm;
  out.liveness = (st->state == 'Z' || st->state == 'X') ? Liveness::kZombie : Liveness::kAlive;
  return out;
}

}  // namespace stepwatch::probe
