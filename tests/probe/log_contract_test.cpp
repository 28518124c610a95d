// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The log contract: presets replayed over real-looking trainer output (tests/probe/data/*.txt,
// captured as a pipe sees them: '\r' redraws, ANSI colors, nested tqdm bars), then the rules
// one by one: pattern errors, noise, repeats, phases, long, binary and CRLF lines.
#include "src/probe/log_contract.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "src/common/clock.h"
#include "src/probe/log_presets.h"
#include "tests/probe/log_test_support.h"

namespace stepwatch::probe {

void PrintTo(LogEventKind kind, std::ostream* os) {
  *os << log_event_kind_name(kind);
}

namespace {

constexpr int64_t kT0 = int64_t{1'700'000'000} * kNsPerSec;

std::string source_file(const std::string& rel) {
  const char* d = std::getenv("STEPWATCH_SOURCE_DIR");
  std::ifstream in(std::string(d != nullptr ? d : ".") + "/" + rel, std::ios::binary);
  EXPECT_TRUE(in.good()) << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using test::make;

using StepLoss = std::pair<int64_t, double>;

// Everything a replay of a sample saw: counted steps, losses keyed by the step they belong to
// (a later loss for the same step replaces the earlier), the phase after each change.
struct Replay {
  std::vector<int64_t> steps;
  std::vector<StepLoss> losses;
  std::vector<std::string> phases;
  LogState state;
};

Replay replay(const std::string& preset) {
  LogContract c = make({.preset = preset});
  std::istringstream in(source_file("tests/probe/data/" + preset + ".txt"));
  Replay r;
  int64_t current = -1;
  uint64_t phase_count = 0;
  std::string line;
  for (int64_t i = 0; std::getline(in, line); ++i) {
    for (const LogEvent& e : c.feed(line, kT0 + i * kNsPerSec).events) {
      if (e.kind == LogEventKind::kStep && e.step >= 0) current = e.step;
      if (e.counted) r.steps.push_back(e.step);
      if (!e.loss) continue;
      if (!r.losses.empty() && r.losses.back().first == current && !e.counted) {
        r.losses.back().second = *e.loss;
      } else {
        r.losses.emplace_back(current, *e.loss);
      }
    }
    if (c.state().phase_count != phase_count) r.phases.push_back(c.state().phase);
    phase_count = c.state().phase_count;
  }
  r.state = c.state();
  EXPECT_EQ(r.state.phase_count, r.phases.size()) << "one phase change per line in the samples";
  return r;
}

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i <= to; ++i) v.push_back(i);
  return v;
}

std::vector<int64_t> cat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// "step:loss step:loss ...", six significant digits, NaN as "nan".
std::string show(const std::vector<StepLoss>& losses) {
  std::ostringstream out;
  for (const auto& [step, loss] : losses)
    out << (out.tellp() > 0 ? " " : "") << step << ":" << loss;
  return out.str();
}

// Each '\r'/'\n' segment of the sample that carries a known kind of noise is noise on its own.
void expect_noise_segments(const std::string& preset, int want_at_least) {
  static const char* kMarkers[] = {"NCCL INFO",
                                   "UserWarning",
                                   "warnings.warn(",
                                   "torch/_dynamo",
                                   "[W reducer",
                                   "data_connector.py",
                                   "Map: ",
                                   "Loading checkpoint shards",
                                   "Resolving data files",
                                   "| 450/1000 ["};
  LogContract c = make({.preset = preset});
  std::string text = source_file("tests/probe/data/" + preset + ".txt");
  int seen = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = std::min(text.find_first_of("\r\n", pos), text.size());
    std::string seg = text.substr(pos, end - pos);
    pos = end + 1;
    for (const char* m : kMarkers) {
      if (seg.find(m) == std::string::npos) continue;
      ++seen;
      EXPECT_EQ(c.classify(seg).kind(), LogEventKind::kNoise) << preset << ": " << seg;
      break;
    }
  }
  EXPECT_GE(seen, want_at_least) << preset;
}

const double kNan = std::nan("");

std::string fmt_heading(std::string_view name) {
  return "### `" + std::string(name) + "`";
}

TEST(LogPresets, HuggingfaceReadsTheTrainingBarNotTheEvalBar) {
  Replay r = replay("huggingface");
  // Step 3's redraw has a Dynamo warning glued to it (no newline in between): noise wins.
  EXPECT_EQ(r.steps, cat({1, 2}, range(4, 60)));
  EXPECT_EQ(r.state.steps_backwards, 0u) << "the nested eval bar (0/63..63/63) is no step";
  EXPECT_EQ(show(r.losses), "25:3.1234 50:nan");
  EXPECT_EQ(r.phases, (std::vector<std::string>{"train", "eval", "train", "checkpoint", "train",
                                                "checkpoint"}));
  expect_noise_segments("huggingface", 10);
}

TEST(LogPresets, LightningCountsBatchesOfEachEpoch) {
  Replay r = replay("lightning");
  EXPECT_EQ(r.steps, cat(range(1, 12), range(1, 12)));
  EXPECT_EQ(r.state.steps_backwards, 0u) << "a new epoch is progress, not a step backwards";
  EXPECT_EQ(r.state.step, 24) << "epoch 1's batches continue from epoch 0's 12";
  EXPECT_EQ(r.state.epoch, 1);
  EXPECT_EQ(r.state.inner_redraws, 0u) << "Lightning 2.x only redraws the bar after validation";
  EXPECT_EQ(
      show(r.losses),
      "1:10.9 2:9.87 3:9.12 4:8.64 5:8.21 6:7.93 7:7.61 8:7.33 9:7.02 10:6.78 11:6.51 12:6.12 "
      "1:6.01 2:5.92 3:5.88 4:5.81 5:5.77 6:5.69 7:nan 8:5.6 9:5.54 10:5.48 11:5.43 12:5.39");
  EXPECT_EQ(r.phases, (std::vector<std::string>{"eval", "train", "eval", "train", "eval"}));
  expect_noise_segments("lightning", 4);
}

TEST(LogPresets, MegatronIterationLines) {
  Replay r = replay("megatron");
  std::vector<int64_t> want;
  for (int64_t i = 10; i <= 100; i += 10) want.push_back(i);
  EXPECT_EQ(r.steps, want);
  EXPECT_EQ(show(r.losses),
            "10:10.8912 20:9.87654 30:8.76543 40:8.01234 "
            "50:7.54321 60:7.23457 70:7.01234 90:6.91235 100:6.81234");
  EXPECT_EQ(r.phases, (std::vector<std::string>{"train", "checkpoint", "train", "eval", "train"}));
  expect_noise_segments("megatron", 3);
}

TEST(LogPresets, TorchtitanColoredStepLines) {
  Replay r = replay("torchtitan");
  EXPECT_EQ(r.steps, range(1, 10)) << "rank 1 repeating step 10 counts once; validate is no step";
  EXPECT_EQ(show(r.losses),
            "1:12.2345 2:11.8712 3:10.9901 4:9.8765 5:9.1234 "
            "6:8.7766 7:nan 8:8.4321 9:8.2109 10:8.0123");
  EXPECT_EQ(r.phases, (std::vector<std::string>{"compile", "train", "checkpoint", "train"}));
  expect_noise_segments("torchtitan", 8);
}

TEST(LogPresets, PlainStepLinesRepeatsAndARestart) {
  Replay r = replay("plain");
  EXPECT_EQ(r.steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 7, 8, 9}));
  EXPECT_EQ(r.state.steps_backwards, 1u);
  EXPECT_EQ(show(r.losses),
            "1:10.8734 2:10.441 3:10.1022 4:9.8777 5:9.6012 "
            "6:9.4012 7:9.2231 8:nan 7:9.2231 8:9.0412 9:8.8871");
  EXPECT_EQ(r.phases, (std::vector<std::string>{"train", "eval", "train", "checkpoint", "train"}));
  expect_noise_segments("plain", 10);
}

TEST(LogPresets, DocsQuoteEveryPatternVerbatim) {
  std::string doc = source_file("docs/log-contract.md");
  for (const auto& p : log_presets()) {
    for (std::string_view s : {p.phase_start, p.phase_end}) {
      if (!s.empty()) {
        EXPECT_NE(doc.find(s), std::string::npos) << p.name << ": " << s;
      }
    }
    for (auto list : {p.step, p.noise, p.detect}) {
      for (std::string_view s : list)
        EXPECT_NE(doc.find(s), std::string::npos) << p.name << ": " << s;
    }
    EXPECT_NE(doc.find(fmt_heading(p.name)), std::string::npos) << p.name;
    EXPECT_TRUE(LogContract::compile({.preset = std::string(p.name)}).ok()) << p.name;
  }
  EXPECT_TRUE(LogContract::compile({.preset = ""}).ok()) << "empty means none";
}

std::string compile_error(const LogPatterns& p) {
  auto r = LogContract::compile(p);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

TEST(LogContractCompile, ErrorsQuoteThePatternAndRe2) {
  std::string m = compile_error({.step = R"(step (?P<step>\d+)"});
  EXPECT_NE(m.find(R"(step: invalid RE2 pattern "step (?P<step>\d+")"), std::string::npos) << m;
  EXPECT_NE(m.find("missing )"), std::string::npos) << m;
  m = compile_error({.preset = "plain", .noise = {"ok", "[z-a]"}});
  EXPECT_NE(m.find(R"(noise[1]: invalid RE2 pattern "[z-a]": invalid character class range)"),
            std::string::npos)
      << m;
  m = compile_error({.step = R"(step (\d+))"});
  EXPECT_NE(m.find("has no named group (?P<step>...)"), std::string::npos) << m;
  m = compile_error({.phase_start = R"(begin (\w+))"});
  EXPECT_NE(m.find("phase_start: pattern \"begin (\\w+)\" has no named group"), std::string::npos);
  m = compile_error({.preset = "deepspeeed"});
  EXPECT_EQ(m,
            "unknown log preset \"deepspeeed\"; allowed: none, plain, huggingface, lightning, "
            "megatron, torchtitan, nemo, deepspeed, auto");
  EXPECT_EQ(LogContract::compile({.preset = "x"}).error().code, Errc::kInvalidArgument);
}

TEST(LogContractCompile, ExplicitPatternsReplaceStepsAndPhasesAndAddNoise) {
  const std::string mem = "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1.0";
  EXPECT_EQ(make({.preset = "megatron"}).classify(mem).kind(), LogEventKind::kOther);
  LogContract c = make({.preset = "megatron",
                        .phase_start = R"(^>>> (?P<phase>\w+) begins)",
                        .noise = {R"(^\[Rank \d+\] \(after)"}});
  EXPECT_EQ(c.classify(mem).kind(), LogEventKind::kNoise);
  EXPECT_EQ(c.classify("NCCL INFO Bootstrap").kind(), LogEventKind::kNoise) << "preset noise kept";
  EXPECT_EQ(c.classify(" iteration  10/  50 | lm loss: 1.5E+00 |").events[0].step, 10);
  EXPECT_EQ(c.classify(">>> data begins").events[0].phase, "data");
  EXPECT_EQ(c.classify("saving checkpoint at iteration 5").kind(), LogEventKind::kOther);
  EXPECT_EQ(c.classify("successfully saved checkpoint").kind(), LogEventKind::kPhaseEnd);

  LogContract own = make({.preset = "megatron", .step = R"(^it (?P<step>\d+)$)"});
  EXPECT_EQ(own.classify(" iteration  10/  50 |").kind(), LogEventKind::kOther);
  EXPECT_EQ(own.classify("it 7").events[0].step, 7);
}

TEST(LogContractRules, TqdmBarIsAStepOnlyWhenThePatternSaysSo) {
  const std::string bar = " 45%|████▌     | 450/1000 [00:12<00:15, 36.2it/s]";
  for (const char* preset : {"none", "plain", "megatron", "torchtitan", "lightning"}) {
    EXPECT_NE(make({.preset = preset}).classify(bar).kind(), LogEventKind::kStep) << preset;
  }
  EXPECT_EQ(make({.preset = "plain"}).classify(bar).kind(), LogEventKind::kNoise);
  EXPECT_EQ(make({.step = R"(\| *(?P<step>\d+)/\d+ \[)"}).classify(bar).events[0].step, 450);
  EXPECT_EQ(make({.preset = "huggingface"}).classify(bar).events[0].step, 450);
  // Drawn below the main bar (tqdm position 1): a preset never reads it, your pattern does.
  const std::string nested = "\r" + bar + "\x1b[A";
  EXPECT_EQ(make({.preset = "huggingface"}).classify(nested).kind(), LogEventKind::kOther);
  std::string hf_step(find_log_preset("huggingface")->step[0]);
  EXPECT_EQ(make({.step = hf_step}).classify(nested).events[0].step, 450);
}

TEST(LogContractRules, RepeatsCountOnceBackwardsCounts) {
  LogContract c = make({.preset = "plain"});
  for (int64_t s : {5, 5, 6, 6, 3}) c.feed("step " + std::to_string(s), kT0 + s);
  EXPECT_EQ(c.state().step_count, 3u);
  EXPECT_EQ(c.state().steps_backwards, 1u);
  EXPECT_EQ(c.progress().step, 3);
  EXPECT_EQ(c.feed("step 3 loss 1.25", kT0 + 100).events[0].counted, false);
  EXPECT_EQ(c.progress().loss, 1.25) << "a repeat may still bring the loss";
  EXPECT_EQ(c.progress().step_wall_ns, kT0 + 3) << "but not a new step time";
}

// Found by fuzz/log_contract_fuzz.cpp: a counter that starts again in a new epoch after a step
// near INT64_MAX overflowed the running step (undefined). It is held at INT64_MAX.
TEST(LogContractRules, HugeStepNumbersSaturateInsteadOfOverflowing) {
  LogContract c = make({.step = R"(^ep (?P<epoch>\d+) it (?P<step>\d+)$)"});
  c.feed("ep 0 it 9223372036854775000", kT0);
  EXPECT_EQ(c.state().step, 9223372036854775000);
  c.feed("ep 1 it 5", kT0 + 1);  // a new epoch counting from 1 again: continues from the last
  EXPECT_EQ(c.state().step, 9223372036854775005);
  c.feed("ep 1 it 9223372036854775000", kT0 + 2);
  EXPECT_EQ(c.state().step, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(c.state().step_count, 3u);
}

TEST(LogContractRules, OutputWithoutStepsIsNotProgress) {
  LogContract c = make({.preset = "plain"});
  c.feed("step 1 loss 2.0", kT0);
  for (int i = 1; i <= 500; ++i) {
    c.feed(i % 2 ? "still loading shard ..." : "node1:1:1 [0] NCCL INFO Channel 00", kT0 + i);
  }
  const LogState& s = c.state();
  EXPECT_EQ(s.lines_total, 501u);
  EXPECT_EQ(s.noise_lines, 250u);
  EXPECT_EQ(s.last_line_wall_ns, kT0 + 500);
  EXPECT_EQ(s.step_wall_ns, kT0);
  EXPECT_EQ(s.step_count, 1u);
}

TEST(LogContractRules, NoiseWinsOverEveryOtherPattern) {
  LogContract c = make({.preset = "plain", .noise = {"DEBUG"}});
  c.feed("step 4 loss 1.0", kT0);
  LogState before = c.state();
  for (const char* l : {"/w/train.py:9: UserWarning: skipped step 9 loss 0.5",
                        "DEBUG phase eval start", "DEBUG step 12", "DEBUG phase train end"}) {
    EXPECT_EQ(c.feed(l, kT0 + 1).kind(), LogEventKind::kNoise) << l;
  }
  EXPECT_EQ(c.progress().step, before.step);
  EXPECT_EQ(c.progress().loss, before.loss);
  EXPECT_EQ(c.progress().phase, "train");
  EXPECT_EQ(c.state().step_count, before.step_count);
}

TEST(LogContractRules, Phases) {
  LogContract c = make({.step = R"(^step (?P<step>\d+))",
                        .phase_start = R"(^begin (?P<phase>.+)|^(?P<phase_checkpoint>saving))",
                        .phase_end = R"(^end(?: (?P<phase>\S+))?)"});
  c.reset(kT0);
  c.feed("begin compile", kT0 + 1);
  EXPECT_EQ(c.progress().phase, "compile");
  c.feed("end", kT0 + 2);
  EXPECT_EQ(c.progress().phase, "init") << "before the first step an end returns to init";
  c.feed("step 1", kT0 + 3);
  EXPECT_EQ(c.progress().phase, "train");
  c.feed("saving to /ckpt", kT0 + 4);
  c.feed("saving to /ckpt", kT0 + 5);
  EXPECT_EQ(c.progress().phase, "checkpoint");
  EXPECT_EQ(c.progress().phase_since_wall_ns, kT0 + 4) << "the same marker again is a redraw";
  c.feed("end eval", kT0 + 6);
  EXPECT_EQ(c.progress().phase, "checkpoint") << "a named end of another phase";
  c.feed("step 2", kT0 + 7);
  EXPECT_EQ(c.progress().phase, "train") << "a new step ends a labeled phase";
  c.feed("begin my eval (val set) with a long name", kT0 + 8);
  EXPECT_EQ(c.progress().phase, "my_eval__val_set__with_a_long_n");
  c.feed("end my_eval__val_set__with_a_long_n", kT0 + 9);
  EXPECT_EQ(c.progress().phase, "train");
  EXPECT_EQ(c.progress().phase_count, 7u);
  EXPECT_EQ(c.progress().phase_since_wall_ns, kT0 + 9);
}

TEST(LogContractRules, LossValues) {
  LogContract c = make({.preset = "plain"});
  struct Case {
    const char* line;
    double want;
  } cases[] = {{"step 1 loss 2.5", 2.5},      {"step 2 loss=1.5E+00", 1.5},
               {"step 3, loss: +0.25", 0.25}, {"step 4 loss -inf", -INFINITY},
               {"step 5 loss NaN", kNan},     {"Step 6 LOSS nan", kNan}};
  for (const auto& k : cases) {
    LogLine l = c.classify(k.line);
    ASSERT_EQ(l.kind(), LogEventKind::kStep) << k.line;
    ASSERT_TRUE(l.events[0].loss.has_value()) << k.line;
    if (std::isnan(k.want)) {
      EXPECT_TRUE(std::isnan(*l.events[0].loss)) << k.line;
    } else {
      EXPECT_EQ(*l.events[0].loss, k.want) << k.line;
    }
  }
  EXPECT_FALSE(c.classify("step 7 loss tensor(2.5)").events[0].loss.has_value());
  EXPECT_EQ(c.classify("step 99999999999999999999 loss 1").kind(), LogEventKind::kOther);
  LogContract alt = make({.step = R"(^step (?P<step>\d+)|^avg loss (?P<loss>\S+))"});
  EXPECT_EQ(alt.classify("avg loss 2.5").events[0].kind, LogEventKind::kLoss);
  EXPECT_EQ(alt.classify("avg loss 2.5").events[0].loss, 2.5);
  // A loss alone is no step, unless the pattern says it reports one without its number
  // ((?P<tick>), Hugging Face's loss dict): see LogStepRules.HuggingFaceLossDictsWithoutABar.
  LogContract hf = make({.preset = "huggingface"});
  hf.feed(" 10%|█         | 6/60 [00:04<00:38,  1.40it/s]", kT0);
  LogLine l =
      hf.feed("{'loss': 2.3456, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.05}", kT0);
  EXPECT_EQ(l.kind(), LogEventKind::kStep);
  EXPECT_EQ(l.events[0].step, -1) << "no number";
  EXPECT_FALSE(l.events[0].counted) << "the bar counts the steps";
  EXPECT_EQ(hf.progress().loss, 2.3456);
  EXPECT_EQ(hf.progress().step_count, 1u);
}

TEST(LogContractLines, AnsiCrlfAndEmptyLines) {
  LogContract c = make({.preset = "torchtitan"});
  LogLine l =
      c.feed("\x1b[31mstep:  7  \x1b[32mloss:  2.5000  \x1b]0;title\a\x1b(B\x1b[39m\r\n", kT0);
  ASSERT_EQ(l.events.size(), 1u);
  EXPECT_EQ(l.events[0].step, 7);
  EXPECT_EQ(l.events[0].loss, 2.5);
  LogLine crlf = make({.preset = "plain"}).classify("phase eval start\r");
  ASSERT_EQ(crlf.events.size(), 1u);
  EXPECT_EQ(crlf.events[0].phase, "eval");
  for (const char* blank : {"", "\r\n", "   \t", "\x1b[2K\r"}) {
    LogLine b = c.feed(blank, kT0 + 1);
    EXPECT_TRUE(b.events.empty()) << blank;
    EXPECT_EQ(b.kind(), LogEventKind::kOther);
  }
  EXPECT_EQ(c.state().lines_total, 5u);
  EXPECT_EQ(c.state().last_line_wall_ns, kT0 + 1);
  EXPECT_EQ(c.progress().step, 7);
}

TEST(LogContractLines, LongLinesAreBounded) {
  LogContract c = make({.preset = "huggingface"});
  // A bar redrawn for hours without a newline: the tail (what the terminal shows) is read.
  std::string redraws;
  for (int n = 1; redraws.size() < 4 * kMaxLogLineBytes; ++n) {
    redraws += "\r " + std::to_string(n / 100) + "%|█         | " + std::to_string(n) +
               "/900000 [00:12<00:15, 36.2it/s]";
  }
  LogLine l = c.feed(redraws, kT0);
  EXPECT_TRUE(l.truncated);
  int64_t last = std::stoll(redraws.substr(redraws.rfind("| ") + 2));
  EXPECT_EQ(c.progress().step, last);
  EXPECT_LT(l.events.size(), 2000u);
  // One 8 MiB segment: only its head is read.
  std::string huge = "step 5 loss 1.0 " + std::string(8 << 20, 'x') + " step 6";
  LogContract p = make({.preset = "plain"});
  l = p.feed(huge, kT0);
  EXPECT_TRUE(l.truncated);
  EXPECT_EQ(p.progress().step, 5);
}

TEST(LogContractLines, BinaryGarbageIsHarmless) {
  std::mt19937 rng(42);
  for (const auto& p : log_presets()) {
    const std::string preset(p.name);
    LogContract c = make({.preset = preset});
    for (int i = 0; i < 300; ++i) {
      std::string line(rng() % 600, '\0');
      for (char& ch : line) ch = static_cast<char>(rng() % 4 == 0 ? "\x1b[]\r0"[rng() % 5] : rng());
      c.feed(line, kT0 + i);
    }
    c.feed("\x1b", kT0);
    c.feed("\x1b]unterminated osc step 1", kT0);
    c.feed("\x1b[", kT0);
    EXPECT_EQ(c.state().lines_total, 303u) << preset;
  }
}

TEST(LogContractLines, ResetStartsANewIncarnation) {
  LogContract c = make({.preset = "plain"});
  c.feed("step 9 loss 1.0", kT0);
  c.reset(kT0 + 50);
  EXPECT_FALSE(c.progress().step.has_value());
  EXPECT_EQ(c.progress().phase, "init");
  EXPECT_EQ(c.progress().phase_since_wall_ns, kT0 + 50);
  EXPECT_EQ(c.state().lines_total, 0u);
  EXPECT_EQ(log_event_kind_name(LogEventKind::kPhaseStart), std::string("phase_start"));
}

}  // namespace
}  // namespace stepwatch::probe
