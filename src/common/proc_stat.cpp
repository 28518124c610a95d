// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/proc_stat.h"

#include <fmt/format.h>

#include <charconv>

#include "src/common/text_file.h"

namespace stepwatch {

namespace {
template <class T>
bool to_num(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

Result<ProcStat> parse_proc_stat(std::string_view text) {
  ProcStat st;
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return Error{Errc::kParse, "stat: no '(comm)' field"};
  }
  if (!to_num(text.substr(0, open > 0 ? open - 1 : 0), st.pid)) {
    return Error{Errc::kParse, "stat: malformed pid"};
  }
  st.comm = std::string(text.substr(open + 1, close - open - 1));
  // Fields after the comm, 1-based as in proc(5): 3 = state, 4 = ppid ...
  std::string_view rest = text.substr(close + 1);
  int field = 2;
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\n')) ++i;
    if (i >= rest.size()) break;
    size_t j = i;
    while (j < rest.size() && rest[j] != ' ' && rest[j] != '\n') ++j;
    std::string_view tok = rest.substr(i, j - i);
    ++field;
    bool ok = true;
    switch (field) {
      case 3:
        st.state = tok.empty() ? '?' : tok[0];
        break;
      case 4:
        ok = to_num(tok, st.ppid);
        break;
      case 5:
        ok = to_num(tok, st.pgrp);
        break;
      case 6:
        ok = to_num(tok, st.session);
        break;
      case 14:
        ok = to_num(tok, st.utime_ticks);
        break;
      case 15:
        ok = to_num(tok, st.stime_ticks);
        break;
      case 20:
        ok = to_num(tok, st.num_threads);
        break;
      case 22:
        ok = to_num(tok, st.start_ticks);
        break;
      default:
        break;
    }
    if (!ok) return Error{Errc::kParse, fmt::format("stat: malformed field {} \"{}\"", field, tok)};
    i = j;
  }
  if (field < 22) return Error{Errc::kParse, fmt::format("stat: only {} fields", field)};
  return st;
}

Result<ProcStat> read_proc_stat(const std::string& proc_root, int pid) {
  std::string path = fmt::format("{}/{}/stat", proc_root, pid);
  auto text = read_small(path, kStatMaxBytes);
  if (!text) {
    if (text.error().code == Errc::kNotFound)
      return Error{Errc::kNotFound, fmt::format("{}: process gone", path)};
    return text.error();
  }
  if (text->empty()) return Error{Errc::kNotFound, fmt::format("{}: empty (process gone)", path)};
  auto st = parse_proc_stat(*text);
  if (!st) return Error{st.error().code, fmt::format("{}: {}", path, st.error().message)};
  return st;
}

}  // namespace stepwatch
