// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Byte sizes as a spec writes them: "64MiB", "512KiB", "1.5GiB", "100MB", "4096" (bytes).
// Binary (KiB, MiB, GiB, TiB) and decimal (KB, MB, GB, TB) units; bare K/M/G are refused
// because half the world reads them one way and half the other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/result.h"

namespace stepwatch::spec {

// Parses a non-negative size into bytes. Errors say what was wrong and what is allowed.
Result<int64_t> parse_size(std::string_view text);

// Formats bytes with the largest binary unit that divides them: 64MiB, 1536KiB, 100B.
std::string format_size(int64_t bytes);

}  // namespace stepwatch::spec
