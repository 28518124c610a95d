// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// An in-memory coord::Kv with etcd v3's semantics, for tests of what coord/ and the job leader
// decide, without a real etcd: one revision counter (each put, delete that removed something,
// and writing txn moves it by one), create/mod revisions and versions per key, txn compares as
// etcd evaluates them (a VALUE compare on a missing key fails; the others compare against 0),
// leases that expire on an injected clock and take their keys with them. tests/coord/kv_test.cpp
// runs the same scripts against it and a real etcd, so where the two differ a test says so.
//
// Beyond etcd: set_down(true) makes every call fail as an unreachable etcd does (Errc::kIo), and
// calls() counts the calls made (load tests), and keys_scanned() the keys etcd would have read
// to answer the ranges (etcd 3.4 reads a whole range before it sorts and limits it). Thread-safe:
// several clients may share one. Call it through a coord::Kv& (the defaults of the arguments are
// the interface's).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/coord/kv.h"

namespace stepwatch::test {

class MemoryKv final : public coord::Kv {
 public:
  explicit MemoryKv(const Clock& clock) : clock_(clock) {}

  void set_down(bool down) {
    std::lock_guard lock(mu_);
    down_ = down;
  }
  int64_t calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  int64_t keys_scanned() const {
    std::lock_guard lock(mu_);
    return scanned_;
  }
  int64_t revision() const {
    std::lock_guard lock(mu_);
    return revision_;
  }

  Result<int64_t> put(const std::string& key, const std::string& value, int64_t lease) override {
    std::lock_guard lock(mu_);
    if (auto st = enter("/v3/kv/put"); !st) return st.error();
    if (lease != 0 && !leases_.count(lease)) return lease_not_found("/v3/kv/put");
    ++revision_;
    write(key, value, lease);
    return revision_;
  }

  Result<coord::RangeResult> range(const std::string& key,
                                   const coord::RangeOptions& options) override {
    std::lock_guard lock(mu_);
    if (auto st = enter("/v3/kv/range"); !st) return st.error();
    return read(key, options);
  }

  Result<int64_t> del(const std::string& key, bool prefix) override {
    std::lock_guard lock(mu_);
    if (auto st = enter("/v3/kv/deleterange"); !st) return st.error();
    int64_t n = count(key, prefix);
    if (n > 0) {
      ++revision_;
      erase(key, prefix);
    }
    return n;
  }

  Result<coord::TxnResult> txn(const std::vector<coord::Compare>& compares,
                               const std::vector<coord::TxnOp>& success,
                               const std::vector<coord::TxnOp>& failure) override {
    std::lock_guard lock(mu_);
    if (auto st = enter("/v3/kv/txn"); !st) return st.error();
    coord::TxnResult r;
    r.succeeded = std::all_of(compares.begin(), compares.end(),
                              [this](const coord::Compare& c) { return holds(c); });
    const auto& ops = r.succeeded ? success : failure;
    bool writes = false;
    for (const auto& op : ops) {
      if (op.kind == coord::TxnOp::Kind::kPut && op.lease != 0 && !leases_.count(op.lease))
        return lease_not_found("/v3/kv/txn");
      if (op.kind == coord::TxnOp::Kind::kPut ||
          (op.kind == coord::TxnOp::Kind::kDelete && count(op.key, op.prefix) > 0)) {
        writes = true;
      }
    }
    if (writes) ++revision_;  // one revision for the whole txn
    for (const auto& op : ops) {
      switch (op.kind) {
        case coord::TxnOp::Kind::kPut:
          write(op.key, op.value, op.lease);
          break;
        case coord::TxnOp::Kind::kDelete:
          erase(op.key, op.prefix);
          break;
        case coord::TxnOp::Kind::kRange:
          r.ranges.push_back(read(op.key, op.range));
          break;
      }
    }
    r.revision = revision_;
    return r;
  }

  Result<coord::Lease> grant(int64_t ttl_s) override {
    std::lock_guard lock(mu_);
    if (auto st = enter("/v3/lease/grant"); !st) return st.error();
    const int64_t id = next_lease_++;
    leases_[id] = LeaseState{ttl_s, clock_.now().mono_ns + ttl_s * kNsPerSec};
    return coord::Lease{id, ttl_s};
  }

  Result<int64_t> keepalive(int64_t lease) override {
    std::lock_guard lock(mu_);
    if (auto st = enter("/v3/lease/keepalive"); !st) return st.error();
    auto it = leases_.find(lease);
    if (it == leases_.end()) return int64_t{0};
    it->second.expires_mono_ns = clock_.now().mono_ns + it->second.ttl_s * kNsPerSec;
    return it->second.ttl_s;
  }

  Status revoke(int64_t lease) override {
    std::lock_guard lock(mu_);
    if (auto st = enter("/v3/lease/revoke"); !st) return st.error();
    if (!leases_.count(lease)) return lease_not_found("/v3/lease/revoke");
    end_lease(lease);
    return {};
  }

  Result<int64_t> time_to_live(int64_t lease) override {
    std::lock_guard lock(mu_);
    if (auto st = enter("/v3/lease/timetolive"); !st) return st.error();
    auto it = leases_.find(lease);
    if (it == leases_.end()) return int64_t{-1};
    return (it->second.expires_mono_ns - clock_.now().mono_ns) / kNsPerSec;
  }

  Status health() override {
    std::lock_guard lock(mu_);
    return enter("/health");
  }

  const std::string& endpoint() const override { return endpoint_; }

 private:
  struct LeaseState {
    int64_t ttl_s = 0;
    int64_t expires_mono_ns = 0;
  };

  // Every call: counted, refused while down, and leases past their time end first.
  Status enter(const char* path) {
    ++calls_;
    if (down_) {
      return Error{Errc::kIo, fmt::format("etcd: no endpoint answered {}: {}: unreachable (down)",
                                          path, endpoint_)};
    }
    const int64_t now = clock_.now().mono_ns;
    std::vector<int64_t> expired;
    for (const auto& [id, l] : leases_) {
      if (l.expires_mono_ns <= now) expired.push_back(id);
    }
    for (int64_t id : expired) end_lease(id);
    return {};
  }

  Error lease_not_found(const char* path) const {
    return Error{Errc::kNotFound,
                 fmt::format("etcd {}: {}: HTTP 404: etcdserver: requested lease not found",
                             endpoint_, path)};
  }

  void end_lease(int64_t id) {
    leases_.erase(id);
    bool any = false;
    for (auto it = kvs_.begin(); it != kvs_.end();) {
      if (it->second.lease == id) {
        it = kvs_.erase(it);
        any = true;
      } else {
        ++it;
      }
    }
    if (any) ++revision_;  // etcd revokes a lease in a txn of its own
  }

  // At the current revision (the caller moved it).
  void write(const std::string& key, const std::string& value, int64_t lease) {
    auto [it, created] = kvs_.try_emplace(key);
    coord::KeyValue& kv = it->second;
    if (created) {
      kv.key = key;
      kv.create_revision = revision_;
    }
    kv.value = value;
    kv.mod_revision = revision_;
    ++kv.version;
    kv.lease = lease;
  }

  bool in(const std::string& k, const std::string& key, bool prefix) const {
    if (!prefix) return k == key;
    const std::string end = coord::prefix_end(key);
    return k >= key && (end == std::string(1, '\0') || k < end);
  }

  int64_t count(const std::string& key, bool prefix) const {
    int64_t n = 0;
    for (const auto& [k, kv] : kvs_) n += in(k, key, prefix) ? 1 : 0;
    return n;
  }

  void erase(const std::string& key, bool prefix) {
    for (auto it = kvs_.begin(); it != kvs_.end();) {
      it = in(it->first, key, prefix) ? kvs_.erase(it) : std::next(it);
    }
  }

  coord::RangeResult read(const std::string& key, const coord::RangeOptions& o) const {
    coord::RangeResult r;
    r.revision = revision_;
    for (const auto& [k, kv] : kvs_) {
      if (in(k, key, o.prefix)) r.kvs.push_back(kv);
    }
    if (o.by_create_rev) {
      std::sort(r.kvs.begin(), r.kvs.end(),
                [](const auto& a, const auto& b) { return a.create_revision < b.create_revision; });
    } else if (o.descending) {
      std::reverse(r.kvs.begin(), r.kvs.end());
    }
    r.count = static_cast<int64_t>(r.kvs.size());
    scanned_ += r.count;
    std::erase_if(r.kvs,
                  [&](const coord::KeyValue& kv) { return kv.mod_revision < o.min_mod_revision; });
    if (o.limit > 0 && static_cast<int64_t>(r.kvs.size()) > o.limit) r.kvs.resize(o.limit);
    if (o.keys_only) {
      for (auto& kv : r.kvs) kv.value.clear();
    }
    return r;
  }

  bool holds(const coord::Compare& c) const {
    using T = coord::Compare::Target;
    using R = coord::Compare::Result;
    auto it = kvs_.find(c.key);
    if (c.target == T::kValue) {
      if (it == kvs_.end()) return false;
      const int cmp = it->second.value.compare(c.value);
      switch (c.result) {
        case R::kEqual:
          return cmp == 0;
        case R::kNotEqual:
          return cmp != 0;
        case R::kLess:
          return cmp < 0;
        case R::kGreater:
          return cmp > 0;
      }
      return false;
    }
    coord::KeyValue none;
    const coord::KeyValue& kv = it == kvs_.end() ? none : it->second;
    const int64_t v = c.target == T::kCreate ? kv.create_revision
                      : c.target == T::kMod  ? kv.mod_revision
                                             : kv.version;
    switch (c.result) {
      case R::kEqual:
        return v == c.number;
      case R::kNotEqual:
        return v != c.number;
      case R::kLess:
        return v < c.number;
      case R::kGreater:
        return v > c.number;
    }
    return false;
  }

  const Clock& clock_;
  const std::string endpoint_ = "memory://kv";
  mutable std::mutex mu_;
  bool down_ = false;
  int64_t calls_ = 0;
  mutable int64_t scanned_ = 0;
  int64_t revision_ = 1;  // an empty etcd is at revision 1
  int64_t next_lease_ = 0x694d0000000001;
  std::map<std::string, coord::KeyValue> kvs_;
  std::map<int64_t, LeaseState> leases_;
};

}  // namespace stepwatch::test
