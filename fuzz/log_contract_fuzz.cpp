// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the log contract. Input: byte 0 picks a preset (low bits, modulo the
// presets) and whether patterns of one's own follow (bit 7); then, with bit 7, one line of
// tab-separated RE2 patterns: step, phase_start, phase_end, noise...; the rest is log lines,
// fed one per '\n'. A line of a single NUL byte resets the contract (a new incarnation); a line
// "\x01" N TEXT is TEXT repeated to N x 300 bytes, so lines past kMaxLogLineBytes are in reach.
//
// Properties: every preset compiles; one's own patterns compile exactly when RE2 takes them and
// they have the groups docs/log-contract.md requires, and an error names the field; classify()
// agrees with feed(); events and the folded state stay within the contract (steps >= 0, valid
// phase names, counts that add up, times that never run ahead of the last line).
#include <re2/re2.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/require.h"
#include "fuzz/text.h"
#include "src/contract/names.h"
#include "src/probe/log_contract.h"
#include "src/probe/log_presets.h"

namespace {

using stepwatch::probe::LogContract;
using stepwatch::probe::LogEvent;
using stepwatch::probe::LogEventKind;
using stepwatch::probe::LogLine;
using stepwatch::probe::LogPatterns;

using stepwatch::fuzz::split;

// What the field must satisfy, checked with RE2 directly: "" when acceptable.
enum class Groups { kNone, kStep, kPhase };
bool acceptable(const std::string& pattern, Groups groups) {
  RE2::Options options;
  options.set_log_errors(false);
  RE2 re(pattern, options);
  if (!re.ok()) return false;
  for (const auto& [name, index] : re.NamedCapturingGroups()) {
    if (groups == Groups::kStep && name == "step") return true;
    if (groups == Groups::kPhase &&
        (name == "phase" || (name.size() > 6 && name.starts_with("phase_")))) {
      return true;
    }
  }
  return groups == Groups::kNone;
}

// The field the first unacceptable pattern is in, in the order compile() reads them; "" if none.
std::string first_bad_field(const LogPatterns& p) {
  if (!p.step.empty() && !acceptable(p.step, Groups::kStep)) return "step: ";
  if (!p.phase_start.empty() && !acceptable(p.phase_start, Groups::kPhase)) return "phase_start: ";
  if (!p.phase_end.empty() && !acceptable(p.phase_end, Groups::kNone)) return "phase_end: ";
  for (size_t i = 0; i < p.noise.size(); ++i) {
    if (!acceptable(p.noise[i], Groups::kNone)) return "noise[" + std::to_string(i) + "]: ";
  }
  return "";
}

// Each preset compiled once: copies share the compiled patterns and start with a fresh state.
const LogContract& preset_contract(std::string_view name) {
  static const auto contracts = [] {
    std::vector<std::pair<std::string_view, LogContract>> all;
    for (const auto& preset : stepwatch::probe::log_presets()) {
      LogPatterns p;
      p.preset = std::string(preset.name);
      auto c = LogContract::compile(p);
      FUZZ_REQUIRE(c.ok());  // every built-in preset compiles
      all.emplace_back(preset.name, std::move(*c));
    }
    return all;
  }();
  for (const auto& [n, c] : contracts) {
    if (n == name) return c;
  }
  stepwatch::fuzz::violated("every name comes from log_presets()", __FILE__, __LINE__);
}

bool same_loss(const std::optional<double>& a, const std::optional<double>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (std::isnan(*a) ? std::isnan(*b) : *a == *b);
}

bool same_event(const LogEvent& a, const LogEvent& b) {
  return a.kind == b.kind && a.step == b.step && a.epoch == b.epoch && same_loss(a.loss, b.loss) &&
         a.phase == b.phase && a.nested == b.nested;
}

void check_event(const LogEvent& e) {
  // A step's number, or -1 for a tick (a step line that shows no number: a Trainer's loss dict).
  FUZZ_REQUIRE(e.kind != LogEventKind::kStep || e.step >= -1);
  FUZZ_REQUIRE(e.kind == LogEventKind::kStep || (!e.counted && !e.inner && !e.epoch));
  FUZZ_REQUIRE(!e.loss || e.kind == LogEventKind::kStep || e.kind == LogEventKind::kLoss);
  FUZZ_REQUIRE(e.kind != LogEventKind::kLoss || e.loss);
  if (e.kind == LogEventKind::kPhaseStart) {
    FUZZ_REQUIRE(stepwatch::contract::validate_phase(e.phase).ok());
  } else if (e.kind == LogEventKind::kPhaseEnd) {
    FUZZ_REQUIRE(e.phase.empty() || stepwatch::contract::validate_phase(e.phase).ok());
  } else {
    FUZZ_REQUIRE(e.phase.empty());
  }
  FUZZ_REQUIRE(!e.epoch || *e.epoch >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto presets = stepwatch::probe::log_presets();
  std::string_view preset = presets[data[0] % presets.size()].name;
  bool own = (data[0] & 0x80) != 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::optional<LogContract> contract;
  if (own) {
    size_t nl = rest.find('\n');
    auto fields = split(rest.substr(0, nl), '\t');
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    LogPatterns p;
    p.preset = std::string(preset);
    p.step = std::string(fields[0]);
    if (fields.size() > 1) p.phase_start = std::string(fields[1]);
    if (fields.size() > 2) p.phase_end = std::string(fields[2]);
    for (size_t i = 3; i < fields.size(); ++i) p.noise.emplace_back(fields[i]);
    auto c = LogContract::compile(p);
    std::string bad = first_bad_field(p);
    FUZZ_REQUIRE(c.ok() == bad.empty());
    if (!c) {
      FUZZ_REQUIRE(c.error().code == stepwatch::Errc::kInvalidArgument);
      FUZZ_REQUIRE(c.error().message.starts_with(bad));
      return 0;
    }
    contract.emplace(std::move(*c));
  } else {
    contract.emplace(preset_contract(preset));
  }
  const bool auto_mode = preset == stepwatch::probe::kLogPresetAuto;

  int64_t wall = 1'000'000;
  uint64_t fed = 0, counted = 0;
  for (std::string_view line : split(rest, '\n')) {
    wall += 1000;
    if (line == std::string_view("\0", 1)) {
      contract->reset(wall);
      fed = counted = 0;
      continue;
    }
    std::string long_line;
    if (line.size() >= 2 && line[0] == '\x01') {
      size_t n = static_cast<uint8_t>(line[1]) * size_t{300};
      std::string_view text = line.size() > 2 ? line.substr(2) : std::string_view("x");
      while (long_line.size() < n) long_line += text;
      line = long_line;
    }
    std::string before = contract->state().preset;
    LogLine classified = contract->classify(line);
    LogLine got = contract->feed(line, wall);
    ++fed;
    const auto& s = contract->state();

    FUZZ_REQUIRE(got.truncated == (line.size() > stepwatch::probe::kMaxLogLineBytes));
    FUZZ_REQUIRE(classified.truncated == got.truncated);
    // classify() reads the line as feed() does, unless auto picked a preset on it.
    if (!auto_mode || s.preset == before) {
      FUZZ_REQUIRE(classified.events.size() == got.events.size());
      for (size_t i = 0; i < got.events.size(); ++i) {
        FUZZ_REQUIRE(same_event(classified.events[i], got.events[i]));
      }
    }
    for (const auto& e : got.events) {
      check_event(e);
      counted += e.counted;
      FUZZ_REQUIRE(e.picked.empty() || auto_mode);
      FUZZ_REQUIRE(e.held_line == 0);
    }
    // The lines auto held back before it picked, read once it picked: earlier lines of this run.
    for (const auto& e : got.held) {
      check_event(e);
      counted += e.counted;
      FUZZ_REQUIRE(auto_mode && e.held_line >= 1 && e.held_line < fed);
    }

    FUZZ_REQUIRE(s.lines_total == fed && s.noise_lines <= s.lines_total);
    FUZZ_REQUIRE(s.held_lines_read <= s.lines_total);
    FUZZ_REQUIRE(s.last_line_wall_ns == wall);
    FUZZ_REQUIRE(s.step_count == counted);
    FUZZ_REQUIRE(s.step.has_value() == (s.step_count > 0));
    FUZZ_REQUIRE(!s.step || *s.step >= 0);
    FUZZ_REQUIRE(s.step_wall_ns <= wall && s.loss_wall_ns <= wall && s.phase_since_wall_ns <= wall);
    FUZZ_REQUIRE(stepwatch::contract::validate_phase(s.phase).ok());
    FUZZ_REQUIRE(s.loss.has_value() == (s.loss_wall_ns > 0));
    if (auto_mode) {
      FUZZ_REQUIRE(s.preset.empty() || stepwatch::probe::find_log_preset(s.preset) != nullptr);
    } else {
      FUZZ_REQUIRE(s.preset == preset);
    }
  }
  return 0;
}
