// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The webhook sink: one POST of the generic page document (page_json) to the target's URL.
#include "src/runbook/page_sink.h"

namespace stepwatch::runbook {

namespace {

class WebhookSink final : public HttpPostSink {
 public:
  WebhookSink(const spec::Pager& target, const PagerOptions& options)
      : HttpPostSink(target.url, options) {}

 protected:
  std::string body(const PageMessage& m) const override { return page_json(m); }
};

}  // namespace

std::unique_ptr<PageSink> make_webhook_sink(const spec::Pager& target,
                                            const PagerOptions& options) {
  return std::make_unique<WebhookSink>(target, options);
}

}  // namespace stepwatch::runbook
