// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/names.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "stepwatch/beacon_v1.h"

namespace stepwatch::contract {

namespace {
bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool printable(char c) {
  return c > 0x20 && c < 0x7f;
}

std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7f)
      out += c;
    else
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  }
  if (s.size() > 80) out += "...";
  return out;
}

Status check(std::string_view what, std::string_view s, size_t max_len, bool (*ok_char)(char),
             const char* allowed) {
  if (s.empty()) return Error{Errc::kInvalidArgument, fmt::format("{} is empty", what)};
  if (s.size() > max_len) {
    return Error{Errc::kInvalidArgument, fmt::format("{} \"{}\" is {} bytes, at most {} allowed",
                                                     what, shown(s), s.size(), max_len)};
  }
  for (char c : s) {
    if (!ok_char(c)) {
      return Error{Errc::kInvalidArgument,
                   fmt::format("{} \"{}\" has a character outside {}", what, shown(s), allowed)};
    }
  }
  return {};
}
}  // namespace

Status validate_job_id(std::string_view job) {
  auto st = check(
      "job id", job, STEPWATCH_JOB_MAX - 1,
      [](char c) { return is_alnum(c) || c == '.' || c == '_' || c == '-'; }, "[A-Za-z0-9._-]");
  if (!st) return st;
  if (job.front() == '.' || job.front() == '-') {
    return Error{Errc::kInvalidArgument,
                 fmt::format("job id \"{}\" may not start with '.' or '-'", shown(job))};
  }
  return {};
}

Status validate_phase(std::string_view phase) {
  return check(
      "phase", phase, STEPWATCH_PHASE_MAX - 1,
      [](char c) {
        return is_alnum(c) || c == '.' || c == '_' || c == '-' || c == ':' || c == '/';
      },
      "[A-Za-z0-9._:/-]");
}

Status validate_checkpoint_id(std::string_view id) {
  return check(
      "checkpoint id", id, STEPWATCH_CKPT_ID_MAX - 1,
      [](char c) { return printable(c) && c != '"' && c != '\'' && c != '\\'; },
      "printable ASCII without quotes or backslash");
}

Status validate_host(std::string_view host) {
  if (host.empty()) return {};
  return check("host", host, STEPWATCH_HOST_MAX - 1, printable, "printable ASCII");
}

Status validate_node_name(std::string_view node) {
  auto st = check(
      "node name", node, 63, [](char c) { return is_alnum(c) || c == '.' || c == '_' || c == '-'; },
      "[A-Za-z0-9._-]");
  if (!st) return st;
  if (node.front() == '-') {
    return Error{Errc::kInvalidArgument,
                 fmt::format("node name \"{}\" may not start with '-'", shown(node))};
  }
  return {};
}

Status validate_slurm_job_id(std::string_view id) {
  auto digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 10 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const size_t task = id.find('_');
  if (task == std::string_view::npos ? digits(id)
                                     : digits(id.substr(0, task)) && digits(id.substr(task + 1)))
    return {};
  if (id.empty()) return Error{Errc::kInvalidArgument, "Slurm job id is empty"};
  return Error{Errc::kInvalidArgument,
               fmt::format("Slurm job id \"{}\" must be digits, or digits_digits for an array "
                           "task (at most 10 digits each)",
                           shown(id))};
}

std::string job_dir(const std::string& root, std::string_view job) {
  return fmt::format("{}/{}", root, job);
}

std::string beacon_path(const std::string& root, std::string_view job, int rank) {
  return fmt::format("{}/{}/rank-{}.beacon", root, job, rank);
}

std::string jsonl_path(const std::string& root, std::string_view job) {
  return fmt::format("{}/{}/progress.jsonl", root, job);
}

int rank_from_beacon_name(std::string_view name) {
  constexpr std::string_view kPrefix = "rank-", kSuffix = ".beacon";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return -1;
  }
  std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return -1;
  // from_chars would take a sign ("rank--5.beacon"): only plain digits name a rank.
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
  }
  int rank = -1;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (ec != std::errc() || p != digits.data() + digits.size()) return -1;
  return rank;
}

}  // namespace stepwatch::contract
