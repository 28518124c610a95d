// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The key-value store the coordination is written against: etcd v3's unary calls (put, range,
// delete, txn, leases), as `EtcdClient` speaks them to a real etcd. Everything in coord/ takes a
// `Kv&`, so its decisions can be tested over an in-memory store (tests/fakes/memory_kv.h) with
// a fake clock, and the same scripts are run against a real etcd (tests/coord/kv_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::coord {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct RangeResult {
  int64_t revision = 0;  // the store's revision when it was read (the response header's)
  std::vector<KeyValue> kvs;
  int64_t count = 0;  // keys in the range, even past `limit`
};

struct RangeOptions {
  bool prefix = false;         // every key that starts with `key`
  int64_t limit = 0;           // 0: no limit
  bool keys_only = false;      // values left empty
  bool by_create_rev = false;  // sorted by create_revision, ascending (else by key)
  bool descending = false;     // sorted by key, descending (with limit: the last keys)
  // Only keys whose mod revision is at least this (0: every key): what changed since a read at
  // revision min_mod_revision - 1. `count` still counts every key of the range (etcd prunes
  // after counting), so a key deleted since then shows as a count smaller than what was held.
  int64_t min_mod_revision = 0;

  bool operator==(const RangeOptions&) const = default;
};

// One comparison of a txn.
struct Compare {
  enum class Target { kCreate, kMod, kVersion, kValue };
  enum class Result { kEqual, kNotEqual, kLess, kGreater };
  std::string key;
  Target target = Target::kCreate;
  Result result = Result::kEqual;
  int64_t number = 0;  // for kCreate, kMod, kVersion
  std::string value;   // for kValue

  static Compare create_rev(std::string key, int64_t rev);  // CREATE(key) == rev (0: absent)
  static Compare mod_rev(std::string key, int64_t rev);     // MOD(key) == rev
  static Compare value_is(std::string key, std::string value);
};

// One operation of a txn.
struct TxnOp {
  enum class Kind { kPut, kDelete, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;    // kPut
  int64_t lease = 0;    // kPut: 0 for none
  bool prefix = false;  // kDelete: every key that starts with `key`
  RangeOptions range;   // kRange (its `prefix`: every key that starts with `key`)

  static TxnOp put(std::string key, std::string value, int64_t lease = 0);
  static TxnOp del(std::string key, bool prefix = false);
  static TxnOp get(std::string key, bool prefix = false);
  static TxnOp read(std::string key, RangeOptions options);
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;  // the store's revision after the txn (the response header's)
  // The results of the range ops of the branch that ran, in order.
  std::vector<RangeResult> ranges;
};

// After a txn fenced by CREATE(fence key) == fence whose failure branch is
// {TxnOp::get(fence key)}: whether the fence still held, i.e. another compare failed.
bool fence_held(const TxnResult& t, int64_t fence);

struct Lease {
  int64_t id = 0;
  int64_t ttl_s = 0;
};

class Kv {
 public:
  virtual ~Kv() = default;
  // The revision the put made.
  virtual Result<int64_t> put(const std::string& key, const std::string& value,
                              int64_t lease = 0) = 0;
  virtual Result<RangeResult> range(const std::string& key, const RangeOptions& options = {}) = 0;
  // How many keys were deleted.
  virtual Result<int64_t> del(const std::string& key, bool prefix = false) = 0;
  virtual Result<TxnResult> txn(const std::vector<Compare>& compares,
                                const std::vector<TxnOp>& success,
                                const std::vector<TxnOp>& failure = {}) = 0;

  virtual Result<Lease> grant(int64_t ttl_s) = 0;
  // The lease's TTL after the renewal; 0: the lease is gone (expired or revoked).
  virtual Result<int64_t> keepalive(int64_t lease) = 0;
  virtual Status revoke(int64_t lease) = 0;
  // Seconds left; -1: the lease is gone.
  virtual Result<int64_t> time_to_live(int64_t lease) = 0;
  // Whether the store answers.
  virtual Status health() = 0;
  // Where it is, for messages: the endpoint that answered last.
  virtual const std::string& endpoint() const = 0;
};

// The key just past every key with this prefix (etcd's range_end for a prefix): the prefix with
// its last byte incremented, dropping trailing 0xff bytes; "\0" (no upper bound) for an empty
// prefix or one of only 0xff bytes.
std::string prefix_end(const std::string& prefix);

}  // namespace stepwatch::coord
