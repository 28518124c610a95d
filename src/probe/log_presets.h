// Built-in log formats for trainers that cannot be changed: the RE2 patterns that read steps,
// losses and phases from the output of Hugging Face Trainer, PyTorch Lightning, Megatron-LM
// (and GPT-NeoX), torchtitan, NeMo, DeepSpeed and plain "step N loss X" loops.
// docs/log-contract.md quotes every pattern verbatim (a test checks it); change both together.
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
};

// Every preset, "none" first, in the order the spec documents them.
std::span<const LogPresetPatterns> log_presets();

// The preset called `name`; "" means "none". nullptr: no such preset.
const LogPresetPatterns* find_log_preset(std::string_view name);

// "none, plain, huggingface, ...": for error messages.
std::string log_preset_names();

}  // namespace stepwatch::probe
