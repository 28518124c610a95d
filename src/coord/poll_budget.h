// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One budget for every etcd call of a poll (reliability review E8). A hung etcd (stopped, or a
// black hole) made each call wait request_timeout, once per job: a poll of 11 jobs took 11 s,
// while /healthz said ok and local stalls went unseen, the very case the degraded mode is for.
// Every call of the agent's poll thread goes through this Kv:
//   - the first call of a poll that fails on the transport (Errc::kIo: no endpoint answered, a
//     timeout) fails every later call of that poll at once, with the same error;
//   - once the poll's calls took `budget_ns` together, the rest of them fail at once too;
//   - start_poll() re-arms both, at the top of each poll.
// So a hung etcd costs a poll one request_timeout (plus the budget) at most, never one per job.
// Application errors (a txn's compare, a lease etcd no longer has) pass as they are.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/coord/kv.h"

namespace stepwatch::coord {

class PollBudget final : public Kv {
 public:
  // `inner` must outlive it; `mono_now` is the clock the budget counts on.
  PollBudget(Kv& inner, int64_t budget_ns, std::function<int64_t()> mono_now);

  void start_poll();
  // Why the rest of this poll skips etcd; nullopt while it does not.
  const std::optional<Error>& tripped() const { return tripped_; }

  Result<int64_t> put(const std::string& key, const std::string& value, int64_t lease) override;
  Result<RangeResult> range(const std::string& key, const RangeOptions& options) override;
  Result<int64_t> del(const std::string& key, bool prefix) override;
  Result<TxnResult> txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                        const std::vector<TxnOp>& failure) override;
  Result<Lease> grant(int64_t ttl_s) override;
  Result<int64_t> keepalive(int64_t lease) override;
  Status revoke(int64_t lease) override;
  Result<int64_t> time_to_live(int64_t lease) override;
  Status health() override;
  const std::string& endpoint() const override { return inner_.endpoint(); }

 private:
  // Runs `call` unless the poll's budget is spent; notes a transport failure or the time spent.
  template <class R, class F>
  R spend(F call);

  Kv& inner_;
  int64_t budget_ns_;
  std::function<int64_t()> mono_now_;
  int64_t spent_ns_ = 0;
  std::optional<Error> tripped_;
};

}  // namespace stepwatch::coord
