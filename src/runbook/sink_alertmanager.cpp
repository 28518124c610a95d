// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The Alertmanager sink: one POST of the page as an alert (alertmanager_json) to Alertmanager's
// API v2 (`{url}/api/v2/alerts`). The alert fires only while it is re-posted, so AlertKeeper
// keeps it alive and resolves it (endsAt) when the incident closes.
#include "src/runbook/page_sink.h"

namespace stepwatch::runbook {

namespace {

class AlertmanagerSink final : public HttpPostSink {
 public:
  AlertmanagerSink(const spec::Pager& target, const PagerOptions& options)
      : HttpPostSink(alertmanager_alerts_url(target.url), options) {}

  bool keeps_alert_alive() const override { return true; }

 protected:
  std::string body(const PageMessage& m) const override { return alertmanager_json(m); }
};

}  // namespace

std::unique_ptr<PageSink> make_alertmanager_sink(const spec::Pager& target,
                                                 const PagerOptions& options) {
  return std::make_unique<AlertmanagerSink>(target, options);
}

}  // namespace stepwatch::runbook
