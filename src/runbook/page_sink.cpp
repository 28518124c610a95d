// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one place a page sink is made from the spec: a row per pager kind.
#include "src/runbook/page_sink.h"

#include <utility>

#include "src/common/host.h"

namespace stepwatch::runbook {

namespace {

struct SinkRow {
  spec::PagerKind kind;
  std::unique_ptr<PageSink> (*make)(const spec::Pager& target, const PagerOptions& options);
};

constexpr SinkRow kSinks[] = {
    {spec::PagerKind::kWebhook, &make_webhook_sink},
    {spec::PagerKind::kAlertmanager, &make_alertmanager_sink},
    {spec::PagerKind::kCommand, &make_command_sink},
};

}  // namespace

HttpPostSink::HttpPostSink(std::string url, const PagerOptions& options)
    : url_(std::move(url)), post_(options.post) {}

std::string HttpPostSink::destination(const PageMessage&) const {
  return redact_url(url_);
}

Attempt HttpPostSink::deliver(const PageMessage& m, int64_t timeout_ns) {
  const std::string b = body(m);
  return post_ ? post_(url_, b, timeout_ns) : post_json(url_, b, timeout_ns);
}

std::unique_ptr<PageSink> make_page_sink(const spec::Pager& target, const PagerOptions& options) {
  for (const auto& row : kSinks) {
    if (row.kind == target.kind) return row.make(target, options);
  }
  return nullptr;
}

}  // namespace stepwatch::runbook
