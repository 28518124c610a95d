// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch doctor` as a unit: usage errors, a clean job, a leftover of an earlier incarnation
// holding the port (reported, then fixed with --fix), and a stranger's port (never touched).
#include "src/cli/doctor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "tests/contract/test_support.h"
#include "tests/runbook/children.h"

namespace stepwatch::cli {
namespace {

using runbook::RecordedProcess;
using test::Child;

const char* kListen =
    "import socket, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', 0))\n"
    "s.listen()\n"
    "print(s.getsockname()[1], flush=True)\n"
    "time.sleep(60)\n";

const char* no_env(const char*) {
  return nullptr;
}

struct Fixture {
  test::TempDir root;
  DoctorOptions options() const {
    DoctorOptions o;
    o.job = "job-1";
    o.dir = root.path();
    o.getenv = no_env;
    o.grace_ns = 2 * kNsPerSec;
    return o;
  }
};

std::vector<RecordedProcess> g_store;  // what the fake store loader returns
Result<std::vector<RecordedProcess>> fake_loader(const std::string& state_dir,
                                                 const std::string& job) {
  if (state_dir == "/broken") return Error{Errc::kIo, "store.db: disk I/O error"};
  EXPECT_EQ(job, "job-1");
  return g_store;
}

TEST(Doctor, UsageErrors) {
  Fixture fx;
  std::string out;
  DoctorOptions o = fx.options();
  o.job.clear();
  EXPECT_EQ(doctor_report(o, &out), kDoctorUsage);
  EXPECT_NE(out.find("no job"), std::string::npos) << out;
  o.job = "../etc";
  EXPECT_EQ(doctor_report(o, &out), kDoctorUsage);
  o = fx.options();
  o.port = 70000;
  EXPECT_EQ(doctor_report(o, &out), kDoctorUsage);
  o = fx.options();
  o.spec_path = fx.root / "missing.toml";
  EXPECT_EQ(doctor_report(o, &out), kDoctorUsage);
  o = fx.options();
  o.state_dir = "/broken";
  o.load_recorded = fake_loader;
  out.clear();
  EXPECT_EQ(doctor_report(o, &out), kDoctorUsage);
  EXPECT_NE(out.find("disk I/O error"), std::string::npos) << out;
  // --slurm-job reaches scontrol: an option in its place is a usage error, and nothing runs.
  o = fx.options();
  o.slurm_job = "--state=RUNNING";
  out.clear();
  EXPECT_EQ(doctor_report(o, &out), kDoctorUsage);
  EXPECT_NE(out.find("--slurm-job: Slurm job id \"--state=RUNNING\" must be digits"),
            std::string::npos)
      << out;
}

// Inside a Slurm job, with a spec that names no job, doctor finds the job `stepwatch run` runs:
// slurm-<SLURM_JOB_ID> (issue 30: one rule for the job id).
TEST(Doctor, InsideASlurmJobTheJobIsTheOneRunRuns) {
  Fixture fx;
  std::ofstream(fx.root / "job.toml") << "expected_interval = \"2s\"\n";
  DoctorOptions o = fx.options();
  o.job.clear();
  o.spec_path = fx.root / "job.toml";
  o.getenv = [](const char* n) -> const char* {
    return std::string_view(n) == "SLURM_JOB_ID" ? "7001" : nullptr;
  };
  std::string out;
  // Not a usage error; its Slurm checks fail here, where no slurmctld answers (e2e_slurm runs
  // doctor inside a real Slurm job).
  EXPECT_NE(doctor_report(o, &out), kDoctorUsage) << out;
  EXPECT_NE(out.find("stepwatch doctor: job slurm-7001, current incarnation 0"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("no job id"), std::string::npos) << out;
}

TEST(Doctor, CleanJob) {
  Fixture fx;
  std::string out;
  EXPECT_EQ(doctor_report(fx.options(), &out), kDoctorClean) << out;
  EXPECT_NE(out.find("clean: nothing left over"), std::string::npos) << out;
}

TEST(Doctor, ReportsThenFixesALeftoverHoldingThePort) {
  Fixture fx;
  Child old({test::kPython, "-c", kListen});
  int port = std::stoi(old.read_line());
  Child current({"/bin/sleep", "30"}, {.capture_stdout = false});
  g_store = {{old.pid(), old.start(), 1, "rank 1"}, {current.pid(), current.start(), 2, "rank 1"}};
  // The port comes from the spec's resume_command.
  test::write_file(
      fx.root / "job.toml",
      "job = \"job-1\"\n[runbook]\nresume_command = [\"torchrun\", \"--master_port\", \"" +
          std::to_string(port) + "\", \"train.py\"]\n");
  DoctorOptions o = fx.options();
  o.job.clear();
  o.spec_path = fx.root / "job.toml";
  o.load_recorded = fake_loader;

  std::string out;
  EXPECT_EQ(doctor_report(o, &out), kDoctorLeftovers) << out;
  std::string want = fmt::format("would kill pid {} (rank 1 of incarnation 1, started ", old.pid());
  EXPECT_NE(out.find(want), std::string::npos) << out;
  EXPECT_NE(out.find(fmt::format("still alive; holds port {}", port)), std::string::npos) << out;
  EXPECT_NE(out.find("current incarnation 2"), std::string::npos) << out;
  EXPECT_TRUE(old.running());  // reporting never acts

  o.fix = true;
  out.clear();
  EXPECT_EQ(doctor_report(o, &out), kDoctorClean) << out;
  EXPECT_NE(out.find("clean after --fix"), std::string::npos) << out;
  EXPECT_TRUE(old.wait_state([](char s) { return s == 'Z'; })) << old.state();
  EXPECT_TRUE(current.running());  // the current incarnation is never touched
}

TEST(Doctor, StrangerOnThePortStaysAndKeepsExitOne) {
  Fixture fx;
  Child stranger({test::kPython, "-c", kListen});
  int port = std::stoi(stranger.read_line());
  DoctorOptions o = fx.options();
  o.port = port;
  o.fix = true;
  std::string out;
  EXPECT_EQ(doctor_report(o, &out), kDoctorLeftovers) << out;
  EXPECT_NE(
      out.find(fmt::format("will not touch pid {} (python3): holds port {}", stranger.pid(), port)),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("no recorded processes"), std::string::npos) << out;
  EXPECT_TRUE(stranger.running());
}

TEST(Doctor, PortFromEnvironmentAndStaleBeaconFixed) {
  Fixture fx;
  std::filesystem::create_directories(fx.root / "job-1");
  Child dead({"/bin/true"}, {.capture_stdout = false});
  dead.reap();
  stepwatch_beacon_v1 b = test::valid_record("job-1");
  b.pid = dead.pid();
  b.pid_start_ticks = dead.start();
  test::write_file(fx.root / "job-1/rank-0.beacon", test::as_bytes(b));
  DoctorOptions o = fx.options();
  o.getenv = [](const char* n) -> const char* {
    return std::string(n) == "MASTER_PORT" ? "1" : nullptr;
  };
  std::string out;
  EXPECT_EQ(doctor_report(o, &out), kDoctorLeftovers) << out;
  EXPECT_NE(out.find("port 1 (from $MASTER_PORT)"), std::string::npos) << out;
  EXPECT_NE(out.find("would remove " + (fx.root / "job-1/rank-0.beacon")), std::string::npos)
      << out;
  o.fix = true;
  out.clear();
  EXPECT_EQ(doctor_report(o, &out), kDoctorClean) << out;
  EXPECT_FALSE(std::filesystem::exists(fx.root / "job-1/rank-0.beacon"));
}

}  // namespace
}  // namespace stepwatch::cli
