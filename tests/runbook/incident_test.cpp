// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The incident state machine with a fake host, an in-memory ledger and a hand-moved clock: every
// path of the runbook and the faults of reviews/reliability.md (D3, D4, D6, D8, D10), without a
// process, a socket or a database. The page deliveries run on real threads through the pager's
// delivery seam; each test waits for them where it reads their outcome.
#include "src/runbook/incident.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace stepwatch::runbook {
namespace {

constexpr int64_t kSec = kNsPerSec;

// The ledger as a map, with a switch that makes every write fail (a full or read-only disk).
class MemoryLedger final : public IncidentLedger {
 public:
  bool failing = false;
  bool failing_deliveries = false;  // record_delivery alone fails
  std::map<int64_t, store::Incident> rows;
  std::vector<store::Action> actions;

  Result<std::optional<store::Incident>> open_for(const std::string& job) override {
    for (const auto& [id, r] : rows) {
      if (r.job == job && r.is_open()) return std::optional<store::Incident>(r);
    }
    return std::optional<store::Incident>();
  }
  Result<store::IncidentRef> open(const store::NewIncident& n) override {
    if (failing) return fail();
    if (auto o = *open_for(n.job)) return store::IncidentRef{o->id, false};
    store::Incident r;
    r.id = next_++;
    r.job = n.job;
    r.incarnation = n.incarnation;
    r.opened_at_ns = n.at_ns;
    r.state = n.state;
    r.cause = n.cause;
    r.summary = n.summary;
    rows[r.id] = r;
    return store::IncidentRef{r.id, true};
  }
  Result<std::optional<store::Incident>> get(int64_t id) override {
    auto it = rows.find(id);
    if (it == rows.end()) return std::optional<store::Incident>();
    return std::optional<store::Incident>(it->second);
  }
  Status update(int64_t id, const store::NewIncident& n) override {
    if (failing) return fail();
    rows[id].state = n.state;
    rows[id].cause = n.cause;
    return {};
  }
  Result<bool> claim_page(int64_t id, int64_t at_ns) override {
    if (failing) return fail();
    auto& r = rows[id];
    if (r.paged_at_ns || !r.is_open()) return false;
    r.paged_at_ns = at_ns;
    r.page_result = "claimed";
    return true;
  }
  Status record_delivery(int64_t id, int64_t at_ns, std::string_view result,
                         bool delivered) override {
    if (failing || failing_deliveries) return fail();
    auto& r = rows[id];
    if (!r.paged_at_ns) r.paged_at_ns = at_ns;
    r.page_result = std::string(result);
    if (delivered && !r.delivered_at_ns) r.delivered_at_ns = at_ns;
    return {};
  }
  Status close(int64_t id, int64_t at_ns, std::string_view resolution) override {
    if (failing) return fail();
    auto& r = rows[id];
    if (!r.closed_at_ns) {
      r.closed_at_ns = at_ns;
      r.resolution = std::string(resolution);
    }
    return {};
  }
  Status record_action(const store::Action& a) override {
    if (failing) return fail();
    actions.push_back(a);
    return {};
  }
  int count(std::string_view kind) const {
    int n = 0;
    for (const auto& a : actions) n += a.kind == kind;
    return n;
  }

 private:
  static Error fail() { return Error{Errc::kIo, "stepwatch.db: database or disk is full"}; }
  int64_t next_ = 1;
};

// The host: proven targets and a preempt outcome set by the test; acts in place.
class FakeHost final : public IncidentHost {
 public:
  std::vector<std::string> lines;
  std::vector<ProcessRef> procs = {{101, 7, "rank 0"}, {102, 8, "rank 1"}};
  std::vector<int> survivors;  // pids the preempt fails to end
  bool refuse = false;
  int acts = 0;
  int ledger_failures = 0;
  // Set: act() returns at once and its preempt finishes only once this is ready.
  std::optional<std::shared_future<void>> gate;
  std::string resolution = "preempted by the host";
  bool none_left = false;  // act() finds no process left to end (every node: "none runs here")
  bool hold = false;       // after_preempt holds the incident open (a restart storm)
  std::optional<PagedElsewhere> elsewhere;  // paged_as(): the stall's page sent elsewhere
  // act_under_way(): an earlier watcher's act, finishing once the gate is ready.
  std::optional<std::shared_future<void>> under_way;
  std::vector<std::pair<int64_t, std::string>> taken_up;  // (incident, acted-on summary)

  PageMessage page(const detect::Verdict& v) override {
    PageMessage m;
    m.job = "llm";
    m.summary = v.summary;
    m.host = "node-a";
    return m;
  }
  void log(LogLevel, const std::string& line) override { lines.push_back(line); }
  std::optional<std::string> refuse_act() override {
    if (refuse) return std::string("this host does not preempt llm");
    return std::nullopt;
  }
  PreemptTargets targets() override { return {procs, ""}; }
  std::future<ActReport> act(const detect::Verdict&, int64_t, PreemptTargets t) override {
    ++acts;
    ActReport r;
    r.artifact = "artifact /state/incidents/llm-1: 3 files";
    r.preempt.ok = true;
    if (none_left) t.processes.clear();
    for (const auto& p : t.processes) {
      ProcessOutcome o;
      o.process = p;
      bool survives = std::count(survivors.begin(), survivors.end(), p.pid) > 0;
      o.after = survives ? probe::Liveness::kAlive : probe::Liveness::kGone;
      if (survives) {
        o.note = "signal 9 not permitted (EPERM)";
        r.preempt.survivors.push_back(p);
        r.preempt.ok = false;
      }
      r.preempt.processes.push_back(o);
    }
    if (gate) {
      return std::async(std::launch::async, [r, g = *gate] {
        g.wait();
        return r;
      });
    }
    std::promise<ActReport> done;
    done.set_value(r);
    return done.get_future();
  }
  AfterPreempt after_preempt(const ActReport& r) override {
    if (hold) return {false, "", true};
    return {r.preempt.ok, resolution};
  }
  void ledger_failed(const Error&) override { ++ledger_failures; }
  std::optional<PagedElsewhere> paged_as(const detect::Verdict&) override { return elsewhere; }
  std::optional<std::future<ActReport>> act_under_way(int64_t id,
                                                      const detect::Verdict& acted_on) override {
    if (!under_way) return std::nullopt;
    taken_up.emplace_back(id, acted_on.summary);
    ProcessOutcome o;
    o.process = procs.back();
    o.before = probe::Liveness::kAlive;
    o.after = probe::Liveness::kGone;
    ActReport r;
    r.preempt.ok = true;
    r.preempt.processes.push_back(o);
    return std::async(std::launch::async, [r, g = *under_way] {
      g.wait();
      return r;
    });
  }

  bool said(std::string_view part) const {
    for (const auto& l : lines) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

// Page deliveries through the pager's seam: counted, and held while `hold` is set.
struct Receiver {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  bool refuse = false;  // every delivery fails (nothing listening)
  std::vector<std::string> bodies;

  PagerOptions options() {
    PagerOptions o;
    o.first_backoff_ns = 1;
    o.max_backoff_ns = 1;
    o.sleep = [](int64_t) { return true; };
    o.post = [this](const std::string&, const std::string& body, int64_t) {
      std::unique_lock lock(mu);
      cv.wait(lock, [this] { return !hold; });
      Attempt a;
      if (refuse) {
        a.detail = "connection refused";
        return a;
      }
      bodies.push_back(body);
      a.ok = true;
      a.http_status = 200;
      a.detail = "HTTP 200";
      return a;
    };
    return o;
  }
  void release() {
    std::lock_guard lock(mu);
    hold = false;
    cv.notify_all();
  }
  size_t pages() {
    std::lock_guard lock(mu);
    return bodies.size();
  }
};

detect::Verdict verdict(detect::State s, const char* summary = "stalled/io: last step 41 20m ago") {
  detect::Verdict v;
  v.state = s;
  v.cause = s == detect::State::kStalled ? detect::Cause::kIo : detect::Cause::kNone;
  v.summary = summary;
  return v;
}

class IncidentTest : public ::testing::Test {
 protected:
  void SetUp() override { make(); }
  void make(int64_t incarnation = 1) {
    runbook_.reset();
    IncidentPolicy p;
    spec::Pager hook;
    hook.url = "http://127.0.0.1:9/hook";
    hook.retries = 0;
    hook.timeout_ns = kSec;
    p.pagers = {hook};
    p.ack_timeout_ns = 60 * kSec;
    p.ack_hold_limit_ns = 600 * kSec;
    p.auto_preempt = true;
    p.misses = 2;
    policy_ = p;
    if (!deliveries_) deliveries_.emplace(ledger_, receiver_.options());
    runbook_.emplace(IncidentScope{"llm", incarnation, 0}, policy_, ledger_, host_, *deliveries_);
  }
  void turn(detect::State s, bool running = true) {
    runbook_->step(verdict(s), clock_.now(), running);
  }
  void settle() { deliveries_->wait(clock_.now()); }
  const store::Incident& row(int64_t id) { return ledger_.rows.at(id); }

  ManualClock clock_;
  MemoryLedger ledger_;
  FakeHost host_;
  Receiver receiver_;
  IncidentPolicy policy_;
  std::optional<PageDeliveries> deliveries_;
  std::optional<Incident> runbook_;
};

// ---- the sequence, one row per path ----

TEST_F(IncidentTest, HealthyVerdictsOpenNothing) {
  for (auto s : {detect::State::kStarting, detect::State::kHealthy, detect::State::kSlow,
                 detect::State::kSuspect, detect::State::kFinished}) {
    turn(s);
  }
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_TRUE(ledger_.rows.empty());
}

TEST_F(IncidentTest, AStallIsPagedOnceAndARecoveryClosesIt) {
  turn(detect::State::kStalled);
  ASSERT_TRUE(runbook_->is_open());
  int64_t id = *runbook_->id();
  for (int i = 0; i < 5; ++i) {
    clock_.advance(kSec);
    turn(detect::State::kStalled);
  }
  settle();
  EXPECT_EQ(receiver_.pages(), 1u);
  EXPECT_TRUE(row(id).delivered_at_ns.has_value());
  EXPECT_EQ(ledger_.count("page"), 1);
  EXPECT_NE(receiver_.bodies[0].find("\"incident_id\":\"1\""), std::string::npos)
      << receiver_.bodies[0];
  turn(detect::State::kHealthy);
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(row(id).resolution, "recovered");
  EXPECT_EQ(host_.acts, 0);
}

TEST_F(IncidentTest, AHeldIncidentIsNeitherRecoveredNorActedOnUntilTheHostClosesIt) {
  host_.hold = true;  // a restart storm: the host holds the next incarnation until an ack
  turn(detect::State::kStalled);
  clock_.advance(61 * kSec);
  turn(detect::State::kStalled);
  ASSERT_EQ(host_.acts, 1);
  ASSERT_TRUE(runbook_->is_open());
  turn(detect::State::kHealthy);  // the preempted ranks' verdict is no recovery
  EXPECT_TRUE(runbook_->is_open());
  for (int i = 0; i < 3; ++i) {
    clock_.advance(61 * kSec);
    turn(detect::State::kStalled);
  }
  EXPECT_EQ(host_.acts, 1) << "held: not acted on again";
  runbook_->close(clock_.now(), "acked restart storm");
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(row(1).resolution, "acked restart storm");
}

TEST_F(IncidentTest, SuspectInTheMiddleResetsTheMissesButKeepsTheIncident) {
  turn(detect::State::kStalled);
  clock_.advance(61 * kSec);  // past the ack deadline, one miss so far
  turn(detect::State::kSuspect);
  EXPECT_TRUE(runbook_->is_open());
  turn(detect::State::kStalled);  // misses 1 of 2
  EXPECT_EQ(host_.acts, 0);
  turn(detect::State::kStalled);  // 2 of 2
  EXPECT_EQ(host_.acts, 1);
}

TEST_F(IncidentTest, NoAckByTheDeadlineActsOnceAndTheHostsResolutionClosesIt) {
  turn(detect::State::kStalled);
  clock_.advance(30 * kSec);
  turn(detect::State::kStalled);
  EXPECT_EQ(host_.acts, 0) << "the ack deadline has not passed";
  clock_.advance(31 * kSec);
  turn(detect::State::kStalled);
  EXPECT_EQ(host_.acts, 1);
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(row(1).resolution, "preempted by the host");
  EXPECT_EQ(ledger_.count("collect"), 1);
  EXPECT_EQ(ledger_.count("preempt"), 1);
  EXPECT_EQ(runbook_->ended_pids(), (std::set<int>{101, 102}));
  EXPECT_TRUE(host_.said("preempting 2 proven process(es)"));
}

TEST_F(IncidentTest, ADeadRankIsActedOnWithoutWaitingForAnAck) {
  turn(detect::State::kDead);
  turn(detect::State::kDead);  // misses 2 of 2: no deadline to wait for
  EXPECT_EQ(host_.acts, 1);
}

// E7: a dead job whose processes had all ended already. Its preempt ends nothing: the incident
// stays open (paged once, acted on once), and the same verdict of the same run opens nothing
// new after a close; a recovery, or a next run, re-arms it.
TEST_F(IncidentTest, APreemptThatEndedNothingClosesNothingAndTheSameVerdictDoesNotReopen) {
  host_.none_left = true;  // its records say it runs; no process of it does any more
  for (int i = 0; i < 10; ++i) {
    turn(detect::State::kDead);
    clock_.advance(kSec);
  }
  settle();
  EXPECT_EQ(host_.acts, 1) << "acted on once";
  ASSERT_TRUE(runbook_->is_open()) << "a preempt of 0 processes closes nothing";
  EXPECT_EQ(ledger_.rows.size(), 1u) << "no incident after incident (56 pages in the review)";
  EXPECT_EQ(receiver_.pages(), 1u);
  EXPECT_TRUE(host_.said("nothing left to preempt")) << ::testing::PrintToString(host_.lines);

  // The job goes away (retired): closed. The same verdict of the same run opens nothing again.
  runbook_->close(clock_.now(), "job vanished");
  EXPECT_FALSE(runbook_->is_open());
  for (int i = 0; i < 5; ++i) {
    turn(detect::State::kDead);
    clock_.advance(kSec);
  }
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(ledger_.rows.size(), 1u);
  // Another verdict (a stall, not death) is a new incident.
  turn(detect::State::kStalled);
  EXPECT_TRUE(runbook_->is_open());
  EXPECT_EQ(ledger_.rows.size(), 2u);
}

// `stepwatch run`'s child that exited by itself: nothing ran to end, and its host's resolution
// closes the incident (the run ends with it).
TEST_F(IncidentTest, AJobThatExitedByItselfClosesAsItsHostSays) {
  host_.procs.clear();
  turn(detect::State::kDead, /*running=*/false);
  turn(detect::State::kDead, false);
  EXPECT_EQ(host_.acts, 1);
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(row(1).resolution, "preempted by the host");
}

TEST_F(IncidentTest, AfterAPreemptARecoveryReArmsTheSameVerdict) {
  turn(detect::State::kStalled);
  clock_.advance(61 * kSec);
  turn(detect::State::kStalled);
  ASSERT_EQ(host_.acts, 1);
  ASSERT_FALSE(runbook_->is_open()) << "2 processes ended: the host's resolution closes it";
  turn(detect::State::kStalled);
  EXPECT_FALSE(runbook_->is_open()) << "the verdict it was preempted on opens nothing new";
  turn(detect::State::kHealthy);
  turn(detect::State::kStalled);
  EXPECT_TRUE(runbook_->is_open()) << "a stall after a recovery is a new one";
  EXPECT_EQ(ledger_.rows.size(), 2u);
}

TEST_F(IncidentTest, AnAckHoldsUntilItsLimitThenTheRunbookActs) {
  turn(detect::State::kStalled);
  ledger_.rows[1].acked_at_ns = clock_.now().wall_ns;
  ledger_.rows[1].acked_by = "alice";
  clock_.advance(61 * kSec);
  turn(detect::State::kStalled);
  turn(detect::State::kStalled);
  EXPECT_EQ(host_.acts, 0);
  EXPECT_TRUE(host_.said("acked by alice: holding for up to 10m"));
  clock_.advance(600 * kSec);
  turn(detect::State::kStalled);
  EXPECT_EQ(host_.acts, 1);
}

TEST_F(IncidentTest, AutoPreemptOffOrAHostThatRefusesNeverActsAndSaysSoOnce) {
  host_.refuse = true;
  turn(detect::State::kDead);
  for (int i = 0; i < 4; ++i) turn(detect::State::kDead);
  EXPECT_EQ(host_.acts, 0);
  int said = 0;
  for (const auto& l : host_.lines) said += l == "this host does not preempt llm";
  EXPECT_EQ(said, 1);
  EXPECT_TRUE(runbook_->is_open());
}

TEST_F(IncidentTest, AJobThatExitedIsActedOnAtOnce) {
  turn(detect::State::kStalled, /*running=*/false);
  EXPECT_EQ(host_.acts, 1) << "nothing to wait for once the job's processes exited";
}

TEST_F(IncidentTest, AVerdictChangeUpdatesTheRecord) {
  turn(detect::State::kStalled);
  EXPECT_EQ(row(1).state, "stalled");
  turn(detect::State::kDead);
  EXPECT_EQ(row(1).state, "dead");
  EXPECT_EQ(ledger_.rows.size(), 1u);
}

// ---- D3: a claim is not a delivery ----

TEST_F(IncidentTest, AClaimedPageThatWasNeverDeliveredIsDeliveredByTheNextWatcher) {
  receiver_.refuse = true;  // the first watcher's delivery never arrives...
  turn(detect::State::kStalled);
  runbook_.reset();  // ...and it dies before recording anything
  deliveries_.reset();
  ledger_.rows[1].page_result = "claimed";
  receiver_.refuse = false;
  make();
  turn(detect::State::kStalled);  // claimed moments ago: maybe still under way elsewhere
  settle();
  EXPECT_EQ(receiver_.pages(), 0u);
  clock_.advance(10 * kSec);  // past the longest delivery (1 attempt of 1 s)
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u);
  EXPECT_TRUE(host_.said("never delivered"));
  EXPECT_TRUE(row(1).delivered_at_ns.has_value());
  clock_.advance(10 * kSec);
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u) << "delivered once, then never again";
}

// E14: the page was delivered, but the ledger could not take that (etcd stopped, the leader's
// lease lapsed): the outcome is kept and recorded once it can be, by the next watcher's turn on
// this node too, and the page is never sent again.
TEST_F(IncidentTest, ADeliveryTheLedgerCouldNotTakeIsRecordedLaterAndNeverSentAgain) {
  receiver_.hold = true;
  turn(detect::State::kStalled);  // claimed, under way
  ledger_.failing = true;         // the ledger goes away mid-delivery
  receiver_.release();
  settle();
  EXPECT_EQ(receiver_.pages(), 1u);
  EXPECT_FALSE(row(1).delivered_at_ns.has_value());
  EXPECT_EQ(ledger_.count("page"), 0);
  make();  // this node's next watcher of the job (it led again): a fresh runbook, adopting
  ledger_.failing = false;
  clock_.advance(60 * kSec);  // long past the longest delivery
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u) << "delivered from here: recorded, not sent again";
  EXPECT_TRUE(row(1).delivered_at_ns.has_value());
  EXPECT_EQ(row(1).page_result.find("sent after 1 attempt(s)") != std::string::npos, true)
      << row(1).page_result;
  EXPECT_EQ(ledger_.count("page"), 1) << "and its action, kept meanwhile";
  clock_.advance(10 * kSec);
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u);
}

// The kept outcome is also kept where it outlives the process (DeliverySink::keep, the node's
// store): a next process given it (take_kept) records it at its first reap, never pages it again
// meanwhile, and forgets it once recorded.
TEST_F(IncidentTest, AKeptOutcomeOutlivesTheProcessAndIsRecordedNotSentAgain) {
  std::map<int64_t, DeliveryOutcome> store;  // the node's store
  std::vector<int64_t> forgotten;
  DeliverySink sink;
  sink.keep = [&](const std::string& job, int64_t id, int64_t, const DeliveryOutcome& out) {
    EXPECT_EQ(job, "llm");
    store[id] = out;
  };
  sink.forget = [&](const std::string&, int64_t id) {
    store.erase(id);
    forgotten.push_back(id);
  };
  runbook_.reset();
  deliveries_.reset();
  deliveries_.emplace(ledger_, receiver_.options(), sink);
  runbook_.emplace(IncidentScope{"llm", 1, 0}, policy_, ledger_, host_, *deliveries_);
  receiver_.hold = true;
  turn(detect::State::kStalled);
  ledger_.failing = true;
  receiver_.release();
  settle();
  ASSERT_EQ(store.count(1), 1u);
  EXPECT_TRUE(store[1].delivered);
  EXPECT_NE(store[1].summary.find("sent after 1 attempt(s)"), std::string::npos);

  // The process is killed: what it held in memory is gone; the store is not.
  runbook_.reset();
  deliveries_.reset();
  deliveries_.emplace(ledger_, receiver_.options(), sink);
  for (const auto& [id, out] : store) deliveries_->take_kept("llm", id, clock_.now().wall_ns, out);
  runbook_.emplace(IncidentScope{"llm", 1, 0}, policy_, ledger_, host_, *deliveries_);
  clock_.advance(60 * kSec);  // long past the longest delivery: a lost claim would be re-sent
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u) << "not sent again";
  EXPECT_FALSE(row(1).delivered_at_ns.has_value()) << "the ledger still fails";
  ledger_.failing = false;
  deliveries_->reap(clock_.now());
  EXPECT_TRUE(row(1).delivered_at_ns.has_value());
  EXPECT_TRUE(store.empty());
  EXPECT_EQ(forgotten, std::vector<int64_t>{1});
  clock_.advance(10 * kSec);
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u);
}

// The same, with no turn of a runbook in between: each reap records what is kept.
TEST_F(IncidentTest, WhatTheLedgerDidNotTakeIsRecordedAtTheNextReap) {
  receiver_.hold = true;
  turn(detect::State::kStalled);
  ledger_.failing = true;
  receiver_.release();
  settle();
  deliveries_->reap(clock_.now());
  EXPECT_FALSE(row(1).delivered_at_ns.has_value()) << "still failing";
  ledger_.failing = false;
  deliveries_->reap(clock_.now());
  EXPECT_TRUE(row(1).delivered_at_ns.has_value());
  EXPECT_EQ(ledger_.count("page"), 1);
}

// A page another watcher claimed and never recorded as delivered: a watcher that adopted the
// incident delivers it only once adopted_claim_wait passed since its first look (a multi-node
// leader: the lease TTL, for the node that claimed it to record its delivery).
TEST_F(IncidentTest, AnAdoptedClaimIsDeliveredOnlyAfterTheClaimWaitFromTheFirstLook) {
  receiver_.refuse = true;
  turn(detect::State::kStalled);
  settle();
  runbook_.reset();
  deliveries_.reset();
  ledger_.rows[1].page_result = "claimed";
  receiver_.refuse = false;
  clock_.advance(60 * kSec);  // claimed long ago
  make();
  policy_.adopted_claim_wait_ns = 5 * kSec;
  runbook_.emplace(IncidentScope{"llm", 1, 0}, policy_, ledger_, host_, *deliveries_);
  turn(detect::State::kStalled);
  clock_.advance(4 * kSec);
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 0u) << "4 s after its first look";
  clock_.advance(2 * kSec);
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u);
  EXPECT_TRUE(host_.said("never delivered"));
}

// A watcher that adopts an incident whose preempt an earlier watcher started and did not see
// through (a multi-node leader stopped right after its order): it takes that act up and waits on
// its report. Meanwhile the verdict is not news (the ranks the order ended read as the others
// finishing, "healthy"): the incident neither recovers nor acts again, nor pages again.
TEST_F(IncidentTest, AnAdoptedIncidentTakesUpTheActUnderWayAndWaitsOnItsReport) {
  turn(detect::State::kStalled);
  settle();
  ASSERT_EQ(receiver_.pages(), 1u);
  std::promise<void> gate;
  host_.under_way = gate.get_future().share();
  make();  // the next watcher (the job's next leader)
  turn(detect::State::kHealthy);
  ASSERT_EQ(host_.taken_up.size(), 1u);
  EXPECT_EQ(host_.taken_up[0].first, 1);
  EXPECT_TRUE(runbook_->acting());
  clock_.advance(120 * kSec);  // past the ack timeout
  turn(detect::State::kHealthy);
  turn(detect::State::kStalled);
  EXPECT_TRUE(runbook_->is_open()) << "not recovered while the act is under way";
  EXPECT_EQ(host_.acts, 0) << "never acted twice";
  gate.set_value();
  for (int i = 0; i < 200 && runbook_->acting(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    turn(detect::State::kHealthy);
  }
  settle();
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(row(1).resolution, "preempted by the host");
  EXPECT_EQ(ledger_.count("preempt"), 1);
  EXPECT_EQ(receiver_.pages(), 1u);
  EXPECT_EQ(host_.acts, 0);
}

// A join whose delivery the ledger did not take (etcd just back after losing its data, a write
// that timed out) is kept and recorded at a later reap: its claim alone would be delivered again
// by a next watcher.
TEST_F(IncidentTest, AJoinTheLedgerDidNotTakeIsRecordedLater) {
  host_.elsewhere = IncidentHost::PagedElsewhere{
      "1796000000000017", "incident 1796000000000017 of the job, paged through etcd by node a"};
  ledger_.failing_deliveries = true;
  turn(detect::State::kStalled);
  ASSERT_EQ(runbook_->delivered_key(), "1796000000000017");
  EXPECT_TRUE(row(1).paged_at_ns.has_value()) << "claimed";
  EXPECT_FALSE(row(1).delivered_at_ns.has_value());
  ledger_.failing_deliveries = false;
  deliveries_->reap(clock_.now());
  EXPECT_TRUE(row(1).delivered_at_ns.has_value());
  EXPECT_NE(row(1).page_result.find("joins the page of incident 1796000000000017"),
            std::string::npos)
      << row(1).page_result;
  EXPECT_EQ(receiver_.pages(), 0u);
}

// Without an act under way an adopted incident goes its usual way: a healthy job recovered.
TEST_F(IncidentTest, AnAdoptedIncidentWithNoActUnderWayRecovers) {
  turn(detect::State::kStalled);
  settle();
  make();
  turn(detect::State::kHealthy);
  EXPECT_TRUE(host_.taken_up.empty());
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(row(1).resolution, "recovered");
}

// E16: the stall was paged already by another runbook (the job's incident through etcd, before
// this node lost it): this incident joins that page under its key, recorded as paged, and
// sends nothing; its later pages (an escalation) carry the same key.
TEST_F(IncidentTest, AStallPagedElsewhereIsJoinedUnderItsKeyNotPagedAgain) {
  host_.elsewhere = IncidentHost::PagedElsewhere{"1796000000000017",
                                                 "incident 1796000000000017 "
                                                 "of the job, paged through etcd by node a"};
  host_.survivors = {102};  // its preempt will fail, which pages again (D6)
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 0u);
  EXPECT_EQ(runbook_->delivered_key(), "1796000000000017");
  EXPECT_TRUE(
      host_.said("not paged again: joins the page of incident 1796000000000017 of the "
                 "job, paged through etcd by node a (dedup key 1796000000000017)"));
  EXPECT_TRUE(row(1).delivered_at_ns.has_value()) << "recorded as paged";
  EXPECT_NE(row(1).page_result.find("joins the page of"), std::string::npos);
  EXPECT_EQ(ledger_.count("note"), 1);
  host_.elsewhere.reset();
  clock_.advance(61 * kSec);
  turn(detect::State::kStalled);
  turn(detect::State::kStalled);
  settle();
  ASSERT_EQ(receiver_.pages(), 1u) << "the escalation";
  EXPECT_NE(receiver_.bodies[0].find("\"incident_id\":\"1796000000000017\""), std::string::npos)
      << receiver_.bodies[0];
}

TEST_F(IncidentTest, ADeliveredPageIsNotSentAgainByTheNextWatcher) {
  turn(detect::State::kStalled);
  settle();
  make();
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u);
  EXPECT_TRUE(host_.said("already paged"));
}

// ---- D4: a ledger that cannot be written never silences a page ----

TEST_F(IncidentTest, ALedgerThatFailsStillPagesAndRecordsOnceItHeals) {
  ledger_.failing = true;
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u) << "paged from memory";
  EXPECT_GT(host_.ledger_failures, 0);
  EXPECT_TRUE(ledger_.rows.empty());
  EXPECT_EQ(runbook_->id(), 0);
  turn(detect::State::kStalled);
  settle();
  EXPECT_EQ(receiver_.pages(), 1u) << "still once";
  ledger_.failing = false;
  turn(detect::State::kStalled);
  ASSERT_EQ(ledger_.rows.size(), 1u);
  const auto& r = row(1);
  EXPECT_TRUE(r.delivered_at_ns.has_value()) << "the page sent from memory is recorded";
  EXPECT_NE(r.page_result.find("sent after 1 attempt"), std::string::npos) << r.page_result;
  settle();
  EXPECT_EQ(receiver_.pages(), 1u) << "recording it did not page again";
}

TEST_F(IncidentTest, ALedgerThatFailsDoesNotStopThePreempt) {
  ledger_.failing = true;
  turn(detect::State::kDead);
  turn(detect::State::kDead);
  EXPECT_EQ(host_.acts, 1);
}

// ---- D6: a preempt that leaves survivors does not close the incident ----

TEST_F(IncidentTest, APreemptWithSurvivorsKeepsItOpenAndPagesAgainNamingThem) {
  host_.survivors = {102};
  turn(detect::State::kDead);
  turn(detect::State::kDead);
  settle();
  EXPECT_EQ(host_.acts, 1);
  EXPECT_TRUE(runbook_->is_open());
  EXPECT_FALSE(row(1).closed_at_ns.has_value());
  ASSERT_EQ(receiver_.pages(), 2u) << "the page and the escalation";
  // The two deliveries run side by side: either may arrive first.
  const std::string& escalation =
      receiver_.bodies[receiver_.bodies[0].find("preempt failed") != std::string::npos ? 0 : 1];
  EXPECT_NE(escalation.find("preempt failed"), std::string::npos) << escalation;
  EXPECT_NE(escalation.find("survivor: pid 102 (rank 1)"), std::string::npos) << escalation;
  EXPECT_NE(escalation.find("EPERM"), std::string::npos) << escalation;
  EXPECT_EQ(runbook_->ended_pids(), (std::set<int>{101})) << "only the gone are the host's";
  for (int i = 0; i < 3; ++i) turn(detect::State::kDead);
  settle();
  EXPECT_EQ(host_.acts, 1) << "never preempted twice";
  EXPECT_EQ(receiver_.pages(), 2u);
  turn(detect::State::kHealthy);
  EXPECT_FALSE(runbook_->is_open());
}

TEST_F(IncidentTest, ClosingWhileThePreemptRunsNeverWaitsAndClosesOnceItsReportIsIn) {
  std::promise<void> finish;
  host_.gate = finish.get_future().share();
  turn(detect::State::kDead);
  turn(detect::State::kDead);  // the preempt starts and runs on
  ASSERT_TRUE(runbook_->acting());
  runbook_->close(clock_.now(), "beacons vanished");  // returns at once
  runbook_->reap(clock_.now());
  EXPECT_TRUE(runbook_->acting()) << "still under way: nothing recorded yet";
  EXPECT_EQ(ledger_.count("preempt"), 0);
  finish.set_value();
  for (int i = 0; i < 500 && runbook_->acting(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    runbook_->reap(clock_.now());
  }
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(ledger_.count("preempt"), 1) << "its report is recorded";
  EXPECT_EQ(row(1).resolution, "beacons vanished") << "the close the host asked for";
}

// ---- D8: an incident of an earlier run is closed, not joined ----

TEST_F(IncidentTest, AnOpenIncidentOfAnEarlierIncarnationIsClosedAndTheNewStallPaged) {
  turn(detect::State::kStalled);
  settle();
  make(/*incarnation=*/2);
  turn(detect::State::kDead);
  settle();
  EXPECT_TRUE(row(1).closed_at_ns.has_value());
  EXPECT_NE(row(1).resolution.find("no longer observed"), std::string::npos);
  ASSERT_EQ(ledger_.rows.size(), 2u);
  EXPECT_EQ(*runbook_->id(), 2);
  EXPECT_EQ(receiver_.pages(), 2u);
}

TEST_F(IncidentTest, AnIncidentOpenedBeforeTheRunBeganIsOfAnotherRun) {
  turn(detect::State::kStalled);
  settle();
  runbook_.reset();
  clock_.advance(3600 * kSec);
  runbook_.emplace(IncidentScope{"llm", 1, clock_.now().wall_ns - kSec}, policy_, ledger_, host_,
                   *deliveries_);
  turn(detect::State::kDead);
  settle();
  EXPECT_TRUE(row(1).closed_at_ns.has_value());
  EXPECT_EQ(receiver_.pages(), 2u);
}

// ---- D10: deliveries never hold up a turn ----

TEST_F(IncidentTest, ClosingWhileThePageIsInFlightReturnsAtOnceAndRecordsItLater) {
  receiver_.hold = true;
  turn(detect::State::kStalled);
  turn(detect::State::kHealthy);  // closes while the webhook has not answered
  EXPECT_FALSE(runbook_->is_open());
  EXPECT_EQ(deliveries_->in_flight(), 1u);
  deliveries_->reap(clock_.now());
  EXPECT_EQ(deliveries_->in_flight(), 1u) << "reap never waits";
  receiver_.release();
  settle();
  EXPECT_EQ(deliveries_->in_flight(), 0u);
  EXPECT_TRUE(row(1).delivered_at_ns.has_value());
  EXPECT_EQ(row(1).resolution, "recovered");
}

}  // namespace
}  // namespace stepwatch::runbook
