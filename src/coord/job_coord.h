// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One job as this node takes part in its coordination (multinode.md §5.2-5.3):
//   - publish(): puts this node's summary under <prefix>/jobs/<job>/nodes/<node>, attached to
//     the node lease, when its ranks' progress changed and at least every publish interval;
//   - then reads the job's node keys in create-revision order: the first that is a live node's
//     summary is the job leader. A key counts only under a lease, named as its "node" field
//     says, and as a summary that reads (summary.h's bounds): anything else under nodes/ (put
//     without a lease, garbage, a node's summary under another name) neither leads nor is
//     merged, and is said once (reliability review E2, E3). The leader reads what changed since
//     its last poll (a range from a revision on) and every summary that changed; the others read
//     the leader's key while it counts, and list the line (the first key) when it does not;
//   - the leader's fence: the create revision of its own node key. Every leader write compares
//     it (etcd_ledger.h), so a leader whose lease lapsed (stopped, partitioned) cannot commit.
// No watch and no held connection per job: each poll asks, and a failed call is a poll's
// "coordination lost", never a blocked loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/coord/read_ahead.h"
#include "src/coord/session.h"
#include "src/coord/summary.h"
#include "src/watch/job_state.h"

namespace stepwatch::coord {

// What the agent's look at the job says about publishing it again.
struct PublishCue {
  uint64_t progress = 0;  // the ranks' progress: steps, beats, phases, statuses, processes
  uint64_t shape = 0;     // the same without steps and beats
  bool steady = false;    // this node's own verdict on its ranks is healthy
};

// The cue of a node's look at the job: progress and shape hashed from its ranks' records and
// processes (not their ages, which the leader extrapolates).
PublishCue publish_cue(const detect::Observation& obs, bool steady);

class JobCoord {
 public:
  // session must outlive it; the poll thread only. steady_window_ns: how long a steady summary
  // vouches for this node's ranks; 0: never vouch. A steady summary is put again every two
  // publish intervals, so the window must hold that and the polls of both ends (the agent's:
  // two publish intervals and two polls).
  JobCoord(NodeSession& session, std::string job, int64_t publish_interval_ns,
           int64_t steady_window_ns = 0);

  // Publishes `summary` (the step ring of its lowest rank alone: keep_lowest_ring) after a new
  // lease, once the publish interval passed (two while it stays steady), or when `cue` changed:
  // its shape or steadiness always, its progress unless this node vouches (steady, and leading
  // or following a leader whose summary reads_steady): a steady node's steps alone are not
  // published. Then reads the leader (and, leading, every summary that changed).
  void poll(NodeSummary summary, const PublishCue& cue, Stamp now);
  // After this poll's verdict on this node's ranks: a node whose last summary vouched for them
  // and whose verdict is no longer healthy publishes this poll's look again at once, not
  // vouching, rather than a poll later. The look is the one poll() was given.
  void settle(bool steady, Stamp now);
  // The read the next poll() starts with, for a read ahead (read_ahead.h): a follower that knows
  // its leader reads that key; none otherwise.
  std::vector<Read> next_reads(Stamp now) const;
  // Whether this node's last summary vouches for its ranks (steady_ns set).
  bool vouching() const { return published_steady_; }

  bool leads() const { return leads_; }
  const std::string& leader() const { return leader_; }  // "" unknown
  // The create revision of the leader's node key: the fence its writes carry (0: unknown).
  int64_t leader_fence() const { return leader_fence_; }
  // The create revision of this node's key while it leads (0: it does not lead).
  int64_t fence() const { return leads_ ? my_create_rev_ : 0; }
  // Every other node's summary, current or lapsed, while this node leads.
  std::vector<const Received*> remote() const;
  std::vector<watch::NodeState> nodes(Stamp now) const;
  // Nodes a previous leader knew ranks on (the roster) that this node never read: held as
  // lapsed, with those ranks, so they are named rank-silent rather than missing.
  void remember(const std::map<std::string, std::vector<int>>& roster, int world_size,
                int64_t incarnation, Stamp now);
  // Deletes this node's key (the job finished or vanished here).
  void retire();
  uint64_t puts() const { return puts_; }
  // Summary values read from etcd (keys are listed without them; a value is read when changed).
  uint64_t values_read() const { return values_read_; }

  const std::string& job() const { return job_; }
  std::string node_key(const std::string& node) const;

 private:
  void read_nodes(Stamp now);
  // A follower that knows its leader reads that one key (a get costs etcd one key; the first key
  // in create order costs it the whole prefix, since etcd sorts before it limits). false: the
  // line must be listed (the key went, was put anew or no longer counts, or kRelistLineNs
  // passed since the line was last listed, for a key ahead of the leader that became a node's).
  // true: done for this poll (the leader read, or etcd failed: said).
  bool follow_known(const std::string& prefix, Stamp now);
  // Whether the next poll reads the leader's key alone (follow_known()).
  bool follows_known(Stamp now) const;
  static constexpr int64_t kRelistLineNs = 60 * kNsPerSec;
  // Whether `kv` may be node `name`'s key at all, from the key alone (no value needed): a node
  // name, under a lease.
  Status identity(const KeyValue& kv, const std::string& name) const;
  // The summary at `kv` if it is a live node's (identity(), and a summary of `name` that reads).
  Result<NodeSummary> candidate(const KeyValue& kv, const std::string& name) const;
  // The key with its value (an empty inner optional: deleted meanwhile); nullopt: etcd failed
  // (said to the session).
  std::optional<std::optional<KeyValue>> read_value(const std::string& key);
  // Whether `kv` counted when this value of it was checked; nullopt: not checked yet.
  std::optional<bool> checked(const KeyValue& kv) const;
  // Every node key of the job (`prefix`), without values, in candidacy order, into `out`.
  // Leading since the last poll, only what changed since the listing then is read (a range from
  // that revision on, which also counts every key) and laid over it; a count that differs (a key
  // went away) or a first poll as leader lists them all. `changed_since` is set to the first
  // revision the read covered by change (0: listed whole). false: etcd failed (said).
  bool list_nodes(const std::string& prefix, RangeResult& out, int64_t& changed_since);
  // Reads the values of the keys-only `kvs` (under `prefix`) that `need` names: a get each for a
  // few, one range for more: of the keys changed since `changed_since` (every key when 0). A key
  // gone meanwhile is dropped, one changed comes with its new revisions; `kvs` stays in
  // candidacy order. false: etcd failed (said).
  bool fill_values(const std::string& prefix, std::vector<KeyValue>& kvs,
                   const std::function<bool(const KeyValue&)>& need, int64_t changed_since);
  // Whether `kv` counts as node `name`'s key (each value checked once; a bad one said once).
  // When it reads a new value, the summary goes to `parsed` (the leader keeps it: read once).
  bool counts(const KeyValue& kv, const std::string& name,
              std::optional<NodeSummary>* parsed = nullptr);

  NodeSession& session_;
  std::string job_;
  int64_t publish_interval_ns_;
  int64_t steady_window_ns_;
  uint64_t published_generation_ = 0;
  std::optional<PublishCue> published_cue_;
  bool published_steady_ = false;
  std::optional<int64_t> published_mono_ns_;
  int64_t my_create_rev_ = 0;
  bool leads_ = false;
  std::string leader_;
  int64_t leader_fence_ = 0;
  bool leader_reads_steady_ = false;  // the leader's summary says it takes steady ones as current
  std::optional<int64_t> line_listed_mono_ns_;  // when a follower last listed the line
  std::optional<NodeSummary> look_;             // the look of this poll, until the next (settle())
  // Puts `summary` as this node's, its envelope set (vouching or not); false: etcd failed
  // (said).
  bool put(NodeSummary& summary, const PublishCue& cue, bool vouch, Stamp now);
  // A key's value as checked: at which mod revision, whether it counted, and whether it reads
  // steady summaries. A value is checked (and read) once.
  struct Checked {
    int64_t mod_revision = 0;
    bool counts = false;
    bool reads_steady = false;
  };
  std::map<std::string, Checked> checked_mod_;
  // Takes `kv` (that counts) as the leader's key.
  void follow(const KeyValue& kv, const std::string& name);
  std::map<std::string, Received> peers_;    // by node; the leader's
  std::map<std::string, int64_t> peer_mod_;  // the mod revision of each peer's summary read
  uint64_t puts_ = 0;
  uint64_t values_read_ = 0;
  // The leader's last listing of the node keys (values left out) and the revision it is
  // complete at: the next poll reads only what changed since (0: none held).
  std::vector<KeyValue> listed_;
  int64_t listed_rev_ = 0;
  std::vector<int> my_ranks_;
};

}  // namespace stepwatch::coord
