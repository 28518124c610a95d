// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The log contract: how `stepwatch run` reads progress from a trainer's output when the trainer
// cannot be changed. Each output line is matched against RE2 patterns (linear time, so a user's
// pattern can never hang the supervisor): a step pattern, phase start/end patterns and noise.
// A log that keeps printing without a step line is not progress. docs/log-contract.md is the
// user-facing contract; keep the two in step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::probe {

struct LogMatchers;      // the compiled patterns (log_contract.cpp)
struct LogAutoMatchers;  // auto mode: every preset it may pick, with its signatures

// At most this much of one line is matched (the last segments of a '\r'-redrawn line, or the
// head of one very long segment); the rest is skipped, so a runaway line costs bounded work.
inline constexpr size_t kMaxLogLineBytes = 64 * 1024;
// Phase names are cut to this many bytes (the beacon's phase field holds 31).
inline constexpr size_t kMaxLogPhaseBytes = 31;
// auto holds back at most this many of the last lines (and bytes of them) until it picks a
// preset, and reads them with it: a step printed before the pick is not lost.
inline constexpr size_t kMaxHeldLines = 256;
inline constexpr size_t kMaxHeldBytes = 256 * 1024;

// What the job's spec says about its log. Explicit patterns replace the preset's step,
// phase_start and phase_end; noise patterns are added to the preset's.
struct LogPatterns {
  // A name of log_presets() ("" is none); auto picks one of them from the output
  // (docs/log-contract.md#auto)
  std::string preset = "none";
  // (?P<step>\d+) required; (?P<loss>...), (?P<epoch>\d+) and (?P<tick>) (a step whose number
  // the line does not show, when the step group took no part) optional
  std::string step{};
  std::string phase_start{};  // (?P<phase>...) captures the name, or (?P<phase_NAME>...) names it
  std::string phase_end{};    // the same groups, optional: without one, ends the current phase
  std::vector<std::string> noise{};  // matching lines are never progress and never reset anything
};

// log_contract.cpp indexes tables by this order.
enum class LogEventKind {
  kOther,       // nothing the contract knows
  kNoise,       // matched a noise pattern
  kStep,        // a completed step
  kLoss,        // a loss without a step number (the step group did not take part)
  kPhaseStart,  // a phase begins
  kPhaseEnd,    // a phase ends
};

const char* log_event_kind_name(LogEventKind kind);

// What one segment of a line said. A line is cut into segments at '\r' (a terminal redraw:
// tqdm) and '\n'; blank segments say nothing.
struct LogEvent {
  LogEventKind kind = LogEventKind::kOther;
  int64_t step = -1;  // kStep: the number the line shows (see LogState::step); -1: none (a tick)
  std::optional<int64_t> epoch;  // kStep: the epoch group, when the pattern has one and it matched
  std::optional<double> loss;    // kStep (when the loss group matched) and kLoss; NaN stays NaN
  std::string phase;             // kPhaseStart: the phase; kPhaseEnd: the phase named, or empty
  bool nested = false;           // drawn below the main line (a tqdm bar at position >= 1)
  // kPhaseStart drawn as a bar "N/M [": the inner loop's count N and total M; -1: no such bar
  int64_t bar_count = -1;
  int64_t bar_total = -1;
  bool counted = false;       // feed() only: this kStep was a new step (not a repeat)
  bool inner = false;         // feed() only: this kStep was the step bar redrawn by an inner loop
  std::string_view picked{};  // feed() only, auto: the preset this segment picked (or moved to)
  uint64_t held_line = 0;     // feed() only, in LogLine::held: the line it was read from (1-based)
};

// What one line said, segment by segment, in order.
struct LogLine {
  std::vector<LogEvent> events;  // empty: a blank line
  bool truncated = false;        // longer than kMaxLogLineBytes; only part of it was read
  // feed() only, auto: what the lines held back before this line's pick said, read (and folded
  // into the state) when it picked, before this line's own events; in order.
  std::vector<LogEvent> held;

  // The most telling kind: step > phase start > phase end > loss > noise > other.
  LogEventKind kind() const;
};

// The progress an uninstrumented trainer shows through its log, shaped like a rank's beacon
// (contract::RankSnapshot) so the supervisor can hand it to the detector as one rank.
struct LogProgress {
  // The last step counted: the number the line showed or, when the pattern reads an epoch,
  // that number plus the steps of the earlier epochs (docs/log-contract.md: it never goes
  // back at a new epoch). Empty before the first.
  std::optional<int64_t> step;
  uint64_t step_count = 0;          // step lines counted (a log may print every Nth step only)
  int64_t step_wall_ns = 0;         // when the last counted step line arrived; 0: never
  std::string phase = "init";       // "init" until the first step, then "train" or a labeled phase
  int64_t phase_since_wall_ns = 0;  // init: reset()'s time, else the first line's
  uint64_t phase_count = 0;         // phase transitions
  std::optional<double> loss;       // the last loss read; NaN when the log said nan
  int64_t loss_wall_ns = 0;
};

// Everything feed() has learned: the progress view plus the line counters.
struct LogState : LogProgress {
  uint64_t lines_total = 0;       // every line fed, noise and blank ones included
  uint64_t noise_lines = 0;       // lines whose most telling segment was noise
  int64_t last_line_wall_ns = 0;  // any line at all: output, not progress
  uint64_t steps_backwards = 0;   // counted steps lower than the one before in the same epoch
  std::optional<int64_t> epoch;   // the epoch of the last step line, when the pattern reads one
  uint64_t inner_redraws = 0;     // step-bar advances drawn by an inner loop: not counted
  // The preset whose patterns read the log: the configured one, or the one auto picked (empty
  // until then). Kept by reset(): a new incarnation runs the same trainer.
  std::string preset;
  uint64_t preset_line = 0;      // auto: the line (1-based, as lines_total counts) that picked it
  uint64_t held_lines_read = 0;  // auto: lines held back before the pick and read once it picked
};

// Compiled once per job; feed() and classify() from one thread at a time (in auto mode feed()
// switches the patterns that classify() uses).
class LogContract {
 public:
  // Compiles the preset's and the explicit patterns. Errors (kInvalidArgument) name the field,
  // quote the pattern and carry RE2's message; an unknown preset lists the allowed ones.
  static Result<LogContract> compile(const LogPatterns& patterns);

  // Classifies a line without touching the state. A trailing "\n" or "\r\n" is allowed. In
  // auto mode it uses the preset picked so far and never picks one.
  LogLine classify(std::string_view line) const;

  // Classifies a line that arrived at wall_ns and folds it into the state:
  // - every line counts in lines_total and last_line_wall_ns;
  // - a step counts unless it repeats the last step's position (number, and epoch when the
  //   pattern reads one: a redraw, two ranks printing the same step): a repeat changes only
  //   the loss; a lower number in the same epoch (a restart) counts, and so does any number
  //   under a new epoch;
  // - after a phase-start line drawn as a nested bar (Lightning's validation bar), the next
  //   advance of the step bar in the same epoch is that inner loop's: not counted; after one
  //   drawn unnested with its count ("Validation DataLoader 0:  46%|...| 73/157 ["), the advances
  //   up to its remaining batches are (Lightning 1.x counts them in the epoch bar);
  // - a step without a number (a tick) counts as one more step in a log that has shown no step
  //   number since reset(); after one, it only carries its loss;
  // - a counted step ends "init" or a labeled phase: the loop is training again;
  // - noise and other lines never change step, loss or phase;
  // - in auto mode, a segment that is unmistakably one framework's picks its preset first, and
  //   the lines held back before the first pick (the last kMaxHeldLines) are read with it.
  LogLine feed(std::string_view line, int64_t wall_ns);

  // Forgets steps, losses, phases and held-back lines (a new incarnation): "init" since
  // wall_ns. A preset that auto picked stays picked.
  void reset(int64_t wall_ns);

  const LogState& state() const { return state_; }
  LogProgress progress() const { return state_; }

 private:
  // Where the last step line stood, to tell repeats, new epochs and inner-loop redraws apart.
  struct Position {
    bool seen = false;             // a step line since reset()
    std::optional<int64_t> epoch;  // its epoch
    int64_t number = 0;            // the number it showed
    int64_t base = 0;              // steps of the earlier epochs
    int64_t skipped = 0;           // inner-loop advances of the step bar in this epoch
    bool inner_pending = false;    // a nested phase-start bar since the last step line
    int64_t inner_left = 0;        // advances still due to an unnested inner-loop bar
    bool numbered = false;         // a step line with a number since reset()
  };
  // auto: a line fed before the first pick, to be read once a preset is picked.
  struct HeldLine {
    std::string text;  // as bounded() cut it
    int64_t wall_ns = 0;
    uint64_t line = 0;  // its number, as lines_total counts
  };

  LogContract(std::shared_ptr<const LogMatchers> matchers,
              std::shared_ptr<const LogAutoMatchers> candidates);
  bool pick(std::string_view text);  // auto: picks (or refines) a preset from one segment
  void hold(std::string_view text, int64_t wall_ns);  // auto: keeps a line fed before the pick
  // auto, at the first pick: reads the held lines with the picked preset into `out`
  void read_held(std::vector<LogEvent>& out);
  void apply(LogEvent& event, int64_t wall_ns);
  void apply_step(LogEvent& event, int64_t wall_ns);
  void set_phase(std::string phase, int64_t wall_ns);

  std::shared_ptr<const LogMatchers> matchers_;  // shared: copies of a contract share the RE2s
  std::shared_ptr<const LogAutoMatchers> auto_;  // auto mode: the presets it may pick; else null
  int picked_ = -1;                              // auto: the candidate picked; -1: none yet
  LogState state_;
  Position pos_;
  std::deque<HeldLine> held_;  // auto, before the first pick: the last lines fed
  size_t held_bytes_ = 0;
};

}  // namespace stepwatch::probe
