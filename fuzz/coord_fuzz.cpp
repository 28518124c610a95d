// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: every reader of a coordination record in etcd (docs/multinode.md, "etcd
// content is input, not authority"). Byte 0 picks the key the value is put at, in an in-memory
// store (tests/fakes/memory_kv.h); the rest is the value, as anyone who may write under the
// prefix could put it. Properties: nothing crashes or throws, however deep or large; a value
// that does not read is skipped and counted (never an error of the call: the store answers);
// an accepted node summary is the node its key names, within the bounds, and writes back to a
// summary that reads the same; an accepted order, report, roster or view holds what its key
// says; whatever the epoch record holds, an incident opens under an id below 2^53; whatever sits
// at the job's incident key, the leader's read of it is no error (one that does not read is no
// incident: E15), and one written over the job's open incident is set aside and that incident
// restored under its id; an accepted checkpoint record names a valid checkpoint id and a step
// >= 0, and writes back to one that reads the same.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/require.h"
#include "src/contract/names.h"
#include "src/coord/etcd_ledger.h"
#include "src/coord/incarnation.h"
#include "src/coord/orders.h"
#include "src/coord/records.h"
#include "src/coord/summary.h"
#include "tests/fakes/memory_kv.h"

namespace {

using namespace stepwatch;
using namespace stepwatch::coord;

const std::string kBase = "/sw/jobs/j/";

void summary(const KeyValue& kv) {
  auto s = summary_from_json(kv.value, kv.key);
  if (!s) {
    FUZZ_REQUIRE(s.error().code != Errc::kOk);
    FUZZ_REQUIRE(s.error().message.starts_with(kv.key + ": "));
    return;
  }
  FUZZ_REQUIRE(kv.value.size() <= kMaxSummaryBytes);
  FUZZ_REQUIRE(s->observation.ranks.size() <= kMaxSummaryRanks);
  FUZZ_REQUIRE(!s->node.empty());
  auto back = summary_from_json(summary_to_json(*s), kv.key);
  FUZZ_REQUIRE(back.ok());
  FUZZ_REQUIRE(summary_to_json(*back) == summary_to_json(*s));
}

// Node b's key under a lease, as a leader's: its fence.
int64_t b_leads(Kv& store) {
  auto lease = store.grant(60);
  FUZZ_REQUIRE(lease.ok());
  auto f = store.put(kBase + "nodes/b", "{}", lease->id);
  FUZZ_REQUIRE(f.ok());
  return *f;
}

store::NewIncident a_stall() {
  store::NewIncident n;
  n.job = "j";
  n.at_ns = int64_t{1'800'000'000} * kNsPerSec;
  n.state = "stalled";
  n.cause = "io";
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int pick = data[0] % 11;
  std::string value(reinterpret_cast<const char*>(data) + 1, size - 1);
  ManualClock clock;
  test::MemoryKv kv(clock);
  Kv& store = kv;
  BadRecords bad;
  JobOrders orders(store, bad, kBase, "b", kBase + "nodes/b");
  const char* keys[] = {"nodes/a",
                        "orders/00000000000000000007",
                        "done/00000000000000000007/a",
                        "roster",
                        "view",
                        "incarnation",
                        "launchers/a",
                        "incident",
                        "epoch",
                        "checkpoint",
                        "incident"};
  const std::string key = pick == 8 ? std::string("/sw/epoch") : kBase + keys[pick];
  // 10: the value is written over the job's open incident, which a leader opened and read.
  LedgerKeys lk{kBase + "incident", kBase + "incidents/", kBase + "nodes/b",    "b",
                kBase + "nodes/",   kBase + "roster",     kBase + "set_aside/", "/sw/epoch"};
  int64_t fence = 0;
  EtcdLedger leader(store, "j", lk, [&] { return fence; });
  int64_t opened = 0;
  if (pick == 10) {
    fence = b_leads(store);
    auto ref = leader.open(a_stall());
    FUZZ_REQUIRE(ref.ok() && ref->created);
    opened = ref->id;
    FUZZ_REQUIRE(leader.claim_page(opened, a_stall().at_ns).ok());
  }
  FUZZ_REQUIRE(store.put(key, value, 0).ok());
  auto got = store.range(key);
  FUZZ_REQUIRE(got.ok() && got->kvs.size() == 1);
  const KeyValue& rec = got->kvs[0];
  switch (pick) {
    case 0:
      summary(rec);
      break;
    case 1: {
      auto all = orders.orders();
      FUZZ_REQUIRE(all.ok());  // a bad value is skipped, never an error of the listing
      FUZZ_REQUIRE(all->size() + bad.total() == 1);
      break;
    }
    case 2: {
      auto all = orders.reports(7);
      FUZZ_REQUIRE(all.ok());
      FUZZ_REQUIRE(all->size() + bad.total() == 1);
      if (!all->empty()) FUZZ_REQUIRE(all->front().node == "a");  // its key's node
      break;
    }
    case 3: {
      auto r = orders.roster();
      FUZZ_REQUIRE(r.ok());
      FUZZ_REQUIRE(r->has_value() != (bad.total() == 1));
      break;
    }
    case 4: {
      auto v = orders.view();
      FUZZ_REQUIRE(v.ok());
      FUZZ_REQUIRE((*v != nullptr) != (bad.total() == 1));
      break;
    }
    case 5: {
      auto i = incarnation_from_json(rec.value, rec.key);
      if (i) FUZZ_REQUIRE(i->incarnation >= 0);
      break;
    }
    case 6: {
      auto l = launcher_from_json(rec.value, rec.key);
      (void)l;
      auto all = orders.launchers();
      FUZZ_REQUIRE(all.ok() && all->size() == 1);  // a bad record is still a launcher
      break;
    }
    case 7: {
      auto open = open_incident(store, lk, bad);
      FUZZ_REQUIRE(open.ok());
      FUZZ_REQUIRE(open->has_value() != (bad.total() == 1));
      auto id = incident_id_of(rec);  // a launcher's read of the same record
      if (open->has_value()) FUZZ_REQUIRE(id.ok() && *id == (*open)->id && *id >= 0);
      auto listed = incidents_in_etcd(store, lk, "j", 10);
      FUZZ_REQUIRE(listed.ok());
      FUZZ_REQUIRE(leader.open_for("j").ok());  // (fence 0: a node that does not lead)
      break;
    }
    case 9: {
      auto c = orders.checkpoint();
      FUZZ_REQUIRE(c.ok());
      FUZZ_REQUIRE(c->has_value() != (bad.total() == 1));
      if (c->has_value()) {
        FUZZ_REQUIRE(contract::validate_checkpoint_id((*c)->id).ok());
        FUZZ_REQUIRE((*c)->step >= 0);
        auto back = checkpoint_from_json(checkpoint_to_json(**c), rec.key);
        FUZZ_REQUIRE(back.ok() && checkpoint_to_json(*back) == checkpoint_to_json(**c));
      }
      break;
    }
    case 10: {  // whatever is written over it, the leader's read is no error; one that is no
                // incident of the job's is set aside and the incident restored under its id (E15)
      BadRecords written;
      FUZZ_REQUIRE(open_incident(store, lk, written).ok());
      auto got = leader.get(opened);
      FUZZ_REQUIRE(got.ok());
      auto open = open_incident(store, lk, bad);
      FUZZ_REQUIRE(open.ok());
      if (written.total() == 1) {  // it did not read: set aside, the incident back in its place
        FUZZ_REQUIRE(got->has_value() && (*got)->id == opened);
        FUZZ_REQUIRE(open->has_value() && (*open)->id == opened);
      }
      if (open->has_value()) FUZZ_REQUIRE((*open)->id > 0 && (*open)->id < (int64_t{1} << 53));
      break;
    }
    case 8: {  // the epoch record: whatever it holds, an incident opens with an id below 2^53
      fence = b_leads(store);
      auto ref = leader.open(a_stall());
      FUZZ_REQUIRE(ref.ok() && ref->created);
      FUZZ_REQUIRE(ref->id > 0 && ref->id < (int64_t{1} << 53));
      auto got = leader.get(ref->id);
      FUZZ_REQUIRE(got.ok() && got->has_value());
      break;
    }
  }
  return 0;
}
