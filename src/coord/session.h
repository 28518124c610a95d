// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// This node's standing with etcd: its lease, kept from the agent's poll loop (never from a
// side thread: a wedged poll loop must lose its lease, and with it every job it leads), and
// whether coordination works at all right now.
//
//   tick() once per poll, first: grants a lease when there is none, renews it every ttl/3;
//   a renewal that finds the lease gone (expired while the agent was stopped, partitioned or
//   slow) grants a new one, and bumps generation(): every key under the old lease is gone, so
//   each job re-publishes and goes to the back of its leader line.
// Every etcd call of the poll reports its outcome here (ok / failed), so "coordination lost"
// is one fact for the whole agent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/common/clock.h"
#include "src/common/result.h"
#include "src/coord/kv.h"
#include "src/coord/records.h"

namespace stepwatch::coord {

struct SessionOptions {
  std::string prefix = "/stepwatch/v1";
  std::string node;
  int64_t ttl_ns = 10 * kNsPerSec;
  // What losing etcd means for this process, said once when it is lost (the agent's default).
  std::string while_lost =
      "observing and paging locally, no destructive action until a fenced write succeeds again";
  // What a replaced lease means for it (its keys under the old one are gone).
  std::string after_new_lease =
      "its jobs are published again and it goes to the back of each job's leader line";
};

class NodeSession {
 public:
  // etcd must outlive it; one thread (the poll loop).
  NodeSession(Kv& etcd, SessionOptions options);

  void tick(Stamp now);

  // The node lease; 0: none (etcd unreachable since start, or the last grant failed).
  int64_t lease() const { return lease_; }
  // Bumped whenever a new lease replaces one (the keys under the old one are gone).
  uint64_t generation() const { return generation_; }
  // Whether etcd answered the poll's calls: false from the first failure until a call succeeds.
  bool connected() const { return connected_; }
  // Whether this node may take a destructive step now: its lease was renewed (or granted) less
  // than ttl/2 ago, so it cannot have expired meanwhile (a leader that stalls between its fence
  // check and its act is bounded by this; multinode.md §5.4).
  bool may_act(Stamp now) const;
  // Whether this node's lease replaced an expired one less than a TTL ago: every other node's
  // lease may have lapsed with it (etcd paused, or lost its data), and their keys come back
  // within a TTL. A leader does not judge the other nodes' absence meanwhile.
  bool rejoining(Stamp now) const;
  // Since the lease was last granted or renewed; nullopt: never.
  std::optional<int64_t> lease_age_ns(Stamp now) const;
  // Why coordination failed last ("" while connected).
  const std::string& last_error() const { return last_error_; }
  // How many times coordination was lost (connected -> not), since start.
  uint64_t losses() const { return losses_; }

  void note_ok();
  void note_failure(const Error& e);

  const SessionOptions& options() const { return options_; }
  Kv& etcd() { return etcd_; }
  // The keys this node skipped because their value did not read (records.h): said once each.
  BadRecords& bad() { return bad_; }
  const BadRecords& bad() const { return bad_; }
  // <prefix>/jobs/<job>/...
  std::string job_key(const std::string& job, const std::string& rest = "") const;

 private:
  void grant(Stamp now);

  Kv& etcd_;
  SessionOptions options_;
  BadRecords bad_;
  int64_t lease_ = 0;
  uint64_t generation_ = 0;
  std::optional<int64_t> renewed_mono_ns_;
  std::optional<int64_t> replaced_mono_ns_;  // when a new lease last replaced an expired one
  bool connected_ = false;
  bool ever_connected_ = false;
  uint64_t losses_ = 0;
  std::string last_error_ = "not connected yet";
};

}  // namespace stepwatch::coord
