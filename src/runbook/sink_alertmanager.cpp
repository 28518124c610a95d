// The Alertmanager sink: one POST of the page as an alert (alertmanager_json) to Alertmanager's
// API v2 (`{url}/api/v2/alerts`). The alert fires only while it is re-posted, so AlertKeeper
// keeps it alive and resolves it (endsAt) when the incident closes.
#include "src/common/host.h"
#include "src/runbook/page_sink.h"

namespace stepwatch::runbook {

namespace {

class AlertmanagerSink final : public PageSink {
 public:
  AlertmanagerSink(const spec::Pager& target, const PagerOptions& options)
      : url_(alertmanager_alerts_url(target.url)), post_(options.post) {}

  std::string destination(const PageMessage&) const override { return redact_url(url_); }

  Attempt deliver(const PageMessage& m, int64_t timeout_ns) override {
    std::string body = alertmanager_json(m);
    return post_ ? post_(url_, body, timeout_ns) : post_json(url_, body, timeout_ns);
  }

  bool keeps_alert_alive() const override { return true; }

 private:
  std::string url_;                    // .../api/v2/alerts
  decltype(PagerOptions::post) post_;  // empty: post_json
};

}  // namespace

std::unique_ptr<PageSink> make_alertmanager_sink(const spec::Pager& target,
                                                 const PagerOptions& options) {
  return std::make_unique<AlertmanagerSink>(target, options);
}

}  // namespace stepwatch::runbook
