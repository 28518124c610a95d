# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""A multi-node job whose restarts Slurm owns (docs/slurm.md, "Multi-node jobs"): a real two-node
Slurm (tests/e2e/slurm_support.py), a real etcd, two real `stepwatch agent` processes named n1
and n2 (each with its own beacon root, each spec saying runbook.resume_owner = "slurm") and a real
webhook receiver.

`sbatch --requeue -N2 --ntasks-per-node=1` runs `srun stepwatch run --coord` on each node, which
launches one rank of the real 2-rank PyTorch trainer (examples/train_ddp.py, gloo, RANK from
SLURM_PROCID). Rank 1 hangs in its data fetch in incarnation 0. The job's leader (n1) pages once,
every node preempts its own rank, and the leader requeues the batch job with `scontrol requeue`,
fenced by the restart count the launchers published (Restarts 0 -> 1), and records the requeue
as incarnation 1 in etcd. The leader is SIGKILLed right after its requeue: n2 takes the job over
and does not requeue again. The rerun (SLURM_RESTART_COUNT=1) runs as incarnation 1, resumes
from the last committed checkpoint and the job ends COMPLETED with Restarts=1 and one page.

Times are printed. The job's output (both runs, --open-mode=append) is shown on failure.
"""

import os
import re
import shutil
import signal
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import swtest  # noqa: E402
from agent_support import NodeAgent, Receiver, free_port  # noqa: E402
from etcd_support import ETCD, Etcd  # noqa: E402
from slurm_support import SlurmCluster  # noqa: E402
from swtest import HAVE_TORCH, TRAIN, python_env, stepwatch_bin  # noqa: E402

JOB = "ddp"


def write_spec(node, url):
    """The same spec on both nodes: the runbook acts 1 s after the page unless acked, and Slurm
    owns the restarts."""
    with open(os.path.join(node.specs, f"{JOB}.toml"), "w") as f:
        f.write(f'job = "{JOB}"\nexpected_interval = "500ms"\ngrace_intervals = 2\n[learn]\nwarmup_steps = 1\n'
                f'[phases]\ndata = "1s"\n[runbook]\nresume_owner = "slurm"\nack_timeout = "1s"\n'
                f'preempt_grace = "2s"\n[[runbook.pager]]\nurl = "{url}"\ntimeout = "2s"\nretries = 1\n')


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class MultiNodeSlurm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = SlurmCluster()
        cls.cluster.start()
        print(f"\nslurm: two nodes idle in {cls.cluster.start_seconds:.2f} s", flush=True)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.assertTrue(os.access(ETCD, os.X_OK), "etcd is not installed: scripts/setup-deps.sh installs etcd-server")
        self.bin = stepwatch_bin()
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-mnslurm-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.etcd = Etcd()
        self.addCleanup(self.etcd.close)
        self.receiver = Receiver()
        self.addCleanup(self.receiver.close)
        # The agents run scontrol against this instance; sbatch passes PYTHONPATH to the job.
        saved = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(saved)))
        env = python_env()
        os.environ.update(SLURM_CONF=self.cluster.conf, PATH=self.cluster.env()["PATH"],
                          PYTHONPATH=env["PYTHONPATH"], PYTHONDONTWRITEBYTECODE="1")
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "MASTER_ADDR", "STEPWATCH_JOB",
                  "STEPWATCH_DIR", "STEPWATCH_INCARNATION"):
            os.environ.pop(k, None)

    def wait_for(self, what, check, timeout=20, every=0.05, details=lambda: ""):
        return swtest.wait_for(what, check, timeout, every, details)

    def submit(self, nodes, port):
        ckpt = os.path.join(self.tmp, "ckpt")
        node_sh = os.path.join(self.tmp, "node.sh")
        roots = " ".join(f'{n.name}) root={n.root};;' for n in nodes.values())
        with open(node_sh, "w") as f:
            f.write(f'''#!/bin/bash
# One task per node: this node's agent watches the beacons under its own root.
case "$SLURMD_NODENAME" in {roots} *) echo "no agent for node $SLURMD_NODENAME"; exit 2;; esac
export RANK=$SLURM_PROCID LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT={port}
export STEPWATCH_DIR=$root
exec {self.bin} run --coord {self.etcd.endpoint} --job {JOB} --lease-ttl 1s --grace 2s --resume-wait 60s -- \\
    /usr/bin/python3 {TRAIN} --steps 90 --step-time 0.05 --label-data --ckpt-dir {ckpt} --ckpt-every 20 \\
    --hang-rank 1 --hang-at-step 50 --hang-incarnation 0
''')
        os.chmod(node_sh, 0o755)
        script = f'''#!/bin/bash
echo "batch on $SLURMD_NODENAME: restart count ${{SLURM_RESTART_COUNT:-unset}}"
srun -l {node_sh}
'''
        job_id = self.cluster.sbatch(script, "--requeue", "--open-mode=append", "-N2", "--ntasks-per-node=1",
                                     "-c1")
        self.addCleanup(self.cluster.run, "scancel", job_id, check=False)
        return job_id

    def test_the_leader_requeues_once_and_the_rerun_resumes_as_incarnation_1(self):
        c, rx = self.cluster, self.receiver
        nodes = {}
        for name in ("n1", "n2"):
            n = NodeAgent(self.bin, self.tmp, name, self.etcd.endpoint, extra=f'preempt_jobs = ["{JOB}"]')
            write_spec(n, rx.url)
            self.addCleanup(n.stop)
            nodes[name] = n
        n1, n2 = nodes["n1"], nodes["n2"]
        n1.start()
        t0 = time.monotonic()
        job_id = self.submit(nodes, free_port())
        out = lambda: c.job_output(job_id)  # noqa: E731
        logs = lambda: f"job output:\n{out()[-4000:]}\nn1:\n{n1.log_tail()}\nn2:\n{n2.log_tail()}"  # noqa: E731
        # n1 publishes first: it leads the job.
        self.wait_for("n1's first summary", lambda: n1.json("/healthz")["coord"]["summaries_published_total"] > 0,
                      timeout=60, details=logs)
        n2.start()
        running = time.monotonic() - t0

        # The hang: one page; past the ack timeout every node preempts its own rank and the
        # leader requeues the batch job.
        self.wait_for("the page", lambda: rx.pages, timeout=60, details=logs)
        paged = time.monotonic() - t0
        page = rx.pages[0]
        self.assertEqual([(x["rank"], x["host"]) for x in page["culprits"]], [(1, "n2")], page)
        requeue_line = f"requeued Slurm job {job_id} (Restarts 0 -> 1): Slurm starts incarnation 1 from step_40"
        self.wait_for("the leader's requeue", lambda: requeue_line in read(n1.log), timeout=60, every=0.02,
                      details=logs)
        requeued = time.monotonic() - t0
        # The leader dies right after its requeue: n2 takes the job over and must not requeue again.
        n1.kill()
        self.assertEqual(c.show_job(job_id)["Restarts"], "1")
        self.wait_for("n2 leading the job", lambda: n2.job(JOB)["cluster"]["leader"] == "n2", timeout=20,
                      details=logs)
        took_over = time.monotonic() - t0
        inc = self.wait_for("the incident closed", lambda: (
            lambda i: i if i and i[0]["status"] == "closed" else None)(
                n2.json(f"/api/v1/incidents?job={JOB}")["incidents"]), timeout=30, details=logs)
        self.assertEqual(str(inc[0]["id"]), page["incident_id"])
        # Closed by n1 with its requeue line; or, when n1 died between its requeue and the close,
        # by n2, which adopted the open incident: the resume step again finds incarnation 1
        # recorded (or the restart-count fence refuses), or no stall is left to act on.
        print(f"multinode slurm: the incident's resolution: {inc[0]['resolution']}", flush=True)
        self.assertRegex(inc[0]["resolution"], rf"requeued Slurm job {job_id} \(Restarts 0 -> 1\); next incarnation 1 "
                         rf"from step_40|incarnation 1 was started already|Slurm job {job_id} was requeued already|"
                         rf"^recovered$", logs())
        n1.start()  # back before the rerun, so that its rank is watched again

        rec = c.wait_job(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=150)
        done = time.monotonic() - t0
        text = out()
        print(f"multinode slurm: running on both nodes {running:.1f} s, paged {paged:.1f} s, requeued "
              f"{requeued:.1f} s, n2 leads {took_over:.1f} s, {rec['JobState']} {done:.1f} s after sbatch",
              flush=True)
        self.assertEqual(rec["JobState"], "COMPLETED", logs())
        self.assertEqual(rec["Restarts"], "1", logs())  # one requeue: the new leader did not requeue again
        self.assertIn("restart count unset", text)
        self.assertIn("restart count 1", text)
        # Both launchers of the rerun launch incarnation 1 (SLURM_RESTART_COUNT=1, as recorded in
        # etcd); the ranks resume from the newest checkpoint both committed.
        self.assertEqual(len(re.findall(rf"job {JOB} on n\d: launched incarnation 1", text)), 2, text)
        self.assertEqual(len(re.findall(r"resumed from step_40", text)), 2, text)
        for rank, n in ((0, n1), (1, n2)):
            beacon = swtest.read_beacon(os.path.join(n.root, JOB, f"rank-{rank}.beacon"))
            self.assertEqual((beacon["step"], beacon["incarnation"]), (90, 1), n.name)
        self.assertEqual(len(rx.pages), 1, rx.pages)  # one page in all
        # Only n1 requeued; n2, leading after the failover, did not.
        requeues = [(n.name, l) for n in (n1, n2) for l in read(n.log).splitlines() if ": requeued Slurm job" in l]
        self.assertEqual([n for n, _ in requeues], ["n1"], requeues)


if __name__ == "__main__":
    unittest.main()
