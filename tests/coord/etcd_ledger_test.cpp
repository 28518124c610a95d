// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The job's incident in a real etcd: opened once whoever races, every write fenced by the
// leader's node key, acks from any node, closes moved aside and kept.
#include "src/coord/etcd_ledger.h"

#include <gtest/gtest.h>

#include <thread>

#include "src/coord/etcd_client.h"
#include "tests/support/etcd_server.h"

namespace stepwatch::coord {
namespace {

struct Leader {
  std::string key;
  int64_t rev = 0;
};

class EtcdLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = std::make_unique<test::EtcdServer>();
    client_ = std::make_unique<EtcdClient>(EtcdOptions{{etcd_->endpoint()}, "", kNsPerSec});
  }
  LedgerKeys keys(const std::string& node) const {
    return {
        "/sw/jobs/j/incident", "/sw/jobs/j/incidents/", "/sw/jobs/j/nodes/" + node, node,
        "/sw/jobs/j/nodes/",   "/sw/jobs/j/roster",     "/sw/jobs/j/set_aside/",    "/sw/epoch"};
  }
  // A node key under a lease, as a node's summary is: its create revision is the fence.
  Leader join(const std::string& node, int64_t lease = 0) {
    if (lease == 0) {
      auto l = client_->grant(60);
      EXPECT_TRUE(l.ok()) << l.error().message;
      lease = l.ok() ? l->id : 0;
    }
    auto rev = client_->put("/sw/jobs/j/nodes/" + node, "{}", lease);
    EXPECT_TRUE(rev.ok()) << rev.error().message;
    return {"/sw/jobs/j/nodes/" + node, rev.ok() ? *rev : 0};
  }
  static store::NewIncident stall() {
    store::NewIncident n;
    n.job = "j";
    n.at_ns = 1'000;
    n.state = "stalled";
    n.cause = "collective";
    n.summary = "stalled/collective: culprit rank 1 on b";
    n.verdict_json = "{}";
    return n;
  }

  std::unique_ptr<test::EtcdServer> etcd_;
  std::unique_ptr<EtcdClient> client_;
  BadRecords fresh_bad_;
};

TEST_F(EtcdLedgerTest, OpensOnceRecordsThePageAndClosesAside) {
  Leader a = join("a");
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto none = ledger.open_for("j");
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->has_value());
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  EXPECT_TRUE(ref->created);
  auto again = ledger.open(stall());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->id, ref->id);

  auto claim = ledger.claim_page(ref->id, 2'000);
  ASSERT_TRUE(claim.ok()) << claim.error().message;
  EXPECT_TRUE(*claim);
  auto second = ledger.claim_page(ref->id, 3'000);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);  // the right to page is given once
  auto got = ledger.get(ref->id);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_TRUE((*got)->page_undelivered());
  ASSERT_TRUE(ledger.record_delivery(ref->id, 2'500, "webhook 200", true).ok());
  store::Action act;
  act.incident_id = ref->id;
  act.job = "j";
  act.kind = "page";
  act.detail = "webhook 200";
  ASSERT_TRUE(ledger.record_action(act).ok());
  got = ledger.get(ref->id);
  EXPECT_FALSE((*got)->page_undelivered());
  EXPECT_EQ((*got)->page_result, "webhook 200");
  EXPECT_EQ((*got)->summary, "stalled/collective: culprit rank 1 on b");

  ASSERT_TRUE(ledger.close(ref->id, 9'000, "recovered").ok());
  ASSERT_TRUE(ledger.close(ref->id, 9'500, "later").ok());  // the first resolution stays
  none = ledger.open_for("j");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  got = ledger.get(ref->id);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->resolution, "recovered");
  EXPECT_EQ((*got)->closed_at_ns, 9'000);
  auto listed = incidents_in_etcd(*client_, keys("a"), "j", 10);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().id, ref->id);

  auto next = ledger.open(stall());  // a new incident after the close: a new id
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->created);
  EXPECT_GT(next->id, ref->id);
}

TEST_F(EtcdLedgerTest, RacingLeadersOpenOneIncident) {
  Leader a = join("a");
  std::vector<std::thread> threads;
  std::vector<int> created(3, -1);
  std::vector<int64_t> ids(3, 0);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      EtcdClient c(EtcdOptions{{etcd_->endpoint()}, "", kNsPerSec});
      EtcdLedger l(c, "j", keys("a"), [&] { return a.rev; });
      auto r = l.open(stall());
      if (r) {
        created[i] = r->created;
        ids[i] = r->id;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created[0] + created[1] + created[2], 1);
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_EQ(ids[1], ids[2]);
}

// E7: incident ids survive an etcd that lost its data. Revisions restart with the data; ids do
// not, whether the opener remembers the old ids (the same agent) or not (one restarted with it).
TEST_F(EtcdLedgerTest, IdsNeverRepeatAfterEtcdLostItsData) {
  Leader a = join("a");
  auto at = [](int64_t s) {
    store::NewIncident n = stall();
    n.at_ns = s * kNsPerSec;
    return n;
  };
  const int64_t t0 = 1'800'000'000;  // seconds, a wall-clock time
  int64_t first_id = 0;
  int64_t first_rev = 0;
  {
    EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
    auto ref = ledger.open(at(t0));
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    first_id = ref->id;
    auto kv = client_->range("/sw/jobs/j/incident");
    ASSERT_TRUE(kv.ok() && kv->kvs.size() == 1u);
    first_rev = kv->kvs[0].create_revision;
    EXPECT_EQ(first_id, incident_id(first_rev, t0 * 1000)) << "epoch: the first open's time";
    auto got = ledger.get(first_id);
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ((*got)->id, first_id);
    ASSERT_TRUE(ledger.close(first_id, 9'000, "recovered").ok());
    auto closed = ledger.get(first_id);
    ASSERT_TRUE(closed.ok() && closed->has_value()) << "found under its id once closed";
  }

  // The same ledger (its agent lived through the loss), at the same second: past what it saw.
  EtcdLedger survivor(*client_, "j", keys("a"), [&] { return a.rev; });
  auto before = survivor.open(at(t0));
  ASSERT_TRUE(before.ok()) << before.error().message;
  ASSERT_TRUE(survivor.close(before->id, 9'000, "recovered").ok());
  etcd_->wipe();
  a = join("a");
  ASSERT_LE(a.rev, first_rev) << "etcd's revisions restarted: the case under test";
  auto after = survivor.open(at(t0));
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_GT(after->id, before->id) << "no id seen before the loss comes back";
  ASSERT_TRUE(survivor.close(after->id, 9'000, "recovered").ok());

  // A new ledger (an agent restarted with etcd), a second later: the clock moves the epoch on.
  etcd_->wipe();
  a = join("a");
  EtcdLedger fresh(*client_, "j", keys("a"), [&] { return a.rev; });
  auto later = fresh.open(at(t0 + 1));
  ASSERT_TRUE(later.ok()) << later.error().message;
  EXPECT_GT(later->id, after->id);
  EXPECT_GT(later->id, first_id);
  auto open = open_incident(*client_, keys("a"), fresh_bad_);
  ASSERT_TRUE(open.ok() && open->has_value());
  EXPECT_EQ((*open)->id, later->id) << "an order checks the same id";
  auto kv = client_->range("/sw/jobs/j/incident");
  ASSERT_TRUE(kv.ok() && kv->kvs.size() == 1u);
  auto id = incident_id_of(kv->kvs[0]);
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(*id, later->id) << "and so does a launcher";
  EXPECT_LT(later->id, int64_t{1} << 53) << "exact in every JSON reader";
}

// A record written before epochs keeps its id, its create revision, through every write.
TEST_F(EtcdLedgerTest, ARecordFromBeforeEpochsKeepsItsRevisionAsItsId) {
  Leader a = join("a");
  const std::string old =
      R"({"job":"j","incarnation":0,"opened_at_ns":1,"state":"stalled","cause":"io",)"
      R"("summary":"s","page_result":"","opened_by":"a","actions":[]})";
  auto put = client_->put("/sw/jobs/j/incident", old);
  ASSERT_TRUE(put.ok());
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto joined = ledger.open(stall());
  ASSERT_TRUE(joined.ok()) << joined.error().message;
  EXPECT_FALSE(joined->created);
  EXPECT_EQ(joined->id, *put);
  ASSERT_TRUE(ledger.claim_page(*put, 2'000).ok());
  auto acked = ack_in_etcd(*client_, keys("b"), "j", 3'000, "alice", "");
  ASSERT_TRUE(acked.ok() && acked->has_value());
  EXPECT_EQ((*acked)->id, *put);
  auto got = ledger.get(*put);
  ASSERT_TRUE(got.ok() && got->has_value()) << "still found by the same id after two writes";
}

// An epoch record that does not read (a forgery, a bad write) is replaced, said once; ids go on.
TEST_F(EtcdLedgerTest, AnEpochThatDoesNotReadIsReplaced) {
  Leader a = join("a");
  for (const std::string bad : {R"({"epoch":"soon"})", R"({"epoch":-5})", "[[[", R"({})",
                                R"({"epoch":99999999999999999})"}) {
    SCOPED_TRACE(bad);
    ASSERT_TRUE(client_->put("/sw/epoch", bad).ok());
    EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
    store::NewIncident n = stall();
    n.at_ns = 1'800'000'000 * kNsPerSec;
    auto ref = ledger.open(n);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    EXPECT_GE(ref->id, 1'800'000'000'000 * kEpochScale);
    auto e = client_->range("/sw/epoch");
    ASSERT_TRUE(e.ok() && e->kvs.size() == 1u);
    EXPECT_NE(e->kvs[0].value, bad);
    ASSERT_TRUE(ledger.close(ref->id, 9'000, "recovered").ok());
  }
}

// E4: a record no node of the job opened (a plain put, acked, to mute a stall) is not joined:
// the leader sets it aside and opens the job's own incident, which is paged.
TEST_F(EtcdLedgerTest, ARecordNoNodeOfTheJobOpenedIsSetAsideNotJoined) {
  Leader a = join("a");
  const std::string forged =
      R"({"job":"j","incarnation":0,"opened_at_ns":1,"state":"stalled","cause":"io",)"
      R"("summary":"forged","page_result":"sent","acked_by":"mallory","opened_by":"n1",)"
      R"("actions":[],"paged_at_ns":1,"delivered_at_ns":1,"acked_at_ns":1})";
  auto put = client_->put("/sw/jobs/j/incident", forged);
  ASSERT_TRUE(put.ok());
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto joined = ledger.open_for("j");
  ASSERT_TRUE(joined.ok()) << joined.error().message;
  EXPECT_FALSE(joined->has_value()) << "n1 holds no lease and is in no roster of the job";
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  EXPECT_TRUE(ref->created) << "the job's own incident, not the forged one";
  EXPECT_NE(ref->id, *put);
  auto claimed = ledger.claim_page(ref->id, 2'000);
  ASSERT_TRUE(claimed.ok()) << claimed.error().message;
  EXPECT_TRUE(*claimed) << "its page is this incident's own, never delivered";
  auto aside = client_->range("/sw/jobs/j/set_aside/", {true});
  ASSERT_TRUE(aside.ok());
  ASSERT_EQ(aside->kvs.size(), 1u) << "kept, for whoever looks into it";
  EXPECT_EQ(aside->kvs[0].value, forged);
}

// E15: a record at the job's incident key that does not read is no incident: passed over (the
// job has none open), set aside when the job's own opens, which is then listed and acked as any.
TEST_F(EtcdLedgerTest, AnUnreadableRecordIsSetAsideAndTheJobsOwnIncidentIsListedAndAckable) {
  Leader a = join("a");
  const std::string junk = R"({"state": 7, "id": "x", "page": [1, 2], "ack": {"by": 3}})";
  ASSERT_TRUE(client_->put("/sw/jobs/j/incident", junk).ok());
  ASSERT_TRUE(client_->put("/sw/jobs/j/incident", "{\"job\": 3}").ok());  // and then another
  ASSERT_TRUE(client_->put("/sw/jobs/j/incident", junk).ok());
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto none = ledger.open_for("j");
  ASSERT_TRUE(none.ok()) << none.error().message << ": an unreadable record is not an error";
  EXPECT_FALSE(none->has_value());
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  EXPECT_TRUE(ref->created);
  auto aside = client_->range("/sw/jobs/j/set_aside/", {true});
  ASSERT_TRUE(aside.ok());
  ASSERT_EQ(aside->kvs.size(), 1u);
  EXPECT_EQ(aside->kvs[0].value, junk) << "kept as it was";
  auto listed = incidents_in_etcd(*client_, keys("a"), "j", 10);
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().id, ref->id);
  auto acked = ack_in_etcd(*client_, keys("b"), "j", 5'000, "alice", "");
  ASSERT_TRUE(acked.ok()) << acked.error().message;
  ASSERT_TRUE(acked->has_value());
  EXPECT_EQ((*acked)->id, ref->id);
  auto got = ledger.get(ref->id);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->acked_by, "alice");
}

// E15 mid-incident: junk written over the job's open incident after its page (put over it, or
// the key deleted and made again). The leader's next read sets it aside and restores the incident
// as it last read it, under its own id: listed, ackable on any node, its delivery kept, the
// orders written for it still proven. A node that does not lead restores nothing.
TEST_F(EtcdLedgerTest, JunkOverTheOpenIncidentIsSetAsideAndTheIncidentRestoredUnderItsId) {
  Leader a = join("a");
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  ASSERT_TRUE(ledger.claim_page(ref->id, 2'000).ok());
  ASSERT_TRUE(ledger.record_delivery(ref->id, 2'100, "sent after 1 attempt(s)", true).ok());
  auto opened = open_incident(*client_, keys("b"), fresh_bad_);
  ASSERT_TRUE(opened.ok() && opened->has_value());
  const int64_t opened_at = (*opened)->create_revision;

  const std::string junk = R"({"state": 7, "page": [1, 2]})";
  for (bool recreate : {false, true}) {
    SCOPED_TRACE(recreate ? "deleted and made again" : "put over it");
    if (recreate) {
      ASSERT_TRUE(client_->del("/sw/jobs/j/incident").ok());
    }
    ASSERT_TRUE(client_->put("/sw/jobs/j/incident", junk).ok());
    auto hidden = incidents_in_etcd(*client_, keys("b"), "j", 10);
    ASSERT_TRUE(hidden.ok());
    EXPECT_TRUE(hidden->empty()) << "until the leader reads it";
    EtcdLedger follower(*client_, "j", keys("b"), [] { return int64_t{0}; });
    auto not_led = follower.get(ref->id);
    ASSERT_TRUE(not_led.ok()) << not_led.error().message;
    EXPECT_FALSE(not_led->has_value()) << "a follower restores nothing";

    auto got = ledger.get(ref->id);  // the leader's read: restored
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ((*got)->id, ref->id);
    EXPECT_TRUE((*got)->delivered_at_ns.has_value()) << "its delivery kept";
    auto listed = incidents_in_etcd(*client_, keys("b"), "j", 10);
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ(listed->front().id, ref->id);
    auto open = open_incident(*client_, keys("b"), fresh_bad_);
    ASSERT_TRUE(open.ok() && open->has_value());
    EXPECT_EQ((*open)->id, ref->id);
    EXPECT_EQ((*open)->create_revision, opened_at) << "an order written after it opened proves";
    EXPECT_TRUE((*open)->delivered);
  }
  auto aside = client_->range("/sw/jobs/j/set_aside/", {true});
  ASSERT_TRUE(aside.ok());
  ASSERT_EQ(aside->kvs.size(), 2u);
  for (const auto& kv : aside->kvs) EXPECT_EQ(kv.value, junk) << "kept as it was";
  auto acked = ack_in_etcd(*client_, keys("b"), "j", 5'000, "alice", "");
  ASSERT_TRUE(acked.ok()) << acked.error().message;
  ASSERT_TRUE(acked->has_value());
  EXPECT_EQ((*acked)->id, ref->id);
  ASSERT_TRUE(ledger.close(ref->id, 6'000, "recovered").ok());
  auto closed = ledger.get(ref->id);
  ASSERT_TRUE(closed.ok() && closed->has_value());
  EXPECT_EQ((*closed)->acked_by, "alice");
  EXPECT_FALSE((*closed)->is_open());
  // Closed: junk at the key now is the next incident's business, not restored.
  ASSERT_TRUE(client_->put("/sw/jobs/j/incident", junk).ok());
  auto after = ledger.get(ref->id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(client_->range("/sw/jobs/j/incident")->kvs[0].value, junk);
}

// The open incident's key deleted (not closed): the leader's next read writes it back under its
// id. Not once it was closed, and not in an etcd that lost its data (no epoch, or another): there
// the stall opens again under a new id.
TEST_F(EtcdLedgerTest, ADeletedOpenIncidentIsWrittenBackButNotAfterEtcdLostItsData) {
  Leader a = join("a");
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  ASSERT_TRUE(ledger.claim_page(ref->id, 2'000).ok());
  ASSERT_TRUE(client_->del("/sw/jobs/j/incident").ok());
  EtcdLedger follower(*client_, "j", keys("b"), [] { return int64_t{0}; });
  ASSERT_TRUE(follower.get(ref->id).ok());
  EXPECT_TRUE(client_->range("/sw/jobs/j/incident")->kvs.empty()) << "a follower writes nothing";
  auto got = ledger.get(ref->id);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->id, ref->id);
  EXPECT_EQ((*got)->page_result, "claimed");
  auto listed = incidents_in_etcd(*client_, keys("b"), "j", 10);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().id, ref->id);

  // etcd loses its data (the epoch with it): nothing is written back.
  ASSERT_TRUE(client_->del("/sw/jobs/j/incident").ok());
  ASSERT_TRUE(client_->del("/sw/epoch").ok());
  auto gone = ledger.get(ref->id);
  ASSERT_TRUE(gone.ok()) << gone.error().message;
  EXPECT_FALSE(gone->has_value());
  EXPECT_TRUE(client_->range("/sw/jobs/j/incident")->kvs.empty());
}

// A record that reads, under the open incident's own id, but opened by no node of the job (the
// record copied, its opener changed): not joined (whether a node of the job opened it is asked
// of each opener), set aside and the incident restored, once.
TEST_F(EtcdLedgerTest, AForgedRecordUnderTheIncidentsIdIsSetAsideAndTheIncidentRestoredOnce) {
  Leader a = join("a");
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  ASSERT_TRUE(ledger.claim_page(ref->id, 2'000).ok());  // read, and written with its id
  auto kv = client_->range("/sw/jobs/j/incident");
  ASSERT_TRUE(kv.ok() && !kv->kvs.empty());
  std::string forged = kv->kvs[0].value;
  const std::string by = "\"opened_by\":\"a\"";
  ASSERT_NE(forged.find(by), std::string::npos) << forged;
  forged.replace(forged.find(by), by.size(), "\"opened_by\":\"evil\"");
  ASSERT_TRUE(client_->put("/sw/jobs/j/incident", forged).ok());
  auto got = ledger.get(ref->id);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_TRUE(got->has_value());
  EXPECT_NE(client_->range("/sw/jobs/j/incident")->kvs[0].value.find(by), std::string::npos);
  auto aside = client_->range("/sw/jobs/j/set_aside/", {true});
  ASSERT_TRUE(aside.ok());
  ASSERT_EQ(aside->kvs.size(), 1u);
  EXPECT_EQ(aside->kvs[0].value, forged);

  // Restored once: the next reads find it as written and write nothing.
  const int64_t restored_at = client_->range("/sw/jobs/j/incident")->kvs[0].mod_revision;
  for (int i = 0; i < 2; ++i) {
    auto again = ledger.get(ref->id);
    ASSERT_TRUE(again.ok() && again->has_value());
  }
  EXPECT_EQ(client_->range("/sw/jobs/j/incident")->kvs[0].mod_revision, restored_at);
}

// A record's id it carries must be of its epoch and no later than its revision: any other does
// not read (forged to collide with another incident's).
TEST_F(EtcdLedgerTest, AnIdARecordCarriesMustBeItsOwn) {
  Leader a = join("a");
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  auto kv = client_->range("/sw/jobs/j/incident");
  ASSERT_TRUE(kv.ok() && !kv->kvs.empty());
  std::string forged = kv->kvs[0].value;
  forged.insert(1, fmt::format("\"id\": {},", ref->id + 1000));
  ASSERT_TRUE(client_->put("/sw/jobs/j/incident", forged).ok());
  auto id = incident_id_of(client_->range("/sw/jobs/j/incident")->kvs[0]);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.error().message.find("field \"id\""), std::string::npos) << id.error().message;
}

// E14: a page's delivery is what its node sent: recorded by that node once etcd answers, even
// though it no longer leads; every other write stays the leader's.
TEST_F(EtcdLedgerTest, ADeliveryIsRecordedByTheNodeThatSentItEvenOnceItNoLongerLeads) {
  Leader a = join("a");
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  ASSERT_TRUE(*ledger.claim_page(ref->id, 1'000));
  EtcdLedger lapsed(*client_, "j", keys("a"), [] { return int64_t{0}; });  // leads no more
  ASSERT_TRUE(lapsed.record_delivery(ref->id, 2'000, "webhook: sent", true).ok());
  store::Action page;
  page.job = "j";
  page.incident_id = ref->id;
  page.at_ns = 2'000;
  page.kind = std::string(store::action_kind::kPage);
  page.ok = true;
  page.detail = "webhook: sent";
  ASSERT_TRUE(lapsed.record_action(page).ok());
  store::Action preempt = page;
  preempt.kind = std::string(store::action_kind::kPreempt);
  EXPECT_FALSE(lapsed.record_action(preempt).ok()) << "the leader's alone";
  EXPECT_FALSE(lapsed.claim_page(ref->id, 3'000).ok());
  EXPECT_FALSE(lapsed.close(ref->id, 3'000, "x").ok());
  auto got = ledger.get(ref->id);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->delivered_at_ns, 2'000);
  EXPECT_EQ((*got)->page_result, "webhook: sent");
  EXPECT_FALSE((*got)->page_undelivered());
}

TEST_F(EtcdLedgerTest, ALeaderWhoseKeyLapsedCannotWrite) {
  auto lease = client_->grant(1);
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  Leader a = join("a", lease->id);
  // The leader's roster of this run names a: its incident is still the job's once a is gone.
  ASSERT_TRUE(
      client_->put("/sw/jobs/j/roster", R"({"incarnation":0,"nodes":{"a":[0],"b":[1]}})").ok());
  EtcdLedger old(*client_, "j", keys("a"), [&] { return a.rev; });
  auto ref = old.open(stall());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // its lease expires
  Leader b = join("b");
  EtcdLedger next(*client_, "j", keys("b"), [&] { return b.rev; });

  auto claim = old.claim_page(ref->id, 2'000);
  ASSERT_FALSE(claim.ok());
  EXPECT_NE(claim.error().message.find("fence"), std::string::npos) << claim.error().message;
  EXPECT_FALSE(old.close(ref->id, 3'000, "late").ok());
  EXPECT_FALSE(old.update(ref->id, stall()).ok());

  auto taken = next.claim_page(ref->id, 4'000);  // the new leader goes on with it
  ASSERT_TRUE(taken.ok()) << taken.error().message;
  EXPECT_TRUE(*taken);
  auto got = next.get(ref->id);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_TRUE((*got)->is_open());

  // A node that does not lead (fence 0) is refused before it asks.
  EtcdLedger none(*client_, "j", keys("c"), [] { return int64_t{0}; });
  auto refused = none.open(stall());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("does not lead"), std::string::npos);
}

TEST_F(EtcdLedgerTest, AnyNodeAcksAndTheFirstAckStays) {
  Leader a = join("a");
  EtcdLedger ledger(*client_, "j", keys("a"), [&] { return a.rev; });
  auto none = ack_in_etcd(*client_, keys("b"), "j", 1, "bob", "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());  // nothing open
  auto ref = ledger.open(stall());
  ASSERT_TRUE(ref.ok());
  auto acked = ack_in_etcd(*client_, keys("b"), "j", 5'000, "alice", "looking");
  ASSERT_TRUE(acked.ok()) << acked.error().message;
  ASSERT_TRUE(acked->has_value());
  EXPECT_EQ((*acked)->id, ref->id);
  auto again = ack_in_etcd(*client_, keys("c"), "j", 6'000, "bob", "");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->acked_by, "alice");
  // The leader's next write keeps the ack (its compare on MOD re-reads the record).
  ASSERT_TRUE(ledger.update(ref->id, stall()).ok());
  auto got = ledger.get(ref->id);
  EXPECT_EQ((*got)->acked_by, "alice");
  EXPECT_EQ((*got)->acked_at_ns, 5'000);
}

}  // namespace
}  // namespace stepwatch::coord
