// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The keys a spec may hold, table by table: the one list the unknown-key check, its "did you
// mean" hints and docs/spec.md agree on.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace stepwatch::spec {

enum class Table {
  kRoot,
  kLearn,
  kPhase,
  kAutoPreempt,
  kLog,
  kCheckpoint,
  kRunbook,
  kPager,
  kCollect,
  kSlurm,
  kKubernetes,
  kNodeFault
};

std::span<const std::string_view> known_keys(Table table);
bool is_known_key(Table table, std::string_view key);

// The message for a key that `table` does not know: suggests the closest key of the same
// table, or the table where the key belongs ("unknown key; \"ack_timeout\" belongs in [runbook]").
std::string unknown_key_message(Table table, std::string_view key);

}  // namespace stepwatch::spec
