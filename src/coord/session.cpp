// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/coord/session.h"

#include <fmt/format.h>

#include "src/common/log.h"

namespace stepwatch::coord {

NodeSession::NodeSession(Kv& etcd, SessionOptions options)
    : etcd_(etcd), options_(std::move(options)) {}

std::string NodeSession::job_key(const std::string& job, const std::string& rest) const {
  return fmt::format("{}/jobs/{}/{}", options_.prefix, job, rest);
}

void NodeSession::note_ok() {
  if (!connected_) {
    if (ever_connected_) log_info("coord: etcd {} answers again", etcd_.endpoint());
    connected_ = true;
    ever_connected_ = true;
    last_error_.clear();
  }
}

void NodeSession::note_failure(const Error& e) {
  if (connected_ || !ever_connected_) {
    if (connected_) ++losses_;
    if (connected_ || last_error_ != e.message) {
      log_warn("coord: coordination lost ({}): {}", e.message, options_.while_lost);
    }
  }
  connected_ = false;
  last_error_ = e.message;
}

void NodeSession::grant(Stamp now) {
  int64_t ttl_s = std::max<int64_t>(1, options_.ttl_ns / kNsPerSec);
  auto l = etcd_.grant(ttl_s);
  if (!l) return note_failure(l.error());
  note_ok();
  bool replaced = lease_ != 0;
  lease_ = l->id;
  renewed_mono_ns_ = now.mono_ns;
  ++generation_;
  if (replaced) {
    replaced_mono_ns_ = now.mono_ns;
    log_warn(
        "coord: node {}: its lease had expired (the process was stopped, slow or cut off for "
        "longer than {}s): a new lease; {}",
        options_.node, ttl_s, options_.after_new_lease);
  }
}

void NodeSession::tick(Stamp now) {
  if (lease_ == 0) return grant(now);
  if (renewed_mono_ns_ && now.mono_ns - *renewed_mono_ns_ < options_.ttl_ns / 3) return;
  auto ttl = etcd_.keepalive(lease_);
  if (!ttl) return note_failure(ttl.error());
  note_ok();
  if (*ttl <= 0) return grant(now);  // gone: expired meanwhile
  renewed_mono_ns_ = now.mono_ns;
}

bool NodeSession::may_act(Stamp now) const {
  return connected_ && lease_ != 0 && renewed_mono_ns_ &&
         now.mono_ns - *renewed_mono_ns_ < options_.ttl_ns / 2;
}

bool NodeSession::rejoining(Stamp now) const {
  return replaced_mono_ns_ && now.mono_ns - *replaced_mono_ns_ < options_.ttl_ns;
}

std::optional<int64_t> NodeSession::lease_age_ns(Stamp now) const {
  if (!renewed_mono_ns_) return std::nullopt;
  return now.mono_ns - *renewed_mono_ns_;
}

}  // namespace stepwatch::coord
