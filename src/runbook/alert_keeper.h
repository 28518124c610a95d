// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Keeps an open incident's Alertmanager alert alive, and resolves it when the incident closes.
// Alertmanager marks an alert resolved once it has not been re-sent within its resolve_timeout
// (5 minutes by default): a stall that outlasts it would be announced as fixed while the job
// still burns its GPUs. So while the incident stays open the same alert (same labels) is posted
// again every minute, as Prometheus does with its own alerts, and when it closes one last post
// with endsAt resolves it. Only the Alertmanager targets are posted to (page_sink.h): webhooks
// and commands were paged once and are not paged again.
//
// Posts run on their own thread; tick() and resolve() never wait for the network.
#pragma once

#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/runbook/pager.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

inline constexpr int64_t kAlertResendNs = 60 * kNsPerSec;

class AlertKeeper {
 public:
  // `targets`: the job's pagers; only those whose sink keeps its alert alive (Alertmanager's,
  // PageSink::keeps_alert_alive) are kept.
  explicit AlertKeeper(const std::vector<spec::Pager>& targets, PagerOptions options = {});
  ~AlertKeeper();  // waits for a post in flight
  AlertKeeper(const AlertKeeper&) = delete;
  AlertKeeper& operator=(const AlertKeeper&) = delete;

  bool has_targets() const { return !targets_.empty(); }
  bool firing() const { return alert_.has_value(); }

  // The alert was just sent as part of the page (at `mono_ns`): re-send it from now on.
  void sent(const PageMessage& m, int64_t mono_ns);
  // An alert that may have gone unrefreshed (a restarted watcher adopting an open incident):
  // the next tick posts it at once.
  void adopt(const PageMessage& m);
  // Re-posts when kAlertResendNs has passed since the last post. Returns the failure of the
  // previous re-post, once, for the caller's log.
  std::optional<std::string> tick(int64_t mono_ns);
  // Posts the alert with endsAt = `wall_ns` and forgets it. No alert firing: nothing.
  void resolve(int64_t wall_ns);

 private:
  std::optional<std::string> reap(bool wait);
  void post(PageMessage m);

  std::vector<spec::Pager> targets_;
  PagerOptions options_;
  std::optional<PageMessage> alert_;
  std::optional<int64_t> last_sent_mono_ns_;
  std::optional<std::future<std::vector<PageResult>>> inflight_;
};

}  // namespace stepwatch::runbook
