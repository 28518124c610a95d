// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch incidents`: the incident history from the state directory's store, newest first,
// each incident with its page, ack, resolution and the actions taken.
#pragma once

#include <string>

namespace stepwatch::cli {

// Exit codes: listed (possibly nothing); the store could not be opened or read.
inline constexpr int kIncidentsOk = 0;
inline constexpr int kIncidentsUnreadable = 2;

// Prints the incidents of `job` ("" for every job), at most `limit` (<= 0: all), to stdout;
// json: one JSON document {"state_dir", "job", "incidents": [...]}. A missing state directory
// or database, or a database from a newer stepwatch, is reported on stderr with exit 2. The
// state directory is never created.
int run_incidents(const std::string& state_dir, const std::string& job, bool json, int limit);

// The same, appending what would go to stdout to *out and to stderr to *err (tests).
int incidents_report(const std::string& state_dir, const std::string& job, bool json, int limit,
                     std::string* out, std::string* err);

}  // namespace stepwatch::cli
