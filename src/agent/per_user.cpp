#include "src/agent/per_user.h"

namespace stepwatch::agent {

bool PerUserRate::allow(uint32_t uid, int64_t now_mono_ns) {
  User& u = users_[uid];
  while (!u.events.empty() && now_mono_ns - u.events.front() >= window_ns_) u.events.pop_front();
  if (static_cast<int64_t>(u.events.size()) >= limit_) return false;
  u.events.push_back(now_mono_ns);
  return true;
}

bool PerUserRate::first_refusal(uint32_t uid, int64_t now_mono_ns) {
  User& u = users_[uid];
  if (u.refusal_told_mono_ns >= 0 && now_mono_ns - u.refusal_told_mono_ns < window_ns_)
    return false;
  u.refusal_told_mono_ns = now_mono_ns;
  return true;
}

}  // namespace stepwatch::agent
