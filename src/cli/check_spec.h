// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch check-spec FILE...`: validates job specs and shows the values that will apply, so
// a spec is checked before the job it guards is launched.
#pragma once

#include <string>
#include <vector>

namespace stepwatch::cli {

// Exit codes: every file valid; at least one invalid; at least one unreadable (wins over 1).
inline constexpr int kCheckSpecOk = 0;
inline constexpr int kCheckSpecInvalid = 1;
inline constexpr int kCheckSpecUnreadable = 2;

// Prints to stdout, per file, "FILE: ok" and a summary of the effective values (interval or
// learn, grace, phase budgets, runbook), or every error as "FILE:LINE: key: message".
// json: one JSON document with every file's status, errors, warnings and effective spec.
int run_check_spec(const std::vector<std::string>& paths, bool json);

// The same, appending what would be printed to *out (tests).
int check_spec_report(const std::vector<std::string>& paths, bool json, std::string* out);

}  // namespace stepwatch::cli
