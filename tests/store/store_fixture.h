// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The fixture shared by the store's unit tests: a Store on a fresh state directory.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "src/store/store.h"
#include "tests/support/temp_dir.h"

namespace stepwatch::store::testing {

inline constexpr int64_t kT0 = 1'700'000'000'000'000'000;
inline constexpr int64_t kSec = 1'000'000'000;

inline NewIncident stall(const std::string& job, int64_t at = kT0) {
  return NewIncident{job,
                     2,
                     at,
                     "stalled",
                     "collective",
                     "rank 3 stopped at step 1200",
                     R"({"state":"stalled","culprits":[3]})"};
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::open(dir_ / "state");
    ASSERT_TRUE(s.ok()) << s.error().message;
    store_.emplace(std::move(*s));
  }
  Store& store() { return *store_; }

  test::TempDir dir_;
  std::optional<Store> store_;
};

}  // namespace stepwatch::store::testing
