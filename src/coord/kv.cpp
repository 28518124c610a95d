// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/coord/kv.h"

#include <utility>

namespace stepwatch::coord {

Compare Compare::create_rev(std::string key, int64_t rev) {
  return Compare{std::move(key), Target::kCreate, Result::kEqual, rev, {}};
}
Compare Compare::mod_rev(std::string key, int64_t rev) {
  return Compare{std::move(key), Target::kMod, Result::kEqual, rev, {}};
}
Compare Compare::value_is(std::string key, std::string value) {
  return Compare{std::move(key), Target::kValue, Result::kEqual, 0, std::move(value)};
}

TxnOp TxnOp::put(std::string key, std::string value, int64_t lease) {
  return TxnOp{Kind::kPut, std::move(key), std::move(value), lease, false, {}};
}
TxnOp TxnOp::del(std::string key, bool prefix) {
  return TxnOp{Kind::kDelete, std::move(key), {}, 0, prefix, {}};
}
TxnOp TxnOp::get(std::string key, bool prefix) {
  RangeOptions options;
  options.prefix = prefix;
  return read(std::move(key), options);
}
TxnOp TxnOp::read(std::string key, RangeOptions options) {
  return TxnOp{Kind::kRange, std::move(key), {}, 0, options.prefix, options};
}

bool fence_held(const TxnResult& t, int64_t fence) {
  return !t.ranges.empty() && !t.ranges[0].kvs.empty() &&
         t.ranges[0].kvs[0].create_revision == fence;
}

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace stepwatch::coord
