// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Built-in log formats for trainers that cannot be changed: the RE2 patterns that read steps,
// losses and phases from the output of Hugging Face Trainer, PyTorch Lightning, Megatron-LM
// (and GPT-NeoX), torchtitan, NeMo (and NeMo Automodel), DeepSpeed and plain "step N loss X"
// loops, and the signatures that let `auto` pick one of them. docs/log-contract.md quotes every
// pattern verbatim (a test checks it); change both together. The spec names the same presets, in
// the same order (spec.h kLogPresetNames; probe may not include spec): a new preset is a row here
// and its name there, and tests/supervise/log_feed_test.cpp checks that the two lists agree.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace stepwatch::probe {

struct LogPresetPatterns {
  std::string_view name;                    // as written in a spec: "huggingface"
  std::span<const std::string_view> step;   // one per line shape, tried in order; empty: none
  std::string_view phase_start;             // (?P<phase>...) or (?P<phase_NAME>...); empty: none
  std::string_view phase_end;               // optional phase group; empty: none
  std::span<const std::string_view> noise;  // the preset's own noise and the common noise
  // auto: a line (not noise) that matches one of these is unmistakably this framework's.
  // Empty: auto never picks this preset.
  std::span<const std::string_view> detect;
  // auto: the preset this one refines (NeMo prints Lightning's bars and banners; GPT-NeoX,
  // Megatron-DeepSpeed and the Trainer under DeepSpeed print DeepSpeed's step lines): after
  // auto picked `refines`, a line matching `detect` still moves it here. Empty: none.
  std::string_view refines;
};

// "auto": not a preset of its own but the mode that picks one of the others from the output.
inline constexpr std::string_view kLogPresetAuto = "auto";

// Every preset, "none" first and "auto" last, in the order the spec documents them. auto's
// entry holds only the common noise, which applies until it has picked a preset.
std::span<const LogPresetPatterns> log_presets();

// The preset called `name`; "" means "none". nullptr: no such preset.
const LogPresetPatterns* find_log_preset(std::string_view name);

// "none, plain, huggingface, ..., auto": for error messages.
std::string log_preset_names();

}  // namespace stepwatch::probe
