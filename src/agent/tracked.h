// The agent's per-job record (private to src/agent/agent*.cpp): its observer, detector and
// published state, and where its incident and runbook stand.
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/agent/agent.h"
#include "src/detect/detector.h"
#include "src/runbook/alert_keeper.h"
#include "src/runbook/preempt.h"
#include "src/serve/job_state.h"
#include "src/spec/spec.h"
#include "src/supervise/observer.h"

namespace stepwatch::agent {

struct Agent::Tracked {
  std::string job;
  std::string root;
  std::optional<uint32_t> dir_uid;  // the job directory's owner when first seen
  spec::JobSpec spec = spec::default_spec();
  std::unique_ptr<supervise::Observer> observer;
  std::unique_ptr<detect::Detector> detector;
  serve::JobState state;
  detect::State last_state = detect::State::kStarting;
  detect::Cause last_cause = detect::Cause::kNone;
  int64_t incarnation = 0;
  // The open incident, if any (adopted from the store after a restart).
  std::optional<int64_t> incident_id;
  std::string incident_state, incident_cause;
  bool claim_tried = false;  // claim_page was asked for this incident (true at most once ever)
  std::optional<std::future<std::vector<runbook::PageResult>>> paging;
  std::unique_ptr<runbook::AlertKeeper> alert;  // keeps the Alertmanager alert alive while open
  // Preemption (only for jobs in preempt_jobs whose spec enables auto_preempt).
  int misses = 0;                // consecutive stalled or dead verdicts in this incident
  int64_t incident_mono_ns = 0;  // when this agent opened or joined the open incident
  std::optional<int64_t> hold_until_mono_ns;  // acked: the owner has until then
  bool preempt_noted = false;                 // "nothing proven" was said for this incident
  std::optional<std::future<runbook::PreemptReport>> preempting;
  std::string preempt_refused;   // ranks not proven, for the action record
  std::set<int> preempted_pids;  // ended by this agent: their silence is no new incident
  std::optional<int64_t> retired_at_wall_ns;
  bool vanished = false;  // retired because its directory is gone
  bool hidden = false;    // retired longer than retire_after, but its (finished) directory remains
  size_t ranks = 0;       // at the last observation
  size_t due = 0;         // ranks that wanted process details at the last observation
  bool observed = false;  // observed in this poll: `state` holds a new observation to publish
  std::shared_ptr<const serve::JobState> published;  // what the API sees of this job
};

}  // namespace stepwatch::agent
