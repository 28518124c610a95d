// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What one local user's job directories, and one job, may cost the agent: any user can create
// job directories under a beacon root, with any job id, as many as they like, and one job that
// loops (a dead job re-opening its incident on every poll, reliability review E7) must not
// spend its owner's budget for every other job. A sliding window per key (a uid, a job id) on
// the injected monotonic clock bounds incidents and log lines, so one flood is dropped (and
// said once) while everything else is watched as before.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

namespace stepwatch::agent {

template <class Key>
class SlidingRate {
 public:
  // At most `limit` events per key within any `window_ns`.
  SlidingRate(int limit, int64_t window_ns) : limit_(limit), window_ns_(window_ns) {}

  // Counts an event of `key` at `now_mono_ns` and returns true when it is within the limit;
  // false, counting nothing, when the key already had `limit` events in the window.
  bool allow(const Key& key, int64_t now_mono_ns) {
    Entry& e = entries_[key];
    while (!e.events.empty() && now_mono_ns - e.events.front() >= window_ns_) e.events.pop_front();
    if (static_cast<int64_t>(e.events.size()) >= limit_) return false;
    e.events.push_back(now_mono_ns);
    return true;
  }
  // True once per window per key while it is refused: when to say so.
  bool first_refusal(const Key& key, int64_t now_mono_ns) {
    Entry& e = entries_[key];
    if (e.refusal_told_mono_ns >= 0 && now_mono_ns - e.refusal_told_mono_ns < window_ns_)
      return false;
    e.refusal_told_mono_ns = now_mono_ns;
    return true;
  }

  int limit() const { return limit_; }
  int64_t window_ns() const { return window_ns_; }

 private:
  struct Entry {
    std::deque<int64_t> events;         // at most limit_, oldest first
    int64_t refusal_told_mono_ns = -1;  // when first_refusal last said true
  };
  int limit_;
  int64_t window_ns_;
  std::map<Key, Entry> entries_;
};

using PerUserRate = SlidingRate<uint32_t>;
using PerJobRate = SlidingRate<std::string>;

}  // namespace stepwatch::agent
