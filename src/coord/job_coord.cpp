// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/coord/job_coord.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "src/common/log.h"
#include "src/contract/names.h"

namespace stepwatch::coord {

// What changes when the ranks make progress (not their ages, which the leader extrapolates):
// a summary is published again when this changes. `shape` leaves steps and beats out: what a
// steady node publishes at once even while it vouches for its ranks.
PublishCue publish_cue(const detect::Observation& obs, bool steady) {
  uint64_t shape = 1469598103934665603ULL;
  uint64_t progress = shape;
  auto mix = [](uint64_t& h, uint64_t v) {
    h ^= v;
    h *= 1099511628211ULL;
  };
  for (const auto& r : obs.ranks) {
    mix(shape, static_cast<uint64_t>(r.rank));
    mix(progress, r.step_count);
    mix(shape, r.phase_count);
    mix(progress, r.beat_count);
    mix(shape, static_cast<uint64_t>(r.status));
    mix(shape, static_cast<uint64_t>(r.pid));
    mix(shape, r.incarnation);
  }
  for (const auto& p : obs.procs) {
    mix(shape, static_cast<uint64_t>(p.rank) << 8 | (p.alive ? 1 : 0) | (p.same_process ? 2 : 0));
    mix(shape, static_cast<uint64_t>(p.state));
  }
  mix(progress, shape);
  return {progress, shape, steady};
}

JobCoord::JobCoord(NodeSession& session, std::string job, int64_t publish_interval_ns,
                   int64_t steady_window_ns)
    : session_(session),
      job_(std::move(job)),
      publish_interval_ns_(publish_interval_ns),
      steady_window_ns_(steady_window_ns) {}

std::string JobCoord::node_key(const std::string& node) const {
  return session_.job_key(job_, "nodes/" + node);
}

void JobCoord::poll(NodeSummary summary, const PublishCue& cue, Stamp now) {
  keep_lowest_ring(summary.observation);
  my_ranks_.clear();
  for (const auto& r : summary.observation.ranks) my_ranks_.push_back(r.rank);
  if (session_.lease() == 0) {
    leads_ = false;
    return;
  }
  bool fresh_lease = published_generation_ != session_.generation();
  // Leading, this node reads steady summaries itself: its own is read only by the followers
  // (who it is) and, were it to lose the lead, by the next leader.
  bool vouch = cue.steady && steady_window_ns_ > 0 && (leads_ || leader_reads_steady_);
  bool changed = !published_cue_ || published_cue_->shape != cue.shape ||
                 published_steady_ != vouch || (!vouch && published_cue_->progress != cue.progress);
  // A steady node's re-put says only that it is still steady (its lease says it is alive):
  // every other publish interval.
  const int64_t every =
      vouch && published_steady_ ? 2 * publish_interval_ns_ : publish_interval_ns_;
  bool due = !published_mono_ns_ || now.mono_ns - *published_mono_ns_ >= every;
  if (fresh_lease || changed || due) {
    if (!put(summary, cue, vouch, now)) return;
    if (fresh_lease) my_create_rev_ = 0;  // learnt from the range below
  }
  look_ = std::move(summary);
  read_nodes(now);
}

bool JobCoord::put(NodeSummary& summary, const PublishCue& cue, bool vouch, Stamp now) {
  summary.steady_ns = vouch ? std::optional<int64_t>(steady_window_ns_) : std::nullopt;
  summary.reads_steady = steady_window_ns_ > 0;
  std::string text = summary_to_json(summary);
  auto rev = session_.etcd().put(node_key(session_.options().node), text, session_.lease());
  if (!rev) {
    session_.note_failure(rev.error());
    leads_ = false;
    return false;
  }
  session_.note_ok();
  ++puts_;
  published_generation_ = session_.generation();
  published_cue_ = cue;
  published_steady_ = vouch;
  published_mono_ns_ = now.mono_ns;
  return true;
}

void JobCoord::settle(bool steady, Stamp now) {
  if (!published_steady_ || steady || !look_ || session_.lease() == 0) return;
  PublishCue cue = published_cue_.value_or(PublishCue{});
  cue.steady = false;
  put(*look_, cue, false, now);
}

Status JobCoord::identity(const KeyValue& kv, const std::string& name) const {
  // A node name reaches pages and command lines (a drain): no hostlist, no option (E10).
  if (auto st = contract::validate_node_name(name); !st) {
    return Error{Errc::kInvalidField, fmt::format("etcd key {}: {}", kv.key, st.error().message)};
  }
  if (kv.lease == 0) {
    return Error{Errc::kInvalidField,
                 fmt::format("etcd key {}: not under a lease, so no live node's: not a node of "
                             "the job",
                             kv.key)};
  }
  return {};
}

Result<NodeSummary> JobCoord::candidate(const KeyValue& kv, const std::string& name) const {
  if (auto st = identity(kv, name); !st) return st.error();
  auto s = summary_from_json(kv.value, "etcd key " + kv.key);
  if (!s) return s.error();
  if (s->node != name) {
    return Error{Errc::kInvalidField,
                 fmt::format("etcd key {}: the summary of node \"{:.80}\" under node \"{:.80}\"'s "
                             "name: not a node of the job",
                             kv.key, s->node, name)};
  }
  return s;
}

bool JobCoord::counts(const KeyValue& kv, const std::string& name,
                      std::optional<NodeSummary>* parsed) {
  if (name == session_.options().node) return kv.lease != 0 && kv.lease == session_.lease();
  if (auto c = checked(kv)) return *c;
  auto s = candidate(kv, name);
  checked_mod_[kv.key] = {kv.mod_revision, s.ok(), s.ok() && s->reads_steady};
  if (!s) {
    session_.bad().skip(kv, s.error());
    return false;
  }
  if (parsed) *parsed = std::move(*s);
  return true;
}

std::optional<bool> JobCoord::checked(const KeyValue& kv) const {
  auto c = checked_mod_.find(kv.key);
  if (c == checked_mod_.end() || c->second.mod_revision != kv.mod_revision) return std::nullopt;
  return c->second.counts;
}

void JobCoord::follow(const KeyValue& kv, const std::string& name) {
  leader_ = name;
  leader_fence_ = kv.create_revision;
  auto c = checked_mod_.find(kv.key);
  leader_reads_steady_ = c != checked_mod_.end() && c->second.reads_steady;
}

std::optional<std::optional<KeyValue>> JobCoord::read_value(const std::string& key) {
  auto r = session_.etcd().range(key);
  if (!r) {
    session_.note_failure(r.error());
    return std::nullopt;
  }
  ++values_read_;
  if (r->kvs.empty()) return std::optional<KeyValue>{};
  return std::optional<KeyValue>{std::move(r->kvs[0])};
}

bool JobCoord::list_nodes(const std::string& prefix, RangeResult& out, int64_t& changed_since) {
  RangeOptions keys;
  keys.prefix = true;
  keys.by_create_rev = true;
  keys.keys_only = true;
  changed_since = 0;
  if (leads_ && listed_rev_ > 0) {
    keys.min_mod_revision = listed_rev_ + 1;
    auto r = session_.etcd().range(prefix, keys);
    if (!r) {
      session_.note_failure(r.error());
      return false;
    }
    std::map<std::string, KeyValue> held;
    for (const KeyValue& kv : listed_) held[kv.key] = kv;
    for (KeyValue& kv : r->kvs) held[kv.key] = std::move(kv);
    // Every key now is one held or one changed since: the same count means none went away.
    if (static_cast<int64_t>(held.size()) == r->count) {
      out.revision = r->revision;
      out.count = r->count;
      out.kvs.clear();
      for (auto& [key, kv] : held) out.kvs.push_back(std::move(kv));
      std::stable_sort(out.kvs.begin(), out.kvs.end(), [](const KeyValue& a, const KeyValue& b) {
        return a.create_revision < b.create_revision;
      });
      changed_since = keys.min_mod_revision;
    }
    keys.min_mod_revision = 0;
  }
  if (changed_since == 0) {
    auto r = session_.etcd().range(prefix, keys);
    if (!r) {
      session_.note_failure(r.error());
      return false;
    }
    out = std::move(*r);
  }
  listed_ = out.kvs;
  listed_rev_ = out.revision;
  return true;
}

bool JobCoord::fill_values(const std::string& prefix, std::vector<KeyValue>& kvs,
                           const std::function<bool(const KeyValue&)>& need,
                           int64_t changed_since) {
  constexpr size_t kGetEach = 4;  // more changed values than this: one range of them all
  std::vector<size_t> each;       // read one by one
  std::vector<size_t> together;   // read in one range, when there are enough of them
  for (size_t i = 0; i < kvs.size(); ++i) {
    if (!need(kvs[i])) continue;
    (kvs[i].mod_revision >= changed_since ? together : each).push_back(i);
  }
  if (together.size() <= kGetEach) {
    each.insert(each.end(), together.begin(), together.end());
    together.clear();
  }
  if (each.empty() && together.empty()) return true;
  std::vector<bool> gone(kvs.size(), false);
  if (!together.empty()) {
    RangeOptions changed;
    changed.prefix = true;
    changed.by_create_rev = true;
    changed.min_mod_revision = changed_since;
    auto r = session_.etcd().range(prefix, changed);
    if (!r) {
      session_.note_failure(r.error());
      return false;
    }
    values_read_ += r->kvs.size();
    if (changed_since == 0 && each.empty()) {
      kvs = std::move(r->kvs);
      return true;
    }
    std::map<std::string, KeyValue> fresh;
    for (KeyValue& kv : r->kvs) fresh[kv.key] = std::move(kv);
    for (size_t i : together) {
      auto it = fresh.find(kvs[i].key);
      if (it == fresh.end()) {
        gone[i] = true;  // it changed after the listing, and then went away
      } else {
        kvs[i] = std::move(it->second);
      }
    }
  }
  for (size_t i : each) {
    auto got = read_value(kvs[i].key);
    if (!got) return false;
    if (*got) {
      kvs[i] = std::move(**got);
    } else {
      gone[i] = true;
    }
  }
  std::vector<KeyValue> kept;
  for (size_t i = 0; i < kvs.size(); ++i) {
    if (!gone[i]) kept.push_back(std::move(kvs[i]));
  }
  // A key deleted and put again between the listing and its get moved in the line.
  std::stable_sort(kept.begin(), kept.end(), [](const KeyValue& a, const KeyValue& b) {
    return a.create_revision < b.create_revision;
  });
  kvs = std::move(kept);
  return true;
}

bool JobCoord::follows_known(Stamp now) const {
  return !leads_ && !leader_.empty() && leader_ != session_.options().node && leader_fence_ != 0 &&
         line_listed_mono_ns_ && now.mono_ns - *line_listed_mono_ns_ < kRelistLineNs;
}

std::vector<Read> JobCoord::next_reads(Stamp now) const {
  if (session_.lease() == 0 || !follows_known(now)) return {};
  return {Read{node_key(leader_), RangeOptions{.keys_only = true}}};
}

bool JobCoord::follow_known(const std::string& prefix, Stamp now) {
  if (!follows_known(now)) return false;
  auto r = session_.etcd().range(prefix + leader_, RangeOptions{.keys_only = true});
  if (!r) {
    session_.note_failure(r.error());
    return true;  // etcd failed: said, and nothing more this poll
  }
  session_.note_ok();
  // Gone, or put anew (a new lease, so at the back of the line): the line is listed again.
  if (r->kvs.empty() || r->kvs[0].create_revision != leader_fence_) return false;
  if (!fill_values(
          prefix, r->kvs, [&](const KeyValue& kv) { return identity(kv, leader_) && !checked(kv); },
          0))
    return true;
  if (r->kvs.empty()) return false;
  const KeyValue& kv = r->kvs[0];
  if (!counts(kv, leader_)) return false;
  follow(kv, leader_);
  return true;
}

void JobCoord::read_nodes(Stamp now) {
  std::string prefix = session_.job_key(job_, "nodes/");
  bool was_leader = leads_;
  if (!leads_ && follow_known(prefix, now)) return;
  if (!leads_) {
    // A follower reads the first key only, while it is a live node's summary: the leader.
    // Listed without its value, read only when it changed.
    line_listed_mono_ns_ = now.mono_ns;
    RangeOptions first;
    first.prefix = true;
    first.by_create_rev = true;
    first.limit = 1;
    first.keys_only = true;
    auto r = session_.etcd().range(prefix, first);
    if (!r) {
      session_.note_failure(r.error());
      return;
    }
    session_.note_ok();
    if (!fill_values(
            prefix, r->kvs,
            [&](const KeyValue& kv) {
              std::string name = kv.key.substr(prefix.size());
              return name != session_.options().node && identity(kv, name) && !checked(kv);
            },
            0)) {
      return;
    }
    if (r->kvs.empty()) {
      leader_.clear();
      leader_reads_steady_ = false;
      return;
    }
    const KeyValue& kv = r->kvs[0];
    std::string name = kv.key.substr(prefix.size());
    if (counts(kv, name)) {
      follow(kv, name);
      if (leader_ != session_.options().node) return;
    }
  }
  // Leading (or just found to lead, or the first key is no node's): every key, in candidacy
  // order; the first that is a live node's leads. Listed without values (E11: a forged key's
  // megabytes are not read each poll); a value is read when a key that may be a node's changed.
  RangeResult listing;
  int64_t changed_since = 0;
  if (!list_nodes(prefix, listing, changed_since)) {
    leads_ = false;
    listed_rev_ = 0;
    return;
  }
  session_.note_ok();
  const std::string& self = session_.options().node;
  // Whether the leader holds node's summary as it stands at kv: nothing to read.
  auto current = [&](const KeyValue& kv, const std::string& node) {
    if (checked(kv) != true) return false;
    auto seen = peer_mod_.find(node);
    auto peer = peers_.find(node);
    return seen != peer_mod_.end() && seen->second == kv.mod_revision && peer != peers_.end() &&
           !peer->second.lapsed_mono_ns;
  };
  std::vector<KeyValue>& kvs = listing.kvs;
  std::set<std::string> present;
  std::set<std::string> keys;
  std::map<std::string, NodeSummary> read_now;  // summaries counts() read this poll: read once
  auto take = [&](const KeyValue& kv, const std::string& node) {
    keys.insert(kv.key);
    std::optional<NodeSummary> parsed;
    if (!counts(kv, node, &parsed)) return false;
    present.insert(node);
    if (parsed) read_now[node] = std::move(*parsed);
    return true;
  };
  leads_ = false;
  leader_.clear();
  leader_fence_ = 0;
  leader_reads_steady_ = false;
  // 1. The leader: the first key that counts. A value is read only when its key changed, and
  //    none past the leader's unless this node leads.
  size_t next = 0;
  for (; next < kvs.size() && leader_.empty(); ++next) {
    KeyValue& kv = kvs[next];
    std::string node = kv.key.substr(prefix.size());
    if (node != self && identity(kv, node) && !checked(kv)) {
      auto got = read_value(kv.key);
      if (!got) {
        leads_ = false;
        return;
      }
      if (!*got) continue;  // deleted meanwhile
      kv = std::move(**got);
    }
    if (!take(kv, node)) continue;
    follow(kv, node);
    leads_ = node == self;
    if (leads_) my_create_rev_ = kv.create_revision;
  }
  // 2. Leading: every other node's summary, read when its key changed (or not held yet).
  if (leads_) {
    std::vector<KeyValue> rest(std::make_move_iterator(kvs.begin() + static_cast<long>(next)),
                               std::make_move_iterator(kvs.end()));
    if (!fill_values(
            prefix, rest,
            [&](const KeyValue& kv) {
              std::string node = kv.key.substr(prefix.size());
              return node != self && identity(kv, node) && checked(kv) != false &&
                     !current(kv, node);
            },
            changed_since)) {
      leads_ = false;
      listed_rev_ = 0;
      return;
    }
    for (const KeyValue& kv : rest) {
      if (kv.create_revision <= my_create_rev_) continue;  // ahead of this node (a whole range)
      std::string node = kv.key.substr(prefix.size());
      if (!take(kv, node) || node == self) continue;
      auto fresh = read_now.find(node);
      if (fresh == read_now.end() && current(kv, node))
        continue;  // unchanged since the last read: its ages go on from when it was received
      Received& rec = peers_[node];
      if (fresh != read_now.end()) {
        rec.summary = std::move(fresh->second);
      } else {  // checked at this revision before (as a follower), not kept: read it now
        auto s = summary_from_json(kv.value, "etcd key " + kv.key);
        if (!s) {
          peers_.erase(node);
          continue;
        }
        rec.summary = std::move(*s);
      }
      rec.received_mono_ns = now.mono_ns;
      rec.lapsed_mono_ns.reset();
      peer_mod_[node] = kv.mod_revision;
    }
  }
  std::erase_if(checked_mod_, [&](const auto& e) { return !keys.count(e.first); });
  for (auto& [node, rec] : peers_) {
    if (!present.count(node) && !rec.lapsed_mono_ns) {
      // Its key went with its lease: its last keepalive was a lease TTL ago (E18: "stopped
      // reporting 0us ago" in a page).
      rec.lapsed_mono_ns = now.mono_ns - session_.options().ttl_ns;
      log_warn(
          "coord: job {}: node {} stopped reporting (its lease expired): its ranks are "
          "rank-silent",
          job_, node);
    }
  }
  if (leads_ && !was_leader) {
    log_info("coord: job {}: this node ({}) now leads it", job_, session_.options().node);
  }
  if (!leads_) {
    peers_.clear();
    peer_mod_.clear();
    listed_.clear();
    listed_rev_ = 0;
  }
}

std::vector<const Received*> JobCoord::remote() const {
  std::vector<const Received*> out;
  if (!leads_) return out;
  for (const auto& [node, rec] : peers_) out.push_back(&rec);
  return out;
}

std::vector<watch::NodeState> JobCoord::nodes(Stamp now) const {
  std::vector<watch::NodeState> out;
  watch::NodeState me;
  me.node = session_.options().node;
  me.leader = leader_ == me.node;
  me.summary_age_ns = published_mono_ns_ ? now.mono_ns - *published_mono_ns_ : -1;
  me.ranks = my_ranks_;
  out.push_back(me);
  for (const auto& [node, rec] : peers_) {
    watch::NodeState v;
    v.node = node;
    v.leader = leader_ == node;
    v.lapsed = rec.lapsed_mono_ns.has_value();
    v.summary_age_ns = now.mono_ns - rec.received_mono_ns;
    for (const auto& r : rec.summary.observation.ranks) v.ranks.push_back(r.rank);
    out.push_back(std::move(v));
  }
  return out;
}

void JobCoord::remember(const std::map<std::string, std::vector<int>>& roster, int world_size,
                        int64_t incarnation, Stamp now) {
  for (const auto& [node, ranks] : roster) {
    if (node == session_.options().node || peers_.count(node)) continue;
    Received rec;
    rec.summary.node = node;
    rec.summary.incarnation = incarnation;
    for (int r : ranks) {
      contract::RankSnapshot snap;
      snap.job = job_;
      snap.rank = r;
      snap.world_size = std::max(world_size, r + 1);
      snap.incarnation = static_cast<uint32_t>(incarnation);
      rec.summary.observation.ranks.push_back(std::move(snap));
    }
    rec.received_mono_ns = now.mono_ns;
    rec.lapsed_mono_ns = now.mono_ns - session_.options().ttl_ns;  // at least a TTL ago
    log_warn(
        "coord: job {}: node {} had ranks of this run and does not report: its ranks are "
        "rank-silent",
        job_, node);
    peers_[node] = std::move(rec);
  }
}

void JobCoord::retire() {
  if (session_.lease() == 0) return;
  auto n = session_.etcd().del(node_key(session_.options().node));
  if (!n) {
    session_.note_failure(n.error());
    return;
  }
  session_.note_ok();
  published_cue_.reset();
  published_steady_ = false;
  published_mono_ns_.reset();
  leads_ = false;
}

}  // namespace stepwatch::coord
