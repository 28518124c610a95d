// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Command templates: argv arrays from the spec whose strings may hold {name} placeholders,
// filled in when the runbook runs them ("--resume-from={checkpoint_id}"). One grammar for
// checking (at load) and expanding (at run time), so the two never disagree:
//   {name}     a placeholder; name is [A-Za-z_][A-Za-z0-9_]*
//   {{ and }}  a literal { and }
//   ${NAME}    left alone, for a shell the command may start ("bash", "-c", "... ${HOME}")
//   any other brace is literal (JSON in an argument stays as written)
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::spec {

// The placeholders each command may use.
inline constexpr std::string_view kResumePlaceholders[] = {"checkpoint_id", "checkpoint_step",
                                                           "incarnation", "job"};
inline constexpr std::string_view kPreemptPlaceholders[] = {"incarnation", "job", "pgid"};
inline constexpr std::string_view kPagerPlaceholders[] = {"job"};

// The placeholder names used in one argument, in order of appearance.
std::vector<std::string> template_placeholders(std::string_view arg);

// kInvalidArgument naming the first placeholder outside `allowed` and listing what is allowed.
Status check_template(std::string_view arg, std::span<const std::string_view> allowed);

using TemplateValues = std::map<std::string, std::string, std::less<>>;

// kInvalidArgument when a value read from disk (a checkpoint id) holds anything but
// [A-Za-z0-9._:+=,@%/-]: it may land in a "bash -c" string, where ; | & $ ( ) ` and quotes
// would run as shell. `what` names the value in the message.
Status check_template_value(std::string_view what, std::string_view value);

// Replaces every placeholder found in `values`; one not found is left as written.
std::string expand_template(std::string_view arg, const TemplateValues& values);
std::vector<std::string> expand_command(const std::vector<std::string>& argv,
                                        const TemplateValues& values);

}  // namespace stepwatch::spec
