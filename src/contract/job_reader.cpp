// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/job_reader.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "src/contract/names.h"

namespace stepwatch::contract {

namespace {

int64_t step_wall(const RankSnapshot& s) {
  return s.step ? s.step_at.wall_ns : 0;
}

}  // namespace

JobReader::JobReader(std::string root, std::string job, JobReaderOptions options)
    : root_(std::move(root)), job_(std::move(job)), dir_(job_dir(root_, job_)), options_(options) {
  if (options_.audit_every < 1) options_.audit_every = 1;
}

void JobReader::refresh(Entry& e, bool reopen, bool audit) {
  const std::string& path = e.path;
  if (reopen || (audit && !e.map)) {
    e.map.reset();
    e.snap.reset();
    e.error.reset();
    e.seq = 1;
    auto m = BeaconMapping::open(path);
    if (!m) {
      e.error = m.error();
      return;
    }
    if (dir_uid_ && m->owner_uid() != *dir_uid_) {
      // Only the job directory's owner speaks for the job: in a shared root, a file another
      // user dropped into it (where the directory let them) could forge a healthy rank.
      e.error = Error{Errc::kPermission,
                      fmt::format("{}: owned by uid {}, not by the job directory's owner (uid {}): "
                                  "ignored",
                                  path, m->owner_uid(), *dir_uid_)};
      return;
    }
    ++stats_.mapped;
    e.map.emplace(std::move(*m));
  } else if (audit) {
    ++stats_.audited;
    auto size = e.map->size_on_disk();
    if (size && *size != sizeof(stepwatch_beacon_v1)) {
      e.map.reset();
      e.snap.reset();
      e.error =
          Error{Errc::kSizeMismatch,
                fmt::format("{}: file changed size to {} bytes (a version 1 beacon is {}), skipped",
                            path, *size, sizeof(stepwatch_beacon_v1))};
      return;
    }
  }
  if (!e.map) return;  // the cached error stands
  auto seq = e.map->sequence();
  if (!seq) {  // shrank under the mapping
    e.map.reset();
    e.snap.reset();
    e.error = seq.error();
    return;
  }
  if (*seq == e.seq && (*seq & 1) == 0) {
    ++stats_.unchanged;
    return;
  }
  ++stats_.decoded;
  ReadOptions opts;
  opts.expected_job = job_;
  auto snap = e.map->read(opts);
  if (!snap) {
    e.snap.reset();
    e.error = snap.error();
    e.seq = 1;                                                    // read again next poll
    if (snap.error().code == Errc::kSizeMismatch) e.map.reset();  // shrank: only a new file helps
    return;
  }
  if (snap->rank != e.rank) {
    e.snap.reset();
    e.error = Error{Errc::kInvalidField, fmt::format("{}: file name says rank {}, record says {}",
                                                     path, e.rank, snap->rank)};
    e.seq = *seq;
    return;
  }
  e.error.reset();
  e.snap = std::move(*snap);
  e.seq = *seq;
}

JobView JobReader::poll() {
  stats_ = {};
  JobView view;
  view.job = job_;
  view.dir = dir_;
  ++polls_;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) {
    view.problems.push_back(dir_error(dir_, errno));
    view.problems_total = 1;
    entries_.clear();
    return view;
  }
  struct stat dst {};
  std::optional<uint32_t> uid =
      ::fstat(::dirfd(d), &dst) == 0 ? std::optional<uint32_t>(dst.st_uid) : std::nullopt;
  if (uid != dir_uid_) entries_.clear();  // another directory now: judge its files afresh
  dir_uid_ = uid;
  for (auto& [name, e] : entries_) e.seen = false;
  bool has_jsonl = false;
  size_t index = 0;
  size_t over_cap = 0;  // beacon names beyond max_entries, neither opened nor remembered
  const uint64_t slot = polls_ % static_cast<uint64_t>(options_.audit_every);
  while (dirent* ent = ::readdir(d)) {
    const char* name = ent->d_name;
    if (name[0] == '.') continue;  // ".", "..", and writers' temporary files
    if (std::strcmp(name, "progress.jsonl") == 0) {
      has_jsonl = true;
      continue;
    }
    int rank = rank_from_beacon_name(name);
    if (rank < 0) continue;  // stack dumps, artifacts and other files live here too
    if (entries_.size() >= options_.max_entries && !entries_.count(name)) {
      ++over_cap;
      continue;
    }
    auto [it, added] = entries_.try_emplace(name);
    Entry& e = it->second;
    if (added) {
      e.path = dir_ + "/" + name;
      e.rank = rank;
    }
    bool reopen = added || e.d_ino != ent->d_ino;
    e.d_ino = ent->d_ino;
    e.seen = true;
    bool audit = (index++ % static_cast<size_t>(options_.audit_every)) == slot;
    refresh(e, reopen, audit);
  }
  ::closedir(d);

  std::map<int, const RankSnapshot*> by_rank;
  size_t problems = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    if (!e.seen) {
      it = entries_.erase(it);  // the file is gone
      continue;
    }
    if (e.error) {
      if (problems++ < options_.max_problems) view.problems.push_back(*e.error);
    } else if (e.snap) {
      by_rank[e.snap->rank] = &*e.snap;
    }
    ++it;
  }
  if (has_jsonl) {
    if (!tail_) tail_.emplace(jsonl_path(root_, job_), job_);
    // Bounded: a huge or sparse file costs one window a poll. Only the directory's owner's file.
    auto bad = tail_->poll(kJsonlPollBytes, dir_uid_);
    if (!bad) {
      view.problems.push_back(bad.error());
      ++problems;
    } else {
      for (auto& e : *bad) {
        if (problems++ < options_.max_problems) view.problems.push_back(std::move(e));
      }
      for (const auto& [rank, snap] : tail_->folder().ranks()) {
        auto it = by_rank.find(rank);
        if (it == by_rank.end() || step_wall(snap) > step_wall(*it->second)) by_rank[rank] = &snap;
      }
    }
  } else {
    tail_.reset();
  }
  if (over_cap > 0) {
    view.problems.push_back(
        Error{Errc::kInvalidArgument,
              fmt::format("{}: {} more beacon file(s) beyond the {} watched per job, ignored", dir_,
                          over_cap, options_.max_entries)});
    ++problems;
  }
  view.problems_total = problems;
  if (problems > options_.max_problems) {
    view.problems.push_back(Error{
        Errc::kInvalidArgument,
        fmt::format("{}: {} more problem(s) not listed", dir_, problems - options_.max_problems)});
  }
  view.ranks.reserve(by_rank.size());
  for (const auto& [rank, snap] : by_rank) view.ranks.push_back(*snap);
  return view;
}

}  // namespace stepwatch::contract
