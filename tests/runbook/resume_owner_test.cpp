// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The resume owners (runbook/resume_owner.h), each made from a spec by make_resume_owner; Slurm's
// through fake scontrol and scancel scripts (the real Slurm: tests/e2e/test_slurm*.py).
#include "src/runbook/resume_owner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/fakes/fake_slurm.h"

namespace stepwatch::runbook {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = ResumePlan::Kind;

struct Notes final : OwnerNotes {
  std::vector<std::pair<bool, std::string>> lines;
  void note(bool ok, const std::string& line) override { lines.emplace_back(ok, line); }
};

spec::JobSpec owned_by(spec::ResumeOwner owner) {
  spec::JobSpec s = spec::default_spec();
  s.runbook.resume_owner = owner;
  return s;
}

OwnerRequest request(std::optional<BatchJob> batch = std::nullopt) {
  OwnerRequest r;
  r.job = "train";
  r.incarnation = 3;
  if (batch) r.batch = *batch;
  return r;
}

// A batch job of the job directory's owner: this test's own uid, as the fake scontrol reports it.
BatchJob mine(std::string id, int64_t restarts) {
  return BatchJob{"slurm", std::move(id), restarts, ::getuid()};
}

TEST(MakeResumeOwner, OneOwnerPerSpecValue) {
  EXPECT_STREQ(make_resume_owner(owned_by(spec::ResumeOwner::kStepwatch))->name(), "stepwatch");
  EXPECT_STREQ(make_resume_owner(owned_by(spec::ResumeOwner::kSlurm))->name(), "slurm");
  EXPECT_STREQ(make_resume_owner(owned_by(spec::ResumeOwner::kKubernetes))->name(), "kubernetes");
  // Each name is the spec's own spelling of the value.
  for (auto o :
       {spec::ResumeOwner::kStepwatch, spec::ResumeOwner::kSlurm, spec::ResumeOwner::kKubernetes}) {
    EXPECT_STREQ(make_resume_owner(owned_by(o))->name(), spec::resume_owner_name(o));
  }
}

TEST(StepwatchOwner, TheHostRelaunchesAndResumeOffLeavesTheJob) {
  spec::JobSpec s = owned_by(spec::ResumeOwner::kStepwatch);
  auto owner = make_resume_owner(s);
  Notes n;
  EXPECT_EQ(owner->plan(request(), n).kind, Kind::kRelaunch);
  ResumePlan stop = owner->stop(request(), n);
  EXPECT_EQ(stop.kind, Kind::kStopped);
  EXPECT_EQ(stop.detail, "");
  EXPECT_TRUE(n.lines.empty());
  EXPECT_FALSE(owner->needs_batch_job());
  EXPECT_FALSE(owner->can_drain());
  EXPECT_EQ(owner->describe(), "the original command (STEPWATCH_RESUME_CHECKPOINT)");
  s.runbook.resume_command = {"python3", "train.py", "--from", "a b"};
  EXPECT_EQ(make_resume_owner(s)->describe(), "python3 train.py --from 'a b'");
}

TEST(KubernetesOwner, ExitsWithTheCodeThePodFailurePolicyRestarts) {
  spec::JobSpec s = owned_by(spec::ResumeOwner::kKubernetes);
  s.kubernetes.requeue_exit_code = 88;
  auto owner = make_resume_owner(s);
  Notes n;
  ResumePlan p = owner->plan(request(), n);
  EXPECT_EQ(p.kind, Kind::kExit);
  EXPECT_EQ(p.exit_code, 88);
  EXPECT_EQ(p.scheduler, "kubernetes");
  EXPECT_EQ(p.by, "Kubernetes");
  EXPECT_EQ(p.detail, "restart the pod");
  EXPECT_EQ(owner->stop(request(), n).kind, Kind::kStopped);
  EXPECT_EQ(owner->describe(), "by Kubernetes (exit 88)");
}

class SlurmOwnerTest : public ::testing::Test {
 protected:
  SlurmOwnerTest()
      : dir_(std::filesystem::temp_directory_path() /
             ("sw-resume-owner-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        slurm_(dir_) {
    spec_ = owned_by(spec::ResumeOwner::kSlurm);
    spec_.slurm = slurm_.settings();
  }
  ~SlurmOwnerTest() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  test::FakeSlurm slurm_;
  spec::JobSpec spec_;
  Notes notes_;
};

TEST_F(SlurmOwnerTest, RequeuesTheBatchJobWhileItsRestartCountIsAsTheIncarnationStarted) {
  slurm_.set_restarts(2);
  auto owner = make_resume_owner(spec_);
  EXPECT_TRUE(owner->needs_batch_job());
  ResumePlan p = owner->plan(request(mine("77", 2)), notes_);
  EXPECT_EQ(p.kind, Kind::kRequeued) << p.detail;
  EXPECT_EQ(p.scheduler, "slurm");
  EXPECT_EQ(p.scheduler_job, "77");
  EXPECT_EQ(slurm_.requeues(), "77\n");

  // The count moved (someone requeued it already): the fence refuses, nothing is requeued.
  ResumePlan again = owner->plan(request(mine("77", 2)), notes_);
  EXPECT_EQ(again.kind, Kind::kNotResumed);
  EXPECT_THAT(again.detail, HasSubstr("not requeued: Slurm job 77 was requeued already"));
  EXPECT_EQ(slurm_.requeues(), "77\n");
}

TEST_F(SlurmOwnerTest, WithoutItsBatchJobOrScontrolNothingIsRequeued) {
  auto owner = make_resume_owner(spec_);
  OwnerRequest r = request();
  r.batch = Error{Errc::kNotFound, "no launcher carries a Slurm job id"};
  ResumePlan p = owner->plan(r, notes_);
  EXPECT_EQ(p.kind, Kind::kNotResumed);
  EXPECT_EQ(p.detail, "not requeued: no launcher carries a Slurm job id");

  spec_.slurm.scontrol = "/nonexistent/scontrol";
  ResumePlan failed = make_resume_owner(spec_)->plan(request(mine("77", 0)), notes_);
  EXPECT_EQ(failed.kind, Kind::kFailed);
  EXPECT_THAT(failed.detail, HasSubstr("not requeued: "));
  EXPECT_THAT(failed.detail, HasSubstr("/nonexistent/scontrol"));
}

TEST_F(SlurmOwnerTest, RequeueByExitNeedsNoScontrol) {
  spec_.slurm.requeue = spec::SlurmRequeue::kExit;
  spec_.slurm.requeue_exit_code = 79;
  spec_.slurm.scontrol = "/nonexistent/scontrol";
  auto owner = make_resume_owner(spec_);
  ResumePlan p = owner->plan(request(mine("77", 0)), notes_);
  EXPECT_EQ(p.kind, Kind::kExit);
  EXPECT_EQ(p.exit_code, 79);
  EXPECT_EQ(p.scheduler_job, "77");
  EXPECT_EQ(p.by, "Slurm's RequeueExit");
  EXPECT_EQ(p.detail, "requeue job 77");
  EXPECT_EQ(owner->plan(request(), notes_).detail, "requeue the job");
  EXPECT_EQ(owner->describe(), "by Slurm (exit 79 for RequeueExit)");
}

TEST_F(SlurmOwnerTest, ResumeOffCancelsTheBatchJobAndSaysSoFirst) {
  auto owner = make_resume_owner(spec_);
  ResumePlan p = owner->stop(request(mine("77", 0)), notes_);
  EXPECT_EQ(p.kind, Kind::kCancelled);
  EXPECT_EQ(p.detail, "Slurm job 77 cancelled");
  EXPECT_EQ(slurm_.cancels(), "77\n");
  EXPECT_THAT(
      notes_.lines,
      ElementsAre(std::make_pair(
          true, std::string("resume is off: cancelling Slurm job 77 so it is not requeued"))));

  slurm_.fail_scancel();
  notes_.lines.clear();
  ResumePlan failed = owner->stop(request(mine("77", 0)), notes_);
  EXPECT_EQ(failed.kind, Kind::kStopped);
  EXPECT_THAT(failed.detail, HasSubstr("Slurm job 77 not cancelled: "));
  EXPECT_THAT(failed.detail, HasSubstr("Kill job error on job id 77"));
  ASSERT_EQ(notes_.lines.size(), 2u);
  EXPECT_FALSE(notes_.lines[1].first);
  EXPECT_THAT(notes_.lines[1].second, HasSubstr("not cancelled: "));

  ResumePlan unknown = owner->stop(request(), notes_);
  EXPECT_EQ(unknown.kind, Kind::kStopped);
  EXPECT_EQ(unknown.detail, "not cancelled: no batch job");
}

// The ids a forged launcher key could carry never reach a command line: "--state=RUNNING" or
// "--user=alice" would make `scancel` act on every running job, or every job of a user, as root.
TEST_F(SlurmOwnerTest, IdsThatAreNotSlurmJobIdsRunNothing) {
  auto owner = make_resume_owner(spec_);
  for (const char* bad :
       {"--state=RUNNING", "--user=alice", "--partition=gpu", "1234abc", "12_3x"}) {
    SCOPED_TRACE(bad);
    const std::string why = fmt::format(
        "Slurm job id \"{}\" must be digits, or digits_digits for an array task (at most 10 "
        "digits each): nothing was run",
        bad);
    ResumePlan p = owner->plan(request(mine(bad, 0)), notes_);
    EXPECT_EQ(p.kind, Kind::kFailed);
    EXPECT_EQ(p.detail, "not requeued: " + why);
    ResumePlan stop = owner->stop(request(mine(bad, 0)), notes_);
    EXPECT_EQ(stop.kind, Kind::kStopped);
    EXPECT_EQ(stop.detail, fmt::format("Slurm job {} not cancelled: {}", bad, why));
    auto superseded = owner->superseded(mine(bad, 0));
    ASSERT_FALSE(superseded.ok());
    EXPECT_THAT(superseded.error().message, HasSubstr(why));
  }
  EXPECT_EQ(slurm_.calls(), "") << "nothing ran";
}

// A job id and an array task id are what Slurm gives: both still work, with "--" before them.
TEST_F(SlurmOwnerTest, JobAndArrayTaskIdsAreRequeuedAndCancelled) {
  auto owner = make_resume_owner(spec_);
  for (const char* good : {"123", "123_4"}) {
    SCOPED_TRACE(good);
    slurm_.set_restarts(0);
    ResumePlan p = owner->plan(request(mine(good, 0)), notes_);
    EXPECT_EQ(p.kind, Kind::kRequeued) << p.detail;
    EXPECT_EQ(owner->stop(request(mine(good, 1)), notes_).kind, Kind::kCancelled);
  }
  EXPECT_EQ(slurm_.requeues(), "123\n123_4\n");
  EXPECT_EQ(slurm_.cancels(), "123\n123_4\n");
  EXPECT_EQ(slurm_.calls(),
            "scontrol -o -- show job 123\nscontrol -- requeue 123\n"
            "scontrol -o -- show job 123\nscancel -- 123\n"
            "scontrol -o -- show job 123_4\nscontrol -- requeue 123_4\n"
            "scontrol -o -- show job 123_4\nscancel -- 123_4\n");
}

// An id of the right form may still name another user's job (a forged launcher key, "1234"):
// requeue and cancel act only on a job whose UserId is the job directory's owner, and on none
// when that owner is unknown.
TEST_F(SlurmOwnerTest, AnotherUsersJobIsNeitherRequeuedNorCancelled) {
  const uid_t other = ::getuid() + 1000;
  slurm_.set_user_id(other);
  auto owner = make_resume_owner(spec_);
  const std::string why = fmt::format(
      "Slurm job 1234 belongs to uid {} (UserId), not to uid {} (the job directory's owner): "
      "nothing was done to it",
      other, ::getuid());
  ResumePlan p = owner->plan(request(mine("1234", 0)), notes_);
  EXPECT_EQ(p.kind, Kind::kFailed);
  EXPECT_EQ(p.detail, "not requeued: " + why);
  ResumePlan stop = owner->stop(request(mine("1234", 0)), notes_);
  EXPECT_EQ(stop.kind, Kind::kStopped);
  EXPECT_EQ(stop.detail, "Slurm job 1234 not cancelled: " + why);
  EXPECT_EQ(slurm_.calls(), "scontrol -o -- show job 1234\nscontrol -o -- show job 1234\n")
      << "only read, never requeued or cancelled";

  slurm_.set_user_id(::getuid());
  BatchJob unknown = mine("1234", 0);
  unknown.owner_uid.reset();
  const std::string unowned =
      "the job directory's owner is unknown, so Slurm job 1234 is not known to be its: nothing "
      "was run";
  EXPECT_EQ(owner->plan(request(unknown), notes_).detail, "not requeued: " + unowned);
  EXPECT_EQ(owner->stop(request(unknown), notes_).detail,
            "Slurm job 1234 not cancelled: " + unowned);
  EXPECT_EQ(slurm_.requeues(), "");
  EXPECT_EQ(slurm_.cancels(), "");
  EXPECT_EQ(slurm_.calls(), "scontrol -o -- show job 1234\nscontrol -o -- show job 1234\n");
}

TEST_F(SlurmOwnerTest, DrainsOnlyBlamedSuspectsEachOnce) {
  auto owner = make_resume_owner(spec_);
  EXPECT_TRUE(owner->can_drain());
  NodeFaultReport report;
  SuspectHost blamed;
  blamed.host = "n2";
  blamed.blamed = true;
  blamed.evidence = {"culprit in 2 of the last 2 incarnations"};
  SuspectHost correlated;
  correlated.host = "n3";
  correlated.evidence = {"3 short runs in a row"};
  report.suspects = {blamed, correlated};
  std::set<std::string> drained;
  auto lines = owner->drain(report, "train", drained);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0].line, HasSubstr("drained Slurm node n2"));
  EXPECT_THAT(lines[1].line, HasSubstr("Slurm node n3 not drained"));
  EXPECT_THAT(slurm_.drains(), HasSubstr("NodeName=n2 State=DRAIN"));
  EXPECT_TRUE(owner->drain(report, "train", drained).empty()) << "each host once";
}

// A culprit host comes from the node-fault history in etcd: a Slurm hostlist there ("gpu[1-100]")
// would drain a hundred nodes. One node name or nothing.
TEST_F(SlurmOwnerTest, AHostlistIsNeverDrained) {
  auto owner = make_resume_owner(spec_);
  NodeFaultReport report;
  for (const char* host : {"gpu[1-100]", "n1,n2", "-x", "n1 State=RESUME"}) {
    SuspectHost s;
    s.host = host;
    s.blamed = true;
    s.evidence = {"culprit in 2 of the last 2 incarnations"};
    report.suspects.push_back(s);
  }
  std::set<std::string> drained;
  auto lines = owner->drain(report, "train", drained);
  ASSERT_EQ(lines.size(), 4u);
  for (const auto& l : lines) EXPECT_FALSE(l.ok) << l.line;
  EXPECT_EQ(lines[0].line,
            "could not drain Slurm node gpu[1-100]: node name \"gpu[1-100]\" has a character "
            "outside [A-Za-z0-9._-]: nothing was run");
  EXPECT_THAT(lines[2].line, HasSubstr("node name \"-x\" may not start with '-'"));
  EXPECT_EQ(slurm_.calls(), "") << "nothing ran";
}

TEST_F(SlurmOwnerTest, SupersededWhenTheRestartCountMoved) {
  auto owner = make_resume_owner(spec_);
  slurm_.set_restarts(1);
  auto same = owner->superseded(BatchJob{"slurm", "77", 1});
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_FALSE(same->has_value());
  slurm_.set_restarts(2);
  auto moved = owner->superseded(BatchJob{"slurm", "77", 1});
  ASSERT_TRUE(moved.ok());
  ASSERT_TRUE(moved->has_value());
  EXPECT_EQ(**moved, "Slurm job 77 was requeued since this incarnation started (Restarts 1 -> 2)");
  spec_.slurm.scontrol = "/nonexistent/scontrol";
  auto unasked = make_resume_owner(spec_)->superseded(BatchJob{"slurm", "77", 1});
  ASSERT_FALSE(unasked.ok());
  EXPECT_THAT(unasked.error().message, HasSubstr("cannot ask Slurm whether job 77 was requeued ("));
  // Other owners are never superseded.
  auto k = make_resume_owner(owned_by(spec::ResumeOwner::kKubernetes));
  EXPECT_FALSE(k->superseded(BatchJob{"slurm", "77", 1})->has_value());
}

}  // namespace
}  // namespace stepwatch::runbook
