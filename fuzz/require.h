// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one assertion of the fuzz targets: a property that does not hold is a finding, like a
// crash. It names the property and where it is checked, then aborts so libFuzzer saves the
// input.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace stepwatch::fuzz {

[[noreturn]] inline void violated(const char* property, const char* file, int line) {
  std::fprintf(stderr, "==fuzz== property violated at %s:%d: %s\n", file, line, property);
  std::abort();
}

}  // namespace stepwatch::fuzz

// A macro for the text and the line of the property (std::source_location needs clang 15).
#define FUZZ_REQUIRE(property) \
  ((property) ? static_cast<void>(0) : ::stepwatch::fuzz::violated(#property, __FILE__, __LINE__))
