// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/supervise/log_feed.h"

#include <fmt/format.h>

namespace stepwatch::supervise {

Result<std::unique_ptr<LogFeed>> LogFeed::create(const spec::LogContract& log, size_t keep_lines) {
  std::unique_ptr<LogFeed> f(new LogFeed());
  f->keep_ = keep_lines;
  bool configured =
      log.preset != spec::LogPreset::kNone || !log.step_pattern.empty() || !log.phase_start.empty();
  if (configured) {
    probe::LogPatterns p;
    p.preset = spec::log_preset_name(log.preset);
    p.step = log.step_pattern;
    p.phase_start = log.phase_start;
    p.phase_end = log.phase_end;
    p.noise = log.noise;
    auto c = probe::LogContract::compile(p);
    if (!c) return c.error();
    f->contract_ = std::move(*c);
    f->auto_ = log.preset == spec::LogPreset::kAuto;
  }
  return f;
}

void LogFeed::feed(std::string_view line, int64_t wall_ns) {
  std::lock_guard lock(mu_);
  ++lines_;
  last_line_wall_ns_ = wall_ns;
  recent_.emplace_back(line.substr(0, 4096));
  while (recent_.size() > keep_) recent_.pop_front();
  if (contract_) contract_->feed(line, wall_ns);
}

std::optional<contract::RankSnapshot> LogFeed::progress(const std::string& job,
                                                        uint32_t incarnation) const {
  std::lock_guard lock(mu_);
  if (!contract_) return std::nullopt;
  const probe::LogState& st = contract_->state();
  // Auto before its pick: the log has promised nothing, so it is no rank (nor an init stall).
  if (st.preset.empty()) return std::nullopt;
  contract::RankSnapshot r;
  r.source = contract::Source::kLog;
  r.path = "log";
  r.job = job;
  r.rank = 0;
  r.incarnation = incarnation;
  r.created = Stamp{started_wall_ns_, 0};
  if (st.step) {
    r.step = *st.step;
    r.step_at = Stamp{st.step_wall_ns, 0};
  }
  r.step_count = st.step_count;
  r.phase = st.phase;
  r.phase_since = Stamp{st.phase_since_wall_ns, 0};
  r.phase_count = st.phase_count;
  if (st.loss) {
    r.loss = *st.loss;
    r.loss_at = Stamp{st.loss_wall_ns, 0};
  }
  return r;
}

std::optional<std::string> LogFeed::take_pick() {
  std::lock_guard lock(mu_);
  if (!contract_ || !auto_ || contract_->state().preset == told_preset_) return std::nullopt;
  told_preset_ = contract_->state().preset;
  return fmt::format("{} (from output line {})", told_preset_, contract_->state().preset_line);
}

std::optional<detect::LogFacts> LogFeed::facts() const {
  std::lock_guard lock(mu_);
  detect::LogFacts f;
  f.lines_total = lines_;
  f.last_line_wall_ns = last_line_wall_ns_;
  if (contract_ && contract_->state().step) {
    f.last_step = *contract_->state().step;
    f.last_step_line_wall_ns = contract_->state().step_wall_ns;
  }
  return f;
}

std::vector<std::string> LogFeed::recent() const {
  std::lock_guard lock(mu_);
  return {recent_.begin(), recent_.end()};
}

void LogFeed::reset(int64_t wall_ns) {
  std::lock_guard lock(mu_);
  started_wall_ns_ = wall_ns;
  if (contract_) contract_->reset(wall_ns);
}

}  // namespace stepwatch::supervise
