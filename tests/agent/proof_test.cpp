// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// prove_rank_process: what makes a process named by an (untrusted) beacon one the agent may
// signal, with real beacons and real processes.
#include "src/agent/proof.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "src/common/host.h"
#include "src/contract/beacon_writer.h"
#include "src/contract/job_reader.h"
#include "src/contract/names.h"

namespace stepwatch::agent {
namespace {

namespace fs = std::filesystem;

class ProofTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("sw-proof-{}", ::getpid());
    fs::remove_all(root_);
    contract::Identity id;
    id.dir = root_.string();
    id.job = "job-p";
    id.host = short_hostname();
    auto w = contract::BeaconWriter::create(id);
    ASSERT_TRUE(w.ok()) << w.error().message;
    writer_ = std::move(*w);
    writer_->step(3);
  }
  void TearDown() override {
    writer_.reset();
    fs::remove_all(root_);
  }
  contract::RankSnapshot rank0() {
    contract::JobReader reader(root_.string(), "job-p");
    auto v = reader.poll();
    EXPECT_EQ(v.ranks.size(), 1u);
    return v.ranks.at(0);
  }
  std::string dir() const { return contract::job_dir(root_.string(), "job-p"); }
  fs::path root_;
  std::unique_ptr<contract::BeaconWriter> writer_;
};

TEST_F(ProofTest, TheBeaconsWriterIsProven) {
  Proof p = prove_rank_process("/proc", dir(), rank0());
  EXPECT_TRUE(p.proven) << p.why;
  EXPECT_EQ(p.process.pid, ::getpid());
  EXPECT_NE(p.process.start_ticks, 0u);
}

TEST_F(ProofTest, EachMissingConditionIsNamed) {
  contract::RankSnapshot r = rank0();
  contract::RankSnapshot jsonl = r;
  jsonl.source = contract::Source::kJsonl;
  EXPECT_NE(prove_rank_process("/proc", dir(), jsonl).why.find("known from JSONL only"),
            std::string::npos);
  contract::RankSnapshot no_start = r;
  no_start.pid_start_ticks = 0;
  EXPECT_NE(prove_rank_process("/proc", dir(), no_start).why.find("names no pid and start time"),
            std::string::npos);
  contract::RankSnapshot reused = r;
  reused.pid_start_ticks += 1;
  Proof p = prove_rank_process("/proc", dir(), reused);
  EXPECT_FALSE(p.proven);
  EXPECT_NE(p.why.find("another process has the pid"), std::string::npos) << p.why;
  contract::RankSnapshot other = r;
  other.pid = ::getppid();  // alive, but not the beacon's writer
  p = prove_rank_process("/proc", dir(), other);
  EXPECT_FALSE(p.proven);
  EXPECT_NE(p.why.find("another process has the pid"), std::string::npos) << p.why;
  contract::RankSnapshot moved = r;
  moved.path = root_.string() + "/elsewhere.beacon";
  p = prove_rank_process("/proc", dir(), moved);
  EXPECT_FALSE(p.proven);
  EXPECT_NE(p.why.find("is not a regular file"), std::string::npos) << p.why;
}

// Another user's beacon never gets this (root) process signalled, nor a beacon placed by one
// user in another user's job directory.
TEST_F(ProofTest, OwnershipMustMatchTheProcessAndTheDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to hand files to another uid (CI runs as root)";
  contract::RankSnapshot r = rank0();
  ASSERT_EQ(::chown(r.path.c_str(), 65534, 65534), 0);
  Proof p = prove_rank_process("/proc", dir(), r);
  EXPECT_FALSE(p.proven);
  EXPECT_NE(p.why.find("belongs to uid 65534, its directory to uid 0"), std::string::npos) << p.why;
  ASSERT_EQ(::chown(dir().c_str(), 65534, 65534), 0);
  p = prove_rank_process("/proc", dir(), r);
  EXPECT_FALSE(p.proven);
  EXPECT_NE(p.why.find("runs as uid 0/0, the beacon belongs to uid 65534"), std::string::npos)
      << p.why;
}

}  // namespace
}  // namespace stepwatch::agent
