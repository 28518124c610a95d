// The one place a page sink is made from the spec: a row per pager kind.
#include "src/runbook/page_sink.h"

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

std::unique_ptr<PageSink> make_page_sink(const spec::Pager& target, const PagerOptions& options) {
  for (const auto& row : kSinks) {
    if (row.kind == target.kind) return row.make(target, options);
  }
  return nullptr;
}

}  // namespace stepwatch::runbook
