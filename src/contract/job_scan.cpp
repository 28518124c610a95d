// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/job_scan.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/contract/job_reader.h"
#include "src/contract/names.h"

namespace stepwatch::contract {

Error dir_error(const std::string& dir, int err) {
  Errc code = err == ENOENT ? Errc::kNotFound : err == EACCES ? Errc::kPermission : Errc::kIo;
  return Error{code, fmt::format("{}: {}", dir, std::strerror(err))};
}

Result<std::vector<std::string>> list_jobs(const std::string& root, std::vector<Error>* skipped,
                                           size_t max_listed, size_t* skipped_total) {
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return dir_error(root, errno);
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
  std::sort(bad.begin(), bad.end(),
            [](const Error& a, const Error& b) { return a.message < b.message; });
  if (bad_total > bad.size()) {
    bad.push_back(Error{Errc::kInvalidArgument,
                        fmt::format("{}: {} more entries that are not job directories, skipped",
                                    root, bad_total - bad.size())});
  }
  if (skipped) {
    for (auto& e : bad) skipped->push_back(std::move(e));
  }
  if (skipped_total) *skipped_total = bad_total;
  return jobs;
}

JobView scan_job(const std::string& root, const std::string& job) {
  return JobReader(root, job).poll();
}

}  // namespace stepwatch::contract
