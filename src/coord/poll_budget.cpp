// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/coord/poll_budget.h"

#include <fmt/format.h>

#include <utility>

#include "src/common/duration.h"

namespace stepwatch::coord {

PollBudget::PollBudget(Kv& inner, int64_t budget_ns, std::function<int64_t()> mono_now)
    : inner_(inner), budget_ns_(budget_ns), mono_now_(std::move(mono_now)) {}

void PollBudget::start_poll() {
  spent_ns_ = 0;
  tripped_.reset();
}

template <class R, class F>
R PollBudget::spend(F call) {
  if (tripped_) return *tripped_;
  const int64_t began = mono_now_();
  R r = call();
  spent_ns_ += mono_now_() - began;
  if (!r.ok() && r.error().code == Errc::kIo) {
    tripped_ = Error{Errc::kIo, r.error().message + " (the rest of this poll skips etcd)"};
  } else if (spent_ns_ >= budget_ns_) {
    tripped_ = Error{Errc::kIo, fmt::format("etcd {}: this poll's calls took {}, its budget: the "
                                            "rest of them wait for the next poll",
                                            inner_.endpoint(), format_duration(spent_ns_))};
  }
  return r;
}

Result<int64_t> PollBudget::put(const std::string& key, const std::string& value, int64_t lease) {
  return spend<Result<int64_t>>([&] { return inner_.put(key, value, lease); });
}
Result<RangeResult> PollBudget::range(const std::string& key, const RangeOptions& options) {
  return spend<Result<RangeResult>>([&] { return inner_.range(key, options); });
}
Result<int64_t> PollBudget::del(const std::string& key, bool prefix) {
  return spend<Result<int64_t>>([&] { return inner_.del(key, prefix); });
}
Result<TxnResult> PollBudget::txn(const std::vector<Compare>& compares,
                                  const std::vector<TxnOp>& success,
                                  const std::vector<TxnOp>& failure) {
  return spend<Result<TxnResult>>([&] { return inner_.txn(compares, success, failure); });
}
Result<Lease> PollBudget::grant(int64_t ttl_s) {
  return spend<Result<Lease>>([&] { return inner_.grant(ttl_s); });
}
Result<int64_t> PollBudget::keepalive(int64_t lease) {
  return spend<Result<int64_t>>([&] { return inner_.keepalive(lease); });
}
Status PollBudget::revoke(int64_t lease) {
  return spend<Status>([&] { return inner_.revoke(lease); });
}
Result<int64_t> PollBudget::time_to_live(int64_t lease) {
  return spend<Result<int64_t>>([&] { return inner_.time_to_live(lease); });
}
Status PollBudget::health() {
  return spend<Status>([&] { return inner_.health(); });
}

}  // namespace stepwatch::coord
