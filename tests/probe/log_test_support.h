// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What the log contract's tests share.
#pragma once

#include <gtest/gtest.h>

#include "src/probe/log_contract.h"

namespace stepwatch::probe::test {

// The compiled contract, or (with the compile error reported as a test failure) an empty one.
inline LogContract make(const LogPatterns& p) {
  auto r = LogContract::compile(p);
  if (!r.ok()) {
    ADD_FAILURE() << r.error().message;
    return std::move(LogContract::compile({}).value());
  }
  return std::move(r).value();
}

}  // namespace stepwatch::probe::test
