// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/checkpoint_catalog.h"

#include <dirent.h>
#include <fmt/format.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace stepwatch::probe {

namespace {

std::optional<int64_t> last_number(const std::string& name) {
  size_t end = name.find_last_of("0123456789");
  if (end == std::string::npos) return std::nullopt;
  size_t start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(name[start - 1]))) --start;
  if (end - start + 1 > 18) return std::nullopt;
  return std::stoll(name.substr(start, end - start + 1));
}

// Bytes under `path` other than the marker, one level of subdirectories deep (sharded saves).
uint64_t data_bytes(const std::string& path, const std::string& marker, int depth = 0) {
  uint64_t total = 0;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == ".." || (depth == 0 && n == marker)) continue;
    struct stat st {};
    std::string p = path + "/" + n;
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode))
      total += static_cast<uint64_t>(st.st_size);
    else if (S_ISDIR(st.st_mode) && depth < 2)
      total += data_bytes(p, marker, depth + 1);
  }
  ::closedir(d);
  return total;
}

}  // namespace

const Generation* Catalog::latest() const {
  const Generation* best = nullptr;
  for (const auto& g : committed) {
    if (best == nullptr) {
      best = &g;
    } else if (g.step && best->step) {
      if (*g.step > *best->step ||
          (*g.step == *best->step && g.marker_wall_ns > best->marker_wall_ns))
        best = &g;
    } else if (g.marker_wall_ns > best->marker_wall_ns) {
      best = &g;
    }
  }
  return best;
}

Result<Catalog> scan_checkpoints(const std::string& dir, const std::string& marker) {
  size_t slash = marker.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= marker.size() ||
      marker.find('/', slash + 1) != std::string::npos) {
    return Error{
        Errc::kInvalidArgument,
        fmt::format("checkpoint marker \"{}\" must be DIR_GLOB/FILE, e.g. step_*/COMMITTED",
                    marker)};
  }
  std::string dir_glob = marker.substr(0, slash);
  std::string marker_file = marker.substr(slash + 1);
  Catalog cat;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return cat;
    return Error{errno == EACCES ? Errc::kPermission : Errc::kIo,
                 fmt::format("{}: {}", dir, std::strerror(errno))};
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (::fnmatch(dir_glob.c_str(), n.c_str(), FNM_PERIOD) == 0) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    Generation g;
    g.id = n;
    g.path = dir + "/" + n;
    g.step = last_number(n);
    struct stat st {};
    if (::lstat(g.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    std::string marker_path = g.path + "/" + marker_file;
    struct stat ms {};
    bool has_marker = ::stat(marker_path.c_str(), &ms) == 0;
    g.data_bytes = data_bytes(g.path, marker_file);
    if (!has_marker) {
      cat.in_flight.push_back(g);
      continue;
    }
    g.marker_wall_ns =
        static_cast<int64_t>(ms.st_mtim.tv_sec) * 1'000'000'000LL + ms.st_mtim.tv_nsec;
    if (g.data_bytes == 0) {
      cat.problems.push_back(
          fmt::format("{}: commit marker {} present but no data beside it; not a resume point",
                      g.path, marker_file));
      cat.inconsistent.push_back(g);
      continue;
    }
    cat.committed.push_back(g);
  }
  auto by_step = [](const Generation& a, const Generation& b) {
    if (a.step && b.step && *a.step != *b.step) return *a.step < *b.step;
    return a.marker_wall_ns < b.marker_wall_ns;
  };
  std::sort(cat.committed.begin(), cat.committed.end(), by_step);
  return cat;
}

}  // namespace stepwatch::probe
