// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Artifact collection against real processes: a Python rank dumping its stacks through
// faulthandler, a rank that never answers, size and time limits, and gdb (or the explicit reason
// it cannot run here). Collection must never kill or leave stopped any process.
#include "src/runbook/artifact.h"

#include <gtest/gtest.h>
#include <sys/ptrace.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "src/probe/proc_fs.h"
#include "src/runbook/artifact_sink.h"
#include "tests/contract/test_support.h"
#include "tests/runbook/children.h"

namespace stepwatch::runbook {
namespace {

using test::Child;

const char* kDumper =
    "import faulthandler, signal, sys, threading, time\n"
    "f = open(sys.argv[1], 'a')\n"
    "faulthandler.register(signal.SIGUSR1, file=f, all_threads=True)\n"
    "ev = threading.Event()\n"
    "def stepwatch_distinctive_blocker():\n"
    "    ev.wait()\n"
    "threading.Thread(target=stepwatch_distinctive_blocker, daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n";

// Catches SIGUSR1 (so it is signalled) but never writes a stack.
const char* kSilent =
    "import signal, time\n"
    "signal.signal(signal.SIGUSR1, lambda s, f: None)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n";

struct Fixture {
  test::TempDir root;
  std::string job = "job-1";
  std::string job_dir = root / "beacons/job-1";
  std::string incident = root / "incident";
  Fixture() { std::filesystem::create_directories(job_dir); }
  std::string stacks(int rank) const {
    return job_dir + "/rank-" + std::to_string(rank) + ".stacks";
  }

  ArtifactRequest request() const {
    ArtifactRequest r;
    r.dir = incident;
    r.job = job;
    r.beacon_root = root / "beacons";
    r.verdict_json = R"({"state":"stalled","cause":"collective"})";
    r.settings.native_stacks = false;
    return r;
  }
  std::string read(const std::string& name) const { return test::read_file(incident + "/" + name); }
};

bool has_note(const ArtifactReport& r, const std::string& text) {
  for (const auto& n : r.notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string notes(const ArtifactReport& r) {
  std::string s;
  for (const auto& n : r.notes) s += n + "\n";
  return s;
}

// Whether a process that is not the target's parent may trace it here (what gdb needs): a helper
// seizes it (no stop) and exits, which detaches.
bool ptrace_permitted(int target) {
  pid_t h = ::fork();
  if (h == 0) ::_exit(::ptrace(PTRACE_SEIZE, target, nullptr, nullptr) == 0 ? 0 : 1);
  int st = 0;
  ::waitpid(h, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

TEST(Artifact, PythonStacksProcfsBeaconsAndManifest) {
  Fixture fx;
  test::write_file(fx.stacks(0), "an old dump from before the signal\n");
  Child rank0({test::kPython, "-c", kDumper, fx.stacks(0)});
  ASSERT_EQ(rank0.read_line(), "ready");
  stepwatch_beacon_v1 b = test::valid_record("job-1");
  b.pid = rank0.pid();
  b.pid_start_ticks = rank0.start();
  test::write_file(fx.job_dir + "/rank-0.beacon", test::as_bytes(b));

  ArtifactRequest req = fx.request();
  req.processes = {{{rank0.pid(), rank0.start(), "rank 0"}, 0}};
  req.gpu_text = "gpu 0 (H200): sm 100%, mem 80 GiB";
  for (int i = 0; i < 10; ++i) req.log_lines.push_back("line " + std::to_string(i));
  req.settings.log_lines = 3;
  ArtifactReport rep = collect_artifact(req);
  ASSERT_FALSE(rep.error) << rep.error->message;
  EXPECT_FALSE(rep.truncated);
  EXPECT_FALSE(rep.timed_out) << notes(rep);

  std::string stacks = fx.read("rank-0.python-stacks.txt");
  EXPECT_NE(stacks.find("stepwatch_distinctive_blocker"), std::string::npos) << stacks;
  EXPECT_EQ(stacks.find("an old dump"), std::string::npos);  // only what the signal appended
  EXPECT_EQ(fx.read("verdict.json"), req.verdict_json);
  EXPECT_EQ(fx.read("gpu.txt"), *req.gpu_text);
  EXPECT_EQ(fx.read("log-tail.txt"), "line 7\nline 8\nline 9\n");
  const std::string pid_dir = "pid-" + std::to_string(rank0.pid());
  EXPECT_NE(fx.read(pid_dir + "/status").find("Name:"), std::string::npos);
  EXPECT_NE(fx.read(pid_dir + "/threads.txt").find("python3"), std::string::npos);
  if (::geteuid() == 0) {
    EXPECT_TRUE(rep.file(pid_dir + "/stack") != nullptr || has_note(rep, "/stack")) << notes(rep);
  } else {
    EXPECT_TRUE(has_note(rep, "/stack: not permitted")) << notes(rep);
  }
  EXPECT_EQ(fx.read("beacons/rank-0.beacon").size(), sizeof(stepwatch_beacon_v1));
  EXPECT_NE(fx.read("beacons/summary.txt").find("pid " + std::to_string(rank0.pid())),
            std::string::npos);
  EXPECT_TRUE(has_note(rep, "native stacks: disabled")) << notes(rep);

  std::string manifest = fx.read("manifest.txt");
  for (const auto& f : rep.files) {
    if (f.name != "manifest.txt") {
      EXPECT_NE(manifest.find(f.name), std::string::npos) << f.name;
    }
  }
  EXPECT_NE(manifest.find("truncated: no"), std::string::npos);
  EXPECT_NE(manifest.find(std::to_string(stacks.size()) + "  rank-0.python-stacks.txt"),
            std::string::npos)
      << manifest;
  EXPECT_TRUE(rank0.running());  // collecting never kills
}

TEST(Artifact, TimeLimitBoundsCollectionWhenStacksNeverCome) {
  Fixture fx;
  test::write_file(fx.stacks(0), "");
  test::write_file(fx.stacks(1), "");
  Child silent({test::kPython, "-c", kSilent});
  ASSERT_EQ(silent.read_line(), "ready");
  Child plain({"/bin/sleep", "30"}, {.capture_stdout = false});  // no SIGUSR1 handler
  ArtifactRequest req = fx.request();
  req.processes = {{{silent.pid(), silent.start(), "rank 0"}, 0},
                   {{plain.pid(), plain.start(), "rank 1"}, 1}};
  req.settings.time_limit_ns = 800 * kNsPerMs;
  req.settings.native_stacks = true;
  req.stacks_wait_ns = 30 * kNsPerSec;

  ArtifactReport rep = collect_artifact(req);
  EXPECT_LT(rep.elapsed_ns, 2 * kNsPerSec);
  EXPECT_GE(rep.elapsed_ns, 700 * kNsPerMs);
  EXPECT_TRUE(rep.timed_out);
  EXPECT_TRUE(has_note(
      rep, "python stacks of rank 0 (pid " + std::to_string(silent.pid()) + "): nothing written"))
      << notes(rep);
  EXPECT_TRUE(has_note(rep, "does not catch signal")) << notes(rep);
  EXPECT_NE(fx.read("manifest.txt").find("timed_out: yes"), std::string::npos);
  EXPECT_TRUE(silent.running());
  EXPECT_TRUE(plain.running());  // an uncaught SIGUSR1 would have terminated it
}

TEST(Artifact, MaxBytesTruncatesAndTheManifestSaysSo) {
  Fixture fx;
  ArtifactRequest req = fx.request();
  req.settings.max_bytes = 300;
  req.gpu_text = "gpu";
  for (int i = 0; i < 100; ++i) req.log_lines.push_back(std::string(40, 'x') + std::to_string(i));
  Child sleeper({"/bin/sleep", "30"}, {.capture_stdout = false});
  req.processes = {{{sleeper.pid(), sleeper.start(), ""}, -1}};
  ArtifactReport rep = collect_artifact(req);
  EXPECT_TRUE(rep.truncated);
  EXPECT_LE(rep.bytes, 300u);
  const ArtifactFile* tail = rep.file("log-tail.txt");
  ASSERT_NE(tail, nullptr);
  EXPECT_TRUE(tail->truncated);
  std::string manifest = fx.read("manifest.txt");
  EXPECT_NE(manifest.find("truncated: yes"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("log-tail.txt  (truncated)"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("skipped, max_bytes (300) reached"), std::string::npos) << manifest;
  EXPECT_EQ(std::filesystem::file_size(fx.incident + "/log-tail.txt"), tail->bytes);
}

TEST(Artifact, NativeStacksWithGdbOrTheReasonWhyNot) {
  Fixture fx;
  Child sleeper({"/bin/sleep", "30"}, {.capture_stdout = false});
  ASSERT_TRUE(sleeper.wait_exec("sleep"));
  ArtifactRequest req = fx.request();
  req.settings.native_stacks = true;
  req.processes = {{{sleeper.pid(), sleeper.start(), ""}, -1}};
  ArtifactReport rep = collect_artifact(req);
  const std::string file = "pid-" + std::to_string(sleeper.pid()) + "/native-stacks.txt";
  if (!find_executable("gdb")) {
    EXPECT_TRUE(has_note(rep, "gdb not found in PATH")) << notes(rep);
  } else if (!ptrace_permitted(sleeper.pid())) {
    EXPECT_TRUE(has_note(rep, "not permitted")) << notes(rep);
    EXPECT_EQ(rep.file(file), nullptr);
  } else {
    ASSERT_NE(rep.file(file), nullptr) << notes(rep);
    std::string text = fx.read(file);
    EXPECT_NE(text.find("#0 "), std::string::npos) << text;
    EXPECT_NE(text.find("sleep"), std::string::npos)
        << text;  // clock_nanosleep / __libc_start_main
  }
  EXPECT_TRUE(sleeper.wait_state([](char s) { return s == 'S'; }, 1000)) << sleeper.state();
}

TEST(Artifact, TimedOutGdbNeverLeavesTheTargetStopped) {
  Child sleeper({"/bin/sleep", "30"}, {.capture_stdout = false});
  ASSERT_TRUE(sleeper.wait_exec("sleep"));
  if (!find_executable("gdb") || !ptrace_permitted(sleeper.pid()))
    GTEST_SKIP() << "gdb cannot attach here";
  // Kill gdb at several points of its start and attach; the target must end up running each time.
  for (int64_t ms : {5, 100, 200, 300}) {
    Fixture fx;
    ArtifactRequest req = fx.request();
    req.settings.native_stacks = true;
    req.native_timeout_ns = ms * kNsPerMs;
    req.processes = {{{sleeper.pid(), sleeper.start(), ""}, -1}};
    ArtifactReport rep = collect_artifact(req);
    EXPECT_FALSE(has_note(rep, "STILL STOPPED")) << notes(rep);
    EXPECT_TRUE(sleeper.wait_state([](char s) { return s == 'S'; }, 1000))
        << ms << " ms: state " << sleeper.state();
  }
}

TEST(Artifact, ADebuggerKilledWhileTheTargetIsStoppedLeavesItRunning) {
  // A stand-in for gdb that stops its target (as an attach does) and then hangs.
  Fixture fx;
  const std::string fake_gdb = fx.root / "gdb";
  test::write_file(fake_gdb, "#!/bin/sh\nkill -STOP \"$2\"\nexec sleep 30\n");
  ASSERT_EQ(::chmod(fake_gdb.c_str(), 0755), 0);
  Child sleeper({"/bin/sleep", "30"}, {.capture_stdout = false});
  ASSERT_TRUE(sleeper.wait_exec("sleep"));
  ArtifactRequest req = fx.request();
  req.settings.native_stacks = true;
  req.gdb = fake_gdb;
  req.native_timeout_ns = 300 * kNsPerMs;
  req.processes = {{{sleeper.pid(), sleeper.start(), ""}, -1}};
  ArtifactReport rep = collect_artifact(req);
  EXPECT_TRUE(has_note(rep, "timed out after 300 ms and was killed")) << notes(rep);
  EXPECT_TRUE(has_note(rep, "was left stopped after gdb: SIGCONT sent, running again"))
      << notes(rep);
  EXPECT_TRUE(sleeper.running()) << sleeper.state();
}

TEST(Artifact, CatchesSignalReadsSigCgt) {
  Fixture fx;
  Child silent({test::kPython, "-c", kSilent});
  ASSERT_EQ(silent.read_line(), "ready");
  Child plain({"/bin/sleep", "30"}, {.capture_stdout = false});
  ASSERT_TRUE(plain.wait_exec("sleep"));
  EXPECT_EQ(probe::catches_signal(probe::ProcFs("/proc"), silent.pid(), SIGUSR1),
            std::optional<bool>(true));
  EXPECT_EQ(probe::catches_signal(probe::ProcFs("/proc"), plain.pid(), SIGUSR1),
            std::optional<bool>(false));
  EXPECT_EQ(probe::catches_signal(probe::ProcFs("/proc"), 0, SIGUSR1), std::nullopt);
}

}  // namespace
}  // namespace stepwatch::runbook
