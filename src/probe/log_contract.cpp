#include "src/probe/log_contract.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "src/probe/log_presets.h"

namespace stepwatch::probe {

namespace {

// One compiled pattern and where its named groups are.
struct Pattern {
  std::unique_ptr<RE2> re;
  int step_group = -1;
  int loss_group = -1;
  int phase_group = -1;
  std::vector<std::pair<int, std::string>> named_phases;  // (?P<phase_NAME>...) groups
  int nsub = 0;  // submatches to ask for: the highest group used + 1

  // Matches anywhere in text; on success groups[i] is group i (data() == nullptr: no part).
  bool match(std::string_view text, std::vector<re2::StringPiece>& groups) const {
    groups.assign(static_cast<size_t>(nsub), re2::StringPiece());
    return re->Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), RE2::UNANCHORED,
                     groups.data(), nsub);
  }
};

}  // namespace

struct LogMatchers {
  std::vector<Pattern> noise;
  std::optional<Pattern> step;
  std::optional<Pattern> phase_start;
  std::optional<Pattern> phase_end;
  bool step_from_preset = false;  // preset steps never come from a nested bar (see classify)
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
    } else if (name == "loss") {
      p.loss_group = index;
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

LogEvent classify_segment(const LogMatchers& c, const Segment& seg) {
  LogEvent e;
  std::vector<re2::StringPiece> g;
  for (const Pattern& p : c.noise) {
    if (p.match(seg.text, g)) {
      e.kind = LogEventKind::kNoise;
      return e;
    }
  }
  if (c.phase_start && c.phase_start->match(seg.text, g)) {
    std::string name = matched_phase(*c.phase_start, g);
    if (!name.empty()) {
      e.kind = LogEventKind::kPhaseStart;
      e.phase = std::move(name);
      return e;
    }
  }
  if (c.phase_end && c.phase_end->match(seg.text, g)) {
    e.kind = LogEventKind::kPhaseEnd;
    e.phase = matched_phase(*c.phase_end, g);
    return e;
  }
  // A preset's step is never read from a nested progress bar (tqdm position >= 1): that is an
  // inner loop such as Hugging Face's evaluation bar, which looks exactly like the training bar.
  if (c.step && !(seg.nested && c.step_from_preset) && c.step->match(seg.text, g)) {
    const Pattern& p = *c.step;
    std::optional<double> loss;
    if (p.loss_group >= 0 && took_part(g[static_cast<size_t>(p.loss_group)])) {
      const auto& s = g[static_cast<size_t>(p.loss_group)];
      loss = parse_loss(std::string_view(s.data(), s.size()));
    }
    const auto& s = g[static_cast<size_t>(p.step_group)];
    if (took_part(s)) {
      if (auto step = parse_step(std::string_view(s.data(), s.size()))) {
        e.kind = LogEventKind::kStep;
        e.step = *step;
        e.loss = loss;
      }
    } else if (loss) {
      e.kind = LogEventKind::kLoss;
      e.loss = loss;
    }
  }
  return e;
}

// How telling a kind is, indexed by LogEventKind: step > phase start > phase end > loss > noise.
constexpr int kTelling[] = {0, 1, 5, 2, 4, 3};

int telling(LogEventKind k) {
  return kTelling[static_cast<int>(k)];
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

LogContract::LogContract(std::shared_ptr<const LogMatchers> matchers)
    : matchers_(std::move(matchers)) {}

Result<LogContract> LogContract::compile(const LogPatterns& patterns) {
  const LogPresetPatterns* preset = find_log_preset(patterns.preset);
  if (preset == nullptr) {
    return Error{Errc::kInvalidArgument, fmt::format("unknown log preset \"{}\"; allowed: {}",
                                                     patterns.preset, log_preset_names())};
  }
  auto c = std::make_shared<LogMatchers>();
  // Explicit patterns replace the preset's; an empty one keeps the preset's (if any).
  auto pick = [](const std::string& own, std::string_view preset_text) {
    return own.empty() ? preset_text : std::string_view(own);
  };
  std::string_view step = pick(patterns.step, preset->step);
  if (!step.empty()) {
    auto p = compile_pattern("step", step);
    if (!p) return p.error();
    if (p->step_group < 0) {
      return Error{Errc::kInvalidArgument,
                   fmt::format("step: pattern \"{}\" has no named group (?P<step>...)", step)};
    }
    c->step = std::move(*p);
    c->step_from_preset = patterns.step.empty();
  }
  std::string_view start = pick(patterns.phase_start, preset->phase_start);
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
  std::string_view end = pick(patterns.phase_end, preset->phase_end);
  if (!end.empty()) {
    auto p = compile_pattern("phase_end", end);
    if (!p) return p.error();
    c->phase_end = std::move(*p);
  }
  for (std::string_view text : preset->noise) {
    auto p = compile_pattern(fmt::format("preset {} noise", preset->name), text);
    if (!p) return p.error();
    c->noise.push_back(std::move(*p));
  }
  for (size_t i = 0; i < patterns.noise.size(); ++i) {
    auto p = compile_pattern(fmt::format("noise[{}]", i), patterns.noise[i]);
    if (!p) return p.error();
    c->noise.push_back(std::move(*p));
  }
  return LogContract(std::move(c));
}

LogLine LogContract::classify(std::string_view line) const {
  LogLine out;
  std::string_view text = bounded(line, &out.truncated);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) {
      Segment seg = clean(text.substr(pos, end - pos));
      if (!blank(seg.text)) out.events.push_back(classify_segment(*matchers_, seg));
    }
    pos = end + 1;
  }
  return out;
}

LogLine LogContract::feed(std::string_view line, int64_t wall_ns) {
  LogLine out = classify(line);
  ++state_.lines_total;
  state_.last_line_wall_ns = wall_ns;
  if (state_.phase_since_wall_ns == 0) state_.phase_since_wall_ns = wall_ns;
  if (out.kind() == LogEventKind::kNoise) ++state_.noise_lines;
  for (LogEvent& e : out.events) apply(e, wall_ns);
  return out;
}

void LogContract::apply(LogEvent& e, int64_t wall_ns) {
  LogState& s = state_;
  switch (e.kind) {
    case LogEventKind::kStep:
      if (s.step && *s.step == e.step) {  // the same step again (a redraw, another rank): once
        if (e.loss) {  // a redraw may add the loss (Lightning sets the postfix after the count)
          s.loss = e.loss;
          s.loss_wall_ns = wall_ns;
        }
        return;
      }
      if (s.step && e.step < *s.step) ++s.steps_backwards;
      e.counted = true;
      s.step = e.step;
      ++s.step_count;
      s.step_wall_ns = wall_ns;
      if (e.loss) {
        s.loss = e.loss;
        s.loss_wall_ns = wall_ns;
      }
      if (s.phase != "train") set_phase("train", wall_ns);
      return;
    case LogEventKind::kLoss:
      s.loss = e.loss;
      s.loss_wall_ns = wall_ns;
      return;
    case LogEventKind::kPhaseStart:
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

void LogContract::set_phase(std::string phase, int64_t wall_ns) {
  state_.phase = std::move(phase);
  state_.phase_since_wall_ns = wall_ns;
  ++state_.phase_count;
}

void LogContract::reset(int64_t wall_ns) {
  state_ = LogState{};
  state_.phase_since_wall_ns = wall_ns;
}

}  // namespace stepwatch::probe
