// The webhook sink: one POST of the generic page document (page_json) to the target's URL.
#include "src/common/host.h"
#include "src/runbook/page_sink.h"

namespace stepwatch::runbook {

namespace {

class WebhookSink final : public PageSink {
 public:
  WebhookSink(const spec::Pager& target, const PagerOptions& options)
      : url_(target.url), post_(options.post) {}

  std::string destination(const PageMessage&) const override { return redact_url(url_); }

  Attempt deliver(const PageMessage& m, int64_t timeout_ns) override {
    std::string body = page_json(m);
    return post_ ? post_(url_, body, timeout_ns) : post_json(url_, body, timeout_ns);
  }

 private:
  std::string url_;
  decltype(PagerOptions::post) post_;  // empty: post_json
};

}  // namespace

std::unique_ptr<PageSink> make_webhook_sink(const spec::Pager& target,
                                            const PagerOptions& options) {
  return std::make_unique<WebhookSink>(target, options);
}

}  // namespace stepwatch::runbook
