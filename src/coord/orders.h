// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What a multi-node job's leader orders and what each node reports back (multinode.md §5.4),
// and the job's incarnation counter. All under <prefix>/jobs/<job>/:
//
//   orders/<incident>          {"incident","incarnation","collect","by","fence","at_ns"}:
//                              collect an artifact and preempt this incident's incarnation.
//                              Written once (CREATE == 0), by the leader, fenced by its node
//                              key: a leader that lost its lease cannot order anything. `fence`
//                              is that key's create revision, so a node checks when it reads an
//                              order that the leader of now wrote it (a next leader signs an
//                              order of its predecessor's again).
//   done/<incident>/<node>     what that node did: each process it ended (or could not), its
//                              artifact, or why it refused. Written once per (incident, node)
//                              by that node's agent: an order is never carried out twice.
//   incarnation                {"incarnation","resume_from","resume_step","incident","by",
//                              "at_ns"}: moved
//                              N -> N+1 once, by the leader (fenced, CAS on its revision), after
//                              every node reported; `stepwatch run --coord` relaunches on it.
//   launchers/<node>           a `stepwatch run --coord` on that node (under its lease), and
//                              the incarnation it is ready to start at the barrier.
//   start                      {"incarnation","by","at_ns","nodes"}: the start barrier,
//                              written by the leader (fenced) once every node is ready for it.
//   checkpoint                 {"id","step","incarnation","by","at_ns"}: the newest checkpoint
//                              every rank committed, written by the leader (fenced) as it
//                              moves forward, never back (coord/incarnation.h).
//   roster                     {"incarnation","nodes":{node:[ranks]}}: every node the leader
//                              knew ranks on, so a next leader names a dead leader's ranks.
//   view                       {"leader","at_wall_ns","verdict":{...},"obs":{...},"nodes":[..],
//                              "compact","paged":{"key","incident","incarnation"}}: the leader's
//                              verdict on the whole job and its merged ranks, for the other nodes'
//                              status, API and dashboard; compact (no ranks' records, only the
//                              ranks not judged healthy) for a large job.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/coord/incarnation.h"
#include "src/coord/kv.h"
#include "src/coord/read_ahead.h"
#include "src/coord/records.h"
#include "src/detect/observation.h"
#include "src/detect/verdict.h"
#include "src/runbook/preempt.h"
#include "src/watch/job_state.h"

namespace stepwatch::coord {

struct Order {
  int64_t incident = 0;
  int64_t incarnation = 0;
  bool collect = true;
  std::string by;     // the leader that ordered it
  int64_t fence = 0;  // the create revision of its node key when it ordered
  int64_t at_ns = 0;
  int64_t revision = 0;  // read: the order key's create revision
};

// One process as a node reports it after carrying out an order.
struct DoneProcess {
  int pid = 0;
  std::string label;  // "rank 1"
  bool gone = false;
  std::string describe;  // ProcessOutcome::describe()
};

struct Done {
  std::string node;
  bool ok = false;       // every process it had to end is gone
  std::string refused;   // why it did not act ("" when it did)
  std::string artifact;  // one line: where and how much, or why it failed
  std::string summary;   // PreemptReport::summary()
  std::vector<DoneProcess> processes;
  int64_t at_ns = 0;
};

// The leader's view of the whole job, as the other nodes show it.
struct JobView {
  std::string leader;
  int64_t at_wall_ns = 0;  // when the leader judged it
  detect::Verdict verdict;
  detect::Observation observation;      // every node's ranks, each with its node as host
  std::vector<watch::NodeState> nodes;  // every node as the leader knows it
  // Written without the ranks' records, and with only the ranks the verdict does not call
  // healthy (culprits first, at most kCompactViewRanks): the whole view of a large job would
  // be past kMaxViewBytes (8,000 ranks: megabytes, past etcd's own request limit).
  bool compact = false;
  // The job's open incident once its page reached someone: the page's dedup key and the
  // incarnation it is of ("": none). A node that loses etcd joins that page rather than paging
  // the same stall again (review E16).
  std::string paged_key;
  int64_t paged_incident = 0;  // the job's incident in etcd that carries it
  int64_t paged_incarnation = 0;
};
inline constexpr size_t kMaxViewBytes = 256 * 1024;
inline constexpr size_t kCompactViewRanks = 256;

// The job's keys, and this node (whose node key fences the leader's writes).
class JobOrders {
 public:
  // `base`: <prefix>/jobs/<job>/ ; `fence_key`: this node's key under nodes/. A record that does
  // not read is skipped and said to `bad`; only a failed call is an error.
  JobOrders(Kv& etcd, BadRecords& bad, std::string base, std::string node, std::string fence_key);

  // The leader: orders the incident's collect and preempt, signed by this node and its fence.
  // false: ordered already (by this leader; one of a previous leader is signed again).
  Result<bool> order(const Order& o, int64_t fence);
  // Every order of the job that reads, by key.
  Result<std::vector<Order>> orders();
  // One order key's record.
  static Result<Order> order_of(const KeyValue& kv);
  // This node's report, once: false when it had already reported.
  Result<bool> report(int64_t incident, const Done& d);
  // Whether this node reported on the incident already.
  Result<bool> reported(int64_t incident);
  // Every node's report on the incident.
  Result<std::vector<Done>> reports(int64_t incident);

  Result<JobIncarnation> incarnation();
  // N -> N+1, fenced, once: false when the counter is no longer as read in `from` (moved by a
  // previous leader already) or the fence failed.
  Result<bool> advance(const JobIncarnation& from, const IncarnationRecord& to, int64_t fence);
  // The `stepwatch run --coord` launchers registered for the job. A record that does not parse
  // still counts as a launcher (named by its key, no scheduler fields).
  Result<std::vector<LauncherRecord>> launchers();
  // The start barrier as last released (nullopt: never; one that does not read is said to `bad`
  // and read as never). release() writes it, fenced: false when the fence failed.
  Result<std::optional<StartRecord>> start();
  Result<bool> release(const StartRecord& s, int64_t fence);

  // The newest checkpoint every rank committed, as recorded (nullopt: none; one that does not
  // read is said to `bad` and read as none).
  Result<std::optional<CheckpointRecord>> checkpoint();
  // Moves that record forward to `c` (fenced; a CAS on the key as read here, a bad record
  // replaced). false: the key names c.step or later already, another writer came between, or
  // the fence failed.
  Result<bool> advance_checkpoint(const CheckpointRecord& c, int64_t fence);

  // The roster: nodes and their ranks, for an incarnation. Written by the leader (fenced) when
  // it changed.
  Status write_roster(int64_t incarnation, const std::map<std::string, std::vector<int>>& nodes,
                      int64_t fence);
  Result<std::optional<std::pair<int64_t, std::map<std::string, std::vector<int>>>>> roster();

  // The leader's view (fenced), compact past kMaxViewBytes; the others read it: its value only
  // when it changed since the last read here (a get without the value first). nullptr: none
  // (or one that does not read); else valid until the next call.
  Status write_view(const JobView& v, int64_t fence);
  Result<const JobView*> view();
  // What a following node reads of these keys each poll (the view, the orders), for a read
  // ahead (read_ahead.h).
  std::vector<Read> poll_reads() const;

 private:
  Kv& etcd_;
  BadRecords& bad_;
  std::string base_;
  std::string node_;
  std::string fence_key_;
  // The view as last read here, and the mod revision it was read at (0: none).
  std::optional<JobView> view_;
  int64_t view_mod_ = 0;
};

// The merged report of every node's Done, as the leader's runbook reads it.
runbook::ActReport merged_report(const std::vector<Done>& dones,
                                 const std::vector<std::string>& missing);

}  // namespace stepwatch::coord
