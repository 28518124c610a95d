// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Where a page goes: one sink per kind of [[runbook.pager]] target, each in a file of its own,
// all made in one place (make_page_sink, page_sink.cpp):
//   webhook       sink_webhook.cpp       POSTs page_json to the URL
//   alertmanager  sink_alertmanager.cpp  POSTs alertmanager_json to {url}/api/v2/alerts, and
//                                        keeps the alert alive while it fires (alert_keeper.h)
//   command       sink_command.cpp       runs the command: page_json on its stdin, STEPWATCH_PAGE_*
//                                        in its environment, {job} expanded in its arguments
// A sink makes one attempt. Retries, backoff, each attempt's deadline and the PageResult are
// page_one's (pager.h), the same for every kind. A new kind is one file here, one value of
// spec::PagerKind with its name and spec rules, and one row of page_sink.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "src/runbook/pager.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

class PageSink {
 public:
  virtual ~PageSink() = default;
  // Where page m goes, as results and logs show it after the kind's name: the URL without its
  // path or credentials (redact_url), or the program ("/usr/bin/notify").
  virtual std::string destination(const PageMessage& m) const = 0;
  // One attempt to deliver m, bounded by timeout_ns: ok, or what happened and whether another
  // attempt can help (Attempt::permanent). Expected failures are values, never thrown.
  virtual Attempt deliver(const PageMessage& m, int64_t timeout_ns) = 0;
  // Whether the page is an alert that fires only while it is re-posted (Alertmanager ends an
  // alert nobody re-posts): AlertKeeper re-posts it to these targets until the incident closes.
  virtual bool keeps_alert_alive() const { return false; }
};

// What the HTTP kinds share: one POST of a JSON body, the kind's, to a URL (through
// options.post when that test seam is set, else post_json); destination() is the URL redacted.
class HttpPostSink : public PageSink {
 public:
  HttpPostSink(std::string url, const PagerOptions& options);
  std::string destination(const PageMessage& m) const override;
  Attempt deliver(const PageMessage& m, int64_t timeout_ns) override;

 protected:
  virtual std::string body(const PageMessage& m) const = 0;

 private:
  std::string url_;
  decltype(PagerOptions::post) post_;  // empty: post_json
};

// The sink for `target` (its kind), sending through options.post / options.run when the test
// seams are set, else through post_json / run_pager_command. nullptr: a kind without a sink
// (the spec's reader admits none).
std::unique_ptr<PageSink> make_page_sink(const spec::Pager& target,
                                         const PagerOptions& options = {});

// One file each (sink_<kind>.cpp).
std::unique_ptr<PageSink> make_webhook_sink(const spec::Pager& target, const PagerOptions& options);
std::unique_ptr<PageSink> make_alertmanager_sink(const spec::Pager& target,
                                                 const PagerOptions& options);
std::unique_ptr<PageSink> make_command_sink(const spec::Pager& target, const PagerOptions& options);

}  // namespace stepwatch::runbook
