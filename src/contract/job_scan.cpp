#include "src/contract/job_scan.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "src/contract/beacon_reader.h"
#include "src/contract/jsonl.h"
#include "src/contract/names.h"

namespace stepwatch::contract {

namespace {

// Directory entries by name; errors name the directory.
Result<std::vector<std::string>> read_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    Errc code = errno == ENOENT ? Errc::kNotFound : errno == EACCES ? Errc::kPermission : Errc::kIo;
    return Error{code, fmt::format("{}: {}", dir, std::strerror(errno))};
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;  // ".", "..", and writers' temporary files
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

int64_t step_wall(const RankSnapshot& s) { return s.step ? s.step_at.wall_ns : 0; }

}  // namespace

Result<std::vector<std::string>> list_jobs(const std::string& root, std::vector<Error>* skipped, size_t max_listed,
                                           size_t* skipped_total) {
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) {
    Errc code = errno == ENOENT ? Errc::kNotFound : errno == EACCES ? Errc::kPermission : Errc::kIo;
    return Error{code, fmt::format("{}: {}", root, std::strerror(errno))};
  }
  std::vector<std::string> jobs;
  std::vector<Error> bad;
  size_t bad_total = 0;
  auto skip = [&](Error e) {
    if (bad_total++ < max_listed) bad.push_back(std::move(e));
  };
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string n = e->d_name;
    std::string p = root + "/" + n;
    bool dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {  // some filesystems do not say: ask, without following links
      struct stat st {};
      dir = ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (!dir) {
      skip(Error{Errc::kInvalidArgument, fmt::format("{}: not a job directory, skipped", p)});
      continue;
    }
    if (auto v = validate_job_id(n); !v) {
      skip(Error{Errc::kInvalidArgument, fmt::format("{}: {}, skipped", p, v.error().message)});
      continue;
    }
    jobs.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(jobs.begin(), jobs.end());
  std::sort(bad.begin(), bad.end(), [](const Error& a, const Error& b) { return a.message < b.message; });
  if (bad_total > bad.size()) {
    bad.push_back(Error{Errc::kInvalidArgument,
                        fmt::format("{}: {} more entries that are not job directories, skipped", root, bad_total - bad.size())});
  }
  if (skipped) {
    for (auto& e : bad) skipped->push_back(std::move(e));
  }
  if (skipped_total) *skipped_total = bad_total;
  return jobs;
}

JobView scan_job(const std::string& root, const std::string& job) {
  JobView view;
  view.job = job;
  view.dir = job_dir(root, job);
  auto names = read_dir(view.dir);
  if (!names) {
    view.problems.push_back(names.error());
    return view;
  }
  std::map<int, RankSnapshot> by_rank;
  bool has_jsonl = false;
  for (auto& n : *names) {
    if (n == "progress.jsonl") {
      has_jsonl = true;
      continue;
    }
    int rank = rank_from_beacon_name(n);
    if (rank < 0) continue;  // stack dumps, artifacts and other files live here too
    std::string path = view.dir + "/" + n;
    ReadOptions opts;
    opts.expected_job = job;
    auto snap = read_beacon_file(path, opts);
    if (!snap) {
      view.problems.push_back(snap.error());
      continue;
    }
    if (snap->rank != rank) {
      view.problems.push_back(
          Error{Errc::kInvalidField, fmt::format("{}: file name says rank {}, record says {}", path, rank, snap->rank)});
      continue;
    }
    by_rank[rank] = std::move(*snap);
  }
  if (has_jsonl) {
    JsonlTail tail(jsonl_path(root, job), job);
    auto bad = tail.poll(std::numeric_limits<size_t>::max());
    if (!bad) {
      view.problems.push_back(bad.error());
    } else {
      for (auto& e : *bad) view.problems.push_back(std::move(e));
      for (auto& [rank, snap] : tail.folder().ranks()) {
        auto it = by_rank.find(rank);
        if (it == by_rank.end() || step_wall(snap) > step_wall(it->second)) by_rank[rank] = snap;
      }
    }
  }
  for (auto& [rank, snap] : by_rank) view.ranks.push_back(std::move(snap));
  view.problems_total = view.problems.size();
  return view;
}

}  // namespace stepwatch::contract
