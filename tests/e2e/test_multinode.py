# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Multi-node jobs end to end (docs/multinode.md): two real `stepwatch agent` processes as nodes
"a" and "b" (own node name, beacon root, state and specs), one real etcd (/usr/bin/etcd), a real
webhook receiver, and a job whose rank 0 writes under a's root and rank 1 under b's.

- MultiNodeTorchJob: a real 2-rank PyTorch DDP job (examples/train_ddp.py, gloo, env://) whose
  rank 1 hangs in its data loader: one leader, one page naming rank 1 on b, the same incident on
  both agents, an ack through the follower, the leader SIGKILLed (failover, no second page), the
  new leader SIGSTOPped past twice the TTL (fenced, no second page), node b lost (rank-silent).
- CoordinationLost: a healthy job while etcd is killed and restarted, and while b's path to
  etcd is cut (a TCP forwarder) and restored.
- MultiNodeResume: the same PyTorch job, each node's rank launched by its own `stepwatch run
  --coord`: past the ack timeout each node's agent preempts its own rank once. With [node_fault]
  storm_incarnations = 1 the hang is a restart storm: the leader records the incarnation's end
  in etcd, pages the storm and holds the relaunch (the launchers wait past their resume_wait)
  until an ack on the other node; then it moves the job to incarnation 1 from the newest
  committed checkpoint, both launchers relaunch, and the job resumes there and finishes.
- RestartTogether: the same job without a storm. A node whose cleanup is slow (a leftover that
  ignores SIGTERM) holds every node at the start barrier until it is clean; a dead launcher holds
  the next incarnation, is paged once past [coord] restart_wait naming its node, and once it is
  started again the job restarts whole from the checkpoint.
- LauncherExit: a launcher told by the incarnation key to leave the restart to a scheduler exits
  with the key's exit code; a storm hold keeps a launcher waiting past its resume_wait only while
  the hold's incident is open.

Leases are 1 s, polls 200 ms: every bound below is a few TTLs. Measured times are printed.
"""

import base64
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import shutil
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import swtest  # noqa: E402
from agent_support import RANKS, NodeAgent, Receiver, free_port, get, left_behind, pgrep  # noqa: E402
from etcd_support import ETCD, Etcd, Forwarder  # noqa: E402
from swtest import python_env, stepwatch_bin  # noqa: E402

SRC = os.environ.get("STEPWATCH_SOURCE_DIR", os.path.join(HERE, "..", ".."))
TTL = 1.0
JOB = "ddp"


def write_spec(node, url):
    """The same spec on every node: a step every 500 ms, grace 2, data fetches of at most 1 s.
    Without the data budget the hang would sit in the built-in 10-minute one: `suspect`, no page."""
    with open(os.path.join(node.specs, f"{JOB}.toml"), "w") as f:
        f.write(f'job = "{JOB}"\nexpected_interval = "500ms"\ngrace_intervals = 2\n[learn]\nwarmup_steps = 1\n'
                f'[phases]\ndata = "1s"\n[[runbook.pager]]\nurl = "{url}"\ntimeout = "2s"\nretries = 1\n')


class MultiNodeBase(unittest.TestCase):
    markers = []  # every temporary path the class's processes name in their argv

    @classmethod
    def tearDownClass(cls):
        # Every process a test started is gone: etcd (its data dir), the agents (their configs)
        # and the ranks (their --ckpt-dir / argv).
        left = left_behind(cls.markers)
        if left:
            raise AssertionError(f"processes left behind: {left}")

    def setUp(self):
        self.assertTrue(os.access(ETCD, os.X_OK), "etcd is not installed: scripts/setup-deps.sh installs etcd-server")
        self.bin = stepwatch_bin()
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-multinode-")
        self.markers.append(self.tmp)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.etcd = Etcd()
        self.markers.append(self.etcd.dir)
        self.addCleanup(self.etcd.close)
        self.receiver = Receiver()
        self.addCleanup(self.receiver.close)
        self.ranks = []

    def node(self, name, endpoint):
        n = NodeAgent(self.bin, self.tmp, name, endpoint)
        write_spec(n, self.receiver.url)
        self.addCleanup(n.stop)
        return n

    def start_rank(self, argv, rank, node, master_port):
        env = python_env()
        env.update(STEPWATCH_JOB=JOB, STEPWATCH_DIR=node.root, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port),
                   RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2", LOCAL_WORLD_SIZE="1")
        log = open(os.path.join(self.tmp, f"rank-{rank}.log"), "w")
        self.addCleanup(log.close)
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(self._kill, p)  # a rank blocked in gloo does not act on SIGTERM
        self.ranks.append(p)
        return p

    @staticmethod
    def _kill(p):
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
        p.wait()

    def wait_for(self, what, check, timeout=20, every=0.05):
        """Polls check() until it returns something true; that value. Fails after `timeout` s."""
        return swtest.wait_for(what, check, timeout, every)

    def wait_published(self, node):
        """Until `node` has put a summary of the job: it is in the job's leader line."""
        self.wait_for(f"{node.name}'s first summary",
                      lambda: node.json("/healthz")["coord"]["summaries_published_total"] > 0)

    @staticmethod
    def cluster(node):
        return node.job(JOB)["cluster"]

    @staticmethod
    def connected(node):
        return node.json("/healthz")["coord"]["connected"]

    def incidents(self, node):
        return node.json(f"/api/v1/incidents?job={JOB}")["incidents"]


class MultiNodeTorchJob(MultiNodeBase):
    def test_one_leader_one_page_failover_fencing_and_a_lost_node(self):
        etcd, rx = self.etcd, self.receiver
        a, b = self.node("a", etcd.endpoint), self.node("b", etcd.endpoint)
        a.start()
        port = free_port()
        ranks = [self.start_rank(["/usr/bin/python3", os.path.join(SRC, "examples", "train_ddp.py"), "--steps", "100000",
                                  "--step-time", "0.05", "--label-data", "--hang-rank", "1", "--hang-at-step", "50",
                                  "--ckpt-dir", os.path.join(self.tmp, "ckpt")], rank, node, port)
                 for rank, node in ((0, a), (1, b))]
        # a publishes first (rank 0's beacon appears at stepwatch.init()): a is first in line.
        self.wait_published(a)
        b.start()

        # a. Healthy: one leader, a; its view merges both nodes' ranks, each with its node as host.
        view = self.wait_for("a's merged healthy view", lambda: (lambda j: j if j["state"] == "healthy" and len(
            j["ranks"]) == 2 else None)(a.job(JOB)), timeout=30)
        self.assertEqual(view["cluster"]["leader"], "a")
        self.assertTrue(view["cluster"]["leads"])
        self.assertEqual({r["rank"]: r["beacon"]["host"] for r in view["ranks"]}, {0: "a", 1: "b"})
        self.assertEqual([n["node"] for n in view["cluster"]["nodes"]], ["a", "b"])
        cb = self.wait_for("b's view of the leader", lambda: (lambda c: c if c["leader"] else None)(self.cluster(b)))
        self.assertEqual(cb["leader"], "a")
        self.assertFalse(cb["leads"])
        # The follower shows the leader's view of the whole job: both ranks, each with its node.
        vb = self.wait_for("b showing the whole job", lambda: (lambda j: j if len(j["ranks"]) == 2 else None)(
            b.job(JOB)))
        self.assertEqual({r["rank"]: r["beacon"]["host"] for r in vb["ranks"]}, {0: "a", 1: "b"})
        status = subprocess.run([self.bin, "status", JOB, "--agent", b.api], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=30)
        self.assertEqual(status.returncode, 0, status.stdout)
        self.assertIn("leader a", status.stdout)
        self.assertEqual([n["node"] for n in vb["cluster"]["nodes"]], ["a", "b"])  # as the leader knows them
        self.assertEqual(rx.pages, [])

        # b. Rank 1 (on b) hangs in its data loader before step 50; rank 0 (on a) waits in the
        # gradient all-reduce. The leader: stalled/collective, rank 1 on b the culprit; one page.
        self.wait_for("the page", lambda: rx.pages, timeout=30)
        time.sleep(1.0)  # five more polls of both agents: nobody pages again
        self.assertEqual(len(rx.pages), 1, rx.pages)
        page = rx.pages[0]
        self.assertEqual((page["state"], page["cause"]), ("stalled", "collective"), page)
        self.assertEqual(page["host"], "a")  # paged by the leader
        self.assertEqual([(c["rank"], c["host"]) for c in page["culprits"]], [(1, "b")], page)
        self.assertIn("rank 1 on b", page["summary"])
        incident_id = page["incident_id"]
        self.assertTrue(incident_id.isdigit(), page)  # etcd's revision of the incident key
        for n in (a, b):  # the job's one incident, in etcd: the same on both nodes
            inc = self.incidents(n)
            self.assertEqual([str(i["id"]) for i in inc], [incident_id], (n.name, inc))
            self.assertEqual(inc[0]["status"], "open")
        # Acked through the follower's agent, seen on the leader's.
        ack = subprocess.run([self.bin, "ack", JOB, "--agent", b.api, "--by", "alice"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=30)
        self.assertEqual(ack.returncode, 0, ack.stdout)
        self.assertIn(incident_id, ack.stdout)
        inc = self.incidents(a)[0]
        self.assertEqual((inc["status"], inc["acked_by"]), ("acked", "alice"), inc)

        # c. The leader's agent is SIGKILLed: b leads within the TTL and a few polls, adopts the
        # same (acked) incident and does not page again.
        t = time.monotonic()
        a.kill()
        self.wait_for("b to lead", lambda: self.cluster(b)["leads"], timeout=TTL + 5, every=0.02)
        failover = time.monotonic() - t
        print(f"\nfailover: b leads {failover:.2f}s after a's agent was SIGKILLed (lease TTL {TTL:.0f}s)",
              file=sys.stderr)
        self.assertLess(failover, TTL + 0.5 + 5 * 0.2 + 1.0)  # TTL + etcd's expiry tick + polls + slack
        jb = self.wait_for("b's verdict on the whole job", lambda: (lambda j: j if j["state"] == "stalled" else None)(
            b.job(JOB)))
        self.assertEqual(jb["cluster"]["leader"], "b")
        # b never read a's summary, but the roster a kept in etcd names a's rank 0: rank-silent on
        # node a, not missing.
        print(f"new leader's view: {jb['state']}/{jb['cause']}, ranks {[r['rank'] for r in jb['ranks']]}",
              file=sys.stderr)
        self.assertEqual(sorted(r["rank"] for r in jb["ranks"]), [0, 1])
        jb = self.wait_for("rank 0 on a named rank-silent", lambda: (
            lambda j: j if j["cause"] == "rank-silent" else None)(b.job(JOB)))
        self.assertIn((0, "a"), [(c["rank"], c.get("host")) for c in jb["culprits"]])
        inc = self.incidents(b)
        self.assertEqual([(str(i["id"]), i["status"], i["acked_by"]) for i in inc], [(incident_id, "acked", "alice")])
        time.sleep(1.0)
        self.assertEqual(len(rx.pages), 1, rx.pages)

        # d. a comes back (at the back of the line). b, now the leader, is SIGSTOPped for more
        # than 2 x TTL: a takes the job over; b wakes with its lease gone and does not lead, its
        # late writes fenced: still one page.
        a.start()
        self.wait_for("a back as a follower", lambda: (lambda c: c["leader"] == "b" and not c["leads"])(self.cluster(a)))
        t = time.monotonic()
        b.signal(signal.SIGSTOP)
        self.wait_for("a to lead while b is stopped", lambda: self.cluster(a)["leads"], timeout=TTL + 5)
        time.sleep(max(0.0, 2.5 * TTL - (time.monotonic() - t)))
        b.signal(signal.SIGCONT)
        self.wait_for("b to see a lead", lambda: (lambda c: c["leader"] == "a" and not c["leads"])(self.cluster(b)))
        time.sleep(2.0)  # ten polls of the woken agent
        self.assertFalse(self.cluster(b)["leads"])
        self.assertTrue(self.cluster(a)["leads"])
        self.assertEqual(len(rx.pages), 1, rx.pages)
        self.assertEqual([str(i["id"]) for i in self.incidents(a)], [incident_id])
        # b stood down: as it found a leading, or, its first poll awake over its etcd budget, as
        # it lost etcd (then its own incident joins the job's page: no second page, above).
        woke = b.log_tail(20000)
        self.assertTrue("this node no longer leads it (a does)" in woke or
                        "etcd does not answer: this node leads it no more" in woke, woke)

        # e. Node b is lost: its agent SIGKILLed, its rank frozen (SIGSTOP: a dead node sends no
        # FIN; a SIGKILLed rank on this one host would have its sockets closed by the kernel and
        # wake rank 0 with an error). Its lease lapses: the leader turns rank 1 rank-silent, node b
        # named, within the TTL and a poll; the open incident goes on, no second page.
        t = time.monotonic()
        b.kill()
        ranks[1].send_signal(signal.SIGSTOP)

        def rank1_silent():
            j = a.job(JOB)
            r1 = [r for r in j["ranks"] if r["rank"] == 1]
            return j if r1 and r1[0]["cause"] == "rank-silent" else None

        ja = self.wait_for("rank 1 rank-silent on a", rank1_silent, timeout=TTL + 5, every=0.02)
        lapse = time.monotonic() - t
        print(f"node lost: rank 1 rank-silent on the leader {lapse:.2f}s after b's agent was SIGKILLed "
              f"(lease TTL {TTL:.0f}s)", file=sys.stderr)
        self.assertLess(lapse, TTL + 0.5 + 0.2 + 1.0)
        self.assertEqual(ja["state"], "stalled")
        self.assertEqual([n["lapsed"] for n in ja["cluster"]["nodes"] if n["node"] == "b"], [True], ja["cluster"])
        self.assertIn("on b", ja["summary"])
        self.assertEqual(len(rx.pages), 1, rx.pages)


class CoordinationLost(MultiNodeBase):
    def test_etcd_killed_and_restarted_and_a_node_cut_off_and_back(self):
        etcd, rx = self.etcd, self.receiver
        fwd = Forwarder(etcd.client_port)
        self.addCleanup(fwd.close)
        a, b = self.node("a", etcd.endpoint), self.node("b", fwd.endpoint)  # b reaches etcd through fwd
        a.start()
        marker = os.path.join(self.tmp, "ranks")
        for rank, node in ((0, a), (1, b)):
            # RANKS with an argv that names this test's directory (the final pgrep looks for it).
            self.start_rank(["/usr/bin/python3", "-c", RANKS, str(rank), "1000000", marker], rank, node, 0)
        self.wait_published(a)
        b.start()
        self.wait_for("a's merged healthy view", lambda: (lambda j: j["state"] == "healthy" and len(
            j["ranks"]) == 2 and j["cluster"]["leads"])(a.job(JOB)), timeout=30)
        # The final check (tearDownClass) is not vacuous: it finds what runs now.
        self.assertEqual(sorted(pgrep(re.escape(self.tmp))), sorted([a.pid, b.pid] + [p.pid for p in self.ranks]))
        self.assertEqual(pgrep(re.escape(self.etcd.dir)), [etcd.pid])

        # f. etcd is killed: both agents say so in /healthz and /metrics, and go on watching.
        etcd.kill()
        for n in (a, b):
            self.wait_for(f"{n.name} disconnected", lambda: not self.connected(n), timeout=5)
            self.assertRegex(get(n.api + "/metrics"),
                             rf'(?m)^stepwatch_agent_coord_connected\{{node="{n.name}"\}} 0$')
            self.assertEqual(n.json("/healthz")["status"], "ok")  # lost coordination fails no liveness probe
        self.assertEqual(a.job(JOB)["state"], "healthy")
        # etcd again, on the same data: connected again, a leads the job's merge again.
        self.assertTrue(etcd.start(), etcd.log_tail())
        t = time.monotonic()
        for n in (a, b):
            self.wait_for(f"{n.name} connected again", lambda: self.connected(n), timeout=10)
            self.assertRegex(get(n.api + "/metrics"),
                             rf'(?m)^stepwatch_agent_coord_connected\{{node="{n.name}"\}} 1$')
        print(f"\netcd restarted: both agents connected again within {time.monotonic() - t:.2f}s", file=sys.stderr)
        self.wait_for("a's merged view again", lambda: (lambda j: j["state"] == "healthy" and len(
            j["ranks"]) == 2 and j["cluster"]["leads"])(a.job(JOB)))
        self.assertEqual(rx.pages, [])

        # g. b is cut off from etcd (the forwarder drops its connections and refuses new ones):
        # b says it is disconnected; the leader sees b's lease lapse: rank 1 rank-silent, node b
        # named. Restored: b connected again, rank 1 back in the leader's view.
        t = time.monotonic()
        fwd.cut()
        self.wait_for("b disconnected", lambda: not self.connected(b), timeout=5)

        def b_lapsed():
            j = a.job(JOB)
            r1 = [r for r in j["ranks"] if r["rank"] == 1]
            lapsed = [n["lapsed"] for n in j["cluster"]["nodes"] if n["node"] == "b"]
            return j if lapsed == [True] and r1 and r1[0]["cause"] == "rank-silent" else None

        ja = self.wait_for("b lapsed on a", b_lapsed, timeout=TTL + 5)
        print(f"partition: b's ranks rank-silent on the leader {time.monotonic() - t:.2f}s after the cut",
              file=sys.stderr)
        self.assertIn("on b", ja["summary"])
        self.assertTrue(self.connected(a))
        fwd.restore()
        self.wait_for("b connected again", lambda: self.connected(b), timeout=10)
        self.wait_for("rank 1 back on a", lambda: (lambda j: not [n for n in j["cluster"]["nodes"] if n["lapsed"]] and
                                                   j["state"] == "healthy")(a.job(JOB)), timeout=10)
        # One page, from the leader: the cut-off node's rank named. b, cut off, pages nothing: its own
        # rank is healthy. Back, the job recovered and the incident closed.
        self.assertEqual(len(rx.pages), 1, rx.pages)
        page = rx.pages[0]
        self.assertEqual((page["state"], page["cause"], page["host"]), ("stalled", "rank-silent", "a"), page)
        self.assertEqual([(c["rank"], c["host"]) for c in page["culprits"]], [(1, "b")], page)
        inc = self.wait_for("the incident closed", lambda: (lambda i: i if i["status"] == "closed" else None)(
            self.incidents(a)[0]))
        self.assertEqual((str(inc["id"]), inc["resolution"]), (page["incident_id"], "recovered"), inc)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def write_preempt_spec(node, url, extra="", runbook=""):
    """As write_spec, and the runbook acts: preempt 1 s after the page unless acked. `runbook`:
    more lines of [runbook]; `extra`: more tables."""
    with open(os.path.join(node.specs, f"{JOB}.toml"), "w") as f:
        f.write(f'job = "{JOB}"\nexpected_interval = "500ms"\ngrace_intervals = 2\n[learn]\nwarmup_steps = 1\n'
                f'[phases]\ndata = "1s"\n[runbook]\nack_timeout = "1s"\npreempt_grace = "2s"\n{runbook}'
                f'[[runbook.pager]]\nurl = "{url}"\ntimeout = "2s"\nretries = 1\n{extra}')


class MultiNodeResume(MultiNodeBase):
    def launch(self, spec_extra="", resume_wait="60s"):
        """Both agents (preempting), and each node's rank under its own `stepwatch run --coord`:
        the real 2-rank trainer whose rank 1 hangs in its data fetch at step 50 of incarnation 0,
        a checkpoint committed every 20 steps. The nodes and the launchers, by node name."""
        etcd, rx = self.etcd, self.receiver
        nodes = {}
        for name in ("a", "b"):
            n = NodeAgent(self.bin, self.tmp, name, etcd.endpoint, extra='preempt_jobs = ["ddp"]')
            write_preempt_spec(n, rx.url, spec_extra)
            self.addCleanup(n.stop)
            nodes[name] = n
        nodes["a"].start()
        ckpt = os.path.join(self.tmp, "ckpt")
        port = free_port()
        launchers = {}
        for rank, name in ((0, "a"), (1, "b")):
            n = nodes[name]
            env = python_env()
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK="0",
                       WORLD_SIZE="2", LOCAL_WORLD_SIZE="1")
            log = open(os.path.join(self.tmp, f"launcher-{name}.log"), "w")
            self.addCleanup(log.close)
            argv = [self.bin, "run", "--coord", etcd.endpoint, "--job", JOB, "--node", name, "--dir", n.root,
                    "--lease-ttl", "1s", "--grace", "2s", "--resume-wait", resume_wait, "--",
                    "/usr/bin/python3", os.path.join(SRC, "examples", "train_ddp.py"), "--steps", "90",
                    "--step-time", "0.05", "--label-data", "--ckpt-dir", ckpt, "--ckpt-every", "20",
                    "--hang-rank", "1", "--hang-at-step", "50", "--hang-incarnation", "0"]
            p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            self.addCleanup(self._kill, p)
            launchers[name] = p
            if name == "a":
                self.wait_published(nodes["a"])  # a first in the leader line
                nodes["b"].start()
        return nodes, launchers

    def wait_finished(self, launchers):
        """Both launchers exit 0, each rank having resumed from the checkpoint at step 40."""
        for name, p in launchers.items():
            try:
                rc = p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.fail(f"the launcher on {name} did not finish: {read(os.path.join(self.tmp, f'launcher-{name}.log'))[-2000:]}")
            self.assertEqual(rc, 0, read(os.path.join(self.tmp, f"launcher-{name}.log"))[-3000:])
        for rank in (0, 1):
            log = read(os.path.join(self.tmp, f"launcher-{'ab'[rank]}.log"))
            self.assertIn("step_40", log)  # the relaunched rank resumed from the committed checkpoint

    def test_each_node_preempts_its_own_rank_once_a_storm_holds_the_relaunch_and_the_job_resumes(self):
        """Each node's agent preempts its own rank once, as the leader orders. With
        storm_incarnations = 1 the first hang is already a restart storm: the leader records
        incarnation 0's end in etcd (culprit rank 1 on b), pages the storm and holds, and the
        launchers wait past their resume_wait. An ack through node b releases it: incarnation 1
        resumes from the committed checkpoint on both nodes and finishes. (Without a storm the
        relaunch follows the preempt at once: agent_coord_test, and e2e_multinode_slurm.)"""
        rx = self.receiver
        nodes, launchers = self.launch("[node_fault]\nstorm_incarnations = 1\n", resume_wait="2s")
        a, b = nodes["a"], nodes["b"]
        t0 = time.monotonic()
        self.wait_for("the page and the storm's page", lambda: len(rx.pages) >= 2, timeout=90)
        page, storm = rx.pages[0], rx.pages[1]
        self.assertEqual([(c["rank"], c["host"]) for c in page["culprits"]], [(1, "b")], page)
        self.assertEqual((storm["state"], storm["severity"], storm["incident_id"]),
                         ("restart-storm", "warning", page["incident_id"]), storm)
        self.assertIn("automatic resume held until acked (stepwatch ack ddp, on any node of the job), then "
                      "incarnation 1 from step_40", storm["summary"])
        held_at = time.monotonic()
        print(f"\nstorm hold paged {held_at - t0:.1f} s after the launchers started", flush=True)

        # Held past the launchers' resume_wait (2 s): they wait, saying why; nothing relaunches.
        time.sleep(3.5)
        for name, p in launchers.items():
            self.assertIsNone(p.poll(), read(os.path.join(self.tmp, f"launcher-{name}.log"))[-2000:])
            self.assertIn("the job's leader holds the next incarnation: restart storm",
                          read(os.path.join(self.tmp, f"launcher-{name}.log")))
        inc = self.incidents(b)
        self.assertEqual((str(inc[0]["id"]), inc[0]["status"]), (page["incident_id"], "open"), inc)
        # E13: b's rank was ended by the leader's order: b's own verdict says so and b retires the
        # job as preempted, never finished. The verdict each node shows is the leader's, and while
        # the leader holds the next incarnation for an ack it stands at the stall its incident is
        # open for. Neither node passed through healthy or finished since the stall.
        self.assertIn(f"agent: job {JOB}: stalled -> preempted: its ranks here were ended by the job leader's "
                      "order", read(b.log))
        self.assertIn(f"agent: job {JOB} retired: job preempted", read(b.log))
        for n in (a, b):
            self.assertEqual(n.job(JOB)["state"], "stalled", n.name)
            moves = [to for _, to in re.findall(rf"agent: job {JOB}: (\w+) -> (\w+)", read(n.log))]
            since_stall = moves[moves.index("stalled"):]
            self.assertFalse({"healthy", "finished"} & set(since_stall), (n.name, since_stall))

        # The job's history is in etcd: every node shows it, and b is implicated by it.
        for n in (a, b):
            nf = self.wait_for(f"{n.name} shows incarnation 0's end", lambda: (
                lambda f: f if any(i["incarnation"] == 0 and i["ended_at"] for i in f["incarnations"]) else None)(
                    n.job(JOB)["node_fault"]), timeout=15)
            ended = [i for i in nf["incarnations"] if i["incarnation"] == 0][0]
            self.assertEqual((ended["end_reason"], ended["culprit_hosts"], sorted(ended["hosts"])),
                             ("preempted", ["b"], ["a", "b"]), nf)
            self.assertIsNotNone(nf["restart_storm"], nf)
            hosts = {h["host"]: h for h in n.json("/api/v1/hosts")["hosts"]}
            self.assertEqual(hosts["b"]["implications"], 1, hosts)

        # The ack, on the follower, releases the hold: incarnation 1 from step_40 on both nodes.
        ack = subprocess.run([self.bin, "ack", JOB, "--agent", b.api, "--by", "alice"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=30)
        self.assertEqual(ack.returncode, 0, ack.stdout)
        self.wait_finished(launchers)
        inc = self.wait_for("the incident closed", lambda: (
            lambda i: i if i and i[0]["status"] == "closed" else None)(self.incidents(a)), timeout=30)
        self.assertIn("acked restart storm; preempted on 2 node(s) (a, b); relaunched as incarnation 1 from "
                      "step_40", inc[0]["resolution"])
        done = self.wait_for("the job finished on the leader", lambda: (
            lambda j: j if j["state"] == "finished" else None)(a.job(JOB)), timeout=20)
        self.assertEqual({r["beacon"]["incarnation"] for r in done["ranks"]}, {1})
        # Two pages, the stall's and the storm's: none for the preempted ranks.
        self.assertEqual(len(rx.pages), 2, rx.pages)
        # Each node carried the order out once, on its own rank.
        for n in (a, b):
            actions = [l for l in read(n.log).splitlines() if "as ordered by a" in l and "preempted on this node" in l]
            self.assertEqual(len(actions), 1, (n.name, actions))


class TwoLaunchers(MultiNodeBase):
    """Both agents, and each node's rank of the real 2-rank trainer under its own `stepwatch run
    --coord` (rank 1 hangs at step 50 of incarnation 0; a checkpoint every 20 steps), no restart
    storm: the helpers of RestartTogether and of test_multinode_kubernetes."""

    def start_launcher(self, name, port, grace="2s", wrap=None, env_extra=None):
        """Node `name`'s launcher of its rank (a: rank 0, b: rank 1); `wrap` is a shell line the
        trainer's command is appended to. Appends to launcher-<name>.log."""
        rank = "ab".index(name)
        n = self.nodes[name]
        env = python_env()
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2",
                   LOCAL_WORLD_SIZE="1", **(env_extra or {}))
        log = open(os.path.join(self.tmp, f"launcher-{name}.log"), "a")
        self.addCleanup(log.close)
        trainer = ["/usr/bin/python3", os.path.join(SRC, "examples", "train_ddp.py"), "--steps", "90",
                   "--step-time", "0.05", "--label-data", "--ckpt-dir", os.path.join(self.tmp, "ckpt"),
                   "--ckpt-every", "20", "--hang-rank", "1", "--hang-at-step", "50", "--hang-incarnation", "0",
                   "--resume-from-env"]  # from the checkpoint the launcher names, not the newest on disk
        cmd = trainer if wrap is None else ["/bin/sh", "-c", wrap + ' exec "$@"', "sh"] + trainer
        argv = [self.bin, "run", "--coord", self.etcd.endpoint, "--job", JOB, "--node", name, "--dir", n.root,
                "--lease-ttl", "1s", "--grace", grace, "--resume-wait", "60s", "--", *cmd]
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(self._kill, p)
        return p

    def launch(self, restart_wait, wrap_a=None, grace_a="2s", wrap_b=None, runbook="", env=None, spec_extra=""):
        """Both agents (preempting, [coord] restart_wait, `runbook` lines and `spec_extra` tables in
        the spec) and both launchers (`env` added to theirs), a first."""
        self.nodes = {}
        for name in ("a", "b"):
            n = NodeAgent(self.bin, self.tmp, name, self.etcd.endpoint, extra='preempt_jobs = ["ddp"]',
                          coord_extra=f'restart_wait = "{restart_wait}"')
            write_preempt_spec(n, self.receiver.url, runbook=runbook, extra=spec_extra)
            self.addCleanup(n.stop)
            self.nodes[name] = n
        self.nodes["a"].start()
        self.port = free_port()
        launchers = {"a": self.start_launcher("a", self.port, grace_a, wrap_a, env)}
        self.wait_published(self.nodes["a"])  # a first in the leader line
        self.nodes["b"].start()
        launchers["b"] = self.start_launcher("b", self.port, wrap=wrap_b, env_extra=env)
        return launchers

    def log_of(self, name):
        return read(os.path.join(self.tmp, f"launcher-{name}.log"))

    def barrier_wait(self, name):
        """Seconds the launcher on `name` waited at the start barrier of incarnation 1."""
        m = re.search(r"incarnation 1: every node is ready: starting after ([0-9.]+)(ms|s) at the barrier",
                      self.log_of(name))
        self.assertIsNotNone(m, self.log_of(name)[-3000:])
        return float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)

    def finished(self, launchers, resumed_from="step_40"):
        """Each launcher exits 0, its rank having resumed from `resumed_from` (None: not checked),
        as its launcher named it (the trainer resumes from nothing else: --resume-from-env)."""
        for name, p in launchers.items():
            try:
                rc = p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.fail(f"the launcher on {name} did not finish: {self.log_of(name)[-3000:]}")
            self.assertEqual(rc, 0, self.log_of(name)[-3000:])
            if resumed_from:
                self.assertIn(f"[rank {'ab'.index(name)}] resumed from {resumed_from} ", self.log_of(name))

    def closed_incident(self, node):
        return self.wait_for("the incident closed", lambda: (
            lambda i: i if i and i[0]["status"] == "closed" else None)(self.incidents(node)), timeout=60)



class RestartTogether(TwoLaunchers):
    """Nodes restart together (docs/multinode.md, "The runbook across nodes", 4): the leader moves
    the incarnation only once every node has a live launcher, and the launchers start it at one
    barrier once every node's cleanup is done."""

    def test_a_node_slow_to_clean_up_holds_every_node_at_the_start_barrier(self):
        """Node a's incarnation 0 leaves a process behind that ignores SIGTERM: a's launcher
        cleans it up (SIGTERM, its 4 s grace, SIGKILL) before it is ready. b, clean at once,
        waits at the barrier for a; neither starts incarnation 1 before a is clean, and both
        start it together."""
        leftover = ("if [ \"$STEPWATCH_INCARNATION\" = 0 ]; then (trap '' TERM; exec /usr/bin/python3 -c "
                    f"'import time; time.sleep(600)' {self.tmp}/leftover) & fi;")
        launchers = self.launch("30s", wrap_a=leftover, grace_a="4s")
        rx = self.receiver
        t0 = time.monotonic()
        self.wait_for("the stall's page", lambda: rx.pages, timeout=90)
        self.assertEqual([(c["rank"], c["host"]) for c in rx.pages[0]["culprits"]], [(1, "b")], rx.pages[0])
        # b is ready first and waits; a is still cleaning up: b has not started incarnation 1.
        self.wait_for("b at the barrier", lambda: "incarnation 1: cleanup done on b; waiting at the start barrier"
                      in self.log_of("b"), timeout=60)
        self.wait_for("a cleaning up its leftover", lambda: "leftover before incarnation 1" in self.log_of("a"))
        self.assertNotIn("launched incarnation 1", self.log_of("b"))
        evidence = self.wait_for("the job's verdict naming a", lambda: [
            e["value"] for e in self.nodes["b"].job(JOB)["evidence"]
            if e["name"] == "restart" and "node(s) a (cleaning up" in e["value"]], timeout=10)
        print(f"\nwhile a cleans up, the job's verdict on b says: {evidence[0]}", flush=True)
        self.wait_for("a ready", lambda: "cleanup done on a" in self.log_of("a"), timeout=30)
        self.assertNotIn("launched incarnation 1", self.log_of("b"), "b started before a was clean")
        self.assertIn("SIGKILL", self.log_of("a"))  # the leftover ignored SIGTERM for the whole grace
        self.finished(launchers)
        waited = {n: self.barrier_wait(n) for n in "ab"}
        print(f"at the barrier: b waited {waited['b']:.1f} s for a, a {waited['a']:.1f} s; "
              f"job done {time.monotonic() - t0:.1f} s after the launch", flush=True)
        self.assertGreaterEqual(waited["b"], 2.0, waited)  # a's grace is 4 s
        self.assertLess(waited["a"], waited["b"], waited)
        inc = self.closed_incident(self.nodes["a"])
        self.assertIn("relaunched as incarnation 1 from step_40; every node started it together", inc[0]["resolution"])
        self.assertEqual(len(rx.pages), 1, rx.pages)  # a's cleanup took less than restart_wait

    def test_a_dead_launcher_is_paged_and_the_job_restarts_whole_once_it_is_back(self):
        """b's launcher is SIGKILLed while incarnation 0 runs (its rank runs on, and hangs). The
        leader preempts both ranks, waits for b's launcher, and pages once past restart_wait (3 s)
        that the job cannot restart whole, naming b; the job's verdict names b meanwhile. b's
        launcher started again waits (its incarnation was preempted) and the job restarts whole:
        both ranks start incarnation 1 at the barrier and finish from the checkpoint."""
        # Incarnation 0 of rank 1 writes to a file, not through its launcher: a dead launcher's pipe
        # would end it on its next line (SIGPIPE), and this test is of the launcher alone.
        launchers = self.launch("3s", wrap_b=f'[ "$STEPWATCH_INCARNATION" = 0 ] && exec >>{self.tmp}/rank1-0.log 2>&1;')
        rx = self.receiver
        a = self.nodes["a"]
        self.wait_for("both ranks stepping", lambda: (lambda j: j if j["last_step"] and j["last_step"] >= 5 else None)(
            a.job(JOB)), timeout=60)
        launchers["b"].kill()
        launchers["b"].wait()
        self.wait_for("the stall's page and the restart-blocked page", lambda: len(rx.pages) >= 2, timeout=90)
        page, blocked = rx.pages[0], rx.pages[1]
        self.assertEqual([(c["rank"], c["host"]) for c in page["culprits"]], [(1, "b")], page)
        self.assertEqual((blocked["state"], blocked["incident_id"]), ("restart-blocked", page["incident_id"]), blocked)
        self.assertIn("cannot restart whole: incarnation 1 waits for node(s) b (no `stepwatch run --coord` under a "
                      "lease", blocked["summary"])
        restart = [e["value"] for e in a.job(JOB)["evidence"] if e["name"] == "restart"]
        self.assertTrue(restart and "node(s) b (no `stepwatch run --coord`" in restart[0], a.job(JOB)["evidence"])
        inc = self.incidents(a)
        self.assertEqual((str(inc[0]["id"]), inc[0]["status"]), (page["incident_id"], "open"), inc)
        self.assertNotIn("launched incarnation 1", self.log_of("a"))
        print(f"\nrestart-blocked page: {blocked['summary']}", flush=True)

        launchers["b"] = self.start_launcher("b", self.port)
        self.wait_for("b's new launcher waiting past the preempted incarnation", lambda: (
            f"incarnation 0 was preempted (incident {page['incident_id']}) before this launcher started"
            in self.log_of("b")), timeout=20)
        self.finished(launchers)
        for n in "ab":
            self.barrier_wait(n)
        inc = self.closed_incident(a)
        self.assertIn("relaunched as incarnation 1 from step_40; every node started it together", inc[0]["resolution"])
        self.assertEqual(len(rx.pages), 2, rx.pages)
        done = self.wait_for("the job finished on the leader", lambda: (
            lambda j: j if j["state"] == "finished" else None)(a.job(JOB)), timeout=20)
        self.assertEqual({r["beacon"]["incarnation"] for r in done["ranks"]}, {1})


class LauncherExit(MultiNodeBase):
    def etcd_call(self, path, body):
        req = urllib.request.Request(self.etcd.endpoint + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def put(self, key, value, lease=None):
        """Puts the key; the store's revision after it (a new key's create revision)."""
        body = {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value.encode()).decode()}
        if lease:
            body["lease"] = lease
        reply = self.etcd_call("/v3/kv/put", body)
        return int(reply["header"]["revision"])

    def launch(self, resume_wait):
        """A launcher whose command exits 3 at once: it waits for the incarnation to move."""
        log_path = os.path.join(self.tmp, "launcher.log")
        with open(log_path, "w") as log:
            p = subprocess.Popen([self.bin, "run", "--coord", self.etcd.endpoint, "--job", JOB, "--node", "a",
                                  "--dir", self.tmp, "--lease-ttl", "1s", "--resume-wait", resume_wait, "--",
                                  "/bin/sh", "-c", "exit 3"],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(self._kill, p)
        return p, log_path

    def test_a_storm_hold_waits_past_resume_wait_only_while_its_incident_is_open(self):
        incident = self.put(f"/stepwatch/v1/jobs/{JOB}/incident", "{}")
        self.put(f"/stepwatch/v1/jobs/{JOB}/incarnation",
                 json.dumps({"incarnation": 0, "hold_incident": incident, "hold": "restart storm: test"}))
        p, log_path = self.launch("2s")
        time.sleep(3.5)
        self.assertIsNone(p.poll(), read(log_path))
        self.assertIn("the job's leader holds the next incarnation: restart storm: test", read(log_path))
        # The incident goes (closed elsewhere, the job abandoned): the hold no longer holds.
        key = base64.b64encode(f"/stepwatch/v1/jobs/{JOB}/incident".encode()).decode()
        self.etcd_call("/v3/kv/deleterange", {"key": key})
        self.assertEqual(p.wait(timeout=15), 3, read(log_path))
        self.assertIn(f"the hold's incident {incident} is no longer open", read(log_path))

    def test_a_scheduler_owned_incarnation_ends_the_launcher_with_its_exit_code(self):
        """The leader moved the job for a scheduler that restarts on an exit status (Kubernetes'
        128-255, Slurm's RequeueExit): the waiting launcher exits with that code, not the job's."""
        p, log_path = self.launch("60s")
        self.wait_for("the launcher waiting for the move", lambda: "waiting up to 1m00s" in read(log_path))
        # What a launcher checks before it obeys a move (docs/multinode.md): incident 7 is one of
        # the job's (closed here), and its leader b is a node of the job under a lease.
        lease = self.etcd_call("/v3/lease/grant", {"TTL": 60})["ID"]
        self.put(f"/stepwatch/v1/jobs/{JOB}/nodes/b", "{}", lease)
        self.put(f"/stepwatch/v1/jobs/{JOB}/incidents/{7:020d}", "{}")
        self.put(f"/stepwatch/v1/jobs/{JOB}/incarnation",
                 json.dumps({"incarnation": 1, "by": "b", "incident": 7, "scheduler": "kubernetes",
                             "exit_code": 175}))
        self.assertEqual(p.wait(timeout=20), 175, read(log_path))
        self.assertIn("kubernetes restarts the job on its exit status", read(log_path))


if __name__ == "__main__":
    unittest.main()
