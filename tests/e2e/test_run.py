# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""`stepwatch run` end to end, with real PyTorch (gloo, CPU) ranks, real signals, a real HTTP
receiver for pages and the real SQLite store:

1. A collective hang (rank 1 stuck in its data loader): detected within its budget, paged once
   (and an unreachable second pager does not stop the runbook), artifact with every rank's stack
   and the culprit named, preempted and verified gone, resumed from the last committed checkpoint,
   and the training finishes all its steps.
2. A slow job and a long labeled eval: never paged, never killed.
3. A restart that would hang on a leftover of the earlier incarnation holding MASTER_PORT: found,
   reported, cleaned (it is proven ours), and the restart succeeds. An unrelated process named in
   a forged beacon is never signalled.
4. An uninstrumented trainer (log contract only) that hangs: detected and handled the same way.
5. A rank that crashes while the other hangs in gloo: `dead`, the crashed rank named, and the
   runbook acts at once instead of waiting for gloo's 30-minute timeout.
6. Bad input: a spec with errors refuses to start with a precise message.
7. A restart nobody told stepwatch of (a pod killed whole and started again by its controller)
   resumes from the newest committed checkpoint.
"""

import http.server
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import swtest  # noqa: E402

from agent_support import free_port  # noqa: E402
from swtest import HAVE_TORCH, LAUNCH, PLAIN, TRAIN, alive, python_env, wait_until  # noqa: E402



class Receiver:
    """A real local HTTP receiver that records every page (and when it came, in .times)."""

    def __init__(self):
        self.pages = []
        self.times = []
        received = self.pages
        times = self.times

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.path, json.loads(body)))
                times.append(time.time())
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/page"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunTest(unittest.TestCase):
    def setUp(self):
        self.bin = swtest.stepwatch_bin()
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-run-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.dir = os.path.join(self.tmp, "beacons")
        self.state = os.path.join(self.tmp, "state")
        self.ckpt = os.path.join(self.tmp, "ckpt")
        self.receiver = Receiver()
        self.addCleanup(self.receiver.close)
        self.strays = []
        self.addCleanup(self._kill_strays)

    def _kill_strays(self):
        for p in self.strays:
            if p.poll() is None:
                p.kill()
                p.wait()

    def spec(self, job, extra="", pagers=True, interval="1s", runbook=""):
        """The job's spec; `runbook`: more lines of [runbook], `extra`: more tables."""
        text = f'''job = "{job}"
expected_interval = "{interval}"
grace_intervals = 3
poll_interval = "250ms"
[phases]
init = "90s"
compile = "60s"
compile_warm = "30s"
data = "4s"
eval = "30s"
checkpoint = "30s"
[checkpoint]
dir = "{self.ckpt}"
marker = "step_*/COMMITTED"
[runbook]
ack_timeout = "2s"
preempt_grace = "3s"
restart_budget = 2
{runbook}[runbook.collect]
time_limit = "20s"
native_stacks = false
{extra}
'''
        if pagers:
            text += f'''
[[runbook.pager]]
url = "{self.receiver.url}"
timeout = "2s"
retries = 1
[[runbook.pager]]
url = "http://127.0.0.1:{closed_port()}/unreachable"
timeout = "1s"
retries = 1
'''
        path = os.path.join(self.tmp, f"{job}.toml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_job(self, spec, command, timeout=150, env_extra=None, extra_args=()):
        env = python_env()
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "STEPWATCH_JOB"):
            env.pop(k, None)
        env.update(env_extra or {})
        args = [self.bin, "run", "--spec", spec, "--dir", self.dir, "--state-dir", self.state, *extra_args, "--", *command]
        t0 = time.monotonic()
        p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout, time.monotonic() - t0

    def incidents(self, job):
        out = subprocess.run([self.bin, "incidents", job, "--state-dir", self.state, "--json"], stdout=subprocess.PIPE,
                             text=True, check=True).stdout
        doc = json.loads(out)
        return doc["incidents"] if isinstance(doc, dict) else doc

    def ddp(self, *train_args, keep_going=False, master_port=None):
        cmd = ["/usr/bin/python3", LAUNCH, "--nproc", "2", "--grace", "3"]
        if keep_going:
            cmd.append("--keep-going")
        if master_port:
            cmd += ["--master-port", str(master_port)]
        return cmd + [TRAIN, "--ckpt-dir", self.ckpt, *train_args]


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class CollectiveHang(RunTest):
    def test_hang_in_data_loader_is_paged_preempted_and_resumed(self):
        spec = self.spec("hang")
        rc, out, took = self.run_job(spec, self.ddp("--steps", "60", "--step-time", "0.05", "--ckpt-every", "10",
                                                    "--hang-rank", "1", "--hang-at-step", "25",
                                                    "--hang-incarnation", "0", "--label-data"))
        self.assertEqual(rc, 0, out)
        self.assertIn("stalled/collective", out)
        self.assertIn("culprit rank 1 (phase data", out)
        self.assertIn("resumed from step_20 (step 20) as incarnation 1", out)
        self.assertIn("job hang finished", out)
        # Paged exactly once, to the real receiver, with what an on-call needs.
        self.assertEqual(len(self.receiver.pages), 1, self.receiver.pages)
        path, page = self.receiver.pages[0]
        self.assertEqual(page["job"], "hang")
        self.assertEqual(page["state"], "stalled")
        self.assertEqual(page["cause"], "collective")
        self.assertEqual(page["last_step"], 24)
        self.assertEqual([c["rank"] for c in page["culprits"]], [1])
        self.assertAlmostEqual(page["expected_interval_seconds"], 1.0)
        self.assertIn("stepwatch ack hang", page["ack_command"])
        # The unreachable pager failed, was recorded, and did not stop the runbook.
        [inc] = self.incidents("hang")
        kinds = [(a["kind"], a["ok"]) for a in inc["actions"]]
        self.assertIn(("page", True), kinds)
        self.assertIn(("page-failed", False), kinds)
        for step in ("collect", "preempt", "resume"):
            self.assertIn((step, True), kinds, kinds)
        self.assertIn("resumed from step_20", inc["resolution"])
        # The artifact holds every rank's Python stack; the culprit's shows where it hangs.
        art = os.path.join(self.state, "incidents", f"hang-{inc['id']}")
        with open(os.path.join(art, "rank-1.python-stacks.txt")) as f:
            self.assertIn("hang_forever", f.read())
        with open(os.path.join(art, "rank-0.python-stacks.txt")) as f:
            self.assertIn("backward", f.read())  # blocked in the gradient all-reduce
        with open(os.path.join(art, "verdict.json")) as f:
            self.assertEqual(json.load(f)["culprits"][0]["rank"], 1)
        # Nothing of incarnation 0 is left, and the job reached its last step.
        with open(os.path.join(art, "beacons", "summary.txt")) as f:
            pids = [int(w.split()[0]) for w in f.read().split("pid ")[1:]]
        self.assertTrue(pids)
        for pid in pids:
            self.assertFalse(alive(pid), f"pid {pid} of incarnation 0 survived")
        beacon = swtest.read_beacon(os.path.join(self.dir, "hang", "rank-0.beacon"))
        self.assertEqual(beacon["step"], 60)
        self.assertLess(took, 120)


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class SlowAndEval(RunTest):
    def test_slow_steps_and_a_long_eval_are_never_paged(self):
        # Expected 0.1 s, real steps ~0.4 s (slow, not stalled), and an eval of ~6 s (60 x the
        # expected step) inside its 30 s budget.
        spec = self.spec("slow", interval="100ms")
        rc, out, _ = self.run_job(spec, self.ddp("--steps", "30", "--step-time", "0.4", "--ckpt-every", "10",
                                                 "--eval-every", "15", "--eval-batches", "15"))
        self.assertEqual(rc, 0, out)
        self.assertIn("-> slow", out)
        self.assertNotIn("stalled", out)
        self.assertEqual(self.receiver.pages, [])
        self.assertEqual(self.incidents("slow"), [])


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class RestartHygiene(RunTest):
    def test_leftover_holding_master_port_is_cleaned_and_the_restart_succeeds(self):
        port = closed_port()
        spec = self.spec("port", pagers=False)
        env = python_env()
        env.pop("STEPWATCH_JOB", None)
        env["MASTER_PORT"] = str(port)
        # Incarnation 0, whose supervisor dies (SIGKILL) while the job keeps running: its ranks,
        # in their own session, still hold the rendezvous port.
        first = subprocess.Popen([self.bin, "run", "--spec", spec, "--dir", self.dir, "--state-dir", self.state,
                                  "--", *self.ddp("--steps", "100000", "--step-time", "0.05", master_port=port)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.strays.append(first)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not os.path.exists(os.path.join(self.dir, "port", "rank-1.beacon")):
            time.sleep(0.2)
        time.sleep(3)
        first.kill()
        first.wait()
        first.stdout.close()
        old = swtest.read_beacon(os.path.join(self.dir, "port", "rank-0.beacon"))
        self.assertTrue(alive(old["pid"]), "the leftover must still be running for this test")
        # An unrelated process, named by a forged beacon of this job: never signalled.
        stranger = subprocess.Popen(["sleep", "300"])
        self.strays.append(stranger)
        self.forge_beacon("port", rank=7, pid=stranger.pid)

        rc, out, _ = self.run_job(spec, self.ddp("--steps", "20", "--step-time", "0.05", master_port=port),
                                  env_extra={"MASTER_PORT": str(port)})
        self.assertEqual(rc, 0, out)
        self.assertIn(f"holds port {port}", out)
        self.assertIn("leftover before incarnation 1", out)
        self.assertRegex(out, r"cleanup: .*pid %d" % old["pid"])
        self.assertFalse(alive(old["pid"]))
        self.assertIn("job port finished", out)
        self.assertIsNone(stranger.poll(), "a process outside the job was signalled")

    def forge_beacon(self, job, rank, pid):
        """A copy of rank 0's beacon claiming another rank and a pid outside the job."""
        src = os.path.join(self.dir, job, "rank-0.beacon")
        with open(src, "rb") as f:
            data = bytearray(f.read())
        with open(f"/proc/{pid}/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        struct.pack_into("<Q", data, 24, start)
        struct.pack_into("<iiii", data, 32, pid, rank, 0, 8)
        with open(os.path.join(self.dir, job, f"rank-{rank}.beacon"), "wb") as f:
            f.write(data)


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class ProbesAlone(RunTest):
    def test_uninstrumented_ddp_hang_is_diagnosed_from_processes_and_log(self):
        # No beacons at all: progress from rank 0's printed step lines (log contract), ranks from
        # the RANK each process was started with, and where each one sleeps in the kernel.
        spec = self.spec("probes", extra='[log]\npreset = "plain"\n')
        rc, out, _ = self.run_job(spec, self.ddp("--uninstrumented", "--steps", "60", "--step-time", "0.05",
                                                 "--ckpt-every", "10", "--hang-rank", "1", "--hang-at-step", "25",
                                                 "--hang-incarnation", "0"))
        self.assertEqual(rc, 0, out)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "probes", "rank-0.beacon")))
        self.assertRegex(out, r"stalled/collective: last step 24 .*culprit rank 1 \(asleep in \S+ while 1 rank\(s\) "
                              r"wait in a collective\)")
        page = self.receiver.pages[0][1]
        self.assertEqual(page["cause"], "collective")
        self.assertEqual([c["rank"] for c in page["culprits"]], [1])
        self.assertIn("resumed from step_20 (step 20) as incarnation 1", out)
        self.assertIn("job probes finished", out)


class Uninstrumented(RunTest):
    def test_log_only_trainer_hang_is_detected_and_resumed(self):
        spec = self.spec("plain", extra='[log]\npreset = "plain"\n', pagers=True)
        rc, out, _ = self.run_job(spec, ["/usr/bin/python3", PLAIN, "--steps", "40", "--step-time", "0.05",
                                         "--ckpt-dir", self.ckpt, "--ckpt-every", "10", "--hang-at-step", "25",
                                         "--hang-incarnation", "0", "--noise-while-hung"])
        self.assertEqual(rc, 0, out)
        self.assertIn("stalled", out)
        self.assertIn("resumed from step_20 (step 20) as incarnation 1", out)
        self.assertIn("step 40 loss", out)  # passthrough: the trainer's own lines are all there
        self.assertEqual(len(self.receiver.pages), 1)
        self.assertEqual(self.receiver.pages[0][1]["last_step"], 24)


class SchedulerOwner(RunTest):
    """runbook.resume_owner: a scheduler restarts the job, stepwatch does not (docs/kubernetes.md,
    docs/slurm.md)."""

    def test_kubernetes_owns_the_restart_stepwatch_exits_with_the_requeue_code(self):
        spec = self.spec("k8s", extra='[log]\npreset = "plain"\n[kubernetes]\nrequeue_exit_code = 143\n', pagers=False,
                         runbook='resume_owner = "kubernetes"\n')
        trainer = ["/usr/bin/python3", PLAIN, "--steps", "40", "--step-time", "0.05", "--ckpt-dir", self.ckpt,
                   "--ckpt-every", "10", "--hang-at-step", "15"]
        rc, out, _ = self.run_job(spec, trainer,
                                  env_extra={"KUBERNETES_SERVICE_HOST": "10.0.0.1", "STEPWATCH_INCARNATION": "2"})
        self.assertEqual(rc, 143, out)
        self.assertIn("job k8s incarnation 2 (Kubernetes, restarts owned by kubernetes)", out)
        self.assertIn("exiting with 143 for Kubernetes to restart the pod (next incarnation from step_10 (step 10))",
                      out)
        self.assertNotIn("launched incarnation 3", out)

    def test_a_pod_restarted_by_its_controller_resumes_from_the_newest_committed_checkpoint(self):
        # Issue 30, the Kubernetes case at the process level: the pod of a healthy job is killed
        # whole (a drain, a node lost) after step_20 is committed, and its controller starts it
        # again (STEPWATCH_INCARNATION from the restart attempt). stepwatch did not order it; the
        # new `stepwatch run` resumes from the newest committed checkpoint, and the trainer takes
        # only what stepwatch names.
        spec = self.spec("pod", pagers=False, runbook='resume_owner = "kubernetes"\n')
        env = python_env()
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "STEPWATCH_JOB"):
            env.pop(k, None)
        env.update({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "STEPWATCH_INCARNATION": "0"})
        command = self.ddp("--steps", "60", "--step-time", "0.1", "--ckpt-every", "10", "--resume-from-env",
                           master_port=free_port())
        args = [self.bin, "run", "--spec", spec, "--dir", self.dir, "--state-dir", self.state, "--", *command]
        log = open(os.path.join(self.tmp, "pod-0.out"), "w+")
        self.addCleanup(log.close)
        first = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.strays.append(first)
        committed = lambda: os.path.isfile(os.path.join(self.ckpt, "step_20", "COMMITTED"))
        if not wait_until(committed, 90):
            log.seek(0)
            self.fail(log.read())
        # The pod goes, every process of it at once: its session (the job runs in a process group
        # of its own inside it).
        subprocess.run(["pkill", "-KILL", "-s", str(first.pid)], check=False)
        first.wait()
        rc, out, took = self.run_job(spec, command, env_extra={"KUBERNETES_SERVICE_HOST": "10.0.0.1",
                                                                "STEPWATCH_INCARNATION": "1"})
        self.assertEqual(rc, 0, out)
        m = re.search(r"resuming from step_(\d+) \(step \d+\), the newest committed checkpoint in ", out)
        self.assertTrue(m, out)
        step = int(m.group(1))
        self.assertGreaterEqual(step, 20, out)
        resumed = {int(r): int(n) for r, n in re.findall(r"\[rank (\d)\] resumed from step_(\d+) ", out)}
        self.assertEqual(resumed, {0: step, 1: step}, out)
        print(f"\nrun: a pod killed after step_20 and restarted by its controller: every rank resumed from "
              f"step_{step}, finished in {took:.1f} s", flush=True)

    def test_slurm_requeue_exit_code_and_scancel_without_a_controller(self):
        # stepwatch's side of the RequeueExit contract (the real Slurm's side: test_slurm_cluster),
        # and resume = false, whose scancel fails here (no controller): said, and still exit 75.
        trainer = ["/usr/bin/python3", PLAIN, "--steps", "40", "--step-time", "0.05", "--ckpt-dir", self.ckpt,
                   "--ckpt-every", "10", "--hang-at-step", "15"]
        env = {"SLURM_JOB_ID": "99", "SLURM_RESTART_COUNT": "", "SLURM_CONF": "/nonexistent/slurm.conf"}
        for name, extra, want in (
                ("exitcode", 'restart_budget = 2\nresume_owner = "slurm"\n', None),
                ("cancel", 'restart_budget = 2\nresume_owner = "slurm"\nresume = false\n', None)):
            spec = self.spec(name, extra='[log]\npreset = "plain"\n', pagers=False)
            with open(spec) as f:
                text = f.read().replace("restart_budget = 2\n", extra, 1)
            with open(spec, "w") as f:
                # No controller: scontrol and scancel wait out their timeout (DNS SRV lookups).
                f.write(text + '[slurm]\ncommand_timeout = "2s"\n' +
                        ('requeue = "exit"\n' if name == "exitcode" else ""))
            shutil.rmtree(self.ckpt, ignore_errors=True)  # each job starts from scratch
            rc, out, _ = self.run_job(spec, trainer, env_extra=env)
            self.assertEqual(rc, 75, out)
            self.assertIn(f"job {name} incarnation 0 (Slurm job 99, restarts owned by slurm)", out)
            self.assertIn("cannot ask Slurm whether job 99 was requeued", out)  # then goes on
            if name == "exitcode":
                self.assertIn("exiting with 75 for Slurm's RequeueExit to requeue job 99 (next incarnation from "
                              "step_10 (step 10))", out)
            else:
                self.assertIn("resume is off: cancelling Slurm job 99 so it is not requeued", out)
                # The cancel first reads the job's UserId, which gets no answer either.
                self.assertIn("not cancelled: scontrol -o -- show job 99: no answer within 2.0s", out)
            self.assertNotIn("launched incarnation 1", out)

    def test_an_owner_that_is_not_there_is_refused_before_launch(self):
        for owner, missing in (("slurm", "SLURM_JOB_ID is not set"),
                               ("kubernetes", "KUBERNETES_SERVICE_HOST is not set")):
            spec = self.spec(f"own-{owner}", pagers=False, runbook=f'resume_owner = "{owner}"\n')
            env = {"SLURM_JOB_ID": "", "KUBERNETES_SERVICE_HOST": ""}
            rc, out, _ = self.run_job(spec, ["/bin/true"], env_extra=env)
            self.assertEqual(rc, 2, out)
            self.assertIn(f'runbook.resume_owner = "{owner}", but {missing}', out)
            self.assertIn("nothing was launched", out)

    def test_a_slurm_job_id_that_is_an_option_is_refused_before_launch(self):
        # SLURM_JOB_ID reaches scontrol and scancel: "--state=RUNNING" would cancel every running job.
        spec = self.spec("bad-slurm-id", pagers=False, runbook='resume_owner = "slurm"\n')
        rc, out, _ = self.run_job(spec, ["/bin/true"], env_extra={"SLURM_JOB_ID": "--state=RUNNING"})
        self.assertEqual(rc, 2, out)
        self.assertIn('SLURM_JOB_ID: Slurm job id "--state=RUNNING" must be digits, or digits_digits for an array '
                      "task", out)
        self.assertNotIn("launched incarnation", out)


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class NodeFault(RunTest):
    """docs/node-fault.md: the same host is the culprit in incarnation after incarnation, and the
    incarnations start fast enough to be a restart storm."""

    def test_a_repeat_culprit_host_is_named_and_a_restart_storm_holds_until_acked(self):
        spec = self.spec("lemon", extra='[node_fault]\nstorm_incarnations = 3\n')
        with open(spec) as f:
            text = f.read().replace("restart_budget = 2", "restart_budget = 3", 1).replace(
                'ack_timeout = "2s"', 'ack_timeout = "1s"', 1)
        with open(spec, "w") as f:
            f.write(text)
        # Rank 1 hangs in its data fetch before step 28 in every incarnation, and each resumes from
        # step_20 (7 steps after a restart: past the warmup steps, which get the init budget): no
        # progress after the first, so the restart budget of 3 ends it after incarnation 3 (76).
        env = python_env()
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "STEPWATCH_JOB"):
            env.pop(k, None)
        p = subprocess.Popen([self.bin, "run", "--spec", spec, "--dir", self.dir, "--state-dir", self.state, "--",
                              *self.ddp("--steps", "40", "--step-time", "0.05", "--ckpt-every", "10",
                                        "--hang-rank", "1", "--hang-at-step", "28", "--label-data")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.strays.append(p)
        storm = wait_until(lambda: [pg for _, pg in self.receiver.pages if pg["state"] == "restart-storm"], 90)
        self.assertTrue(storm, self.receiver.pages)
        time.sleep(1.5)  # held: no incarnation 3 while nobody acks
        self.assertEqual([pg["incarnation"] for _, pg in self.receiver.pages], [0, 1, 2, 2])
        subprocess.run([self.bin, "ack", "lemon", "--state-dir", self.state, "--by", "oncall"], check=True,
                       stdout=subprocess.DEVNULL)
        out, _ = p.communicate(timeout=90)
        self.assertEqual(p.returncode, 76, out)
        self.assertLess(out.index("restart storm: acked; starting the next incarnation"),
                        out.index("launched incarnation 3"), out)
        pages = [pg for _, pg in self.receiver.pages]
        self.assertEqual([pg["incarnation"] for pg in pages], [0, 1, 2, 2, 3], out)
        host = pages[0]["host"]
        # Before incarnation 2 at most one ended incarnation had a culprit: nobody named.
        self.assertEqual(pages[0]["suspect_hosts"], [])
        self.assertEqual(pages[1]["suspect_hosts"], [])
        [suspect] = pages[2]["suspect_hosts"]
        self.assertEqual(suspect["host"], host)
        self.assertTrue(any("2 of the last 2" in e for e in suspect["evidence"]), suspect)
        self.assertEqual(suspect["exclude_hint"], f"exclude {host} from the job's next placement")
        self.assertTrue(any("3 of the last 3" in e for e in pages[4]["suspect_hosts"][0]["evidence"]), pages[4])
        # The storm: evidence in incarnation 2's page, then a warning page of its own that holds.
        self.assertFalse(any(e.startswith("restart storm") for e in pages[1]["evidence"]), pages[1])
        self.assertTrue(any(e.startswith("restart storm: 3 incarnations started") for e in pages[2]["evidence"]),
                        pages[2]["evidence"])
        self.assertEqual((storm[0]["severity"], pages[2]["severity"]), ("warning", "page"))
        self.assertIn("automatic resume held until acked", storm[0]["summary"])
        self.assertEqual(storm[0]["suspect_hosts"][0]["host"], host)


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class RankCrash(RunTest):
    def test_crashed_rank_is_dead_and_the_runbook_does_not_wait_for_gloo(self):
        spec = self.spec("crash")
        rc, out, took = self.run_job(spec, self.ddp("--steps", "40", "--step-time", "0.05", "--ckpt-every", "10",
                                                    "--crash-rank", "1", "--crash-at-step", "25",
                                                    "--hang-incarnation", "0", keep_going=True))
        self.assertEqual(rc, 0, out)
        self.assertIn("-> dead", out)
        [inc] = self.incidents("crash")
        self.assertEqual(inc["state"], "dead")
        page = self.receiver.pages[0][1]
        self.assertEqual(page["state"], "dead")
        self.assertEqual([c["rank"] for c in page["culprits"]], [1])
        self.assertIn("resumed from step_20", inc["resolution"])
        self.assertLess(took, 120)  # gloo's own timeout is 30 minutes


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class Endings(RunTest):
    """A job that ends is not a dead job; a rank that dies is, within seconds."""

    # (launcher stays on after its ranks, s; the rank that exits last; how much later, s)
    TIMINGS = [
        (4.0, 0, 3.0),  # rank 0 seconds after rank 1 (an unlabeled final save); a lingering launcher
        (0.0, 1, 3.0),  # rank 1 last, the launcher right after it
        (6.0, -1, 0.0),  # both together, then a launcher that takes its time (srun, torchrun's monitor)
    ]

    def test_a_trainer_without_finish_ends_clean_every_time(self):
        for i, (launcher_linger, last_rank, linger) in enumerate(self.TIMINGS):
            with self.subTest(timing=i):
                job = f"end{i}"
                cmd = ["/usr/bin/python3", LAUNCH, "--nproc", "2", "--grace", "3", "--linger", str(launcher_linger),
                       TRAIN, "--ckpt-dir", os.path.join(self.ckpt, job), "--steps", "12", "--step-time", "0.05",
                       "--ckpt-every", "5", "--no-finish", "--linger-rank", str(last_rank), "--linger", str(linger)]
                rc, out, _ = self.run_job(self.spec(job), cmd)
                self.assertEqual(rc, 0, out)
                self.assertIn(f"job {job} finished", out)
                self.assertNotIn("-> dead", out)
                self.assertNotIn("incident", out)
                self.assertNotIn("launched incarnation 1", out)
                self.assertEqual(self.incidents(job), [])
                for rank in (0, 1):
                    beacon = swtest.read_beacon(os.path.join(self.dir, job, f"rank-{rank}.beacon"))
                    self.assertEqual(beacon["status"], 1, f"rank {rank}: the exit hook marks it finished\n{out}")
                    self.assertEqual(beacon["step"], 12)
        self.assertEqual(self.receiver.pages, [])

    def test_a_rank_that_raises_or_is_killed_while_the_other_blocks_is_dead_within_seconds(self):
        for how in ("raise", "kill"):
            with self.subTest(how=how):
                del self.receiver.pages[:], self.receiver.times[:]
                job = f"die-{how}"
                self.ckpt = os.path.join(self.tmp, f"ckpt-{how}")
                rc, out, took = self.run_job(
                    self.spec(job),
                    self.ddp("--steps", "40", "--step-time", "0.05", "--ckpt-every", "10", "--crash-rank", "1",
                             "--crash-at-step", "25", "--crash-how", how, "--hang-incarnation", "0", "--no-finish",
                             keep_going=True))
                self.assertEqual(rc, 0, out)
                self.assertIn("-> dead", out)
                [inc] = self.incidents(job)
                self.assertEqual(inc["state"], "dead")
                self.assertIn("resumed from step_20", inc["resolution"])
                self.assertEqual(len(self.receiver.pages), 1, self.receiver.pages)
                page = self.receiver.pages[0][1]
                self.assertEqual(page["state"], "dead")
                self.assertEqual([c["rank"] for c in page["culprits"]], [1], page)
                crashed_at = float(re.search(r"crashing before step 25 \(--crash-rank, \w+\) at ([0-9.]+)", out)[1])
                to_page = self.receiver.times[0] - crashed_at
                print(f"\n{how}: crash to page {to_page:.2f} s", file=sys.stderr)
                self.assertLess(to_page, 10.0, out)
                self.assertLess(took, 120)


class ExitStatuses(RunTest):
    """The distinct exit codes, with the plain trainer (no torch needed)."""

    def plain(self, *args):
        return ["/usr/bin/python3", PLAIN, "--steps", "40", "--step-time", "0.05", "--ckpt-dir", self.ckpt,
                "--ckpt-every", "10", *args]

    def resume_off_spec(self, job):
        """A plain-log spec with runbook.resume = false."""
        return self.spec(job, extra='[log]\npreset = "plain"\n', pagers=False, runbook="resume = false\n")

    def test_restart_budget_exhausted_without_progress_is_76(self):
        # Hangs at step 8 in every incarnation (after the warmup steps): no checkpoint is ever
        # committed.
        spec = self.spec("budget", extra='[log]\npreset = "plain"\n', pagers=False)
        with open(spec) as f:
            text = f.read().replace("restart_budget = 2", "restart_budget = 2\nack_timeout = \"1s\"", 1)
        text = text.replace('ack_timeout = "2s"\n', "", 1)
        with open(spec, "w") as f:
            f.write(text)
        rc, out, _ = self.run_job(spec, self.plain("--hang-at-step", "8"))
        self.assertEqual(rc, 76, out)
        self.assertIn("gave up: 2 incarnation(s) in a row without checkpoint progress (budget 2)", out)
        self.assertIn("launched incarnation 1", out)
        self.assertNotIn("launched incarnation 2", out)

    def test_resume_off_stops_with_75(self):
        spec = self.resume_off_spec("noresume")
        rc, out, _ = self.run_job(spec, self.plain("--hang-at-step", "15"))
        self.assertEqual(rc, 75, out)
        self.assertIn("preempt:", out)
        self.assertNotIn("launched incarnation 1", out)

    def test_a_job_that_exits_3_by_itself_exits_3_even_with_resume_off(self):
        spec = self.resume_off_spec("three")
        rc, out, _ = self.run_job(spec, self.plain("--exit-at-step", "15", "--exit-code", "3"))
        self.assertEqual(rc, 3, out)  # its own status, not 75: the watchdog did not stop it
        self.assertIn("-> dead", out)
        self.assertNotIn("launched incarnation 1", out)
        [inc] = self.incidents("three")
        self.assertEqual(inc["state"], "dead")
        self.assertIn("ended with status 3; resume is off", inc["resolution"])

    def test_a_crash_before_the_first_step_is_not_restarted(self):
        spec = self.spec("import", extra='[log]\npreset = "plain"\n', pagers=False)
        rc, out, _ = self.run_job(spec, self.plain("--exit-at-step", "0", "--exit-code", "4"))
        self.assertEqual(rc, 4, out)
        self.assertIn("exited with status 4 before its first step: not restarted", out)
        self.assertNotIn("launched incarnation 1", out)
        self.assertEqual(self.incidents("import"), [])

    def test_a_job_that_exits_0_is_0_and_leaves_no_incident(self):
        spec = self.spec("clean", extra='[log]\npreset = "plain"\n', pagers=False)
        rc, out, _ = self.run_job(spec, self.plain("--steps", "12"))
        self.assertEqual(rc, 0, out)
        self.assertIn("job clean finished", out)
        self.assertEqual(self.incidents("clean"), [])

    def test_sigterm_is_passed_to_the_job(self):
        spec = self.spec("term", extra='[log]\npreset = "plain"\n', pagers=False)
        env = python_env()
        env.pop("STEPWATCH_JOB", None)
        marker = os.path.join(self.tmp, "got-term")
        script = f"trap 'touch {marker}; exit 7' TERM; echo step 1; while true; do sleep 0.1; done"
        p = subprocess.Popen([self.bin, "run", "--spec", spec, "--dir", self.dir, "--state-dir", self.state, "--",
                              "/bin/sh", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        self.strays.append(p)
        time.sleep(2)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 7, out)  # the job's own status
        self.assertTrue(os.path.exists(marker), out)
        self.assertIn("received Terminated: passing it to the job", out)


class AckAndDoctor(RunTest):
    """The owner acks: the runbook holds (up to ack_hold_limit) instead of acting at ack_timeout."""

    def run_hanging(self, job, hold):
        """`stepwatch run` of a plain trainer that hangs at step 15, acks held up to `hold`."""
        spec = self.spec(job, extra='[log]\npreset = "plain"\n', pagers=False)
        with open(spec) as f:
            text = f.read().replace('ack_timeout = "2s"', f'ack_timeout = "2s"\nack_hold_limit = "{hold}"', 1)
        with open(spec, "w") as f:
            f.write(text)
        env = python_env()
        env.pop("STEPWATCH_JOB", None)
        p = subprocess.Popen([self.bin, "run", "--spec", spec, "--dir", self.dir, "--state-dir", self.state, "--",
                              "/usr/bin/python3", PLAIN, "--steps", "30", "--step-time", "0.05", "--ckpt-dir",
                              self.ckpt, "--ckpt-every", "10", "--hang-at-step", "15", "--hang-incarnation", "0"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.strays.append(p)
        return p

    def test_ack_holds_the_runbook_and_is_recorded(self):
        p = self.run_hanging("acked", "8s")
        acked_at = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and acked_at is None:
            time.sleep(0.2)
            r = subprocess.run([self.bin, "ack", "acked", "--state-dir", self.state, "--by", "alice", "--note",
                                "looking"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode == 0:
                acked_at = time.monotonic()
                self.assertIn("acked incident 1 of job acked", r.stdout)
            else:
                self.assertEqual(r.returncode, 1, r.stdout)  # no open incident yet
        self.assertIsNotNone(acked_at, "no incident opened")
        out, _ = p.communicate(timeout=90)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("acked by alice: holding for up to 8.0s", out)
        [inc] = self.incidents("acked")
        self.assertEqual(inc["acked_by"], "alice")
        self.assertEqual(inc["ack_note"], "looking")
        preempt = [a for a in inc["actions"] if a["kind"] == "preempt"][0]
        opened = inc["opened_at_ns"]
        # Held past the 2 s ack timeout, until the 8 s hold ran out.
        self.assertGreater((preempt["at_ns"] - opened) / 1e9, 6.0)
        # Another ack now finds no open incident.
        r = subprocess.run([self.bin, "ack", "acked", "--state-dir", self.state], stdout=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no open incident", r.stdout)

    def test_the_ack_endpoint_takes_only_this_runs_token(self):
        p = self.run_hanging("tokacked", "3s")
        port_file = os.path.join(self.state, "tokacked.ack-port")
        token_file = os.path.join(self.state, "tokacked.ack-token")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (os.path.exists(port_file) and os.path.exists(token_file)):
            time.sleep(0.1)
        self.assertEqual(os.stat(token_file).st_mode & 0o777, 0o600)  # the owner's (and root's) only
        with open(port_file) as f:
            url = f"http://127.0.0.1:{int(f.read())}/ack"
        with open(token_file) as f:
            token = f.read().strip()
        self.assertRegex(token, r"^[0-9a-f]{64}$")

        def post(headers):
            req = urllib.request.Request(url, data=b'{"by": "carol"}', method="POST",
                                         headers={"Content-Type": "application/json", **headers})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read() or b"{}")

        # Without the token, or with another one, nobody acks, incident or not.
        self.assertEqual(post({})[0], 401)
        self.assertEqual(post({"Authorization": "Bearer " + "0" * 64})[0], 401)
        acked = None
        while time.monotonic() < deadline + 30 and acked is None:
            status, body = post({"Authorization": "bearer " + token})
            if status == 200:
                acked = body
            else:
                self.assertEqual(status, 404, body)  # no open incident yet
                self.assertEqual(post({})[0], 401)
                time.sleep(0.2)
        self.assertIsNotNone(acked, "no incident opened")
        self.assertTrue(acked["acked"])
        out, _ = p.communicate(timeout=90)
        self.assertEqual(p.returncode, 0, out)
        [inc] = self.incidents("tokacked")
        self.assertEqual(inc["acked_by"], "carol")

    def test_doctor_reports_a_clean_job_and_a_leftover(self):
        spec = self.spec("doc", extra='[log]\npreset = "plain"\n', pagers=False)
        env = python_env()
        env.pop("STEPWATCH_JOB", None)
        # A supervisor killed mid-run leaves its job behind: doctor finds it, --fix ends it. (A
        # job that prints would die of SIGPIPE with its supervisor: this one stays quiet.)
        p = subprocess.Popen([self.bin, "run", "--spec", spec, "--dir", self.dir, "--state-dir", self.state, "--",
                              "/bin/sh", "-c", "sleep 300"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.strays.append(p)
        time.sleep(3)
        p.kill()
        p.wait()
        args = [self.bin, "doctor", "--spec", spec, "--dir", self.dir, "--state-dir", self.state, "--incarnation", "1"]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("would", r.stdout)
        r = subprocess.run(args + ["--fix"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(r.returncode, 0, r.stdout)
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(r.returncode, 0, r.stdout)


ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


class RealAlertmanager(RunTest):
    """A page sent to a real Alertmanager through its v2 API, read back from it."""

    def test_stall_is_paged_to_alertmanager_and_readable_there(self):
        self.assertTrue(ALERTMANAGER, "prometheus-alertmanager is not installed: scripts/setup-deps.sh installs it")
        port = closed_port()
        cluster = closed_port()
        cfg = os.path.join(self.tmp, "alertmanager.yml")
        with open(cfg, "w") as f:
            f.write("route:\n  receiver: devnull\nreceivers:\n  - name: devnull\n")
        am = subprocess.Popen([ALERTMANAGER, f"--config.file={cfg}", f"--storage.path={self.tmp}/am",
                               f"--web.listen-address=127.0.0.1:{port}",
                               f"--cluster.listen-address=127.0.0.1:{cluster}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.strays.append(am)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(base + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        spec = self.spec("am", extra='[log]\npreset = "plain"\n', pagers=False)
        with open(spec, "a") as f:
            f.write(f'\n[[runbook.pager]]\nkind = "alertmanager"\nurl = "{base}"\ntimeout = "3s"\nretries = 1\n')
        # Read the alert back from Alertmanager while the incident is open; once the job is
        # resumed the incident closes and the alert must be resolved (endsAt), not left to expire.
        seen, done = [], threading.Event()

        def watch():
            while not done.is_set():
                try:
                    with urllib.request.urlopen(base + "/api/v2/alerts", timeout=2) as r:
                        alerts = json.loads(r.read())
                    if alerts and not seen:
                        seen.append(alerts)
                except OSError:
                    pass
                time.sleep(0.1)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            rc, out, _ = self.run_job(spec, ["/usr/bin/python3", PLAIN, "--steps", "30", "--step-time", "0.05",
                                             "--ckpt-dir", self.ckpt, "--ckpt-every", "10", "--hang-at-step", "15",
                                             "--hang-incarnation", "0"])
        finally:
            done.set()
            watcher.join()
        self.assertEqual(rc, 0, out)
        self.assertIn("page alertmanager", out)
        self.assertTrue(seen, "the alert was never active in Alertmanager during the incident")
        alerts = seen[0]
        self.assertEqual(len(alerts), 1, alerts)
        with urllib.request.urlopen(base + "/api/v2/alerts", timeout=5) as r:
            self.assertEqual(json.loads(r.read()), [], "the incident closed: its alert is resolved")
        labels = alerts[0]["labels"]
        self.assertEqual(labels["alertname"], "StepwatchJobStalled")
        self.assertEqual(labels["job_id"], "am")
        self.assertEqual(labels["state"], "stalled")
        self.assertIn("last step 14", alerts[0]["annotations"]["summary"])


class BadInput(RunTest):
    def test_spec_with_errors_refuses_to_start(self):
        path = os.path.join(self.tmp, "bad.toml")
        with open(path, "w") as f:
            f.write('job = "bad"\ngrace_intervals = 0\nexpected_interval = "-2s"\n[phases]\neval = "soon"\n')
        marker = os.path.join(self.tmp, "ran")
        rc, out, _ = self.run_job(path, ["/bin/sh", "-c", f"touch {marker}"])
        self.assertEqual(rc, 2, out)
        self.assertIn("bad.toml:2: grace_intervals", out)
        self.assertIn("bad.toml:3: expected_interval", out)
        self.assertIn("bad.toml:5: phases.eval", out)
        self.assertIn("nothing was launched", out)
        self.assertFalse(os.path.exists(marker))

    def test_missing_command_and_unknown_program(self):
        spec = self.spec("nocmd", pagers=False)
        rc, out, _ = self.run_job(spec, ["/nonexistent/trainer"])
        self.assertEqual(rc, 3, out)
        self.assertIn("cannot run /nonexistent/trainer", out)


if __name__ == "__main__":
    unittest.main()
