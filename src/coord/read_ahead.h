// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Several reads of a poll in one request (docs/multinode.md, "The job leader"). A follower's
// agent reads, each poll and per job, its leader's key, the leader's view and the job's orders:
// three requests, each one a round of etcd's JSON gateway, which is what etcd's CPU goes to at a
// thousand nodes. The job's leader host asks this Kv to prefetch the reads its parts will make
// (prefetch(): one txn of ranges, no compares); each read then answers the first range() call
// with the same key and options, and is dropped. A write through this Kv to a key a held read
// covers drops that read first, so a read never answers older than this node's own writes.
// forget() drops whatever was not used, at the end of the job's turn. Every other call passes
// through to `inner` as it is.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "src/coord/kv.h"

namespace stepwatch::coord {

struct Read {
  std::string key;
  RangeOptions options;
};

class ReadAhead final : public Kv {
 public:
  explicit ReadAhead(Kv& inner) : inner_(inner) {}

  // Reads `reads` in one txn and holds their answers. An error (etcd failed) holds nothing:
  // the reads are then made one by one, and fail or not on their own.
  Status prefetch(const std::vector<Read>& reads);
  void forget() { held_.clear(); }
  // Answers taken from what was prefetched, since this was made.
  uint64_t answered() const { return answered_; }

  Result<int64_t> put(const std::string& key, const std::string& value, int64_t lease) override;
  Result<RangeResult> range(const std::string& key, const RangeOptions& options) override;
  Result<int64_t> del(const std::string& key, bool prefix) override;
  Result<TxnResult> txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                        const std::vector<TxnOp>& failure) override;
  Result<Lease> grant(int64_t ttl_s) override { return inner_.grant(ttl_s); }
  Result<int64_t> keepalive(int64_t lease) override { return inner_.keepalive(lease); }
  Status revoke(int64_t lease) override { return inner_.revoke(lease); }
  Result<int64_t> time_to_live(int64_t lease) override { return inner_.time_to_live(lease); }
  Status health() override { return inner_.health(); }
  const std::string& endpoint() const override { return inner_.endpoint(); }

 private:
  // Drops the held reads that cover `key` (or, `prefix`, any key under it).
  void written(const std::string& key, bool prefix);

  Kv& inner_;
  std::vector<std::pair<Read, RangeResult>> held_;
  uint64_t answered_ = 0;
};

}  // namespace stepwatch::coord
