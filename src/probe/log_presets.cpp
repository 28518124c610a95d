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
// A tqdm bar ("| 450/1000 [00:12<00:15"), for presets whose steps never come from a bar.
constexpr std::string_view kTqdmBar = R"re(\| *[0-9.]+[kMG]?/(?:[0-9.]+[kMG]?|\?) *\[)re";

constexpr std::array kCommonNoise{kNcclInfo,  kTorchLog,   kDynamo,
                                  kPyWarning, kPyWarnCall, kC10Warning};
constexpr std::array kBarNoise{kNcclInfo,   kTorchLog,   kDynamo, kPyWarning,
                               kPyWarnCall, kC10Warning, kTqdmBar};
// Hugging Face: every tqdm bar with a description ("Map: 100%|", "Loading checkpoint shards:")
// is noise; the training bar has none.
constexpr std::array kHfNoise{kNcclInfo,
                              kTorchLog,
                              kDynamo,
                              kPyWarning,
                              kPyWarnCall,
                              kC10Warning,
                              std::string_view(R"re(^[A-Za-z][^|]*: *\d+%\|)re")};

constexpr std::array<LogPresetPatterns, 6> kPresets{{
    {"none", "", "", "", {}},
    // "step 12 loss 2.34", "step=12", "Step [100/600], Loss: 0.21"; phases "phase eval start".
    {"plain",
     R"re((?i)\bstep\s*[=:]?\s*\[?(?P<step>\d+)\b(?:.*?\bloss\s*[=:]?\s*(?P<loss>[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?|(?i:nan|inf))))?)re",
     R"re((?i)\bphase\s*[=:]?\s*(?P<phase>[a-z0-9._:/-]+)[\s,:]+(?:start|begin))re",
     R"re((?i)\bphase\s*[=:]?\s*(?P<phase>[a-z0-9._:/-]+)[\s,:]+(?:end|done|finish))re", kBarNoise},
    // The training bar " 45%|████▌     | 450/1000 [" counts optimizer steps (the only step number
    // the Trainer prints); "{'loss': 2.3456, ...}" reports a loss without a step.
    {"huggingface",
     R"re(^\s*\d+%\|[^|]*\| *(?P<step>[1-9]\d*)/\d+ \[|^\{'loss': '?(?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))re",
     R"re(\*{5} Running (?P<phase_eval>Evaluation|Prediction) \*{5}|(?P<phase_checkpoint>Saving model checkpoint) to\b)re",
     R"re(^\{'(?P<phase_eval>eval)_\w+':)re", kHfNoise},
    // "Epoch 0:  45%|████▌     | 450/1000 [00:12<00:15, 36.20it/s, v_num=0, train_loss=2.310]":
    // the batch within the epoch (Lightning >= 2.0 counts training batches only).
    {"lightning",
     R"re(^Epoch \d+: *(?:\d+%)?\|[^|]*\| *(?P<step>[1-9]\d*)/(?:\d+|\?) \[(?:[^\]]*?[ ,](?:train_)?loss(?:_step)?=(?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))?)re",
     R"re(^(?:(?P<phase_eval>Sanity Checking|Validation|Testing)|(?P<phase_predict>Predicting))(?: DataLoader \d+)?: *(?:\d+%)?\|)re",
     "", kCommonNoise},
    // " [2024-05-01 12:01:02] iteration       10/  500000 | ... | lm loss: 1.089123E+01 | ..."
    {"megatron",
     R"re(\biteration\s+(?P<step>\d+)/\s*\d+ \|(?:.*?\| (?:lm )?loss:? (?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))?)re",
     R"re(\b(?P<phase_checkpoint>saving checkpoint) at iteration\b|\b(?P<phase_eval>Evaluating) (?:on \d+ samples|iter \d+/\d+))re",
     R"re(\b(?P<phase_checkpoint>successfully saved) checkpoint\b|\b(?P<phase_eval>validation loss) at\b)re",
     kCommonNoise},
    // "[titan] 2025-01-15 10:00:05,123 - root - INFO - step:  1  loss: 12.2345  memory: ..."
    // (colored in the terminal; "validate step:" is not a training step).
    {"torchtitan",
     R"re((?:^|\s-\s)step:\s*(?P<step>\d+)\b(?:.*?\bloss:\s*(?P<loss>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))))?)re",
     R"re(\b(?P<phase_checkpoint>Saving) (?:the|a full|a model only) checkpoint\b|\b(?P<phase_compile>Compiling)\b[^.]*\bwith torch\.compile\b)re",
     R"re(\b(?P<phase_checkpoint>Finished saving) the checkpoint\b)re", kBarNoise},
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
