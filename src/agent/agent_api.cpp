// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The agent's API (serve::JobSource), called from the HTTP threads: the published job states,
// health, acks and incidents. A multi-node job's incident is acked and listed in etcd, from any
// node; this node's own in its store.
#include <fmt/format.h>

#include "src/agent/agent.h"
#include "src/agent/node_coord.h"
#include "src/common/log.h"

namespace stepwatch::agent {

std::vector<watch::JobState> Agent::jobs() const {
  std::lock_guard lock(mu_);
  std::vector<watch::JobState> out;
  out.reserve(published_.size());
  for (const auto& [job, s] : published_) out.push_back(*s);
  return out;
}

std::optional<watch::JobState> Agent::job(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = published_.find(id);
  if (it == published_.end()) return std::nullopt;
  return *it->second;
}

watch::AgentHealth Agent::health() const {
  std::lock_guard lock(mu_);
  watch::AgentHealth h = health_;
  if (poll_started_mono_ns_ > 0) h.poll_age_ns = mono_now_ns() - poll_started_mono_ns_;
  h.poll_interval_ns = config_.poll_interval_ns;
  return h;
}

int64_t Agent::last_poll_wall_ns() const {
  std::lock_guard lock(mu_);
  return last_poll_wall_ns_;
}

Result<std::optional<store::Incident>> Agent::ack(const std::string& job, const std::string& by,
                                                  const std::string& note) {
  Result<std::optional<store::Incident>> r = std::optional<store::Incident>{};
  if (coord_) {
    // A multi-node job's incident is acked in etcd, from any node: it holds on every node.
    std::lock_guard lock(coord_->api_mu);
    r = coord::ack_in_etcd(coord_->api_etcd, coord_->keys(job), job, wall_now_ns(), by, note);
    if (!r)
      log_warn("agent: job {}: acking in etcd failed ({}): acking here", job, r.error().message);
  }
  if (!r || !*r) {
    std::lock_guard lock(api_store_mu_);
    r = api_store_.ack(job, wall_now_ns(), by, note);
  }
  if (r && *r) {
    std::lock_guard lock(mu_);
    uint64_t n = ++acks_total_[job];
    if (auto it = published_.find(job); it != published_.end()) {
      auto copy =
          std::make_shared<watch::JobState>(*it->second);  // published states stay immutable
      copy->actions_total["ack"] = n;
      it->second = std::move(copy);
    }
  }
  return r;
}

Result<std::vector<store::Incident>> Agent::incidents(const std::string& job, int limit) {
  std::vector<store::Incident> out;
  if (coord_ && !job.empty()) {
    // The job's incidents in etcd (opened by whichever node led it), then this node's own.
    std::lock_guard lock(coord_->api_mu);
    auto r = coord::incidents_in_etcd(coord_->api_etcd, coord_->keys(job), job, limit);
    if (r) {
      out = std::move(*r);
    } else {
      log_warn("agent: job {}: reading its incidents in etcd failed: {}", job, r.error().message);
    }
  }
  std::lock_guard lock(api_store_mu_);
  auto local = api_store_.incidents(job, limit);
  if (!local) return local;
  if (out.empty()) return local;
  for (auto& i : *local) out.push_back(std::move(i));
  if (limit > 0 && static_cast<int>(out.size()) > limit) out.resize(limit);
  return out;
}

}  // namespace stepwatch::agent
