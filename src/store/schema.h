// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The store's schema and its forward migrations. `schema_version` has one row per migration
// applied (version, when, by which build); the current version is the largest. A database
// written by a newer stepwatch is refused rather than guessed at: an older build might drop
// what it does not understand.
#pragma once

#include <cstdint>

#include "src/common/result.h"
#include "src/store/sqlite_db.h"

namespace stepwatch::store {

// The version this build writes. Bump it together with a new entry in schema.cpp's list.
inline constexpr int kSchemaVersion = 4;

// Reads the version (0 for an empty file) and applies every missing migration in one
// IMMEDIATE transaction, so two processes opening a fresh file at once migrate it once.
// `now_ns` is recorded with each applied version.
Status migrate(Db& db, int64_t now_ns);

// The version recorded in the file (0 when the file has no schema yet).
Result<int> schema_version(Db& db);

}  // namespace stepwatch::store
