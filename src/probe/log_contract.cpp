// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/log_contract.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <tuple>
#include <utility>

#include "src/probe/log_presets.h"

namespace stepwatch::probe {

namespace {

// One compiled pattern and where its named groups are.
struct Pattern {
  std::unique_ptr<RE2> re;
  int step_group = -1;
  int epoch_group = -1;
  int loss_group = -1;
  int tick_group = -1;  // (?P<tick>): a step without a number when the step group took no part
  int phase_group = -1;
  std::vector<std::pair<int, std::string>> named_phases;  // (?P<phase_NAME>...) groups
  int nsub = 0;  // submatches to ask for: the highest group used + 1

  // Matches text[from..] (text is the context for ^ and \b); on success groups[i] is group i
  // (data() == nullptr: no part).
  bool match(std::string_view text, size_t from, std::vector<re2::StringPiece>& groups) const {
    groups.assign(static_cast<size_t>(nsub), re2::StringPiece());
    return re->Match(re2::StringPiece(text.data(), text.size()), from, text.size(), RE2::UNANCHORED,
                     groups.data(), nsub);
  }
};

}  // namespace

struct LogMatchers {
  std::string_view preset;  // the preset's name (log_presets.cpp owns the string)
  std::vector<Pattern> noise;
  std::vector<Pattern> step;  // one per line shape, tried in order
  std::optional<Pattern> phase_start;
  std::optional<Pattern> phase_end;
  bool step_from_preset = false;  // preset steps never come from a nested bar (see classify)
};

struct LogAutoMatchers {
  struct Candidate {
    std::shared_ptr<const LogMatchers> matchers;  // the preset's patterns and the explicit ones
    std::vector<Pattern> detect;                  // its signatures
    int refines = -1;                             // the candidate this one refines; -1: none
    bool refined = false;                         // another candidate refines this one
  };
  std::vector<Candidate> candidates;  // presets that refine another come first
};

namespace {

Result<Pattern> compile_pattern(const std::string& field, std::string_view text) {
  RE2::Options options;
  options.set_log_errors(false);
  Pattern p;
  p.re = std::make_unique<RE2>(re2::StringPiece(text.data(), text.size()), options);
  if (!p.re->ok()) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("{}: invalid RE2 pattern \"{}\": {}", field, text, p.re->error())};
  }
  for (const auto& [name, index] : p.re->NamedCapturingGroups()) {
    bool used = true;
    if (name == "step") {
      p.step_group = index;
    } else if (name == "epoch") {
      p.epoch_group = index;
    } else if (name == "loss") {
      p.loss_group = index;
    } else if (name == "tick") {
      p.tick_group = index;
    } else if (name == "phase") {
      p.phase_group = index;
    } else if (name.size() > 6 && name.compare(0, 6, "phase_") == 0) {
      p.named_phases.emplace_back(index, name.substr(6, kMaxLogPhaseBytes));
    } else {
      used = false;
    }
    if (used) p.nsub = std::max(p.nsub, index + 1);
  }
  std::sort(p.named_phases.begin(), p.named_phases.end());
  return p;
}

bool took_part(const re2::StringPiece& g) {
  return g.data() != nullptr;
}

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// A non-negative decimal integer, nothing else.
std::optional<int64_t> parse_step(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || s.front() == '-') {
    return std::nullopt;
  }
  return v;
}

// The number at the start of s: "2.3456", "1.089123E+01", "nan", "NAN", "-inf".
std::optional<double> parse_loss(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

// A phase name as the beacon stores it: [A-Za-z0-9._:/-], at most kMaxLogPhaseBytes.
std::string phase_name(std::string_view raw) {
  raw = trim(raw).substr(0, kMaxLogPhaseBytes);
  std::string out(raw);
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

// The phase a match names: the first (?P<phase_NAME>) that took part, else (?P<phase>).
std::string matched_phase(const Pattern& p, const std::vector<re2::StringPiece>& g) {
  for (const auto& [index, name] : p.named_phases) {
    if (took_part(g[static_cast<size_t>(index)])) return name;
  }
  if (p.phase_group >= 0 && took_part(g[static_cast<size_t>(p.phase_group)])) {
    const auto& s = g[static_cast<size_t>(p.phase_group)];
    return phase_name(std::string_view(s.data(), s.size()));
  }
  return {};
}

// Skips the escape sequence at s[i] (ESC). Sets *up for a cursor-up (CSI A or F): tqdm draws a
// nested bar on the line below and moves back up after it.
size_t skip_escape(std::string_view s, size_t i, bool* up) {
  auto at = [&](size_t j) { return static_cast<unsigned char>(s[j]); };
  size_t j = i + 1;
  if (j >= s.size()) return j;
  char kind = s[j++];
  if (kind == '[') {  // CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E
    while (j < s.size() && at(j) >= 0x30 && at(j) <= 0x3F) ++j;
    while (j < s.size() && at(j) >= 0x20 && at(j) <= 0x2F) ++j;
    if (j < s.size() && at(j) >= 0x40 && at(j) <= 0x7E) {
      if (s[j] == 'A' || s[j] == 'F') *up = true;
      ++j;
    }
    return j;
  }
  if (kind == ']' || kind == 'P' || kind == '_' || kind == '^' || kind == 'X') {
    // OSC, DCS, APC, PM, SOS: a string up to BEL or ESC '\'.
    for (; j < s.size(); ++j) {
      if (s[j] == '\a') return j + 1;
      if (s[j] == '\x1b' && j + 1 < s.size() && s[j + 1] == '\\') return j + 2;
    }
    return j;
  }
  // ESC [intermediates] final: "ESC 7", "ESC ( B".
  --j;
  while (j < s.size() && at(j) >= 0x20 && at(j) <= 0x2F) ++j;
  if (j < s.size() && at(j) >= 0x30 && at(j) <= 0x7E) ++j;
  return j;
}

struct Segment {
  std::string text;     // without escape sequences and control characters (tabs stay)
  bool nested = false;  // it moved the cursor up: drawn below the main line
};

Segment clean(std::string_view raw) {
  Segment seg;
  seg.text.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    auto c = static_cast<unsigned char>(raw[i]);
    if (c == 0x1b) {
      i = skip_escape(raw, i, &seg.nested);
      continue;
    }
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      ++i;
      continue;
    }
    seg.text.push_back(raw[i++]);
  }
  return seg;
}

// The part of a line that is matched: all of it, or its last kMaxLogLineBytes cut at a segment
// start (a redrawn line ends with what the terminal shows), or, when its last segment alone is
// longer than that, the head of that segment.
std::string_view bounded(std::string_view line, bool* truncated) {
  if (line.size() <= kMaxLogLineBytes) return line;
  *truncated = true;
  std::string_view tail = line.substr(line.size() - kMaxLogLineBytes);
  size_t cut = tail.find_first_of("\r\n");
  if (cut != std::string_view::npos && !blank(tail.substr(cut + 1))) return tail.substr(cut + 1);
  size_t end = line.find_last_not_of(" \t\r\n");
  size_t start = line.find_last_of("\r\n", end);
  start = start == std::string_view::npos ? 0 : start + 1;
  return line.substr(start, kMaxLogLineBytes);
}

// Whether the number g holds is part of a decimal ("1172.13": DeepSpeed's optimizer-step time
// in milliseconds, "| step: 1172.13"): a step number is a whole number.
bool decimal_part(std::string_view text, const re2::StringPiece& g) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t b = static_cast<size_t>(g.data() - text.data());
  size_t e = b + g.size();
  return (b >= 2 && text[b - 1] == '.' && digit(text[b - 2])) ||
         (e + 1 < text.size() && text[e] == '.' && digit(text[e + 1]));
}

// Reads one step pattern into e. False when it does not match; a match whose step is part of
// a decimal number is no match, and the search goes on after it, a few times at most (each
// search is linear in the segment: a line full of decimals must not cost quadratic time).
bool read_step(const Pattern& p, std::string_view text, std::vector<re2::StringPiece>& g,
               LogEvent& e) {
  constexpr int kMaxSearches = 8;
  size_t from = 0;
  for (int n = 0; n < kMaxSearches && from <= text.size() && p.match(text, from, g); ++n) {
    const auto& s = g[static_cast<size_t>(p.step_group)];
    if (took_part(s) && decimal_part(text, s)) {
      from = std::max(from + 1, static_cast<size_t>(s.data() + s.size() - text.data()));
      continue;
    }
    std::optional<double> loss;
    if (p.loss_group >= 0 && took_part(g[static_cast<size_t>(p.loss_group)])) {
      const auto& l = g[static_cast<size_t>(p.loss_group)];
      loss = parse_loss(std::string_view(l.data(), l.size()));
    }
    std::optional<int64_t> epoch;
    if (p.epoch_group >= 0 && took_part(g[static_cast<size_t>(p.epoch_group)])) {
      const auto& ep = g[static_cast<size_t>(p.epoch_group)];
      epoch = parse_step(std::string_view(ep.data(), ep.size()));
      if (!epoch) return true;  // an epoch beyond 64 bits: nothing this line says is trusted
    }
    if (took_part(s)) {
      if (auto step = parse_step(std::string_view(s.data(), s.size()))) {
        e.kind = LogEventKind::kStep;
        e.step = *step;
        e.epoch = epoch;
        e.loss = loss;
      }
    } else if (p.tick_group >= 0 && took_part(g[static_cast<size_t>(p.tick_group)])) {
      e.kind = LogEventKind::kStep;  // a step the line reports without its number
      e.step = -1;
      e.loss = loss;
    } else if (loss) {
      e.kind = LogEventKind::kLoss;
      e.loss = loss;
    }
    return true;
  }
  return false;
}

// The count and total of the first tqdm bar in text ("| 73/157 [", " 0/2 ["), if any.
std::optional<std::pair<int64_t, int64_t>> bar_count(std::string_view text) {
  auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  for (size_t i = text.find(" ["); i != std::string_view::npos; i = text.find(" [", i + 1)) {
    size_t e = i;
    size_t b = e;
    while (b > 0 && digit(text[b - 1])) --b;
    if (b == e || b == 0 || text[b - 1] != '/') continue;
    size_t total_b = b;
    size_t ce = b - 1;
    size_t cb = ce;
    while (cb > 0 && digit(text[cb - 1])) --cb;
    if (cb == ce) continue;
    auto count = parse_step(text.substr(cb, ce - cb));
    auto total = parse_step(text.substr(total_b, e - total_b));
    if (count && total) return std::pair{*count, *total};
  }
  return std::nullopt;
}

LogEvent classify_segment(const LogMatchers& c, const Segment& seg) {
  LogEvent e;
  e.nested = seg.nested;
  std::vector<re2::StringPiece> g;
  for (const Pattern& p : c.noise) {
    if (p.match(seg.text, 0, g)) {
      e.kind = LogEventKind::kNoise;
      return e;
    }
  }
  if (c.phase_start && c.phase_start->match(seg.text, 0, g)) {
    std::string name = matched_phase(*c.phase_start, g);
    if (!name.empty()) {
      e.kind = LogEventKind::kPhaseStart;
      e.phase = std::move(name);
      if (auto bar = bar_count(seg.text)) std::tie(e.bar_count, e.bar_total) = *bar;
      return e;
    }
  }
  if (c.phase_end && c.phase_end->match(seg.text, 0, g)) {
    e.kind = LogEventKind::kPhaseEnd;
    e.phase = matched_phase(*c.phase_end, g);
    return e;
  }
  // A preset's step is never read from a nested progress bar (tqdm position >= 1): that is an
  // inner loop such as Hugging Face's evaluation bar, which looks exactly like the training bar.
  if (seg.nested && c.step_from_preset) return e;
  for (const Pattern& p : c.step) {
    if (read_step(p, seg.text, g, e)) break;  // the first shape that matches decides
  }
  return e;
}

// Calls f(segment) for every non-blank segment of an already bounded line.
template <typename F>
void for_each_segment(std::string_view text, F&& f) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) {
      Segment seg = clean(text.substr(pos, end - pos));
      if (!blank(seg.text)) f(seg);
    }
    pos = end + 1;
  }
}

// How telling a kind is, indexed by LogEventKind: step > phase start > phase end > loss > noise.
constexpr int kTelling[] = {0, 1, 5, 2, 4, 3};

int telling(LogEventKind k) {
  return kTelling[static_cast<int>(k)];
}

// One preset's patterns with the explicit ones: explicit step, phase_start and phase_end
// replace the preset's (an empty one keeps the preset's), explicit noise is added.
Result<std::shared_ptr<LogMatchers>> compile_matchers(const LogPresetPatterns& preset,
                                                      const LogPatterns& patterns) {
  auto c = std::make_shared<LogMatchers>();
  c->preset = preset.name;
  auto add_step = [&](const std::string& field, std::string_view text) -> Result<void> {
    auto p = compile_pattern(field, text);
    if (!p) return p.error();
    if (p->step_group < 0) {
      return Error{Errc::kInvalidArgument,
                   fmt::format("{}: pattern \"{}\" has no named group (?P<step>...)", field, text)};
    }
    c->step.push_back(std::move(*p));
    return {};
  };
  if (!patterns.step.empty()) {
    if (auto r = add_step("step", patterns.step); !r) return r.error();
  } else {
    for (size_t i = 0; i < preset.step.size(); ++i) {
      auto r = add_step(fmt::format("preset {} step[{}]", preset.name, i), preset.step[i]);
      if (!r) return r.error();
    }
    c->step_from_preset = true;
  }
  auto pick = [](const std::string& own, std::string_view preset_text) {
    return own.empty() ? preset_text : std::string_view(own);
  };
  std::string_view start = pick(patterns.phase_start, preset.phase_start);
  if (!start.empty()) {
    auto p = compile_pattern("phase_start", start);
    if (!p) return p.error();
    if (p->phase_group < 0 && p->named_phases.empty()) {
      return Error{Errc::kInvalidArgument,
                   fmt::format("phase_start: pattern \"{}\" has no named group (?P<phase>...) "
                               "or (?P<phase_NAME>...)",
                               start)};
    }
    c->phase_start = std::move(*p);
  }
  std::string_view end = pick(patterns.phase_end, preset.phase_end);
  if (!end.empty()) {
    auto p = compile_pattern("phase_end", end);
    if (!p) return p.error();
    c->phase_end = std::move(*p);
  }
  for (std::string_view text : preset.noise) {
    auto p = compile_pattern(fmt::format("preset {} noise", preset.name), text);
    if (!p) return p.error();
    c->noise.push_back(std::move(*p));
  }
  for (size_t i = 0; i < patterns.noise.size(); ++i) {
    auto p = compile_pattern(fmt::format("noise[{}]", i), patterns.noise[i]);
    if (!p) return p.error();
    c->noise.push_back(std::move(*p));
  }
  return c;
}

// auto: every preset with signatures, those that refine another first (NeMo before Lightning:
// a NeMo bar is also a Lightning bar).
Result<std::shared_ptr<LogAutoMatchers>> compile_auto(const LogPatterns& patterns) {
  auto a = std::make_shared<LogAutoMatchers>();
  for (bool refining : {true, false}) {
    for (const auto& preset : log_presets()) {
      if (preset.detect.empty() || preset.refines.empty() == refining) continue;
      auto m = compile_matchers(preset, patterns);
      if (!m) return m.error();
      LogAutoMatchers::Candidate c;
      c.matchers = std::move(*m);
      for (size_t i = 0; i < preset.detect.size(); ++i) {
        auto p =
            compile_pattern(fmt::format("preset {} detect[{}]", preset.name, i), preset.detect[i]);
        if (!p) return p.error();
        p->nsub = 0;  // only whether it matches
        c.detect.push_back(std::move(*p));
      }
      a->candidates.push_back(std::move(c));
    }
  }
  auto& cs = a->candidates;
  for (auto& c : cs) {
    std::string_view refines = find_log_preset(c.matchers->preset)->refines;
    for (size_t j = 0; j < cs.size() && !refines.empty(); ++j) {
      if (cs[j].matchers->preset == refines) {
        c.refines = static_cast<int>(j);
        cs[j].refined = true;
      }
    }
  }
  return a;
}

}  // namespace

const char* log_event_kind_name(LogEventKind kind) {
  static const char* const kNames[] = {"other", "noise",       "step",
                                       "loss",  "phase_start", "phase_end"};
  return kNames[static_cast<int>(kind)];
}

LogEventKind LogLine::kind() const {
  LogEventKind best = LogEventKind::kOther;
  for (const auto& e : events) {
    if (telling(e.kind) > telling(best)) best = e.kind;
  }
  return best;
}

LogContract::LogContract(std::shared_ptr<const LogMatchers> matchers,
                         std::shared_ptr<const LogAutoMatchers> candidates)
    : matchers_(std::move(matchers)), auto_(std::move(candidates)) {
  if (!auto_) state_.preset = std::string(matchers_->preset);
}

Result<LogContract> LogContract::compile(const LogPatterns& patterns) {
  const LogPresetPatterns* preset = find_log_preset(patterns.preset);
  if (preset == nullptr) {
    return Error{Errc::kInvalidArgument, fmt::format("unknown log preset \"{}\"; allowed: {}",
                                                     patterns.preset, log_preset_names())};
  }
  auto c = compile_matchers(*preset, patterns);
  if (!c) return c.error();
  std::shared_ptr<LogAutoMatchers> a;
  if (preset->name == kLogPresetAuto) {
    auto r = compile_auto(patterns);
    if (!r) return r.error();
    a = std::move(*r);
  }
  return LogContract(std::move(*c), std::move(a));
}

LogLine LogContract::classify(std::string_view line) const {
  LogLine out;
  for_each_segment(bounded(line, &out.truncated), [&](const Segment& seg) {
    out.events.push_back(classify_segment(*matchers_, seg));
  });
  return out;
}

LogLine LogContract::feed(std::string_view line, int64_t wall_ns) {
  ++state_.lines_total;
  state_.last_line_wall_ns = wall_ns;
  if (state_.phase_since_wall_ns == 0) state_.phase_since_wall_ns = wall_ns;
  LogLine out;
  std::string_view text = bounded(line, &out.truncated);
  bool unpicked = auto_ && picked_ < 0;
  for_each_segment(text, [&](const Segment& seg) {
    bool first = auto_ && picked_ < 0;
    bool picked = auto_ && pick(seg.text);
    if (picked && first) read_held(out.held);  // before this line's own events
    out.events.push_back(classify_segment(*matchers_, seg));
    if (picked) out.events.back().picked = matchers_->preset;
  });
  if (out.kind() == LogEventKind::kNoise) ++state_.noise_lines;
  for (LogEvent& e : out.events) apply(e, wall_ns);
  if (unpicked && picked_ < 0 && !out.events.empty() && out.kind() != LogEventKind::kNoise) {
    hold(text, wall_ns);
  }
  return out;
}

void LogContract::hold(std::string_view text, int64_t wall_ns) {
  held_.push_back({std::string(text), wall_ns, state_.lines_total});
  held_bytes_ += text.size();
  while (held_.size() > kMaxHeldLines || held_bytes_ > kMaxHeldBytes) {
    held_bytes_ -= held_.front().text.size();
    held_.pop_front();
  }
}

void LogContract::read_held(std::vector<LogEvent>& out) {
  for (const HeldLine& h : held_) {
    size_t first = out.size();
    for_each_segment(h.text, [&](const Segment& seg) {
      out.push_back(classify_segment(*matchers_, seg));
      out.back().held_line = h.line;
    });
    for (size_t i = first; i < out.size(); ++i) apply(out[i], h.wall_ns);
    ++state_.held_lines_read;
  }
  held_.clear();
  held_bytes_ = 0;
}

bool LogContract::pick(std::string_view text) {
  const auto& cs = auto_->candidates;
  if (picked_ >= 0 && !cs[static_cast<size_t>(picked_)].refined) return false;  // settled
  std::vector<re2::StringPiece> g;
  for (const Pattern& p : matchers_->noise) {
    if (p.match(text, 0, g)) return false;  // noise never picks, whatever it quotes
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    const auto& c = cs[i];
    if (picked_ >= 0 && c.refines != picked_) continue;  // once picked, only a refinement
    for (const Pattern& d : c.detect) {
      if (!d.match(text, 0, g)) continue;
      picked_ = static_cast<int>(i);
      matchers_ = c.matchers;
      state_.preset = std::string(c.matchers->preset);
      state_.preset_line = state_.lines_total;
      return true;
    }
  }
  return false;
}

void LogContract::apply(LogEvent& e, int64_t wall_ns) {
  LogState& s = state_;
  switch (e.kind) {
    case LogEventKind::kStep:
      apply_step(e, wall_ns);
      return;
    case LogEventKind::kLoss:
      s.loss = e.loss;
      s.loss_wall_ns = wall_ns;
      return;
    case LogEventKind::kPhaseStart:
      // A bar drawn below the step bar that starts a phase is an inner loop (Lightning's
      // validation bar): Lightning 1.x advances the step bar right after redrawing it. Drawn
      // unnested (escape sequences stripped, a pasted log), its count says how many advances of
      // the step bar are still its own: the batches left, and the one just drawn (1.x advances
      // after the redraw). Too many is a missed step; too few would be a false one.
      if (e.nested) {
        pos_.inner_pending = true;
      } else if (e.bar_total > 0 && e.bar_count >= 0 && e.bar_count <= e.bar_total) {
        // Complete before any step line: the sanity check, which runs before the first epoch.
        bool before_steps = !pos_.seen && e.bar_count == e.bar_total;
        pos_.inner_left = before_steps ? 0 : e.bar_total - e.bar_count + (e.bar_count > 0 ? 1 : 0);
      }
      if (e.phase != s.phase) set_phase(e.phase, wall_ns);  // a redraw of the same marker
      return;
    case LogEventKind::kPhaseEnd: {
      std::string base = s.step ? "train" : "init";
      if (s.phase != base && (e.phase.empty() || e.phase == s.phase)) {
        set_phase(std::move(base), wall_ns);
      }
      return;
    }
    case LogEventKind::kNoise:
    case LogEventKind::kOther:
      return;
  }
}

namespace {

// a + b, held at the int64 bounds: a log may print any number, and the fold must stay defined.
int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return out;
}

}  // namespace

void LogContract::apply_step(LogEvent& e, int64_t wall_ns) {
  LogState& s = state_;
  Position& p = pos_;
  auto take_loss = [&] {
    if (!e.loss) return;
    s.loss = e.loss;
    s.loss_wall_ns = wall_ns;
  };
  if (e.step < 0) {
    // A step without its number (Hugging Face's loss dict): in a log that shows numbers it
    // reports the last one again; in one that never does, it is the only sign of a step.
    if (p.numbered) {
      take_loss();
      return;
    }
    e.counted = true;
    s.step = saturating_add(s.step.value_or(0), 1);
    ++s.step_count;
    s.step_wall_ns = wall_ns;
    take_loss();
    if (s.phase != "train") set_phase("train", wall_ns);
    return;
  }
  p.numbered = true;
  bool same_epoch = p.seen && p.epoch == e.epoch;
  bool inner = std::exchange(p.inner_pending, false);
  if (!p.seen && e.epoch && p.inner_left > 0) {
    // The first step line drawn while an unnested inner-loop bar is open (the log began in a
    // Lightning 1.x validation): its count is not known to be training's.
    p.seen = true;
    p.epoch = e.epoch;
    p.number = e.step;
    p.base = 0;
    p.skipped = 0;
    --p.inner_left;
    e.inner = true;
    ++s.inner_redraws;
    take_loss();
    return;
  }
  if (same_epoch && e.step == p.number) {
    // The same position again (a redraw, another rank): once. A redraw may add the loss
    // (Lightning sets the postfix after the count).
    take_loss();
    return;
  }
  if (same_epoch && e.epoch && (inner || p.inner_left > 0) && e.step > p.number) {
    // The step bar advanced by the inner loop that was just drawn (Lightning 1.x counts
    // validation batches in the epoch bar): not a step, and not counted in this epoch's steps.
    // An unnested bar owns only the advances it has left; the rest of a jump is training.
    int64_t advance = e.step - p.number;
    int64_t own = inner ? advance : std::min(advance, p.inner_left);
    if (!inner) p.inner_left -= own;
    p.skipped = saturating_add(p.skipped, own);
    if (own == advance) {
      p.number = e.step;
      e.inner = true;
      ++s.inner_redraws;
      take_loss();
      return;
    }
  }
  if (!e.epoch) {
    if (p.seen && !p.epoch && e.step < p.number) ++s.steps_backwards;
    p.base = 0;
    p.skipped = 0;
    p.inner_left = 0;
  } else if (!same_epoch) {
    // A new epoch. A counter that starts again (it shows no more than the last epoch's last
    // number) continues from the last step counted; one that runs on keeps its numbers.
    if (p.seen && p.epoch && *e.epoch < *p.epoch) ++s.steps_backwards;
    if (p.seen && e.step <= p.number) {
      p.base = s.step.value_or(0);
      p.skipped = 0;
    }
    p.inner_left = 0;
  } else if (e.step < p.number) {  // lower in the same epoch: the loop started again
    ++s.steps_backwards;
    p.skipped = 0;
    p.inner_left = 0;
  }
  p.seen = true;
  p.epoch = e.epoch;
  p.number = e.step;
  e.counted = true;
  s.step = saturating_add(p.base, e.step - p.skipped);
  s.epoch = e.epoch;
  ++s.step_count;
  s.step_wall_ns = wall_ns;
  take_loss();
  if (s.phase != "train") set_phase("train", wall_ns);
}

void LogContract::set_phase(std::string phase, int64_t wall_ns) {
  state_.phase = std::move(phase);
  state_.phase_since_wall_ns = wall_ns;
  ++state_.phase_count;
}

void LogContract::reset(int64_t wall_ns) {
  std::string preset = std::move(state_.preset);
  uint64_t preset_line = state_.preset_line;
  state_ = LogState{};
  state_.preset = std::move(preset);
  state_.preset_line = preset_line;
  state_.phase_since_wall_ns = wall_ns;
  pos_ = Position{};
  held_.clear();
  held_bytes_ = 0;
}

}  // namespace stepwatch::probe
