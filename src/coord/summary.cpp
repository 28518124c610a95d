// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The only translation unit of the summaries that includes nlohmann/json (STYLE rule 11).
#include "src/coord/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "src/common/json_fields.h"
#include "src/trace/codec.h"

namespace stepwatch::coord {

namespace {

using json = nlohmann::json;

// The field readers throw FieldError, caught once in summary_from_json and named by source there.
using json_fields::as_int;
using json_fields::FieldError;
using json_fields::need;

// A shifted monotonic stamp: 0 stays "unknown". One older than the leader's own boot has no
// place on its clock and becomes unknown too, so the detector falls back to its wall time.
int64_t shifted(int64_t mono_ns, int64_t offset_ns) {
  if (mono_ns == 0) return 0;
  return std::max<int64_t>(0, mono_ns + offset_ns);
}

// Puts one rank of a node's observation on the leader's clock and names its node. A rank the
// node timed monotonically (its own records) moves by `offset_ns`; one it could only time by
// wall (another host's JSONL) keeps only its wall stamps, as it had on the node.
// `vouched_ns` moves the stamps of committed progress (steps, beats, losses) further on: a
// steady node vouches that they go on as they were (summary.h). Nothing else moves with them:
// not events (creation, a phase's start, a checkpoint's commit: a phase's age is its own), and
// not the evidence inside a step (the record's update, the sampler's moves), which the early
// rule reads as published, so that a rank quiet inside a long step on a steady node still ages.
void rebase(contract::RankSnapshot& r, const std::string& observer_host, int64_t offset_ns,
            int64_t vouched_ns, const std::string& node) {
  bool timed = r.host.empty() || r.host == observer_host;
  auto fix = [&](int64_t& mono_ns) { mono_ns = timed ? shifted(mono_ns, offset_ns) : 0; };
  auto progress = [&](int64_t& mono_ns) {
    mono_ns = timed ? shifted(mono_ns, offset_ns + vouched_ns) : 0;
  };
  fix(r.created.mono_ns);
  progress(r.step_at.mono_ns);
  fix(r.phase_since.mono_ns);
  if (r.beat_at) progress(r.beat_at->mono_ns);
  if (r.checkpoint) fix(r.checkpoint->at.mono_ns);
  progress(r.loss_at.mono_ns);
  fix(r.updated.mono_ns);
  fix(r.updated_mono_ns);
  if (r.sample) {
    fix(r.sample->at.mono_ns);
    fix(r.sample->moved_at.mono_ns);
  }
  // The step ring is monotonic only, and the detector learns intervals from its differences: an
  // entry that became unknown would read as a huge interval. Unknown entries are the oldest
  // ones (the ring is in time order), so dropping them keeps "the last n commits" true.
  for (auto& m : r.recent) progress(m.mono_ns);
  std::erase_if(r.recent, [](const contract::StepMark& m) { return m.mono_ns == 0; });
  r.host = node;
}

// One node's observation as merge() consumes it.
struct Source {
  const detect::Observation* obs;
  const std::string* node;
  int64_t offset_ns;    // onto the leader's clock
  int64_t received_ns;  // when the leader received it (the local look: now)
  int64_t vouched_ns;   // how much further its stamps of progress move (a steady node's)
};

}  // namespace

void keep_lowest_ring(detect::Observation& obs) {
  auto lowest = std::min_element(obs.ranks.begin(), obs.ranks.end(),
                                 [](const contract::RankSnapshot& a,
                                    const contract::RankSnapshot& b) { return a.rank < b.rank; });
  for (auto it = obs.ranks.begin(); it != obs.ranks.end(); ++it)
    if (it != lowest) it->recent.clear();
}

std::string summary_to_json(const NodeSummary& s) {
  // The observation is written as a trace writes it, embedded as an object, so a node's summary
  // and a recorded trace line are read by the same parser. Spliced in as text: parsing it back
  // into a document only to write it out again cost more than writing it (coord_bench).
  std::string steady;
  if (s.steady_ns) steady = fmt::format(R"(,"steady_ns":{})", *s.steady_ns);
  if (s.reads_steady) steady += R"(,"reads_steady":true)";
  return fmt::format(R"({{"v":{},"node":{},"poll_seq":{},"incarnation":{}{},"obs":{}}})",
                     kSummaryVersion, json(s.node).dump(), s.poll_seq, s.incarnation, steady,
                     trace::observation_to_json(s.observation));
}

Result<NodeSummary> summary_from_json(std::string_view text, std::string_view source) {
  auto fail = [&](Errc code, const std::string& message) {
    return Error{code, fmt::format("{}: {}", source, message)};
  };
  if (text.size() > kMaxSummaryBytes) {
    return fail(Errc::kParse, fmt::format("{} bytes, more than the {} a summary may hold",
                                          text.size(), kMaxSummaryBytes));
  }
  auto parsed = json_fields::parse_object(text, source);
  if (!parsed) return parsed.error();
  const json& j = *parsed;
  NodeSummary s;
  try {
    int64_t v = as_int(need(j, "v"), "v");
    if (v != kSummaryVersion) {
      return fail(
          Errc::kUnknownVersion,
          fmt::format("summary version {}, this stepwatch reads version {}", v, kSummaryVersion));
    }
    const json& node = need(j, "node");
    if (!node.is_string() || node.get<std::string>().empty())
      throw FieldError{Errc::kInvalidField,
                       fmt::format("field \"node\" must be a node name, got {:.80}", node.dump())};
    s.node = node.get<std::string>();
    const json& seq = need(j, "poll_seq");
    if (!seq.is_number_unsigned())
      throw FieldError{
          Errc::kInvalidField,
          fmt::format("field \"poll_seq\" must be a count (>= 0), got {:.80}", seq.dump())};
    s.poll_seq = seq.get<uint64_t>();
    s.incarnation = as_int(need(j, "incarnation"), "incarnation");
    if (j.contains("steady_ns")) {
      int64_t steady = as_int(j["steady_ns"], "steady_ns");
      if (steady <= 0 || steady > kMaxSteadyNs)
        throw FieldError{Errc::kInvalidField,
                         fmt::format("field \"steady_ns\" must be more than 0 and at most {} "
                                     "(an hour), got {}",
                                     kMaxSteadyNs, steady)};
      s.steady_ns = steady;
    }
    if (j.contains("reads_steady"))
      s.reads_steady = json_fields::as_bool(j["reads_steady"], "reads_steady");
    // Read in place: never dumped and parsed again (a value of another process, E5).
    const json& o = need(j, "obs");
    if (!o.is_object())
      throw FieldError{Errc::kParse,
                       fmt::format("field \"obs\" must be an object, got {:.80}", o.dump())};
    if (o.value("type", "obs") != "obs")
      return fail(Errc::kParse, "field \"obs\" must be an observation (\"type\": \"obs\")");
    auto obs = trace::observation_from_value(o);
    if (!obs) return fail(obs.error().code, "field \"obs\": " + obs.error().message);
    s.observation = std::move(*obs);
  } catch (const FieldError& e) {
    return fail(e.code, e.message);
  } catch (const json::exception& e) {
    return fail(Errc::kParse, e.what());
  }
  if (s.observation.ranks.size() > kMaxSummaryRanks) {
    return fail(Errc::kInvalidField, fmt::format("{} ranks, more than the {} a node may hold",
                                                 s.observation.ranks.size(), kMaxSummaryRanks));
  }
  return s;
}

Merged merge(const detect::Observation& local, const std::string& local_node,
             const std::vector<const Received*>& remote, Stamp now) {
  Merged out;
  detect::Observation& o = out.observation;
  o.now = now;
  o.local_host = local_node;
  o.one_clock = true;
  o.world_size = local.world_size;
  // The log and the launcher are this node's own: another node's are not observed from here.
  o.log = local.log;
  o.job_exit_code = local.job_exit_code;

  int local_world = local.world_size;  // 0: from its ranks' records
  for (const auto& r : local.ranks) local_world = std::max(local_world, r.world_size);
  o.world_size = local_world;
  std::vector<Source> sources{{&local, &local_node, 0, now.mono_ns, 0}};
  for (const Received* r : remote) {
    // The leader's own key read back from etcd is older than its look of this poll.
    if (r == nullptr || r->summary.node == local_node) continue;
    const detect::Observation& ro = r->summary.observation;
    // A steady node's steps stand for now while its promise runs (their ages as published).
    int64_t vouched = 0;
    if (r->summary.steady_ns && !r->lapsed_mono_ns &&
        now.mono_ns - r->received_mono_ns <= *r->summary.steady_ns)
      vouched = std::max<int64_t>(0, now.mono_ns - r->received_mono_ns);
    sources.push_back({&ro, &r->summary.node, r->received_mono_ns - ro.now.mono_ns,
                       r->received_mono_ns, vouched});
    // The job's size is the leader's own ranks' when it knows it: another node's claim does not
    // grow the job (a summary of 3,299 ranks for a job of 2, E11).
    if (local_world <= 0) o.world_size = std::max(o.world_size, ro.world_size);
    if (r->lapsed_mono_ns)
      o.lapsed_hosts[r->summary.node] = std::max<int64_t>(0, now.mono_ns - *r->lapsed_mono_ns);
  }

  // A rank outside the job's world is no rank of it: kept out of the merge, said once per node.
  const int world = local_world > 0 ? local_world : o.world_size;
  auto outside = [world](int rank) { return rank < 0 || (world > 0 && rank >= world); };
  for (size_t i = 1; i < sources.size(); ++i) {
    int n = 0;
    for (const auto& r : sources[i].obs->ranks) n += outside(r.rank) ? 1 : 0;
    if (n > 0)
      out.problems.push_back(
          fmt::format("node {} lists {} rank(s) outside the job's world of {}: "
                      "ignored",
                      *sources[i].node, n, world));
  }

  // Which node each rank is kept from: the one whose summary was received last (a rank a restart
  // moved may still be listed in its old node's summary, which is then the older one).
  std::map<int, size_t> owner;
  for (size_t i = 0; i < sources.size(); ++i) {
    for (const auto& r : sources[i].obs->ranks) {
      if (outside(r.rank)) continue;
      auto [it, fresh] = owner.try_emplace(r.rank, i);
      if (fresh || it->second == i) continue;
      const Source& held = sources[it->second];
      bool newer = sources[i].received_ns > held.received_ns;
      const std::string& kept = newer ? *sources[i].node : *held.node;
      const std::string& dropped = newer ? *held.node : *sources[i].node;
      out.problems.push_back(fmt::format(
          "rank {} is listed by nodes {} and {}: kept {}'s (received last), ignored {}'s", r.rank,
          *held.node, *sources[i].node, kept, dropped));
      if (newer) it->second = i;
    }
  }

  std::set<int> taken;  // one record per rank, even if a node lists one twice
  for (size_t i = 0; i < sources.size(); ++i) {
    const Source& src = sources[i];
    for (const auto& r : src.obs->ranks) {
      if (outside(r.rank) || owner.at(r.rank) != i || !taken.insert(r.rank).second) continue;
      o.ranks.push_back(r);
      rebase(o.ranks.back(), src.obs->local_host, src.offset_ns, src.vouched_ns, *src.node);
    }
    // Process and GPU facts follow their rank's record; those of ranks known only as processes
    // (an uninstrumented trainer) are kept from every node.
    auto follows = [&](int rank) {
      auto it = owner.find(rank);
      return it == owner.end() || it->second == i;
    };
    for (const auto& p : src.obs->procs)
      if (follows(p.rank)) o.procs.push_back(p);
    for (const auto& g : src.obs->gpus)
      if (follows(g.rank)) o.gpus.push_back(g);
  }
  // In rank order, so a leader's trace reads the same whatever order the summaries came in.
  auto by_rank = [](const auto& a, const auto& b) { return a.rank < b.rank; };
  std::stable_sort(o.ranks.begin(), o.ranks.end(), by_rank);
  std::stable_sort(o.procs.begin(), o.procs.end(), by_rank);
  std::stable_sort(o.gpus.begin(), o.gpus.end(), by_rank);
  return out;
}

}  // namespace stepwatch::coord
