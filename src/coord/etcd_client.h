// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
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
#include "src/coord/kv.h"

namespace stepwatch::coord {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // "http://127.0.0.1:2379" (http only: the gateway)
  std::string token;                   // sent as the Authorization header when set
  int64_t timeout_ns = 2 * kNsPerSec;  // connect, read and write, per request and endpoint
};

class EtcdClient final : public Kv {
 public:
  explicit EtcdClient(EtcdOptions options);
  ~EtcdClient();
  EtcdClient(EtcdClient&&) noexcept;
  EtcdClient& operator=(EtcdClient&&) noexcept;

  // The revision the put made.
  Result<int64_t> put(const std::string& key, const std::string& value, int64_t lease = 0) override;
  Result<RangeResult> range(const std::string& key, const RangeOptions& options = {}) override;
  // How many keys were deleted.
  Result<int64_t> del(const std::string& key, bool prefix = false) override;
  Result<TxnResult> txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                        const std::vector<TxnOp>& failure = {}) override;

  Result<Lease> grant(int64_t ttl_s) override;
  // The lease's TTL after the renewal; 0: the lease is gone (expired or revoked).
  Result<int64_t> keepalive(int64_t lease) override;
  Status revoke(int64_t lease) override;
  // Seconds left; -1: the lease is gone.
  Result<int64_t> time_to_live(int64_t lease) override;
  // Whether the endpoint answers GET /health with {"health":"true"}.
  Status health() override;

  // The endpoint that answered last (the first one before any answer).
  const std::string& endpoint() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepwatch::coord
