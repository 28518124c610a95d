// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/log_presets.h"

#include <array>

namespace stepwatch::probe {
namespace {

// Noise every preset (but "none") ignores: lines that are never progress, whatever they say.
// NCCL's INFO chatter (NCCL_DEBUG=INFO).
constexpr std::string_view kNcclInfo = R"re(\bNCCL INFO\b)re";
// PyTorch's own glog-style lines: "W0501 12:00:40.123000 140213
// torch/_dynamo/convert_frame.py:844]"
constexpr std::string_view kTorchLog = R"re([IWEV]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\])re";
// Dynamo recompilation warnings, also when printed without the glog prefix.
constexpr std::string_view kDynamo =
    R"re(torch\._dynamo hit config\.|\[__recompiles(?:_verbose)?\]|\bRecompiling function \S+|To (?:log all recompilation reasons|diagnose recompilation issues))re";
// Python warnings: "/path/x.py:12: UserWarning: ..." (Lightning drops the category) and the
// source line Python prints under it.
constexpr std::string_view kPyWarning = R"re(^\S*\.py:\d+: \w)re";
constexpr std::string_view kPyWarnCall = R"re((?:^|\]:)\s*warnings\.warn\()re";
// c10 warnings: "[W reducer.cpp:1360] Warning: ...", "[W501 12:00:00.12 ProcessGroupNCCL.cpp:41]"
constexpr std::string_view kC10Warning = R"re(\[W[0-9 :.]*[A-Za-z_0-9]+\.(?:cpp|cc|h):\d+\])re";
// A tqdm bar ("| 450/1000 [00:12<00:15", or without the bar "50% 450/1000 ["), for presets
// whose steps never come from a bar.
constexpr std::string_view kTqdmBar = R"re((?:\||\d%) *[0-9.]+[kMG]?/(?:[0-9.]+[kMG]?|\?) *\[)re";

constexpr std::array kCommonNoise{kNcclInfo,  kTorchLog,   kDynamo,
                                  kPyWarning, kPyWarnCall, kC10Warning};
constexpr std::array kBarNoise{kNcclInfo,   kTorchLog,   kDynamo, kPyWarning,
                               kPyWarnCall, kC10Warning, kTqdmBar};
// Hugging Face: every tqdm bar with a description ("Map: 100%|", "Loading checkpoint shards:",
// also drawn without the bar: "Map:  50% 5/10 [") is noise; the training bar has none.
constexpr std::array kHfNoise{kNcclInfo,
                              kTorchLog,
                              kDynamo,
                              kPyWarning,
                              kPyWarnCall,
                              kC10Warning,
                              std::string_view(R"re(^[A-Za-z][^|]*: *\d+%[| ])re")};

// "step 12 loss 2.34", "step=12", "Step [100/600], Loss: 0.21"; phases "phase eval start".
constexpr std::array<std::string_view, 1> kPlainStep{
    R"re((?i)\bstep\s*[=:]?\s*\[?(?P<step>\d+)\b(?:.*?\bloss\s*[=:]?\s*(?P<loss>[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?|(?i:nan|inf))))?)re"};

// The training bar " 45%|████▌     | 450/1000 [" (also " 45% 450/1000 [" without the bar)
// counts optimizer steps (the only step number the PyTorch Trainer prints). Its
// "{'loss': 2.3456, ...}" lines report a loss without a step (TFTrainer's end with 'step': N,
// transformers 3 printed them as JSON): the (?P<tick>) group makes one a step without a number,
// which counts only in a log that has shown no step number (the Trainer without its bar). Under
// DeepSpeed the engine's "step=N, skipped=" line is the same optimizer step.
constexpr std::array<std::string_view, 3> kHfStep{
    R"re(^\s*\d+%(?:\|[^|]*\| *| +)(?P<step>[1-9]\d*)/\d+ \[)re",
    R"re((?:^|\s)\{["']loss["']: ["']?(?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf)))(?:.*?["']step["']: (?P<step>\d+)[,}])?(?P<tick>))re",
    R"re(\bstep=(?P<step>[1-9]\d*), skipped=\d+, lr=)re"};
constexpr std::array<std::string_view, 2> kHfDetect{
    R"re(\*{5} Running training \*{5})re",
    R"re(\{["']loss["']: .*["']learning_rate["']: .*["']epoch["']:)re"};

// "Epoch 0:  45%|████▌     | 450/1000 [00:12<00:15, 36.20it/s, v_num=0, train_loss=2.310]",
// "Epoch 0:  50% 1/2 [..." (no bar), "Epoch 0: 5it [..." (no total): the batch within the epoch.
// NeMo's bars carry a placeholder "loss=nan" before their real reduced_train_loss.
constexpr std::array<std::string_view, 1> kLightningStep{
    R"re(^Epoch (?P<epoch>\d+): *(?:(?:\d+%)?\|[^|]*\| *|\d+% +)?(?P<step>[1-9]\d*)(?:/(?:\d+|\?) |it )\[(?:(?:[^\]]*?[ ,]reduced_train_loss=|[^\]]*?[ ,](?:train_)?loss(?:_step)?=)(?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))?)re"};
constexpr std::array<std::string_view, 2> kLightningDetect{
    R"re(^GPU available: (?:True|False)(?: \(\w+\))?, used: (?:True|False))re",
    R"re(^Epoch \d+: .*\[[^\]]*\bv_num=)re"};

// " [2024-05-01 12:01:02] iteration       10/  500000 | ... | lm loss: 1.089123E+01 | ...";
// GPT-NeoX: " samples/sec: 12.3 | iteration       10/  320000 | ... | lm_loss: 1.093E+01 |".
// NeoX and Megatron-DeepSpeed also print DeepSpeed's "step=N, skipped=" line for the same
// iteration, often more often than their own line.
constexpr std::array<std::string_view, 2> kMegatronStep{
    R"re(\biteration\s+(?P<step>\d+)/\s*\d+ \|(?:.*?\| (?:lm[ _])?loss:? (?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))?)re",
    R"re(\bstep=(?P<step>[1-9]\d*), skipped=\d+, lr=)re"};
constexpr std::array<std::string_view, 1> kMegatronDetect{
    R"re(\biteration\s+\d+/\s*\d+ \|.*\belapsed time per iteration \(ms\):)re"};

// "[titan] 2025-01-15 10:00:05,123 - root - INFO - step:  1  loss: 12.2345  memory: ..."
// (colored in the terminal; "validate step:" is not a training step). Releases before 2025
// printed no "[titan]" prefix and "wps:" (words per second) for "tps:".
constexpr std::array<std::string_view, 1> kTorchtitanStep{
    R"re((?:^|\s-\s)step:\s*(?P<step>\d+)\b(?:.*?\bloss:\s*(?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))?)re"};
constexpr std::array<std::string_view, 2> kTorchtitanDetect{
    R"re(\[titan\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - root - [A-Z]+ -)re",
    R"re(\bstep:\s*\d+\s+loss:.*\bmemory:.*\b[tw]ps:)re"};

// NeMo 1.x: Lightning's bar, the loss from reduced_train_loss (never the placeholder
// "loss=nan"); NeMo 2: "Training epoch 0, iteration 9/99 | ... | reduced_train_loss: 11.02 |",
// printed after the iteration (iteration 0 is the first one done); NeMo Automodel:
// "2026-04-20 22:56:31 | INFO | root | step 0 | epoch 0 | loss 3.9974 | grad_norm ...", its
// step counted over the run, and "| epoch=0 step=1070 loss=2.5004 acc=..." from some recipes.
constexpr std::array<std::string_view, 4> kNemoStep{
    R"re(^Epoch (?P<epoch>\d+): *(?:(?:\d+%)?\|[^|]*\| *|\d+% +)?(?P<step>[1-9]\d*)(?:/(?:\d+|\?) |it )\[(?:(?:[^\]]*?[ ,]reduced_train_loss=|[^\]]*?[ ,]train_loss=)(?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))?)re",
    R"re(^Training epoch (?P<epoch>\d+), iteration (?P<step>\d+)/\S+ \|(?:.*?\| reduced_train_loss: (?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))?)re",
    R"re(\| step (?P<step>\d+) \| epoch (?P<epoch>\d+) \| loss (?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))) \|)re",
    R"re(\| epoch=(?P<epoch>\d+) step=(?P<step>\d+) loss=(?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf)))(?:\s|$))re"};
constexpr std::array<std::string_view, 5> kNemoDetect{
    R"re(^\[NeMo [IWE] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+:\d+\])re",
    R"re(^Epoch \d+: .*\[[^\]]*[ ,]reduced_train_loss=)re",
    R"re(^Training epoch \d+, iteration \d+/\S+ \|)re",
    R"re(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| [A-Z]+ \| \S+ \| step \d+ \| epoch \d+ \| loss \S+ \| grad_norm\b)re",
    R"re(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| [A-Z]+ \| nemo_automodel\.\S+ \| epoch=\d+ step=\d+ loss=)re"};

// DeepSpeed's engine: "[Rank 0] step=35, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]" every
// steps_per_print (and "step=0" once when it starts: no step); its pipeline engine:
// "steps: 70 loss: 2.1486 iter time (s): 0.521 ...".
constexpr std::array<std::string_view, 2> kDeepspeedStep{
    R"re(\bstep=(?P<step>[1-9]\d*), skipped=\d+, lr=)re",
    R"re(\bsteps: (?P<step>\d+) loss: (?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))) iter time \(s\):)re"};
constexpr std::array<std::string_view, 2> kDeepspeedDetect{
    R"re(\bstep=\d+, skipped=\d+, lr=\[)re", R"re(\bsteps: \d+ loss: \S+ iter time \(s\):)re"};

constexpr std::array<LogPresetPatterns, 9> kPresets{{
    {"none", {}, "", "", {}, {}, ""},
    {"plain",
     kPlainStep,
     R"re((?i)\bphase\s*[=:]?\s*(?P<phase>[a-z0-9._:/-]+)[\s,:]+(?:start|begin))re",
     R"re((?i)\bphase\s*[=:]?\s*(?P<phase>[a-z0-9._:/-]+)[\s,:]+(?:end|done|finish))re",
     kBarNoise,
     {},
     ""},
    {"huggingface", kHfStep,
     R"re(\*{5} Running (?P<phase_eval>Evaluation|Prediction) \*{5}|(?P<phase_checkpoint>Saving model checkpoint) to\b)re",
     R"re(^\{'(?P<phase_eval>eval)_\w+':)re", kHfNoise, kHfDetect, "deepspeed"},
    {"lightning", kLightningStep,
     R"re(^(?:(?P<phase_eval>Sanity Checking|Validation sanity check|Validation|Validating|Testing)|(?P<phase_predict>Predicting))(?: DataLoader \d+)?: *(?:\d+%)?(?:\|| *\d+(?:/(?:\d+|\?)|it) \[))re",
     "", kCommonNoise, kLightningDetect, ""},
    {"megatron", kMegatronStep,
     R"re(\b(?P<phase_checkpoint>saving checkpoint) at iteration\b|\b(?P<phase_eval>Evaluating) (?:on \d+ samples|iter \d+/\d+))re",
     R"re(\b(?P<phase_checkpoint>successfully saved) checkpoint\b|\b(?P<phase_eval>validation (?:loss|results)) at\b)re",
     kCommonNoise, kMegatronDetect, "deepspeed"},
    {"torchtitan", kTorchtitanStep,
     R"re(\b(?P<phase_checkpoint>Saving) (?:the|a full|a model only) checkpoint\b|\b(?P<phase_compile>Compiling)\b[^.]*\bwith torch\.compile\b)re",
     R"re(\b(?P<phase_checkpoint>Finished saving) the checkpoint\b)re", kBarNoise,
     kTorchtitanDetect, ""},
    {"nemo", kNemoStep,
     R"re(^(?:(?P<phase_eval>(?:Sanity Checking|Validation sanity check|Validation|Validating|Testing)(?: DataLoader \d+)?: *(?:\d+%)?(?:\|| *\d+(?:/(?:\d+|\?)|it) \[)|(?:Sanity checking )?(?:Validation|Testing): iteration \d+/)|(?P<phase_predict>Predicting(?: DataLoader \d+)?: *(?:\d+%)?(?:\|| *\d+(?:/(?:\d+|\?)|it) \[))))re",
     "", kCommonNoise, kNemoDetect, "lightning"},
    {"deepspeed", kDeepspeedStep,
     R"re(\b(?P<phase_checkpoint>Checkpoint) \S+ is about to be saved!)re", "", kCommonNoise,
     kDeepspeedDetect, ""},
    {kLogPresetAuto, {}, "", "", kCommonNoise, {}, ""},
}};

}  // namespace

std::span<const LogPresetPatterns> log_presets() {
  return kPresets;
}

const LogPresetPatterns* find_log_preset(std::string_view name) {
  if (name.empty()) name = "none";
  for (const auto& p : kPresets) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string log_preset_names() {
  std::string out;
  for (const auto& p : kPresets) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

}  // namespace stepwatch::probe
