// What one local user's job directories may cost the agent: any user can create job
// directories under a beacon root, with any job id, as many as they like. A sliding window per
// uid on the injected monotonic clock bounds incidents and log lines per user, so one user's
// flood is dropped (and said once) while every other user's jobs are watched as before.
#pragma once

#include <cstdint>
#include <deque>
#include <map>

namespace stepwatch::agent {

class PerUserRate {
 public:
  // At most `limit` events per user within any `window_ns`.
  PerUserRate(int limit, int64_t window_ns) : limit_(limit), window_ns_(window_ns) {}

  // Counts an event of `uid` at `now_mono_ns` and returns true when it is within the limit;
  // false, counting nothing, when the user already had `limit` events in the window.
  bool allow(uint32_t uid, int64_t now_mono_ns);
  // True once per window per user while they are refused: when to say so.
  bool first_refusal(uint32_t uid, int64_t now_mono_ns);

  int limit() const { return limit_; }
  int64_t window_ns() const { return window_ns_; }

 private:
  struct User {
    std::deque<int64_t> events;         // at most limit_, oldest first
    int64_t refusal_told_mono_ns = -1;  // when first_refusal last said true
  };
  int limit_;
  int64_t window_ns_;
  std::map<uint32_t, User> users_;
};

}  // namespace stepwatch::agent
