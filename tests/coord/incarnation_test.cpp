// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The incarnation and launcher records: what the leader writes and the launchers read, parsed
// leniently (only "incarnation" is required) and never mistaken for incarnation 0.
#include "src/coord/incarnation.h"

#include <gtest/gtest.h>

namespace stepwatch::coord {
namespace {

TEST(IncarnationKeys, AreUnderTheJob) {
  EXPECT_EQ(incarnation_key("/sw", "j1"), "/sw/jobs/j1/incarnation");
  EXPECT_EQ(launchers_prefix("/sw", "j1"), "/sw/jobs/j1/launchers/");
  EXPECT_EQ(launcher_key("/sw", "j1", "gpu-17"), "/sw/jobs/j1/launchers/gpu-17");
  EXPECT_EQ(start_key("/sw", "j1"), "/sw/jobs/j1/start");
  EXPECT_EQ(checkpoint_key("/sw", "j1"), "/sw/jobs/j1/checkpoint");
}

// The newest checkpoint every rank committed: its id reaches every rank's environment, so a bad
// one (or a negative step, or none) is refused with the key and field named.
TEST(CheckpointRecord, RoundTripsAndRefusesABadIdOrStep) {
  CheckpointRecord c{"step_40", 40, 2, "gpu-1", 1'700'000'000'000'000'000};
  auto back = checkpoint_from_json(checkpoint_to_json(c), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->id, "step_40");
  EXPECT_EQ(back->step, 40);
  EXPECT_EQ(back->incarnation, 2);
  EXPECT_EQ(back->by, "gpu-1");
  EXPECT_EQ(back->at_ns, c.at_ns);
  auto minimal = checkpoint_from_json(R"({"id":"s1","step":1})", "k");
  ASSERT_TRUE(minimal.ok()) << minimal.error().message;
  EXPECT_EQ(minimal->incarnation, 0);
  for (const char* bad : {R"({"step":1})", R"({"id":"s1"})", R"({"id":"a\"b","step":1})",
                          R"({"id":"s1","step":-1})", R"({"id":7,"step":1})", "[]", "not json"}) {
    auto r = checkpoint_from_json(bad, "etcd key /sw/jobs/j1/checkpoint");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("etcd key /sw/jobs/j1/checkpoint"), std::string::npos)
        << r.error().message;
  }
  EXPECT_NE(checkpoint_from_json(R"({"id":"s1","step":-1})", "k").error().message.find("step"),
            std::string::npos);
  EXPECT_NE(checkpoint_from_json(R"({"id":"a\"b","step":1})", "k").error().message.find("id"),
            std::string::npos);
}

// The start barrier: the incarnation record says the launchers start at it, each launcher that
// it can and which incarnation it is ready for, and the start key which one the leader started.
// A record from before the barrier reads as no barrier (its launchers launch at once).
TEST(StartBarrier, TravelsInTheRecordsAndOlderOnesReadAsNone) {
  IncarnationRecord r;
  r.incarnation = 2;
  EXPECT_EQ(incarnation_to_json(r).find("barrier"), std::string::npos);
  r.barrier = true;
  r.nodes = {"a", "b"};
  auto back = incarnation_from_json(incarnation_to_json(r), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->barrier);
  EXPECT_EQ(back->nodes, (std::vector<std::string>{"a", "b"}));
  auto old = incarnation_from_json(R"({"incarnation": 2})", "k");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->barrier);
  auto bad = incarnation_from_json(R"({"incarnation": 2, "barrier": 1})", "k");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("\"barrier\" must be"), std::string::npos)
      << bad.error().message;

  LauncherRecord l;
  l.node = "b";
  l.barrier = true;
  l.ready = 2;
  auto lb = launcher_from_json(launcher_to_json(l), "k");
  ASSERT_TRUE(lb.ok()) << lb.error().message;
  EXPECT_TRUE(lb->barrier);
  EXPECT_EQ(lb->ready, 2);
  auto lold = launcher_from_json(R"({"node":"b","pid":7,"incarnation":1})", "k");
  ASSERT_TRUE(lold.ok());
  EXPECT_FALSE(lold->barrier);
  EXPECT_FALSE(lold->ready);

  StartRecord s{2, "a", 5, {"a", "b"}};
  auto sb = start_from_json(start_to_json(s), "k");
  ASSERT_TRUE(sb.ok()) << sb.error().message;
  EXPECT_EQ(sb->incarnation, 2);
  EXPECT_EQ(sb->by, "a");
  EXPECT_EQ(sb->at_ns, 5);
  EXPECT_EQ(sb->nodes, (std::vector<std::string>{"a", "b"}));
  auto none = start_from_json(R"({"by":"a"})", "etcd key /sw/jobs/j1/start");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("/sw/jobs/j1/start"), std::string::npos);
  EXPECT_NE(none.error().message.find("\"incarnation\" is missing"), std::string::npos)
      << none.error().message;
}

TEST(IncarnationRecord, RoundTrips) {
  IncarnationRecord r;
  r.incarnation = 3;
  r.resume_from = "step_20";
  r.resume_step = 20;
  r.incident = 41;
  r.by = "gpu-1";
  r.at_ns = 1'700'000'000'000'000'000;
  auto back = incarnation_from_json(incarnation_to_json(r), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->incarnation, 3);
  EXPECT_EQ(back->resume_from, "step_20");
  EXPECT_EQ(back->resume_step, 20);
  EXPECT_EQ(back->incident, 41);
  EXPECT_EQ(back->by, "gpu-1");
  EXPECT_EQ(back->at_ns, r.at_ns);
  EXPECT_FALSE(back->exit_code.has_value());
  EXPECT_EQ(back->hold_incident, 0);

  // A requeue by exit code and a restart-storm hold travel with it.
  r.scheduler = "slurm";
  r.exit_code = 75;
  r.hold_incident = 41;
  r.hold = "restart storm: 5 incarnations started in 12m00s";
  r.hold_resume_from = "step_30";
  r.hold_resume_step = 30;
  back = incarnation_from_json(incarnation_to_json(r), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->scheduler, "slurm");
  EXPECT_EQ(back->exit_code, 75);
  EXPECT_EQ(back->hold_incident, 41);
  EXPECT_EQ(back->hold, r.hold);
  EXPECT_EQ(back->hold_resume_from, "step_30");
  EXPECT_EQ(back->hold_resume_step, 30);
}

TEST(IncarnationRecord, OnlyIncarnationIsRequired) {
  auto r = incarnation_from_json(R"({"incarnation": 2, "later_field": [1, 2]})", "k");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->incarnation, 2);
  EXPECT_EQ(r->resume_from, "");
  auto null_resume = incarnation_from_json(R"({"incarnation": 1, "resume_from": null})", "k");
  ASSERT_TRUE(null_resume.ok());
  EXPECT_EQ(null_resume->resume_from, "");
}

TEST(IncarnationRecord, RefusesWhatIsNotOne) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {"{}", "\"incarnation\" is missing"},
      {R"({"incarnation": "2"})", "\"incarnation\" must be an integer"},
      {R"({"incarnation": 1.5})", "\"incarnation\" must be an integer"},
      {R"({"incarnation": -1})", "must be >= 0"},
      {R"({"incarnation": 1, "resume_from": 7})", "\"resume_from\" must be a string"},
      {R"({"incarnation": 1, "exit_code": 0})", "\"exit_code\" must be 1-255"},
      {R"({"incarnation": 1, "exit_code": 256})", "\"exit_code\" must be 1-255"},
      {R"({"incarnation": 1, "hold_incident": "7"})", "\"hold_incident\" must be an integer"},
      {R"({"incarnation": 1, "hold_resume_step": "7"})", "\"hold_resume_step\" must be an integer"},
  };
  for (const auto& c : cases) {
    auto r = incarnation_from_json(c.text, "etcd key /sw/jobs/j/incarnation");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("/sw/jobs/j/incarnation"), std::string::npos);
  }
}

LauncherRecord launcher(std::string node, int pid, int64_t incarnation, int64_t started_at_ns,
                        std::string scheduler = "", std::string job = "",
                        std::optional<int64_t> restarts = std::nullopt) {
  LauncherRecord r;
  r.node = std::move(node);
  r.pid = pid;
  r.incarnation = incarnation;
  r.started_at_ns = started_at_ns;
  r.scheduler = std::move(scheduler);
  r.scheduler_job = std::move(job);
  r.scheduler_restarts = restarts;
  return r;
}

TEST(LauncherRecord, RoundTrips) {
  LauncherRecord r = launcher("gpu-17", 4242, 5, 1'700'000'000'000'000'000);
  auto back = launcher_from_json(launcher_to_json(r), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->node, "gpu-17");
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->incarnation, 5);
  EXPECT_EQ(back->started_at_ns, r.started_at_ns);
}

TEST(LauncherRecord, CarriesTheSlurmRunAndReadsOlderRecords) {
  LauncherRecord r = launcher("n1", 7, 1, 5, "slurm", "1234", 1);
  auto back = launcher_from_json(launcher_to_json(r), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->scheduler, "slurm");
  EXPECT_EQ(back->scheduler_job, "1234");
  EXPECT_EQ(back->scheduler_restarts, 1);
  // Outside a scheduler nothing is written, and a record from before these fields reads as such.
  auto plain = launcher_to_json(launcher("n1", 7, 0, 5));
  EXPECT_EQ(plain.find("scheduler"), std::string::npos);
  auto old = launcher_from_json(R"({"node":"n1","pid":7,"incarnation":0,"future":true})", "k");
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->scheduler.empty());
  EXPECT_FALSE(old->scheduler_restarts);
  auto null = launcher_from_json(R"({"node":"n1","scheduler_restarts":null})", "k");
  ASSERT_TRUE(null.ok());
  EXPECT_FALSE(null->scheduler_restarts);
  auto bad =
      launcher_from_json(R"({"node":"n1","scheduler_restarts":"1"})", "/sw/jobs/j/launchers/n1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "/sw/jobs/j/launchers/n1: field \"scheduler_restarts\" must be an integer, got \"1\"");
  EXPECT_FALSE(launcher_from_json(R"({"scheduler_job":1234})", "k").ok());
}

// "scheduler_job" reaches scontrol and scancel on the node that leads the job, as root: a record
// whose id is not a Slurm job id is refused where it is read, naming the key and the field.
TEST(SchedulerJob, IsASlurmJobIdInBothRecords) {
  for (const char* bad :
       {"--state=RUNNING", "--user=alice", "--partition=gpu", "1234abc", "12_3x"}) {
    const std::string why = std::string("field \"scheduler_job\": Slurm job id \"") + bad +
                            "\" must be digits, or digits_digits for an array task (at most 10 "
                            "digits each)";
    auto l = launcher_from_json(launcher_to_json(launcher("n1", 7, 0, 5, "slurm", bad, 0)),
                                "/sw/jobs/j/launchers/n1");
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_EQ(l.error().message, "/sw/jobs/j/launchers/n1: " + why);
    IncarnationRecord r;
    r.incarnation = 1;
    r.scheduler = "slurm";
    r.scheduler_job = bad;
    auto i = incarnation_from_json(incarnation_to_json(r), "/sw/jobs/j/incarnation");
    ASSERT_FALSE(i.ok()) << bad;
    EXPECT_EQ(i.error().message, "/sw/jobs/j/incarnation: " + why);
  }
  for (const char* good : {"123", "123_4"}) {
    auto l = launcher_from_json(launcher_to_json(launcher("n1", 7, 0, 5, "slurm", good, 0)), "k");
    ASSERT_TRUE(l.ok()) << l.error().message;
    EXPECT_EQ(l->scheduler_job, good);
  }
}

TEST(IncarnationRecord, NamesTheSchedulerThatRestartsIt) {
  IncarnationRecord r;
  r.incarnation = 1;
  r.scheduler = "slurm";
  r.scheduler_job = "1234";
  auto back = incarnation_from_json(incarnation_to_json(r), "k");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->scheduler, "slurm");
  EXPECT_EQ(back->scheduler_job, "1234");
  auto plain = incarnation_from_json(R"({"incarnation":2})", "k");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->scheduler.empty());
  EXPECT_FALSE(incarnation_from_json(R"({"incarnation":2,"scheduler":1})", "k").ok());
}

TEST(SlurmRunOf, TheLaunchersOfTheIncarnationMustAgree) {
  LauncherRecord n1 = launcher("n1", 1, 0, 0, "slurm", "77", 0);
  LauncherRecord n2 = launcher("n2", 2, 0, 0, "slurm", "77", 0);
  struct Case {
    const char* name;
    std::vector<LauncherRecord> launchers;
    std::string want;  // "job/restarts", or the error
  };
  LauncherRecord n2_later = n2;
  n2_later.scheduler_restarts = 1;
  LauncherRecord n2_other = n2;
  n2_other.scheduler_job = "78";
  LauncherRecord n2_plain = launcher("n2", 2, 0, 0);
  LauncherRecord n2_ahead = n2_later;
  n2_ahead.incarnation = 1;
  const std::vector<Case> cases = {
      {"both agree", {n1, n2}, "77/0"},
      {"one node", {n1}, "77/0"},
      {"another incarnation's launcher is not asked", {n1, n2_ahead}, "77/0"},
      {"none",
       {},
       "no launcher of incarnation 0 carries a Slurm job id (none is registered for it)"},
      {"outside Slurm",
       {launcher("n1", 1, 0, 0), n2_plain},
       "no launcher of incarnation 0 carries a Slurm job id (n1, n2 run outside Slurm)"},
      {"restart counts differ",
       {n1, n2_later},
       "the launchers of incarnation 0 disagree: n1 runs in Slurm job 77 (restarts 0), n2 in Slurm "
       "job 77 (restarts 1)"},
      {"job ids differ",
       {n1, n2_other},
       "the launchers of incarnation 0 disagree: n1 runs in Slurm job 77 (restarts 0), n2 in Slurm "
       "job 78 (restarts 0)"},
      {"one outside Slurm",
       {n1, n2_plain},
       "the launchers of incarnation 0 disagree: n1 runs in Slurm job 77, n2 outside Slurm"},
  };
  for (const auto& c : cases) {
    auto r = slurm_run_of(c.launchers, 0);
    std::string got = r ? r->job + "/" + std::to_string(r->restarts) : r.error().message;
    EXPECT_EQ(got, c.want) << c.name;
  }
}

}  // namespace
}  // namespace stepwatch::coord
