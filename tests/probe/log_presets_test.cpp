// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Real-format samples: lines of the shapes users pasted into the trackers of NeMo, Lightning,
// transformers, DeepSpeed and GPT-NeoX, with the noise around them. Each line carries what its
// preset must read from it. Every sample is replayed through its preset (line by line), through
// auto (which must pick that preset and then agree with it) and through every other preset
// (which may read nothing or the same steps, never a different one). Then the rules these
// samples rely on: whole step numbers, epochs, inner-loop redraws and auto's choices.
#include "src/probe/log_presets.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "src/common/clock.h"
#include "src/probe/log_contract.h"
#include "tests/probe/log_test_support.h"

namespace stepwatch::probe {
namespace {

constexpr int64_t kT0 = int64_t{1'700'000'000} * kNsPerSec;
const double kNan = std::nan("");

using test::make;

// What one line should give. Default: nothing at all.
struct Want {
  std::optional<int64_t> step{};  // the step counted on this line (LogState::step after it)
  std::optional<double> loss{};   // the loss read on this line (NaN: the log said nan)
  std::string phase{};            // the phase this line moves to; empty: no change
  bool noise = false;             // the line is noise
  bool inner = false;             // the step bar redrawn by an inner loop (not counted)
};

struct Line {
  std::string text;
  Want want{};
};

struct Sample {
  std::string name;
  std::string preset;             // the preset that reads it
  std::vector<std::string> also;  // presets that must read it exactly the same
  size_t picked_at;               // auto: the line from which auto reads it with `preset`
  std::vector<Line> lines;
};

// What one line gave.
struct Got {
  std::optional<int64_t> step;
  std::optional<double> loss;
  std::string phase;
  bool noise = false;
  bool inner = false;
};

Got feed(LogContract& c, const std::string& text, int64_t t) {
  uint64_t phases = c.state().phase_count;
  LogLine l = c.feed(text, t);
  Got g;
  for (const LogEvent& e : l.events) {
    if (e.counted) g.step = c.state().step;
    if (e.inner) g.inner = true;
    if (e.loss) g.loss = e.loss;
  }
  if (c.state().phase_count != phases) g.phase = c.state().phase;
  g.noise = l.kind() == LogEventKind::kNoise;
  return g;
}

bool same_loss(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return a.has_value() == b.has_value();
  return (std::isnan(*a) && std::isnan(*b)) || *a == *b;
}

std::string show(std::optional<int64_t> step, std::optional<double> loss, const std::string& phase,
                 bool noise, bool inner) {
  std::ostringstream o;
  o << "{step " << (step ? std::to_string(*step) : "-") << ", loss ";
  if (loss) {
    o << *loss;
  } else {
    o << "-";
  }
  o << ", phase " << (phase.empty() ? "-" : phase) << (noise ? ", noise" : "")
    << (inner ? ", inner" : "") << "}";
  return o.str();
}

// Replays a sample through `preset`, line by line; returns the lines read right.
size_t read_right(const Sample& s, const std::string& preset) {
  LogContract c = make({.preset = preset});
  size_t right = 0;
  for (size_t i = 0; i < s.lines.size(); ++i) {
    const Line& l = s.lines[i];
    Got g = feed(c, l.text, kT0 + static_cast<int64_t>(i) * kNsPerSec);
    const Want& w = l.want;
    bool ok = g.step == w.step && same_loss(g.loss, w.loss) && g.phase == w.phase &&
              g.noise == w.noise && g.inner == w.inner;
    if (ok) {
      ++right;
    } else {
      ADD_FAILURE() << s.name << " via " << preset << ", line " << i << ": " << l.text
                    << "\n  want " << show(w.step, w.loss, w.phase, w.noise, w.inner) << "\n  got  "
                    << show(g.step, g.loss, g.phase, g.noise, g.inner);
    }
  }
  return right;
}

std::set<int64_t> true_steps(const Sample& s) {
  std::set<int64_t> out;
  for (const Line& l : s.lines) {
    if (l.want.step) out.insert(*l.want.step);
  }
  return out;
}

// Another preset may read nothing, or the steps the sample holds; never another number.
// Returns the lines without a false step.
size_t no_false_steps(const Sample& s, const std::string& preset) {
  std::set<int64_t> truth = true_steps(s);
  LogContract c = make({.preset = preset});
  size_t right = 0;
  for (size_t i = 0; i < s.lines.size(); ++i) {
    Got g = feed(c, s.lines[i].text, kT0 + static_cast<int64_t>(i) * kNsPerSec);
    if (!g.step || truth.count(*g.step)) {
      ++right;
    } else {
      ADD_FAILURE() << s.name << " via " << preset << ", line " << i << ": false step " << *g.step
                    << " from " << s.lines[i].text;
    }
  }
  return right;
}

// auto: before picked_at no false step; from it on, the same state as the sample's preset.
size_t auto_right(const Sample& s) {
  LogContract a = make({.preset = "auto"});
  LogContract own = make({.preset = s.preset});
  std::set<int64_t> truth = true_steps(s);
  size_t right = 0;
  for (size_t i = 0; i < s.lines.size(); ++i) {
    int64_t t = kT0 + static_cast<int64_t>(i) * kNsPerSec;
    Got g = feed(a, s.lines[i].text, t);
    feed(own, s.lines[i].text, t);
    bool ok;
    if (i < s.picked_at) {
      ok = (!g.step || truth.count(*g.step)) && a.state().preset != s.preset;
    } else {
      const LogState& x = a.state();
      const LogState& y = own.state();
      ok = x.preset == s.preset && x.step == y.step && same_loss(x.loss, y.loss) &&
           x.phase == y.phase;
      if (i == s.picked_at) ok = ok && x.preset_line == i + 1;
    }
    if (ok) {
      ++right;
    } else {
      ADD_FAILURE() << s.name << " via auto (picked \"" << a.state().preset << "\" at line "
                    << a.state().preset_line << "), line " << i << ": " << s.lines[i].text;
    }
  }
  return right;
}

// The lines of a nested tqdm bar (position 1) as a pipe sees them: drawn, then the cursor up.
std::string nested(const std::string& bar) {
  return "\r" + bar + "\x1b[A";
}

std::vector<Sample> samples() {
  const std::string ok_nemo_w =
      "[NeMo W 2023-09-12 08:14:02 nemo_logging:349] /usr/local/lib/python3.10/dist-packages/"
      "pytorch_lightning/trainer/connectors/data_connector.py:441: PossibleUserWarning: The "
      "dataloader, val_dataloader, does not have many workers which may be a bottleneck.";
  std::vector<Sample> out;
  // NeMo 1.x (Lightning bars): "loss=nan" is a placeholder; reduced_train_loss is the loss.
  out.push_back(
      {"nemo1-bars",
       "nemo",
       {"lightning"},
       0,
       {
           {ok_nemo_w},
           {"GPU available: True (cuda), used: True"},
           {"TPU available: False, using: 0 TPU cores"},
           {"[NeMo I 2023-09-12 08:14:05 exp_manager:394] Experiments will be logged at "
            "/results/megatron_gpt/2023-09-12_08-14-05"},
           {"node01:812:812 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.11<0>", {.noise = true}},
           {"Sanity Checking: 0it [00:00, ?it/s]", {.phase = "eval"}},
           {"Sanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00,  3.51it/s]"},
           {"/usr/local/lib/python3.10/dist-packages/pytorch_lightning/trainer/connectors/"
            "logger_connector/result.py:212: UserWarning: You called `self.log('global_step', "
            "...)` in your `training_step` but the value needs to be floating point. Converting "
            "it to torch.float32.",
            {.noise = true}},
           {"  warning_cache.warn("},
           {"Epoch 0:   0%|          | 0/4 [00:00<?, ?it/s]"},
           {"\rEpoch 0:  25%|██▌       | 1/4 [00:02<00:06,  2.04s/it]",
            {.step = 1, .phase = "train"}},
           {"\rEpoch 0:  25%|██▌       | 1/4 [00:02<00:06,  2.04s/it, loss=nan, v_num=0, "
            "reduced_train_loss=10.90, global_step=0.000, consumed_samples=8.000]",
            {.loss = 10.90}},
           {"\rEpoch 0:  50%|█████     | 2/4 [00:02<00:02,  1.15it/s, loss=nan, v_num=0, "
            "reduced_train_loss=10.90, global_step=0.000, consumed_samples=8.000]",
            {.step = 2, .loss = 10.90}},
           {"\rEpoch 0:  50%|█████     | 2/4 [00:02<00:02,  1.15it/s, loss=nan, v_num=0, "
            "reduced_train_loss=3.910, global_step=1.000, consumed_samples=16.00]",
            {.loss = 3.910}},
           {"\rEpoch 0:  75%|███████▌  | 3/4 [00:03<00:01,  1.19it/s, loss=nan, v_num=0, "
            "reduced_train_loss=3.910, global_step=1.000, consumed_samples=16.00]",
            {.step = 3, .loss = 3.910}},
           {"\rEpoch 0: 100%|██████████| 4/4 [00:03<00:00,  1.21it/s, loss=nan, v_num=0, "
            "reduced_train_loss=3.512, global_step=3.000, consumed_samples=32.00]",
            {.step = 4, .loss = 3.512}},
           {nested("Validation: 0it [00:00, ?it/s]"), {.phase = "eval"}},
           {nested("Validation DataLoader 0:  50%|█████     | 1/2 [00:00<00:00,  5.12it/s]")},
           {nested("Validation DataLoader 0: 100%|██████████| 2/2 [00:00<00:00,  5.40it/s]")},
           {nested("                                                                      ") +
                "\rEpoch 0: 100%|██████████| 4/4 [00:03<00:00,  1.21it/s, loss=nan, v_num=0, "
                "reduced_train_loss=3.301, global_step=3.000, consumed_samples=32.00, "
                "val_loss=3.870]",
            {.loss = 3.301}},
           {"Epoch 0, global step 4: 'val_loss' reached 3.87000 (best 3.87000), saving model to "
            "'/results/checkpoints/megatron_gpt--val_loss=3.870-step=4.ckpt' as top 1"},
           {"\rEpoch 1:   0%|          | 0/4 [00:00<?, ?it/s, loss=nan, v_num=0, "
            "reduced_train_loss=3.301, global_step=3.000, consumed_samples=32.00, val_loss=3.870]"},
           {"\rEpoch 1:  25%|██▌       | 1/4 [00:00<00:02,  1.43it/s, loss=nan, v_num=0, "
            "reduced_train_loss=3.301, global_step=3.000, consumed_samples=32.00, val_loss=3.870]",
            {.step = 5, .loss = 3.301, .phase = "train"}},
           {"`Trainer.fit` stopped: `max_steps=5` reached."},
       }});
  // NeMo 2 (ProgressPrinter): one line every log_interval.
  out.push_back(
      {"nemo2-lines",
       "nemo",
       {},
       0,
       {
           {"[NeMo I 2024-10-01 12:00:00 nemo_logging:393] Experiments will be logged at "
            "/results/llama3_8b/2024-10-01_12-00-00"},
           {"[NeMo W 2024-10-01 12:00:02 nemo_logging:405] /opt/megatron-lm/megatron/core/"
            "transformer/transformer_config.py:1012: UserWarning: moe_shared_expert_overlap is "
            "enabled"},
           {"GPU available: True (cuda), used: True"},
           {"LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1,2,3,4,5,6,7]"},
           {"[rank0]:[W1001 12:00:10.123456 ProcessGroupNCCL.cpp:4115] [PG 0 Rank 0]  using GPU 0 "
            "to perform barrier as devices used by this process are currently unknown.",
            {.noise = true}},
           {"Sanity checking Validation: iteration 1/2", {.phase = "eval"}},
           {"Sanity checking Validation: iteration 2/2"},
           {"Training epoch 0, iteration 9/99 | lr: 1.499e-05 | global_batch_size: 16 | "
            "global_step: 9 | reduced_train_loss: 11.02 | train_step_timing in s: 0.4138 | "
            "consumed_samples: 160",
            {.step = 9, .loss = 11.02, .phase = "train"}},
           {"Training epoch 0, iteration 19/99 | lr: 2.999e-05 | global_batch_size: 16 | "
            "global_step: 19 | reduced_train_loss: 9.871 | train_step_timing in s: 0.4121 | "
            "consumed_samples: 320",
            {.step = 19, .loss = 9.871}},
           {"Validation: iteration 10/10", {.phase = "eval"}},
           {"[NeMo I 2024-10-01 12:01:10 nemo_logging:393] Async finalization time took 0.001 s"},
           {"Training epoch 0, iteration 29/99 | lr: 4.499e-05 | global_batch_size: 16 | "
            "global_step: 29 | reduced_train_loss: nan | train_step_timing in s: 0.4133 | "
            "consumed_samples: 480 | val_loss: 8.912",
            {.step = 29, .loss = kNan, .phase = "train"}},
           {"Training epoch 0, iteration 39/99 | lr: 5.999e-05 | global_batch_size: 16 | "
            "global_step: 39 | reduced_train_loss: 7.7 | train_step_timing in s: 0.4129 | "
            "consumed_samples: 640 | val_loss: 8.912",
            {.step = 39, .loss = 7.7}},
       }});
  // Lightning drawn with 0 columns (under mpirun, in some notebooks): no bar between the bars.
  out.push_back(
      {"lightning-nobar",
       "lightning",
       {},
       0,
       {
           {"GPU available: True, used: True"},
           {"TPU available: False, using: 0 TPU cores"},
           {"LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]"},
           {"  | Name | Type   | Params"},
           {"0 | net  | Linear | 7.9 K "},
           {"/opt/conda/lib/python3.8/site-packages/pytorch_lightning/trainer/data_loading.py:132: "
            "UserWarning: The dataloader, train_dataloader, does not have many workers which may "
            "be a bottleneck.",
            {.noise = true}},
           {"  rank_zero_warn("},
           {"Epoch 0:   0% 0/2 [00:00<?, ?it/s]"},
           {"Epoch 0:  50% 1/2 [00:00<00:00,  6.54it/s]", {.step = 1, .phase = "train"}},
           {"Epoch 0:  50% 1/2 [00:00<00:00,  6.54it/s, loss=2.29, v_num=0]", {.loss = 2.29}},
           {"Epoch 0: 100% 2/2 [00:00<00:00,  7.12it/s, loss=2.29, v_num=0]",
            {.step = 2, .loss = 2.29}},
           {"Epoch 0: 100% 2/2 [00:00<00:00,  7.10it/s, loss=2.21, v_num=0]", {.loss = 2.21}},
           {"Epoch 1:   0% 0/2 [00:00<?, ?it/s, loss=2.21, v_num=0]"},
           {"Epoch 1:  50% 1/2 [00:00<00:00,  6.98it/s, loss=2.21, v_num=0]",
            {.step = 3, .loss = 2.21}},
           {"Epoch 1: 100% 2/2 [00:00<00:00,  7.20it/s, loss=2.14, v_num=0]",
            {.step = 4, .loss = 2.14}},
       }});
  // One batch per epoch: "1/1" every epoch is progress, and the step keeps growing.
  out.push_back(
      {"lightning-one-batch",
       "lightning",
       {"nemo"},
       0,
       {
           {"GPU available: True (cuda), used: True"},
           {"`Trainer(limit_train_batches=1)` was configured so 1 batch per epoch will be used."},
           {"Epoch 0:   0%|          | 0/1 [00:00<?, ?it/s]"},
           {"\rEpoch 0: 100%|██████████| 1/1 [00:00<00:00,  3.12it/s]",
            {.step = 1, .phase = "train"}},
           {"\rEpoch 0: 100%|██████████| 1/1 [00:00<00:00,  3.10it/s, v_num=0, train_loss=2.310]",
            {.loss = 2.310}},
           {"\rEpoch 1:   0%|          | 0/1 [00:00<?, ?it/s, v_num=0, train_loss=2.310]"},
           {"\rEpoch 1: 100%|██████████| 1/1 [00:00<00:00,  3.40it/s, v_num=0, train_loss=2.310]",
            {.step = 2, .loss = 2.310}},
           {"\rEpoch 1: 100%|██████████| 1/1 [00:00<00:00,  3.38it/s, v_num=0, train_loss=2.250]",
            {.loss = 2.250}},
           {"\rEpoch 2: 100%|██████████| 1/1 [00:00<00:00,  3.41it/s, v_num=0, train_loss=2.250]",
            {.step = 3, .loss = 2.250}},
           {"\rEpoch 2: 100%|██████████| 1/1 [00:00<00:00,  3.39it/s, v_num=0, train_loss=2.190]",
            {.loss = 2.190}},
           {"\rEpoch 3: 100%|██████████| 1/1 [00:00<00:00,  3.42it/s, v_num=0, train_loss=2.190]",
            {.step = 4, .loss = 2.190}},
           {"`Trainer.fit` stopped: `max_epochs=4` reached."},
       }});
  // Lightning 1.x: the epoch bar's total is training + validation batches, and it advances once
  // per validation batch, right after the validation bar (val_check_interval=0.5: 4 training
  // batches, 2 validation batches twice per epoch, total 8).
  auto bar = [](int epoch, int n, const std::string& post) {
    static const char* const kBars[] = {"          ", "█▎        ", "██▌       ",
                                        "███▊      ", "█████     ", "██████▎   ",
                                        "███████▌  ", "████████▊ ", "██████████"};
    int pct = n * 100 / 8;
    return "\rEpoch " + std::to_string(epoch) + ": " +
           (pct < 10    ? "  "
            : pct < 100 ? " "
                        : "") +
           std::to_string(pct) + "%|" + kBars[n] + "| " + std::to_string(n) +
           "/8 [00:01<00:01,  3.01it/s" + post + "]";
  };
  const std::string val0 = "Validation DataLoader 0:   0%|          | 0/2 [00:00<?, ?it/s]";
  const std::string val1 = "Validation DataLoader 0:  50%|█████     | 1/2 [00:00<00:00, 11.8it/s]";
  const std::string val2 = "Validation DataLoader 0: 100%|██████████| 2/2 [00:00<00:00, 12.1it/s]";
  const std::string clear = nested(std::string(70, ' '));
  out.push_back(
      {"lightning1-val",
       "lightning",
       {},
       0,
       {
           {"GPU available: True, used: True"},
           {"/opt/conda/lib/python3.9/site-packages/pytorch_lightning/trainer/connectors/"
            "data_connector.py:240: PossibleUserWarning: The dataloader, val_dataloader 0, does "
            "not "
            "have many workers which may be a bottleneck.",
            {.noise = true}},
           {"Sanity Checking: 0it [00:00, ?it/s]", {.phase = "eval"}},
           {"\rSanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00,  9.80it/s]"},
           {"\r" + bar(0, 0, "").substr(1)},
           {bar(0, 1, ", loss=2.31, v_num=1"), {.step = 1, .loss = 2.31, .phase = "train"}},
           {bar(0, 2, ", loss=2.25, v_num=1"), {.step = 2, .loss = 2.25}},
           {nested("Validation: 0it [00:00, ?it/s]"), {.phase = "eval"}},
           {nested(val0)},
           {nested(val1) + bar(0, 3, ", loss=2.25, v_num=1"), {.loss = 2.25, .inner = true}},
           {nested(val2) + bar(0, 4, ", loss=2.25, v_num=1"), {.loss = 2.25, .inner = true}},
           {clear + bar(0, 4, ", loss=2.25, v_num=1, val_loss=2.19"), {.loss = 2.25}},
           {bar(0, 5, ", loss=2.2, v_num=1, val_loss=2.19"),
            {.step = 3, .loss = 2.2, .phase = "train"}},
           {bar(0, 6, ", loss=2.16, v_num=1, val_loss=2.19"), {.step = 4, .loss = 2.16}},
           {nested("Validation: 0it [00:00, ?it/s]"), {.phase = "eval"}},
           {nested(val1) + bar(0, 7, ", loss=2.16, v_num=1, val_loss=2.19"),
            {.loss = 2.16, .inner = true}},
           {nested(val2) + bar(0, 8, ", loss=2.16, v_num=1, val_loss=2.19"),
            {.loss = 2.16, .inner = true}},
           {clear + bar(0, 8, ", loss=2.16, v_num=1, val_loss=2.12"), {.loss = 2.16}},
           {bar(1, 0, ", loss=2.16, v_num=1, val_loss=2.12")},
           {bar(1, 1, ", loss=2.11, v_num=1, val_loss=2.12"),
            {.step = 5, .loss = 2.11, .phase = "train"}},
       }});
  // Hugging Face drawn with 0 columns: " 50% 5/10 [".
  out.push_back(
      {"hf-nobar",
       "huggingface",
       {},
       0,
       {
           {"[INFO|trainer.py:2078] 2024-05-01 12:00:10,001 >> ***** Running training *****"},
           {"[INFO|trainer.py:2079] 2024-05-01 12:00:10,001 >>   Num examples = 80"},
           {"[INFO|trainer.py:2086] 2024-05-01 12:00:10,001 >>   Total optimization steps = 10"},
           {"  0% 0/10 [00:00<?, ?it/s]"},
           {" 10% 1/10 [00:00<00:05,  1.71it/s]", {.step = 1, .phase = "train"}},
           {" 20% 2/10 [00:01<00:04,  1.93it/s]", {.step = 2}},
           {"Map:  50% 5/10 [00:00<00:00, 912.33 examples/s]", {.noise = true}},
           {" 50% 5/10 [00:01<00:01, 4.2it/s]", {.step = 5}},
           {"{'loss': 2.3456, 'grad_norm': 1.25, 'learning_rate': 2.5e-05, 'epoch': 0.5}",
            {.loss = 2.3456}},
           {" 60% 6/10 [00:01<00:01, 4.3it/s]", {.step = 6}},
           {"[INFO|trainer.py:3614] 2024-05-01 12:00:12,500 >> ***** Running Evaluation *****",
            {.phase = "eval"}},
           {nested("  0% 0/3 [00:00<?, ?it/s]")},
           {nested(" 67% 2/3 [00:00<00:00, 9.8it/s]")},
           {"{'eval_loss': 2.21, 'eval_runtime': 0.31, 'eval_samples_per_second': 25.8, "
            "'eval_steps_per_second': 9.7, 'epoch': 0.6}",
            {.phase = "train"}},
           {" 70% 7/10 [00:02<00:00, 3.9it/s]", {.step = 7}},
           {"{'loss': nan, 'grad_norm': nan, 'learning_rate': 1.5e-05, 'epoch': 0.7}",
            {.loss = kNan}},
           {"100% 10/10 [00:02<00:00, 4.1it/s]", {.step = 10}},
           {"{'train_runtime': 2.71, 'train_samples_per_second': 29.5, 'train_steps_per_second': "
            "3.69, 'train_loss': 2.31, 'epoch': 1.0}"},
       }});
  // TFTrainer logs a dict with the step, bare or behind a logging prefix.
  const std::string tf = "05/01/2021 12:00:00 - INFO - transformers.trainer_tf -   ";
  out.push_back({"hf-tftrainer",
                 "huggingface",
                 {},
                 0,
                 {
                     {tf + "***** Running training *****"},
                     {tf + "  Num examples = 1000"},
                     {tf + "  Total optimization steps = 100"},
                     {"2021-05-01 12:00:05.123456: I tensorflow/stream_executor/platform/default/"
                      "dso_loader.cc:49] Successfully opened dynamic library libcublas.so.11"},
                     {"{'loss': 2.31, 'learning_rate': 5e-05, 'epoch': 0.1, 'step': 10}",
                      {.step = 10, .loss = 2.31, .phase = "train"}},
                     {tf + "{'loss': 2.05, 'learning_rate': 4.5e-05, 'epoch': 0.2, 'step': 20}",
                      {.step = 20, .loss = 2.05}},
                     {tf + "***** Running Evaluation *****", {.phase = "eval"}},
                     {tf + "  Num examples = 100"},
                     {"{'eval_loss': 1.98, 'eval_accuracy': 0.61, 'epoch': 0.2, 'step': 20}",
                      {.phase = "train"}},
                     {"{'loss': 1.87, 'learning_rate': 4e-05, 'epoch': 0.3, 'step': 30}",
                      {.step = 30, .loss = 1.87}},
                     {"{'loss': nan, 'learning_rate': 3.5e-05, 'epoch': 0.4, 'step': 40}",
                      {.step = 40, .loss = kNan}},
                     {tf + "Saving checkpoint for step 40 at ./output/checkpoint/ckpt-1"},
                 }});
  // DeepSpeed's engine: "step=N, skipped=" every steps_per_print; its timers print the
  // optimizer step's time in milliseconds as "| step: 1172.13".
  const std::string ds = "[2024-03-01 10:00:10,000] [INFO] [logging.py:96:log_dist] [Rank 0] ";
  const std::string timers =
      "[Rank 0] time (ms) | forward: 230.12 | backward: 500.33 | backward_inner: 480.10 | "
      "backward_allreduce: 20.05 | step: 1172.13";
  out.push_back(
      {"deepspeed-engine",
       "deepspeed",
       {},
       3,
       {
           {"[2024-03-01 10:00:00,123] [INFO] [real_accelerator.py:191:get_accelerator] Setting "
            "ds_accelerator to cuda (auto detect)"},
           {ds + "DeepSpeed info: version=0.13.1, git-hash=unknown, git-branch=unknown"},
           {"[2024-03-01 10:00:06,000] [INFO] [config.py:988:print]   steps_per_print "
            "............... 10"},
           {ds + "step=10, skipped=0, lr=[9.5e-05], mom=[(0.9, 0.999)]",
            {.step = 10, .phase = "train"}},
           {"[2024-03-01 10:00:10,001] [INFO] [timer.py:260:stop] epoch=0/micro_step=10/"
            "global_step=10, RunningAvgSamplesPerSec=199.08, CurrSamplesPerSec=216.76, "
            "MemAllocated=0.06GB, MaxMemAllocated=1.68GB"},
           {timers},
           {ds + "step=20, skipped=0, lr=[9e-05], mom=[(0.9, 0.999)]", {.step = 20}},
           {timers},
           {"[Rank 0] step=35, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]", {.step = 35}},
           {ds + "[Torch] Checkpoint global_step35 is about to be saved!", {.phase = "checkpoint"}},
           {ds + "Saving model checkpoint: /ckpt/global_step35/mp_rank_00_model_states.pt"},
           {"[2024-03-01 10:00:45,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
            "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768"},
           {ds + "step=40, skipped=1, lr=[8e-05], mom=[(0.9, 0.999)]",
            {.step = 40, .phase = "train"}},
       }});
  // DeepSpeed's pipeline engine prints the loss; its engine's step= line comes first.
  out.push_back(
      {"deepspeed-pipeline",
       "deepspeed",
       {},
       2,
       {
           {"[2024-03-01 11:00:00,000] [INFO] [engine.py:151:__init__] is_pipe_partitioned= "
            "False is_grad_partitioned= False"},
           {"[2024-03-01 11:00:00,100] [INFO] [engine.py:316:__init__] CONFIG: micro_batches=4 "
            "micro_batch_size=8"},
           {"steps: 10 loss: 2.3141 iter time (s): 0.530 samples/sec: 60.377",
            {.step = 10, .loss = 2.3141, .phase = "train"}},
           {"[Rank 0] time (ms) | batch_input: 5.12 | forward_microstep: 120.31 | "
            "backward_microstep: 300.12 | backward_inner_microstep: 290.01 | step_microstep: "
            "40.20"},
           {ds + "step=20, skipped=0, lr=[9e-05], mom=[(0.9, 0.999)]", {.step = 20}},
           {"steps: 20 loss: 2.2507 iter time (s): 0.524 samples/sec: 61.070", {.loss = 2.2507}},
           {"steps: 70 loss: 2.1486 iter time (s): 0.521 samples/sec: 61.4",
            {.step = 70, .loss = 2.1486}},
           {"steps: 80 loss: nan iter time (s): 0.519 samples/sec: 61.6",
            {.step = 80, .loss = kNan}},
       }});
  // GPT-NeoX: Megatron's iteration line with lm_loss, and DeepSpeed's step= lines before it
  // (the same iteration: the iteration line repeats it with its loss).
  const std::string neox_ds = "[2023-05-01 12:01:00,000] [INFO] [logging.py:60:log_dist] [Rank 0] ";
  out.push_back(
      {"neox",
       "megatron",
       {},
       4,
       {
           {"[2023-05-01 12:00:00,000] [INFO] [launch.py:229:main] process 4012 spawned with "
            "command: ['/usr/bin/python', '-u', 'train.py', '--local_rank=0']"},
           {"> building GPT2BPETokenizer tokenizer ..."},
           {"NeoXArgs.configure_distributed_args() using world size: 8 and model-parallel size: 2"},
           {neox_ds + "step=10, skipped=0, lr=[1.0E-05], mom=[[0.9, 0.95]]",
            {.step = 10, .phase = "train"}},
           {" samples/sec: 12.3 | iteration       10/  320000 | elapsed time per iteration (ms): "
            "1234.5 | learning rate: 1.0E-05 | approx flops per GPU: 10.0TFLOPS | lm_loss: "
            "1.093E+01 | loss scale: 65536.0 | number of skipped iterations:   0 | number of nan "
            "iterations:   0 |",
            {.loss = 10.93}},
           {neox_ds + "step=20, skipped=0, lr=[2.0E-05], mom=[[0.9, 0.95]]", {.step = 20}},
           {" samples/sec: 12.4 | iteration       20/  320000 | elapsed time per iteration (ms): "
            "1228.1 | learning rate: 2.0E-05 | approx flops per GPU: 10.1TFLOPS | lm_loss: "
            "9.8765E+00 | loss scale: 65536.0 | number of skipped iterations:   0 | number of nan "
            "iterations:   0 |",
            {.loss = 9.8765}},
           {" validation results at iteration 20 | lm_loss value: 9.6543E+00 | lm_loss_ppl value: "
            "1.5564E+04 | "},
           {" samples/sec: 12.3 | iteration       30/  320000 | elapsed time per iteration (ms): "
            "1230.9 | learning rate: 3.0E-05 | approx flops per GPU: 10.0TFLOPS | lm_loss: "
            "8.9012E+00 | loss scale: 32768.0 | number of skipped iterations:   1 | number of nan "
            "iterations:   0 |",
            {.step = 30, .loss = 8.9012}},
       }});
  return out;
}

TEST(LogPresetSamples, EachSampleReadsRightThroughItsPresetAutoAndNoOther) {
  for (const Sample& s : samples()) {
    size_t n = s.lines.size();
    std::cout << "[ sample   ] " << s.name << " (" << n << " lines): " << s.preset << " "
              << read_right(s, s.preset) << "/" << n;
    for (const std::string& p : s.also)
      std::cout << ", " << p << " " << read_right(s, p) << "/" << n;
    std::cout << ", auto " << auto_right(s) << "/" << n;
    for (const auto& p : log_presets()) {
      std::string name(p.name);
      if (name == s.preset || name == "none" || name == "auto") continue;
      if (std::find(s.also.begin(), s.also.end(), name) != s.also.end()) continue;
      std::cout << ", " << name << " " << no_false_steps(s, name) << "/" << n;
    }
    std::cout << "\n";
  }
}

std::vector<int64_t> counted_steps(LogContract& c, const std::vector<std::string>& lines) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    for (const LogEvent& e : c.feed(lines[i], kT0 + static_cast<int64_t>(i)).events) {
      if (e.counted) out.push_back(*c.state().step);
    }
  }
  return out;
}

TEST(LogStepRules, AStepNumberIsNeverADecimal) {
  LogContract plain = make({.preset = "plain"});
  EXPECT_EQ(plain.classify("[Rank 0] time (ms) | forward: 230.12 | step: 1172.13").kind(),
            LogEventKind::kOther);
  EXPECT_EQ(plain.classify("step: 0.5 of warmup").kind(), LogEventKind::kOther);
  EXPECT_EQ(plain.classify("done with step 12.").events[0].step, 12) << "a full stop is no decimal";
  EXPECT_EQ(plain.classify("step 12.5 then step 13 loss 2.0").events[0].step, 13)
      << "the search goes on after a decimal";
  EXPECT_EQ(plain.classify("step 12.5 then step 13 loss 2.0").events[0].loss, 2.0);
  // The same for patterns of your own, in both directions of the group, and ^ stays the start.
  LogContract own = make({.step = R"((?P<step>\d+)/10 \[)"});
  EXPECT_EQ(own.classify("1.5/10 [ then 3/10 [").events[0].step, 3);
  LogContract anchored = make({.step = R"(^it (?P<step>\d+))"});
  EXPECT_EQ(anchored.classify("it 1.5 it 3").kind(), LogEventKind::kOther);
  // A line full of decimals costs a bounded number of searches, and gives no step.
  std::string decimals;
  while (decimals.size() < kMaxLogLineBytes - 32) decimals += "step: 1172.13 | ";
  EXPECT_EQ(plain.classify(decimals + "step 5").kind(), LogEventKind::kOther);
  // The issue: DeepSpeed's timers made step 1172, then the real step 35 went "backwards".
  std::vector<std::string> lines = {
      "[Rank 0] time (ms) | forward: 230.12 | backward: 500.33 | step: 1172.13",
      "[Rank 0] step=35, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
      "[Rank 0] time (ms) | forward: 229.80 | backward: 501.02 | step: 1170.44",
      "[Rank 0] step=36, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]"};
  EXPECT_EQ(counted_steps(plain, lines), (std::vector<int64_t>{35, 36}));
  EXPECT_EQ(plain.state().steps_backwards, 0u);
}

TEST(LogStepRules, ANewEpochIsProgressAndTheStepStaysMonotone) {
  LogContract c = make({.preset = "lightning"});
  std::vector<std::string> lines;
  for (int e = 0; e < 50; ++e) {
    lines.push_back("Epoch " + std::to_string(e) + ": 100%|██████████| 1/1 [00:00<00:00, 3.1it/s]");
    lines.push_back(lines.back());  // the postfix redraw
  }
  EXPECT_EQ(counted_steps(c, lines).size(), 50u);
  EXPECT_EQ(c.state().step, 50);
  EXPECT_EQ(c.state().epoch, 49);
  EXPECT_EQ(c.state().step_count, 50u);
  EXPECT_EQ(c.state().steps_backwards, 0u);

  // A counter that runs on across epochs (NeMo 2 counting the run's iterations) keeps its
  // numbers; one that starts again continues from the last step counted.
  LogContract nemo = make({.preset = "nemo"});
  auto it = [](int epoch, int n) {
    return "Training epoch " + std::to_string(epoch) + ", iteration " + std::to_string(n) +
           "/300 | lr: 1e-05 | reduced_train_loss: 2.5";
  };
  EXPECT_EQ(counted_steps(nemo, {it(0, 50), it(0, 100), it(1, 150), it(1, 200)}),
            (std::vector<int64_t>{50, 100, 150, 200}));
  EXPECT_EQ(counted_steps(nemo, {it(2, 50), it(2, 100)}), (std::vector<int64_t>{250, 300}));
  EXPECT_EQ(nemo.state().steps_backwards, 0u);
  // The same position twice is a repeat; a lower number in the same epoch a restart; a lower
  // epoch counts as a step backwards but the step still does not go back.
  EXPECT_EQ(counted_steps(nemo, {it(2, 100)}), std::vector<int64_t>{});
  EXPECT_EQ(counted_steps(nemo, {it(2, 20)}), (std::vector<int64_t>{220}));
  EXPECT_EQ(nemo.state().steps_backwards, 1u);
  EXPECT_EQ(counted_steps(nemo, {it(0, 10)}), (std::vector<int64_t>{230}));
  EXPECT_EQ(nemo.state().steps_backwards, 2u);
  // A pattern of your own may read an epoch too.
  LogContract own = make({.step = R"(^ep (?P<epoch>\d+) batch (?P<step>\d+))"});
  EXPECT_EQ(counted_steps(own, {"ep 0 batch 1", "ep 0 batch 2", "ep 1 batch 1", "ep 1 batch 2"}),
            (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(own.classify("ep 7 batch 3").events[0].epoch, 7);
  EXPECT_EQ(own.classify("ep 99999999999999999999 batch 3").kind(), LogEventKind::kOther);
  own.reset(kT0);
  EXPECT_EQ(counted_steps(own, {"ep 1 batch 1"}), (std::vector<int64_t>{1})) << "reset forgets";
}

TEST(LogStepRules, AnInnerLoopsRedrawOfTheStepBarIsNoStep) {
  const std::string val = "\rValidation DataLoader 0:  50%|█████     | 1/2 [00:00<00:00, 11.8it/s]";
  const std::string bar3 = "\rEpoch 0:  50%|█████     | 3/6 [00:01<00:01,  3.01it/s, v_num=1]";
  const std::string bar4 = "\rEpoch 0:  67%|██████▋   | 4/6 [00:01<00:01,  3.01it/s, v_num=1]";
  const std::string bar2 = "\rEpoch 0:  33%|███▎      | 2/6 [00:01<00:01,  3.01it/s, v_num=1]";
  LogContract c = make({.preset = "lightning"});
  c.feed(bar2, kT0);
  LogLine l = c.feed(val + "\x1b[A" + bar3, kT0 + 1);
  ASSERT_EQ(l.events.size(), 2u);
  EXPECT_TRUE(l.events[0].nested);
  EXPECT_TRUE(l.events[1].inner);
  EXPECT_FALSE(l.events[1].counted);
  EXPECT_EQ(c.state().step, 2);
  EXPECT_EQ(c.state().phase, "eval") << "the inner loop's redraw does not end its phase";
  EXPECT_EQ(c.state().inner_redraws, 1u);
  EXPECT_EQ(c.feed(bar4, kT0 + 2).events[0].counted, true) << "no validation bar before it";
  EXPECT_EQ(c.state().step, 3) << "4 on the bar, less the validation batch drawn into it";
  EXPECT_EQ(c.state().phase, "train");

  // The same output with its escape sequences stripped (a log collector that drops them, a log
  // pasted into an issue): the validation bar is not nested, but its count says how many
  // advances of the epoch bar are its own (see UnnestedValidationBarsOwnTheirBatches).
  LogContract stripped = make({.preset = "lightning"});
  EXPECT_EQ(counted_steps(stripped, {bar2, val + bar3}), (std::vector<int64_t>{2}));
  // A phase marker that is not a nested bar (NeMo 2's printed validation lines) claims nothing.
  LogContract nemo = make({.preset = "nemo"});
  EXPECT_EQ(counted_steps(nemo, {"Training epoch 0, iteration 10/99 | reduced_train_loss: 2.5",
                                 "Validation: iteration 10/10",
                                 "Training epoch 0, iteration 20/99 | reduced_train_loss: 2.4"}),
            (std::vector<int64_t>{10, 20}));
  // Nor across an epoch, nor before the first step (the sanity check).
  LogContract first = make({.preset = "lightning"});
  EXPECT_EQ(counted_steps(first, {"\rSanity Checking DataLoader 0: 100%|█| 2/2 [00:00<00:00]\x1b[A",
                                  bar2, val + "\x1b[A",
                                  "\rEpoch 1:  17%|█▋        | 1/6 [00:00<00:02,  2.10it/s]"}),
            (std::vector<int64_t>{2, 3}));
}

TEST(LogStepRules, LightningPrefersNemosReducedTrainLossToItsPlaceholder) {
  LogContract c = make({.preset = "lightning"});
  LogLine l = c.classify(
      "Epoch 0: 100%|██████████| 2/2 [00:01<00:00, 1.15it/s, loss=nan, v_num=0, "
      "reduced_train_loss=3.910, global_step=1.000, consumed_samples=16.00]");
  EXPECT_EQ(l.events[0].loss, 3.910);
  EXPECT_TRUE(std::isnan(
      *c.classify("Epoch 0:  50%|█| 1/2 [00:00<00:00, loss=nan, v_num=0]").events[0].loss))
      << "a real nan stays nan";
  // Unknown totals, with and without Lightning's bar.
  EXPECT_EQ(c.classify("Epoch 0: 5it [00:01,  4.20it/s, loss=2.29, v_num=0]").events[0].step, 5);
  EXPECT_EQ(c.classify("Epoch 0: |          | 5/? [00:01<?, 4.20it/s]").events[0].step, 5);
  EXPECT_EQ(c.classify("Validating: 0it [00:00, ?it/s]").events[0].phase, "eval") << "1.0-1.4";
  EXPECT_EQ(c.classify("Validation sanity check: 0it [00:00, ?it/s]").events[0].phase, "eval");
}

TEST(LogStepRules, UnnestedValidationBarsOwnTheirBatches) {
  // Lightning 1.x pasted into an issue (Lightning-AI/pytorch-lightning#14094): the epoch bar
  // (859 training + 157 validation batches) advances under an open validation bar.
  auto ep = [](int n) {
    return "Epoch 0:  92%|█████████▉| " + std::to_string(n) +
           "/1016 [00:33<00:03, 27.70it/s, loss=0.223, v_num=77]";
  };
  auto val = [](int n, int m) {
    return "Validation DataLoader 0:  46%|████▋     | " + std::to_string(n) + "/" +
           std::to_string(m) + " [00:02<00:02, 37.48it/s]";
  };
  LogContract c = make({.preset = "lightning"});
  EXPECT_EQ(
      counted_steps(c, {ep(858), ep(859), val(73, 157), ep(932), ep(933), val(78, 157), ep(934)}),
      (std::vector<int64_t>{858, 859}));
  EXPECT_EQ(c.state().phase, "eval") << "validation goes on";
  EXPECT_EQ(c.state().inner_redraws, 3u);
  // The log may begin inside the validation: the first bar drawn then is not training's either.
  LogContract late = make({.preset = "lightning"});
  EXPECT_EQ(counted_steps(late, {val(73, 157), ep(932), ep(933)}), std::vector<int64_t>{});
  // A bar owns only the batches it has left (and the advance of the batch it just drew): the
  // rest of a jump is training, and the next epoch is training whatever was drawn before.
  LogContract jump = make({.preset = "lightning"});
  EXPECT_EQ(counted_steps(jump, {ep(10), val(1, 2), ep(14),
                                 "Epoch 1:   1%|          | 1/1016 [00:00<00:03, 27.70it/s]"}),
            (std::vector<int64_t>{10, 12, 13}))
      << "2 of the 4 batches were validation's; epoch 1 goes on from step 12";
  // A complete bar before any step is the sanity check: it owns nothing.
  LogContract sanity = make({.preset = "lightning"});
  EXPECT_EQ(
      counted_steps(sanity, {"Sanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00]",
                             "Epoch 0:   1%|          | 1/100 [00:00<00:10,  9.1it/s]"}),
      (std::vector<int64_t>{1}));
  // Lightning 2.x draws validation without advancing the epoch bar: after its last batch the
  // first advance is taken as 1.x's last validation batch (a missed step, never a false one).
  LogContract two = make({.preset = "lightning"});
  EXPECT_EQ(
      counted_steps(two, {"Epoch 0:  10%|█         | 10/100 [00:01<00:10, 9.1it/s, v_num=0]",
                          val(2, 2), "Epoch 0:  10%|█         | 10/100 [00:01<00:10, v_num=0]",
                          "Epoch 0:  11%|█         | 11/100 [00:01<00:10, v_num=0]",
                          "Epoch 0:  12%|█▏        | 12/100 [00:01<00:10, v_num=0]"}),
      (std::vector<int64_t>{10, 11}));
}

TEST(LogStepRules, HuggingFaceLossDictsWithoutABar) {
  // The Trainer without its bar (disable_tqdm, a notebook, a pasted log) prints only its dicts:
  // each is a step whose number the log does not show, counted one by one.
  const std::string d1 = "{'loss': 1.141, 'learning_rate': 8.36e-05, 'epoch': 50.0}";
  const std::string d2 =
      "{'loss': 0.0003, 'grad_norm': nan, 'learning_rate': 6.7e-05, 'epoch': 100.0}";
  LogContract c = make({.preset = "huggingface"});
  EXPECT_EQ(counted_steps(c, {d1, d2, "{'eval_loss': 2.1, 'epoch': 100.0}", d1}),
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(c.state().loss, 1.141);
  EXPECT_EQ(c.state().phase, "train");
  // Once the log shows a step number (the bar, TFTrainer's 'step'), a dict only reports the
  // loss of the step the bar counted.
  EXPECT_EQ(counted_steps(c, {"  8%|▊         | 40/500 [00:04<00:38,  1.40it/s]", d2, d1,
                              " 8%|▊         | 41/500 [00:04<00:38,  1.40it/s]"}),
            (std::vector<int64_t>{40, 41}));
  EXPECT_EQ(c.state().step_count, 5u);
  c.reset(kT0);
  EXPECT_EQ(counted_steps(c, {d1}), (std::vector<int64_t>{1})) << "a new incarnation";
  // transformers 3 printed the dict as JSON, with the step.
  LogContract json = make({.preset = "huggingface"});
  EXPECT_EQ(counted_steps(json, {"> {\"loss\": 7.1527, \"learning_rate\": 4.83e-05, \"epoch\": "
                                 "0.0328, \"step\": 500}"}),
            (std::vector<int64_t>{500}));
  EXPECT_EQ(json.state().loss, 7.1527);
  // auto picks Hugging Face from a dict and counts it.
  LogContract a = make({.preset = "auto"});
  EXPECT_EQ(counted_steps(a, {"some banner", d1, d2}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.state().preset, "huggingface");
}

TEST(LogStepRules, DeepSpeedStepLinesUnderNeoxAndHuggingFace) {
  const std::string ds = "[2023-05-22 21:52:36,066] [INFO] [logging.py:96:log_dist] [Rank 0] ";
  const std::string iter2 =
      " samples/sec: 4.904 | iteration        2/   55000 | elapsed time per iteration (ms): "
      "6524.7 | learning rate: 2.424E-09 | lm_loss: 2.175701E+00 | loss scale: 4096.0 |";
  // GPT-NeoX prints DeepSpeed's step line for the same iteration, before its own.
  LogContract neox = make({.preset = "megatron"});
  EXPECT_EQ(counted_steps(neox, {ds + "step=2, skipped=0, lr=[2.4e-09], mom=[[0.9, 0.95]]", iter2,
                                 ds + "step=3, skipped=0, lr=[3.6e-09], mom=[[0.9, 0.95]]"}),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(neox.state().loss, 2.175701);
  // Under the Trainer the engine's step is the bar's.
  LogContract hf = make({.preset = "huggingface"});
  EXPECT_EQ(counted_steps(hf, {"  8%|▊         | 1999/24128 [1:52:09<20:27:23,  3.33s/it]" + ds +
                                   "step=2000, skipped=1995, lr=[0.001], mom=[0.0, 0.0]",
                               ds + "step=2010, skipped=1995, lr=[0.001], mom=[0.0, 0.0]"}),
            (std::vector<int64_t>{1999, 2010}));
  // "step=0" is the engine saying it started, under every framework: no step.
  for (const char* p : {"deepspeed", "megatron", "huggingface"}) {
    LogContract c = make({.preset = p});
    EXPECT_EQ(counted_steps(c, {ds + "step=0, skipped=0, lr=[5e-06], mom=[[0.9, 0.999]]"}),
              std::vector<int64_t>{})
        << p;
  }
  // auto: DeepSpeed's line picks deepspeed; the Trainer's first dict (its banner is at INFO
  // level) moves it to huggingface, which reads both.
  LogContract a = make({.preset = "auto"});
  EXPECT_EQ(counted_steps(a, {ds + "step=10, skipped=0, lr=[5e-05], mom=[[0.9, 0.999]]",
                              "{'loss': 6.2645, 'learning_rate': 0.001, 'epoch': 0.02}",
                              ds + "step=20, skipped=0, lr=[5e-05], mom=[[0.9, 0.999]]"}),
            (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(a.state().preset, "huggingface");
}

TEST(LogStepRules, NemoAutomodelAndNemo2Lines) {
  auto am = [](int step, int epoch) {
    return "2026-04-20 22:56:31 | INFO | root | step " + std::to_string(step) + " | epoch " +
           std::to_string(epoch) +
           " | loss 0.3582 | grad_norm 9.1875 | lr 2.00e-05 | mem 41.98 GiB | tps "
           "2202.91(2202.91/gpu) | num_label_tokens 112";
  };
  // The step counts over the run: a new epoch keeps its numbers. Step 0 is the first one done.
  LogContract c = make({.preset = "nemo"});
  EXPECT_EQ(counted_steps(c, {am(0, 0), am(1, 0), am(2, 1), am(3, 1)}),
            (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(c.state().epoch, 1);
  EXPECT_EQ(c.state().loss, 0.3582);
  EXPECT_EQ(c.classify("2026-07-26 19:37:11 | INFO | nemo_automodel.recipes.llm.train_eagle1 | "
                       "epoch=0 step=1070 loss=2.5004 acc=0.3245 lr=2.61109e-05")
                .events[0]
                .step,
            1070);
  // NeMo 2 prints an iteration after it is done, from 0.
  LogContract n2 = make({.preset = "nemo"});
  EXPECT_EQ(counted_steps(n2, {"Training epoch 0, iteration 0/9 | lr: 0.0006 | global_step: 0 | "
                               "reduced_train_loss: 11.02",
                               "Training epoch 0, iteration 1/9 | lr: 0.0006 | global_step: 1 | "
                               "reduced_train_loss: 9.761"}),
            (std::vector<int64_t>{0, 1}));
  // auto picks nemo from Automodel's line.
  LogContract a = make({.preset = "auto"});
  EXPECT_EQ(counted_steps(a, {am(5, 0)}), (std::vector<int64_t>{5}));
  EXPECT_EQ(a.state().preset, "nemo");
  // torchtitan before 2025 printed no [titan] prefix, and wps for tps.
  LogContract titan = make({.preset = "auto"});
  EXPECT_EQ(
      counted_steps(titan, {"[rank0]:2024-04-01 17:54:52,734 - root - INFO - step:  1  "
                            "loss: 10.9746  memory:  9.53GiB(10.03%)  wps: 1,228  mfu: 0.02%"}),
      (std::vector<int64_t>{1}));
  EXPECT_EQ(titan.state().preset, "torchtitan");
}

// auto over the lines of a sample: the preset it ends with (empty: none).
std::string auto_pick(const std::vector<std::string>& lines) {
  LogContract a = make({.preset = "auto"});
  for (size_t i = 0; i < lines.size(); ++i) a.feed(lines[i], kT0 + static_cast<int64_t>(i));
  EXPECT_EQ(a.state().preset.empty(), a.state().step_count == 0)
      << "auto reads no step before it picks";
  return a.state().preset;
}

TEST(LogAuto, StaysQuietWithoutAnUnmistakableLine) {
  // Hand-written loops look like many things: auto never picks plain.
  EXPECT_EQ(auto_pick({"step 1 loss 2.3", "step=2 loss=2.2", "Step [3/100], Loss: 2.1"}), "");
  // A tqdm bar named "Epoch 0" is anybody's loop; a bare bar too.
  EXPECT_EQ(auto_pick({"Epoch 0:  50%|█████     | 1/2 [00:00<00:00,  6.54it/s]",
                       " 45%|████▌     | 27/60 [00:10<00:13,  2.50it/s]"}),
            "");
  // DeepSpeed runs under Hugging Face, Lightning and NeoX: its banner picks nothing.
  EXPECT_EQ(auto_pick({"[2024-03-01 10:00:05,456] [INFO] [logging.py:96:log_dist] [Rank 0] "
                       "DeepSpeed info: version=0.13.1, git-hash=unknown, git-branch=unknown"}),
            "");
  // Noise never picks, whatever it quotes.
  EXPECT_EQ(auto_pick({"/w/train.py:9: UserWarning: Epoch 0: 1/2 [00:00, v_num=0, "
                       "reduced_train_loss=3.9]",
                       "node1:1:1 [0] NCCL INFO steps: 10 loss: 2.3 iter time (s): 0.5 ",
                       "W0501 12:00:40.123000 1 torch/x.py:1] ***** Running training *****"}),
            "");
  EXPECT_EQ(auto_pick({"megatron-like: iteration 10/ 500 | lm loss: 2.0 |"}), "")
      << "without Megatron's timing column";
}

TEST(LogAuto, PicksRefinesAndKeepsItsChoice) {
  LogContract a = make({.preset = "auto"});
  EXPECT_EQ(a.state().preset, "");
  a.feed("some banner", kT0);
  LogLine l = a.feed("GPU available: True (cuda), used: True", kT0 + 1);
  EXPECT_EQ(l.events[0].picked, "lightning");
  EXPECT_EQ(a.state().preset, "lightning");
  EXPECT_EQ(a.state().preset_line, 2u);
  a.feed("Epoch 0:  50%|█████     | 1/2 [00:00<00:00, 2.0it/s, loss=nan, v_num=0]", kT0 + 2);
  EXPECT_EQ(a.state().step, 1);
  // NeMo prints Lightning's banners first: its first own line moves auto to nemo, and the
  // step read so far stays.
  l = a.feed("[NeMo I 2023-09-12 08:14:05 exp_manager:394] Experiments will be logged at /r",
             kT0 + 3);
  EXPECT_EQ(l.events[0].picked, "nemo");
  EXPECT_EQ(a.state().preset, "nemo");
  l = a.feed(
      "Epoch 0: 100%|██████████| 2/2 [00:01<00:00, 1.1it/s, loss=nan, v_num=0, "
      "reduced_train_loss=3.910]",
      kT0 + 4);
  EXPECT_TRUE(l.events[0].counted);
  EXPECT_EQ(a.state().step, 2);
  EXPECT_EQ(a.state().loss, 3.910);
  // Settled: nothing moves it now; a new incarnation keeps it and reads at once.
  a.feed("[rank0]:[titan] 2025-01-15 10:00:01,137 - root - INFO - Starting job", kT0 + 5);
  EXPECT_EQ(a.state().preset, "nemo");
  a.reset(kT0 + 6);
  EXPECT_EQ(a.state().preset, "nemo");
  EXPECT_FALSE(a.state().step.has_value());
  a.feed("Training epoch 0, iteration 9/99 | reduced_train_loss: 11.02", kT0 + 7);
  EXPECT_EQ(a.state().step, 9);
  EXPECT_EQ(a.classify("Validation: iteration 10/10").events[0].phase, "eval")
      << "classify reads with the preset picked";

  // A preset named in the spec is in force from the first line, and says so.
  EXPECT_EQ(make({.preset = "megatron"}).state().preset, "megatron");
  EXPECT_EQ(make({}).state().preset, "none");
}

TEST(LogAuto, ReadsTheLinesItHeldBackOnceItPicks) {
  // The Trainer's bar says nothing auto can trust; its first loss dict picks huggingface, and
  // the bar drawn before it is read then, not lost.
  const std::vector<std::string> lines = {
      " 94%|█████████▍| 499/532 [2:08:29<08:25, 15.33s/it]",
      "W0501 12:00:40.123000 2345 torch/_dynamo/convert_frame.py:844] noise is not held",
      " 94%|█████████▍| 500/532 [2:08:45<08:09, 15.30s/it]",
      "{'loss': 4.8381, 'grad_norm': 20.2, 'learning_rate': 1.38e-07, 'epoch': 1.88}",
      " 94%|█████████▍| 501/532 [2:09:00<07:54, 15.31s/it]"};
  LogContract a = make({.preset = "auto"});
  std::vector<LogLine> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    out.push_back(a.feed(lines[i], kT0 + static_cast<int64_t>(i) * kNsPerSec));
  }
  EXPECT_TRUE(out[0].held.empty());
  ASSERT_EQ(out[3].held.size(), 2u) << "the two bars, not the noise";
  EXPECT_EQ(out[3].held[0].held_line, 1u);
  EXPECT_TRUE(out[3].held[0].counted);
  EXPECT_EQ(out[3].held[1].held_line, 3u);
  EXPECT_EQ(out[3].held[1].step, 500);
  EXPECT_EQ(a.state().held_lines_read, 2u);
  EXPECT_EQ(a.state().step, 501);
  EXPECT_EQ(a.state().step_count, 3u);
  EXPECT_EQ(a.state().loss, 4.8381);
  // Only the last kMaxHeldLines are held, and reset() forgets them.
  LogContract many = make({.preset = "auto"});
  for (size_t i = 1; i <= kMaxHeldLines + 10; ++i) {
    many.feed("Epoch 0:  1%| | " + std::to_string(i) + "/5005 [00:03<5:11:29,  0.27it/s]", kT0);
  }
  many.feed("GPU available: True (cuda), used: True", kT0);
  EXPECT_EQ(many.state().held_lines_read, kMaxHeldLines);
  EXPECT_EQ(many.state().step_count, kMaxHeldLines);
  LogContract reset = make({.preset = "auto"});
  reset.feed("Epoch 0:  1%| | 1/5005 [00:03<5:11:29,  0.27it/s]", kT0);
  reset.reset(kT0 + 1);
  reset.feed("GPU available: True (cuda), used: True", kT0 + 2);
  EXPECT_EQ(reset.state().step_count, 0u);
}

TEST(LogAuto, ExplicitPatternsApplyFromTheFirstLine) {
  LogContract a = make({.preset = "auto", .step = R"(^it (?P<step>\d+))", .noise = {"^DEBUG"}});
  a.feed("it 3", kT0);
  EXPECT_EQ(a.state().step, 3) << "your step pattern needs no pick";
  EXPECT_EQ(a.state().preset, "");
  a.feed("DEBUG GPU available: True (cuda), used: True", kT0 + 1);
  EXPECT_EQ(a.state().preset, "") << "your noise never picks";
  a.feed("GPU available: True (cuda), used: True", kT0 + 2);
  EXPECT_EQ(a.state().preset, "lightning");
  EXPECT_EQ(a.classify("Epoch 0:  50%|█████     | 1/2 [00:00<00:00, v_num=0]").kind(),
            LogEventKind::kOther)
      << "your step pattern still replaces the preset's";
  EXPECT_EQ(a.classify("Validation: 0it [00:00, ?it/s]").events[0].phase, "eval")
      << "the preset's phases fill in";
}

TEST(LogAuto, PicksTheRightPresetForEachCheckedInSample) {
  const std::pair<const char*, const char*> cases[] = {{"huggingface", "huggingface"},
                                                       {"lightning", "lightning"},
                                                       {"megatron", "megatron"},
                                                       {"torchtitan", "torchtitan"},
                                                       {"plain", ""}};
  for (const auto& [file, want] : cases) {
    const char* d = std::getenv("STEPWATCH_SOURCE_DIR");
    std::ifstream in(std::string(d != nullptr ? d : ".") + "/tests/probe/data/" + file + ".txt");
    ASSERT_TRUE(in.good()) << file;
    LogContract a = make({.preset = "auto"});
    LogContract own = make({.preset = file});
    std::string line;
    for (int64_t i = 0; std::getline(in, line); ++i) {
      a.feed(line, kT0 + i);
      own.feed(line, kT0 + i);
      if (a.state().preset.empty()) continue;
      EXPECT_EQ(a.state().step, own.state().step) << file << " line " << i;
      EXPECT_EQ(a.state().phase, own.state().phase) << file << " line " << i;
    }
    EXPECT_EQ(a.state().preset, want) << file;
    if (*want == '\0') {
      EXPECT_EQ(a.state().step_count, 0u) << file;
    }
  }
}

TEST(LogPresetErrors, BadPresetsAndPatternsNameTheKey) {
  auto message = [](const LogPatterns& p) {
    auto r = LogContract::compile(p);
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_EQ(message({.preset = "Auto"}),
            "unknown log preset \"Auto\"; allowed: none, plain, huggingface, lightning, "
            "megatron, torchtitan, nemo, deepspeed, auto");
  EXPECT_NE(message({.preset = "auto", .step = "(?P<step>\\d+"}).find("step: invalid RE2 pattern"),
            std::string::npos);
  EXPECT_NE(message({.preset = "nemo", .step = R"(^(?P<epoch>\d+))"})
                .find("step: pattern \"^(?P<epoch>\\d+)\" has no named group (?P<step>...)"),
            std::string::npos);
  EXPECT_NE(message({.preset = "deepspeed", .noise = {"("}}).find("noise[0]: invalid RE2"),
            std::string::npos);
}

}  // namespace
}  // namespace stepwatch::probe
