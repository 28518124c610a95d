// A small etcd v3 client over its JSON gateway (/v3/..., etcd 3.4+), on cpp-httplib: unary
// calls only (no watch, no election): put, range, delete, txn, lease grant / keepalive / revoke /
// timetolive, health. The agent calls it from its poll loop; every call is bounded by a timeout
// and returns an error value, never throws.
//
// Gateway quirks handled here, once (../shared/background/multinode.md §2.3):
//   - keys and values travel base64-encoded; int64s travel as JSON strings (a lease id exceeds
//     2^53), and both are parsed as such;
//   - proto3 leaves out defaults: a failed txn has no "succeeded", an empty range no "kvs", a
//     keepalive on a dead lease no "TTL" (0: the lease is gone);
//   - errors come as an HTTP status with {"error","message","code"}; the message is kept.
//   - every error reply is chunked with a declared trailer, which cpp-httplib 0.11.4 cannot read
//     (it fails the read after the whole body came in): the status and body are kept anyway.
// The gateway ignores unknown JSON fields, so a misspelled field fails open: every request
// builder is tested against a real etcd (tests/coord/etcd_client_test.cpp).
//
// Endpoints are tried in order; the one that answered last is tried first next time. A call
// moves on to the next endpoint when one cannot be reached or answers 503 (unavailable); a txn
// is never sent twice once it may have reached a server (it may have been applied: a retried
// create-once would report a loss). One client per thread (it keeps a persistent connection).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/common/result.h"

namespace stepwatch::coord {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // "http://127.0.0.1:2379" (http only: the gateway)
  std::string token;                   // sent as the Authorization header when set
  int64_t timeout_ns = 2 * kNsPerSec;  // connect, read and write, per request and endpoint
};

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
  bool prefix = false;  // kDelete, kRange: every key that starts with `key`

  static TxnOp put(std::string key, std::string value, int64_t lease = 0);
  static TxnOp del(std::string key, bool prefix = false);
  static TxnOp get(std::string key, bool prefix = false);
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

class EtcdClient {
 public:
  explicit EtcdClient(EtcdOptions options);
  ~EtcdClient();
  EtcdClient(EtcdClient&&) noexcept;
  EtcdClient& operator=(EtcdClient&&) noexcept;

  // The revision the put made.
  Result<int64_t> put(const std::string& key, const std::string& value, int64_t lease = 0);
  Result<RangeResult> range(const std::string& key, const RangeOptions& options = {});
  // How many keys were deleted.
  Result<int64_t> del(const std::string& key, bool prefix = false);
  Result<TxnResult> txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                        const std::vector<TxnOp>& failure = {});

  Result<Lease> grant(int64_t ttl_s);
  // The lease's TTL after the renewal; 0: the lease is gone (expired or revoked).
  Result<int64_t> keepalive(int64_t lease);
  Status revoke(int64_t lease);
  // Seconds left; -1: the lease is gone.
  Result<int64_t> time_to_live(int64_t lease);
  // Whether the endpoint answers GET /health with {"health":"true"}.
  Status health();

  // The endpoint that answered last (the first one before any answer).
  const std::string& endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The key just past every key with this prefix (etcd's range_end for a prefix): the prefix with
// its last byte incremented, dropping trailing 0xff bytes; "\0" (no upper bound) for an empty
// prefix or one of only 0xff bytes.
std::string prefix_end(const std::string& prefix);

}  // namespace stepwatch::coord
