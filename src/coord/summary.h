// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A node's summary of one job, as its agent publishes it to etcd
// (<prefix>/jobs/<job>/nodes/<node>), and the job leader's merge of every node's summary into
// one detector Observation.
//
// Ages, never wall clocks, cross hosts: a summary carries the node's observation as that node
// saw it, on its own monotonic clock, with the node's `now`; the leader rebases every monotonic
// stamp onto its own clock by when it received the summary (a stamp's age on the node at
// publish time, plus the time since the leader received it). Stamps of records the node itself
// could not time monotonically (another host's JSONL) keep only their wall time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/clock.h"
#include "src/common/result.h"
#include "src/detect/observation.h"

namespace stepwatch::coord {

inline constexpr int kSummaryVersion = 1;
// Bounds on what another node's summary may be: a node of 8 ranks publishes about 10 KB.
inline constexpr size_t kMaxSummaryBytes = 256 * 1024;
inline constexpr size_t kMaxSummaryRanks = 256;
// The longest a node may vouch for its ranks between two summaries (steady_ns).
inline constexpr int64_t kMaxSteadyNs = 3600 * kNsPerSec;

struct NodeSummary {
  std::string node;                 // the publishing agent's node name
  uint64_t poll_seq = 0;            // the agent's poll counter when it published
  int64_t incarnation = 0;          // the highest incarnation among its ranks
  detect::Observation observation;  // the node's own look: its ranks, processes, GPUs
  // Set while the node's own verdict on its ranks is healthy: it vouches for them. It publishes
  // again within this long after this summary, or as soon as its verdict is anything else, and
  // meanwhile puts no summary for steps alone (docs/multinode.md, "Steady nodes"). Until then the
  // leader takes this look as current (merge()).
  std::optional<int64_t> steady_ns;
  // The publisher, leading, takes steady summaries as current: a node may then vouch. A leader
  // of an older version (no field) ages every summary from its receipt, so nodes publish every
  // step to it.
  bool reads_steady = false;
};

// What a node publishes of its look: every rank's step ring but its lowest rank's is dropped. A
// detector learns the job's interval from the job's lowest rank alone (detector.cpp, observe), so
// the leader learns from whichever node holds it, and that rank is its node's lowest; the other
// rings were a third of a summary's bytes, which the leader read and parsed for nothing.
void keep_lowest_ring(detect::Observation& obs);

// JSON, one object: {"v":1,"node":..,"poll_seq":..,"incarnation":..,"obs":{...trace obs...}},
// with "steady_ns" and "reads_steady" when set.
std::string summary_to_json(const NodeSummary& s);
// Errors name the field at fault and the source (a key) given. Bounded before it is parsed
// (kMaxSummaryBytes, json_fields::kMaxDepth) and in its ranks (kMaxSummaryRanks).
Result<NodeSummary> summary_from_json(std::string_view text, std::string_view source);

// A summary as the leader holds it.
struct Received {
  NodeSummary summary;
  int64_t received_mono_ns = 0;  // the leader's monotonic clock when it read this version
  // Set once the node's key is gone (its lease expired: agent or node dead, or cut off from
  // etcd): when it stopped reporting, at the latest (a lease TTL before the leader first saw it
  // gone). Its ranks are then rank-silent, named by node.
  std::optional<int64_t> lapsed_mono_ns;
};

// Every node's summary merged into one observation on the leader's clock, at `now`:
//   - each rank's snapshot rebased, with `host` set to the node that published it;
//   - process and GPU facts concatenated (they are keyed by rank);
//   - a rank listed by two nodes is kept from the summary received last (the local look counts
//     as received at `now`), and the other reported in `problems`;
//   - `one_clock` set, and `lapsed_hosts` filled from the lapsed summaries;
//   - a steady summary (steady_ns) read no longer than steady_ns ago vouches for its ranks'
//     committed progress: the stamps of steps, beats and losses keep the ages they had when
//     published. Every other stamp ages as in any summary: events (a phase's start, a
//     checkpoint, creation) and the evidence inside a step (the record's update, the sampler's
//     moves), so the early rule still sees a rank quiet inside a long step.
// `local` is the leader's own observation this poll (rebased by nothing: its clock); a remote
// summary of `local_node` itself (the leader's own key read back) is ignored. Null entries are
// skipped. The result's log and job exit code are the local ones.
struct Merged {
  detect::Observation observation;
  std::vector<std::string> problems;
};
Merged merge(const detect::Observation& local, const std::string& local_node,
             const std::vector<const Received*>& remote, Stamp now);

}  // namespace stepwatch::coord
