// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/alert_keeper.h"

#include <fmt/format.h>

#include <chrono>

#include "src/runbook/page_sink.h"

namespace stepwatch::runbook {

AlertKeeper::AlertKeeper(const std::vector<spec::Pager>& targets, PagerOptions options)
    : options_(std::move(options)) {
  for (const auto& t : targets) {
    if (auto sink = make_page_sink(t); sink && sink->keeps_alert_alive()) targets_.push_back(t);
  }
}

AlertKeeper::~AlertKeeper() {
  (void)reap(true);
}

void AlertKeeper::sent(const PageMessage& m, int64_t mono_ns) {
  if (targets_.empty()) return;
  alert_ = m;
  alert_->ended_wall_ns = 0;
  last_sent_mono_ns_ = mono_ns;
}

void AlertKeeper::adopt(const PageMessage& m) {
  if (targets_.empty()) return;
  alert_ = m;
  alert_->ended_wall_ns = 0;
  last_sent_mono_ns_.reset();
}

std::optional<std::string> AlertKeeper::reap(bool wait) {
  if (!inflight_) return std::nullopt;
  if (!wait && inflight_->wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return std::nullopt;
  std::vector<PageResult> results = inflight_->get();
  inflight_.reset();
  std::string failed;
  for (const auto& r : results) {
    if (!r.ok) failed += fmt::format("{}{}: {}", failed.empty() ? "" : "; ", r.target, r.detail);
  }
  if (failed.empty()) return std::nullopt;
  return failed;
}

void AlertKeeper::post(PageMessage m) {
  inflight_ =
      std::async(std::launch::async, [targets = targets_, m = std::move(m), opts = options_] {
        return page_all(targets, m, opts);
      });
}

std::optional<std::string> AlertKeeper::tick(int64_t mono_ns) {
  std::optional<std::string> failure = reap(false);
  if (!alert_ || inflight_) return failure;  // a post still under way: the next tick
  if (last_sent_mono_ns_ && mono_ns - *last_sent_mono_ns_ < kAlertResendNs) return failure;
  last_sent_mono_ns_ = mono_ns;
  post(*alert_);
  return failure;
}

void AlertKeeper::resolve(int64_t wall_ns) {
  if (!alert_) return;
  PageMessage m = *alert_;
  m.ended_wall_ns = wall_ns;
  alert_.reset();
  last_sent_mono_ns_.reset();
  // A re-post still under way goes first, on the resolving post's thread: resolve() never
  // waits for the network (a slow Alertmanager would hold up the caller's poll).
  inflight_ = std::async(std::launch::async, [previous = std::move(inflight_), targets = targets_,
                                              m = std::move(m), opts = options_]() mutable {
    if (previous) previous->wait();
    return page_all(targets, m, opts);
  });
}

}  // namespace stepwatch::runbook
