// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The rules a spec must satisfy, free of toml++: name and range checks, RE2 patterns, URLs,
// command placeholders and the cross-field rules. spec.cpp turns TOML into a JobSpec (types,
// durations, unknown keys, through toml_reader.h); validate_spec() then applies every rule here,
// in one place.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/spec/spec.h"
#include "src/spec/toml_reader.h"

namespace stepwatch::spec {

std::optional<LogPreset> parse_log_preset(std::string_view name);
std::optional<PagerKind> parse_pager_kind(std::string_view name);
std::optional<CheckpointSource> parse_checkpoint_source(std::string_view name);
std::optional<ResumeOwner> parse_resume_owner(std::string_view name);
std::optional<SlurmRequeue> parse_slurm_requeue(std::string_view name);
inline constexpr std::string_view kPagerKindNames[] = {"webhook", "alertmanager", "command"};
inline constexpr std::string_view kCheckpointSourceNames[] = {"marker", "beacon"};
inline constexpr std::string_view kResumeOwnerNames[] = {"stepwatch", "slurm", "kubernetes"};
inline constexpr std::string_view kSlurmRequeueNames[] = {"scontrol", "exit"};

// "one of a, b or c" for messages.
std::string one_of(std::span<const std::string_view> names);

// An empty string when `name` is acceptable, else what is wrong with it.
std::string job_id_problem(std::string_view name);
std::string phase_name_problem(std::string_view name);

// Applies every rule to a spec read from the file; issues go to `sink`.
void validate_spec(const JobSpec& spec, const KeyLines& lines, IssueSink& sink);

}  // namespace stepwatch::spec
