// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The command sink: runs the target's command ({job} expanded) once through run_command, the page
// document (page_json) on its stdin and the page's main fields in STEPWATCH_PAGE_* variables.
#include <fmt/format.h>
#include <signal.h>

#include <cctype>
#include <cstring>

#include "src/common/duration.h"
#include "src/runbook/command.h"
#include "src/runbook/page_sink.h"
#include "src/spec/command_template.h"

namespace stepwatch::runbook {

namespace {

// The last line(s) of a command's output, one line, at most 200 bytes.
std::string output_tail(const std::string& out) {
  std::string t = out;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.size() > 200) t = "..." + t.substr(t.size() - 197);
  for (char& c : t) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return t;
}

class CommandSink final : public PageSink {
 public:
  CommandSink(const spec::Pager& target, const PagerOptions& options)
      : command_(target.command), run_(options.run) {}

  std::string destination(const PageMessage& m) const override {
    std::vector<std::string> argv = argv_for(m);
    return argv.empty() ? "(empty)" : argv[0];
  }

  Attempt deliver(const PageMessage& m, int64_t timeout_ns) override {
    std::vector<std::string> argv = argv_for(m);
    std::vector<std::pair<std::string, std::string>> env = {
        {"STEPWATCH_PAGE_JOB", m.job},
        {"STEPWATCH_PAGE_STATE", m.state},
        {"STEPWATCH_PAGE_CAUSE", m.cause},
        {"STEPWATCH_PAGE_SUMMARY", m.summary},
        {"STEPWATCH_PAGE_INCIDENT", m.incident_id},
        {"STEPWATCH_PAGE_OWNER", m.owner}};
    std::string body = page_json(m);
    return run_ ? run_(argv, env, body, timeout_ns)
                : run_pager_command(argv, env, body, timeout_ns);
  }

 private:
  std::vector<std::string> argv_for(const PageMessage& m) const {
    return spec::expand_command(command_, {{"job", m.job}});
  }

  std::vector<std::string> command_;  // as the spec wrote it: {job} not yet expanded
  decltype(PagerOptions::run) run_;   // empty: run_pager_command
};

}  // namespace

Attempt run_pager_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env,
                          const std::string& input, int64_t timeout_ns) {
  Attempt a;
  if (argv.empty() || argv[0].empty()) {
    a.permanent = true;
    a.detail = "the pager command is empty";
    return a;
  }
  const std::string& prog = argv[0];
  CommandOptions options;
  options.timeout_ns = timeout_ns;
  options.input = input;
  options.env = env;
  options.max_output = 4096;  // the tail of it goes into the page's outcome
  options.keep_tail = true;
  CommandResult c = run_command(argv, options);
  if (!c.started) {
    a.detail = c.error;
    return a;
  }
  if (c.exec_errno != 0) {
    a.permanent = true;
    a.detail = c.error;
    return a;
  }
  std::string tail = output_tail(c.output);
  std::string said = tail.empty() ? "" : ": " + tail;
  if (c.timed_out) {
    a.detail = c.error.empty()
                   ? fmt::format("{} timed out after {}; its process group was killed{}", prog,
                                 format_duration(timeout_ns), said)
                   : c.error + said;
  } else if (c.term_signal != 0) {
    a.detail = fmt::format("{} was killed by signal {} ({}){}", prog, c.term_signal,
                           sigabbrev_np(c.term_signal) ? sigabbrev_np(c.term_signal) : "?", said);
  } else if (c.exit_code >= 0) {
    a.exit_code = c.exit_code;
    a.ok = c.exit_code == 0;
    a.detail = a.ok ? fmt::format("{} exited 0", prog)
                    : fmt::format("{} exited with status {}{}", prog, c.exit_code, said);
  } else {
    a.detail = c.error.empty() ? fmt::format("{}: no exit status", prog) : c.error;
  }
  return a;
}

std::unique_ptr<PageSink> make_command_sink(const spec::Pager& target,
                                            const PagerOptions& options) {
  return std::make_unique<CommandSink>(target, options);
}

}  // namespace stepwatch::runbook
