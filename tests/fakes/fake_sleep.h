// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The pager's sleep seam (PagerOptions::sleep), recording each backoff instead of sleeping:
// the tests of page_one's retries read the waits it asked for.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "src/runbook/pager.h"

namespace stepwatch::test {

struct FakeSleep {
  std::mutex mu;
  std::vector<int64_t> waits;
  runbook::PagerOptions options() {
    runbook::PagerOptions o;
    o.sleep = [this](int64_t ns) {
      std::lock_guard lock(mu);
      waits.push_back(ns);
      return true;
    };
    return o;
  }
};

}  // namespace stepwatch::test
