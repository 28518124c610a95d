// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/watch/job_watch.h"

namespace stepwatch::watch {

JobWatch::JobWatch(ObserverConfig observer, detect::Config detector,
                   std::optional<detect::Learned> learned)
    : observer_(std::move(observer)), detector_(std::move(detector)) {
  if (learned) {
    detector_.restore_learned(*learned);
    learned_median_ns_ = learned->median_ns;
  }
}

Look JobWatch::look(Stamp now, const LookInputs& in) {
  Look out;
  out.observation = observer_.poll(now, in.log_rank, in.log, &out.report, in.gpus);
  if (in.amend) in.amend(out.observation, out.report);
  out.verdict = detector_.observe(out.observation);
  if (in.settle) in.settle(out.observation, out.verdict);
  if (out.verdict.state != state_ || out.verdict.cause != cause_) {
    out.changed_from = std::make_pair(state_, cause_);
    state_ = out.verdict.state;
    cause_ = out.verdict.cause;
  }
  if (auto l = detector_.learned(); l && learned_median_ns_ != l->median_ns) {
    learned_median_ns_ = l->median_ns;
    out.learned = l;
  }
  return out;
}

}  // namespace stepwatch::watch
