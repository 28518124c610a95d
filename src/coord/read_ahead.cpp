// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/coord/read_ahead.h"

#include <algorithm>

namespace stepwatch::coord {

namespace {

// Whether the keys of `key` (the key alone, or with `prefix` every key under it) and those of
// `other` meet. A range end of "\0" has no bound (prefix_end).
bool meets(const std::string& key, bool prefix, const std::string& other, bool other_prefix) {
  const std::string end = prefix ? prefix_end(key) : key + '\0';
  const std::string other_end = other_prefix ? prefix_end(other) : other + '\0';
  auto below = [](const std::string& a, const std::string& end) {
    return end == std::string(1, '\0') || a < end;
  };
  return below(key, other_end) && below(other, end);
}

}  // namespace

Status ReadAhead::prefetch(const std::vector<Read>& reads) {
  held_.clear();
  if (reads.empty()) return {};
  std::vector<TxnOp> ops;
  for (const Read& r : reads) ops.push_back(TxnOp::read(r.key, r.options));
  auto t = inner_.txn({}, ops, {});
  if (!t) return t.error();
  if (t->ranges.size() != reads.size()) return {};  // not as asked: read one by one
  for (size_t i = 0; i < reads.size(); ++i) held_.emplace_back(reads[i], std::move(t->ranges[i]));
  return {};
}

Result<RangeResult> ReadAhead::range(const std::string& key, const RangeOptions& options) {
  auto it = std::find_if(held_.begin(), held_.end(), [&](const auto& h) {
    return h.first.key == key && h.first.options == options;
  });
  if (it == held_.end()) return inner_.range(key, options);
  RangeResult r = std::move(it->second);
  held_.erase(it);
  ++answered_;
  return r;
}

void ReadAhead::written(const std::string& key, bool prefix) {
  std::erase_if(held_, [&](const auto& h) {
    return meets(h.first.key, h.first.options.prefix, key, prefix);
  });
}

Result<int64_t> ReadAhead::put(const std::string& key, const std::string& value, int64_t lease) {
  written(key, false);
  return inner_.put(key, value, lease);
}

Result<int64_t> ReadAhead::del(const std::string& key, bool prefix) {
  written(key, prefix);
  return inner_.del(key, prefix);
}

Result<TxnResult> ReadAhead::txn(const std::vector<Compare>& compares,
                                 const std::vector<TxnOp>& success,
                                 const std::vector<TxnOp>& failure) {
  for (const auto* ops : {&success, &failure}) {
    for (const TxnOp& op : *ops) {
      if (op.kind != TxnOp::Kind::kRange) written(op.key, op.prefix);
    }
  }
  return inner_.txn(compares, success, failure);
}

}  // namespace stepwatch::coord
