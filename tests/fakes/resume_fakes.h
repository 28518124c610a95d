// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A scripted resume owner and a recording host for the after-preempt sequence
// (runbook/resume.h): the tests of Resume itself, and of the hosts that use one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/runbook/resume.h"
#include "tests/fakes/memory_history.h"

namespace stepwatch::test {

// Answers with the plans it is given, and says what it was asked ("plan 3", "stop", "drain").
class FakeOwner final : public runbook::ResumeOwner {
 public:
  runbook::ResumePlan next_plan = runbook::ResumePlan::of(runbook::ResumePlan::Kind::kRelaunch);
  runbook::ResumePlan stop_plan = runbook::ResumePlan::of(runbook::ResumePlan::Kind::kStopped);
  bool drains = false;
  bool batch = false;                           // needs_batch_job
  std::vector<std::string> calls;               // in order
  std::vector<runbook::OwnerRequest> requests;  // each plan's and stop's
  std::vector<std::string> drain_hosts;         // what drain() was given, suspects in order

  const char* name() const override { return "fake"; }
  runbook::ResumePlan plan(const runbook::OwnerRequest& r, runbook::OwnerNotes& notes) override {
    calls.push_back("plan " + std::to_string(r.incarnation));
    requests.push_back(r);
    notes.note(true, "the owner's own note");
    return next_plan;
  }
  runbook::ResumePlan stop(const runbook::OwnerRequest& r, runbook::OwnerNotes& /*n*/) override {
    calls.push_back("stop");
    requests.push_back(r);
    return stop_plan;
  }
  bool can_drain() const override { return drains; }
  std::vector<runbook::DrainLine> drain(const runbook::NodeFaultReport& report,
                                        const std::string& job,
                                        std::set<std::string>& drained) override {
    calls.push_back("drain");
    std::vector<runbook::DrainLine> out;
    for (const auto& s : report.suspects) {
      drain_hosts.push_back(s.host);
      if (drained.insert(s.host).second) out.push_back({"drained " + s.host + " for " + job, true});
    }
    return out;
  }
  bool needs_batch_job() const override { return batch; }
  std::string describe() const override { return "by the fake"; }
};

// An owner that forwards to `to`, for a host that takes ownership of its owner (the
// supervisor's RunOptions::resume_owner) while the test keeps reading `to`.
class BorrowedOwner final : public runbook::ResumeOwner {
 public:
  explicit BorrowedOwner(runbook::ResumeOwner& to) : to_(to) {}
  const char* name() const override { return to_.name(); }
  runbook::ResumePlan plan(const runbook::OwnerRequest& r, runbook::OwnerNotes& n) override {
    return to_.plan(r, n);
  }
  runbook::ResumePlan stop(const runbook::OwnerRequest& r, runbook::OwnerNotes& n) override {
    return to_.stop(r, n);
  }
  bool can_drain() const override { return to_.can_drain(); }
  std::vector<runbook::DrainLine> drain(const runbook::NodeFaultReport& report,
                                        const std::string& job,
                                        std::set<std::string>& drained) override {
    return to_.drain(report, job, drained);
  }
  Result<std::optional<std::string>> superseded(const runbook::BatchJob& b) const override {
    return to_.superseded(b);
  }
  bool needs_batch_job() const override { return to_.needs_batch_job(); }
  std::string describe() const override { return to_.describe(); }

 private:
  runbook::ResumeOwner& to_;
};

// Records what the sequence asks of its host; acks, "started meanwhile" and the plan's outcome
// are set by the test.
class FakeResumeHost final : public runbook::ResumeHost {
 public:
  MemoryHistory memory;
  std::vector<std::string> logs;
  std::vector<std::pair<bool, std::string>> notes;
  struct Held {
    runbook::NextIncarnation next;
    std::string why;
    int64_t at_wall_ns;
  };
  std::vector<Held> holds;
  std::vector<int64_t> ack_times;  // acks of the held incident (wall ns)
  bool incident_open = true;
  std::optional<Error> ack_error;
  std::optional<std::string> started;  // started_meanwhile's answer
  Result<runbook::BatchJob> batch = runbook::BatchJob{"slurm", "77", 2};
  int batch_asked = 0;
  struct Applied {
    runbook::ResumePlan plan;
    runbook::NextIncarnation next;
    std::string done;
  };
  std::vector<Applied> applied;
  std::vector<runbook::AfterPreempt> outcomes;  // apply's answers in turn; then {true, "applied"}
  std::vector<std::pair<int64_t, std::string>> closes;
  std::vector<int64_t> acked_since_asked;  // the `since` of each acked_since call

  void log(LogLevel /*level*/, const std::string& line) override { logs.push_back(line); }
  void note(bool ok, const std::string& line) override { notes.emplace_back(ok, line); }
  runbook::HistoryLedger& history() override { return memory; }
  std::string ack_hint() const override { return "stepwatch ack train"; }
  Result<runbook::BatchJob> batch_job() override {
    ++batch_asked;
    return batch;
  }
  void hold(const runbook::NextIncarnation& next, const std::string& why, Stamp now) override {
    holds.push_back({next, why, now.wall_ns});
  }
  Result<std::optional<bool>> acked_since(int64_t /*incident*/, int64_t since_wall_ns) override {
    acked_since_asked.push_back(since_wall_ns);
    if (ack_error) return *ack_error;
    if (!incident_open) return std::optional<bool>();
    bool acked = false;
    for (int64_t t : ack_times) acked = acked || t >= since_wall_ns;
    return std::optional<bool>(acked);
  }
  std::optional<std::string> started_meanwhile(const runbook::NextIncarnation&) override {
    return started;
  }
  runbook::AfterPreempt apply(const runbook::ResumePlan& plan, const runbook::NextIncarnation& next,
                              const std::string& done, Stamp /*now*/) override {
    applied.push_back({plan, next, done});
    if (outcomes.empty()) return {true, done + "; applied"};
    runbook::AfterPreempt a = outcomes.front();
    outcomes.erase(outcomes.begin());
    return a;
  }
  void close(int64_t incident, Stamp /*now*/, const std::string& resolution) override {
    closes.emplace_back(incident, resolution);
  }
};

}  // namespace stepwatch::test
