# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Faults and forgeries in etcd against a healthy or stalled multi-node job (issue 26, point 9):
the reproductions E1-E12 of the reliability review and the faults of etcd and of one node, each
against real processes.

Every test: one real etcd (/usr/bin/etcd), two real `stepwatch agent` nodes "a" and "b"
(preempt_jobs = ["*"], lease 1 s, polls 200 ms, request_timeout 500 ms), a real webhook
receiver, and a job of two real trainers (the Python package, ctypes binding; no torch) stepping
every 100 ms: rank 0 under a's root, rank 1 under b's, a first in the leader line. The spec: a
step every 200 ms, stalled after 5, [auto_preempt] after one stalled verdict, ack_timeout 1 s. A
stall is both trainers SIGSTOPped. A bystander `sleep 300` of the same user runs beside them.

- E1  a forged order (no leader, no incident): nothing is preempted, nothing paged.
- E2  a lease-less garbage key under nodes/ before the job starts: no phantom leader; a stall is
      paged once.
- E3  a forged summary of a node that does not exist (ranks 2 and 3, 60 s old, one naming the
      bystander), lease-less, then under a lease of its own claiming a world of 4: not merged, no
      page, no preempt.
- E5  1.2 MB of nested brackets (refused by size) and 100,000 levels in 200 KB (by depth) in
      summaries (lease-less and leased) and in the job's view: both agents live on and say what
      they skipped; a stall is still paged once.
- E6  garbage values under orders/: a stall is paged once and preempted, coordination never
      flaps, each bad key is said at most once.
- E7  a dead job (rank 0 crashed while rank 1 hung, then preempted) when etcd loses its data
      mid-incident: no page storm (at most one incident after the loss, paged once, whose
      preempt ends nothing and keeps it open), and no incident id seen before the loss again.
- E10 against a real Slurm (slurm_support.py): a user's `stepwatch run --coord` with
      SLURM_JOB_ID="--state=RUNNING" refuses to start; launcher keys forged with that id reach no
      scontrol or scancel command line, and another batch job of the cluster runs on.
- E11 a 1.4 MB summary of thousands of ranks, re-put every 200 ms (and once under a lease): the
      job still has 2 ranks.
- E12 a forged incarnation against `stepwatch run --coord` launchers: no relaunch, no exit, and
      the launcher says why.
- The leader's agent SIGKILLed mid-incident: the other node takes the incident over, one page.
- The leader's agent SIGSTOPped past its TTL mid-incident, then SIGCONT: the other node takes
  the incident over, the woken agent stands down, one page.
- etcd SIGKILLed mid-incident and started again on its data: the job's incident is adopted
  again, not paged again; meanwhile each node pages its own ranks' stall from its own store.
- etcd SIGKILLed mid-incident and started again with its data directory deleted: the stall is
  paged again, once, under an id larger than any seen before.
- b cut off from etcd (a TCP forwarder, etcd_support.Forwarder) while its rank stalls: b pages
  its own stall from its own store, the leader the job's; back, b hands its incident over and
  nothing more is paged.
- etcd SIGSTOPped for 5 s: /healthz answers and the poll loop goes on (E8); after SIGCONT the
  job is whole again, no page.
- etcd SIGSTOPped while the ranks stall (E8): each node pages its own rank's stall from its own
  store in time; after SIGCONT the leader pages the job's incident, and no node pages its stall
  again (a follower did, as the leader waited out its rejoin: 3 runs in 6).

After each: no agent exited that the test did not kill, the bystander still runs (neither killed
nor stopped), and the receiver's pages are counted per incident id: one page per incident; in
degraded mode (docs/multinode.md) each node may add one incident of its own, acked on that node,
paged once. Each stall is paged within the grace and two polls (1.4 s; while etcd hangs, a
poll lasts up to two request timeouts longer) whatever etcd does.
"""

import base64
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import swtest  # noqa: E402
from agent_support import NodeAgent, Receiver, left_behind  # noqa: E402
from etcd_support import ETCD, Etcd, Forwarder  # noqa: E402
from slurm_support import SlurmCluster, slurm_binary  # noqa: E402
from swtest import python_env, stepwatch_bin  # noqa: E402

JOB = "mx"
PREFIX = "/stepwatch/v1"
TTL = 1.0
POLL = 0.2
REQUEST_TIMEOUT = 0.5
GRACE = 5 * 0.2  # the spec's grace_intervals x expected_interval
# Whatever etcd does, a node's own stall is paged within the grace and two polls.
STALL_PAGED = GRACE + 2 * POLL
# A poll while etcd hangs lasts up to its etcd budget longer: two request timeouts (E8).
STALL_PAGED_HUNG = GRACE + 2 * (POLL + 2 * REQUEST_TIMEOUT)

# A rank of the job: its identity from the environment (STEPWATCH_JOB, STEPWATCH_DIR, RANK,
# WORLD_SIZE, or what `stepwatch run` sets), a step every 100 ms through the Python package.
# Its first line says which process it is and where its beacon is.
TRAINER = r"""
import os, sys, time, stepwatch
stepwatch.init()
print(f"launched pid={os.getpid()} beacon={stepwatch.path()}", flush=True)
n = 0
while True:
    time.sleep(0.1)
    stepwatch.step(n)
    n += 1
"""

# The 1.2 MB nesting of E5: etcd takes it (under its 1.5 MiB request limit).
DEEP = "[" * 600000 + "]" * 600000


def write_spec(node, url, top="", runbook="", tail=""):
    """The same spec on every node: stalled 1 s after the last step, preempted after one stalled
    verdict and a 1 s ack timeout, paged to the receiver. A case adds keys: `top` at the top
    level, `runbook` under [runbook], `tail` (tables) at the end."""
    with open(os.path.join(node.specs, f"{JOB}.toml"), "w") as f:
        f.write(f'job = "{JOB}"\nexpected_interval = "200ms"\ngrace_intervals = 5\n{top}[learn]\nwarmup_steps = 1\n'
                f'[auto_preempt]\nenabled = true\nmisses = 1\n'
                f'[runbook]\nack_timeout = "1s"\npreempt_grace = "2s"\n{runbook}'
                f'[[runbook.pager]]\nurl = "{url}"\ntimeout = "2s"\nretries = 1\n{tail}')


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def proc_state(pid):
    """The state letter of /proc/<pid>/stat ('R', 'S', 'T', 'Z'...), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def start_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CoordMatrix(unittest.TestCase):
    markers = []  # every temporary path the class's processes name in their argv

    @classmethod
    def tearDownClass(cls):
        left = left_behind(cls.markers)
        if left:
            raise AssertionError(f"processes left behind: {left}")

    def setUp(self):
        self.assertTrue(os.access(ETCD, os.X_OK), "etcd is not installed: scripts/setup-deps.sh installs etcd-server")
        self.t0 = time.monotonic()
        self.bin = stepwatch_bin()
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-coordmatrix-")
        self.markers.append(self.tmp)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.etcd = Etcd()
        self.markers.append(self.etcd.dir)
        self.addCleanup(self.etcd.close)
        self.addCleanup(self._cont_etcd)  # a test that SIGSTOPs etcd and fails leaves it stopped
        self.rx = Receiver()
        self.addCleanup(self.rx.close)
        # A process of the same user that is none of the job's: nothing may signal it.
        self.bystander = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, start_new_session=True)
        self.addCleanup(self._kill, self.bystander)
        self.trainers = []
        self.killed = set()  # the agents this test kills on purpose
        self.a, self.b = self.node("a"), self.node("b")
        self.a.start()
        self.b.start()

    def tearDown(self):
        print(f"\n{self.id().rsplit('.', 1)[1]}: {time.monotonic() - self.t0:.1f} s", file=sys.stderr, flush=True)

    def _cont_etcd(self):
        if self.etcd.proc is not None:
            self.etcd.proc.send_signal(signal.SIGCONT)

    def node(self, name, endpoint=None):
        n = NodeAgent(self.bin, self.tmp, name, endpoint or self.etcd.endpoint, ttl=f"{TTL:.0f}s",
                      poll=f"{POLL * 1000:.0f}ms", request_timeout=f"{REQUEST_TIMEOUT * 1000:.0f}ms",
                      extra='preempt_jobs = ["*"]')
        write_spec(n, self.rx.url)
        self.addCleanup(n.stop)
        return n

    def respec(self, **keys):
        """Both nodes' spec with a case's own keys (write_spec's); before the job starts."""
        for n in (self.a, self.b):
            write_spec(n, self.rx.url, **keys)

    def b_through_forwarder(self):
        """b again, reaching etcd through a TCP forwarder: its cut() partitions b from etcd, and
        nothing else."""
        fwd = Forwarder(self.etcd.client_port)
        self.addCleanup(fwd.close)
        self.b.stop()
        self.b = self.node("b", fwd.endpoint)
        self.b.start()
        return fwd

    @staticmethod
    def _kill(p):
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
        p.wait()

    @staticmethod
    def _stop_launcher(p, log):
        """SIGTERM (the launcher ends its child), SIGKILL after 10 s; then any child it left."""
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for pid in re.findall(r"launched pid=(\d+)", read(log)):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass

    # etcd, through its JSON gateway.
    def etcd_call(self, path, body, timeout=10):
        req = urllib.request.Request(self.etcd.endpoint + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    @staticmethod
    def key(rel):
        return f"{PREFIX}/jobs/{JOB}/{rel}"

    def put(self, rel, value, lease=None):
        """Puts the job's key `rel` (no lease unless one is given); the store's revision after it."""
        body = {"key": base64.b64encode(self.key(rel).encode()).decode(),
                "value": base64.b64encode(value.encode()).decode()}
        if lease is not None:
            body["lease"] = lease
        return int(self.etcd_call("/v3/kv/put", body)["header"]["revision"])

    def get(self, rel):
        r = self.etcd_call("/v3/kv/range", {"key": base64.b64encode(self.key(rel).encode()).decode()})
        kvs = r.get("kvs", [])
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def keys_under(self, rel):
        start = self.key(rel)
        end = start[:-1] + chr(ord(start[-1]) + 1)
        r = self.etcd_call("/v3/kv/range", {"key": base64.b64encode(start.encode()).decode(),
                                            "range_end": base64.b64encode(end.encode()).decode(), "keys_only": True})
        return [base64.b64decode(kv["key"]).decode() for kv in r.get("kvs", [])]

    def lease(self, ttl=120):
        return self.etcd_call("/v3/lease/grant", {"TTL": ttl})["ID"]

    # The job.
    def start_trainer(self, rank, node):
        env = python_env()
        env.update(STEPWATCH_JOB=JOB, STEPWATCH_DIR=node.root, RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2")
        log = os.path.join(self.tmp, f"rank-{rank}.log")
        with open(log, "w") as out:
            # The argv names this test's directory: the final pgrep finds a trainer left behind.
            p = subprocess.Popen(["/usr/bin/python3", "-c", TRAINER, self.tmp], env=env, stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT)
        self.addCleanup(self._kill, p)
        p.log = log
        self.trainers.append(p)
        return p

    def beacon_step(self, p):
        m = self.wait_for(f"pid {p.pid}'s beacon", lambda: re.search(r"beacon=(\S+)", read(p.log)), timeout=15)
        return swtest.read_beacon(m.group(1))["step"]

    def start_job(self):
        """Rank 0 under a, then (a's summary first in etcd: a leads) rank 1 under b; until a leads
        a healthy view of both ranks and b names a as the leader."""
        self.start_trainer(0, self.a)
        self.wait_for("a's first summary", lambda: self.a.json("/healthz")["coord"]["summaries_published_total"] > 0,
                      timeout=30)
        self.start_trainer(1, self.b)
        self.wait_for("a's merged healthy view", lambda: (lambda j: j["state"] == "healthy" and len(
            j["ranks"]) == 2 and j["cluster"]["leads"])(self.a.job(JOB)), timeout=30)
        self.wait_for("b following a, showing both ranks", lambda: (lambda j: j["cluster"]["leader"] == "a" and not j[
            "cluster"]["leads"] and len(j["ranks"]) == 2)(self.b.job(JOB)), timeout=10)

    def stall(self):
        for p in self.trainers:
            p.send_signal(signal.SIGSTOP)

    def job_pages(self):
        """{incident_id: pages} for this job, from the receiver's bodies."""
        return collections.Counter(str(p.get("incident_id")) for p in list(self.rx.pages) if p.get("job", JOB) == JOB)

    def page_groups(self):
        """The job's pages by dedup key: ({incident id: pages} of the job's incident, opened in
        etcd by its leader; {(node, local id): pages} of a node's own incident, opened in its own
        store while etcd did not answer it). A node's own incident is acked there (its page's
        ack_command names that node's --state-dir), the job's on any node."""
        job, local = collections.Counter(), collections.Counter()
        for p in list(self.rx.pages):
            if p.get("job", JOB) != JOB:
                continue
            if "--state-dir" in p.get("ack_command", ""):
                local[(p.get("host"), str(p.get("incident_id")))] += 1
            else:
                job[str(p.get("incident_id"))] += 1
        return job, local

    def paged_in_time(self, stalled_at, host=None, bound=STALL_PAGED):
        """The first page after `stalled_at` (time.time() of the stall), from `host` when one is
        named, came within `bound` of it."""
        pages = list(self.rx.pages)
        times = [t for t, p in zip(list(self.rx.times), pages)
                 if t >= stalled_at and (host is None or p.get("host") == host)]
        self.assertTrue(times, f"no page from {host or 'any node'} after the stall\n{self.unexpected_pages()}")
        took = min(times) - stalled_at
        print(f"\n{self.id().rsplit('.', 1)[1]}: paged{' by ' + host if host else ''} {took:.2f} s after the stall",
              file=sys.stderr)
        self.assertLessEqual(took, bound, f"paged {took:.2f} s after the stall\n{self.unexpected_pages()}")

    def page_recorded(self):
        """Until the leader recorded the page's delivery in the job's incident in etcd: a fault
        from then on is mid-incident, not mid-delivery (a delivered page whose delivery could not
        be recorded is sent again, E14 of the review). The incident's id."""
        def recorded():
            v = self.get("incident")
            return v is not None and json.loads(v).get("delivered_at_ns")

        self.wait_for("the page's delivery recorded in etcd", recorded, timeout=5)
        ids = list(self.page_groups()[0])
        self.assertEqual(len(ids), 1, self.unexpected_pages())
        return ids[0]

    def connected(self, node):
        return node.json("/healthz")["coord"]["connected"]

    def unexpected_pages(self):
        pages = [(p.get("incident_id"), p.get("host"), p.get("summary")) for p in self.rx.pages]
        return f"pages (incident, paged by, summary): {pages}\n{self.logs()}"

    def ranks(self, node):
        return sorted(r["rank"] for r in node.job(JOB)["ranks"])

    def wait_for(self, what, check, timeout=20, every=0.05):
        return swtest.wait_for(what, check, timeout, every, details=self.logs)

    def logs(self):
        return "\n".join(f"--- agent {n.name}:\n{n.log_tail(4000)}" for n in (self.a, self.b))

    def hold(self, seconds, check, every=0.2):
        """check() (which asserts) every `every` s for `seconds` s."""
        deadline = time.monotonic() + seconds
        while True:
            check()
            if time.monotonic() >= deadline:
                return
            time.sleep(every)

    def agents_alive(self):
        for n in (self.a, self.b):
            if n.name not in self.killed:
                self.assertIsNone(n.proc.poll(), f"agent {n.name} exited; its log ends:\n{n.log_tail()}")

    def healthy_job(self):
        """Both agents alive, both trainers running, the job running on the leader (healthy; a
        step late on a loaded machine is suspect or slow, never stalled)."""
        self.agents_alive()
        for p in self.trainers:
            self.assertIsNone(p.poll(), f"trainer {p.pid} exited:\n{read(p.log)[-1000:]}\n{self.logs()}")
        self.assertIn(self.a.job(JOB)["state"], ("healthy", "suspect", "slow"), self.logs())

    def preempted_on_both_nodes(self):
        """E13: once the job's order ended every rank, each node reads the job preempted (the
        leader's verdict, which the follower shows), and neither passed through healthy or
        finished since the stall (the ranks' way out under SIGTERM is not a recovery)."""
        for n in (self.a, self.b):
            self.wait_for(f"{n.name} reads the job preempted", lambda: n.job(JOB)["state"] == "preempted", timeout=5)
            moves = [to for _, to in re.findall(rf"agent: job {JOB}: (\w+) -> (\w+)", read(n.log))]
            since_stall = moves[moves.index("stalled"):]
            self.assertFalse({"healthy", "finished"} & set(since_stall), (n.name, since_stall))

    def invariants(self):
        """What holds after every case: no agent exited but those the test killed, the bystander
        neither killed nor stopped. The job's pages per incident id."""
        self.agents_alive()
        self.assertIsNone(self.bystander.poll(), "the bystander was killed")
        self.assertNotIn(proc_state(self.bystander.pid), ("T", "t", None), "the bystander was stopped")
        return self.job_pages()

    # E1.
    def test_e1_a_forged_order_preempts_nothing(self):
        self.start_job()
        steps = [self.beacon_step(p) for p in self.trainers]
        self.put(f"orders/{999:020d}", json.dumps({"incident": 999, "incarnation": 0, "collect": False,
                                                   "by": "attacker", "at_ns": 0}))
        self.hold(2.5, self.healthy_job)
        after = [self.beacon_step(p) for p in self.trainers]
        self.assertTrue(all(s1 >= s0 + 10 for s0, s1 in zip(steps, after)), (steps, after))
        for n in (self.a, self.b):
            j = n.job(JOB)
            self.assertIn(j["state"], ("healthy", "suspect", "slow"), n.name)
            self.assertEqual((j["incidents_total"], j["actions_total"]), (0, {}), n.name)
            self.assertIn(f"job {JOB}: order 999 not carried out", read(n.log), n.name)
        self.assertEqual(self.keys_under("done/"), [])  # not reported either
        self.assertEqual(self.invariants(), {}, self.unexpected_pages())

    # E2.
    def test_e2_a_leaseless_node_key_leads_nothing_and_a_stall_is_paged_once(self):
        self.put("nodes/ghost", "garbage-not-json")
        self.start_job()  # a leads, b follows a: asserted there
        self.hold(1.0, lambda: [self.assertIn(n.job(JOB)["cluster"]["leader"], ("a", "b")) for n in (self.a, self.b)])
        t = time.monotonic()
        self.stall()
        self.wait_for("the page", self.job_pages, timeout=15)
        print(f"\nE2: paged {time.monotonic() - t:.1f} s after the stall", file=sys.stderr)
        time.sleep(3 * TTL)  # a follower's own page would come a TTL after the stall
        pages = self.invariants()
        self.assertEqual(list(pages.values()), [1], self.rx.pages)
        self.assertEqual(self.rx.pages[0]["host"], "a")
        # E17: the bad key, read every poll for seconds, is said once per node; its next value
        # once more.
        ghost = f"skipped etcd key {self.key('nodes/ghost')}:"
        for n in (self.a, self.b):
            self.assertLessEqual(read(n.log).count(ghost), 1, n.name)
        self.put("nodes/ghost", "other-garbage")
        time.sleep(5 * POLL)
        self.assertTrue(any(read(n.log).count(ghost) >= 1 for n in (self.a, self.b)), self.logs())
        for n in (self.a, self.b):
            self.assertLessEqual(read(n.log).count(ghost), 2, n.name)

    # E3.
    def test_e3_a_forged_summary_of_a_node_that_does_not_exist_is_not_merged(self):
        self.start_job()
        real = json.loads(self.get("nodes/a"))

        def forged(node, world_size):
            """a's summary as node `node`'s: ranks 2 and 3, their last step 60 s old, rank 2 naming
            the bystander (with its real start time), rank 3 rank 1's trainer on b."""
            now = real["obs"]["now"]
            old = [now[0] - 60 * 10**9, now[1] - 60 * 10**9]
            ranks, procs = [], []
            for rank, pid in ((2, self.bystander.pid), (3, self.trainers[1].pid)):
                ranks.append(dict(real["obs"]["ranks"][0], rank=rank, local_rank=rank, pid=pid,
                                  pid_start_ticks=start_ticks(pid), step=3, step_at=old, created=old,
                                  phase_since=old, recent=[], world_size=world_size))
                procs.append({"alive": True, "rank": rank, "same_process": True, "state": "S", "threads_in_d": 0,
                              "wchan": ""})
            return json.dumps(dict(real, node=node, obs=dict(real["obs"], ranks=ranks, procs=procs)))

        def whole(nodes=None):
            self.healthy_job()
            for n in (self.a, self.b):
                j = n.job(JOB)
                self.assertEqual(sorted(r["rank"] for r in j["ranks"]), [0, 1], n.name)
                if nodes is not None:
                    self.assertEqual([x["node"] for x in j["cluster"]["nodes"]], nodes, n.name)
            self.assertEqual(self.job_pages(), {}, self.unexpected_pages())

        # As in the review: no lease.
        self.put("nodes/vm", forged("vm", 2))
        self.hold(2.5, lambda: whole(["a", "b"]))
        self.assertIn(f"skipped etcd key {self.key('nodes/vm')}: not under a lease", read(self.a.log))
        # A forger with a lease of its own, whose ranks claim a world of 4: a node, but its ranks
        # are outside the job's world of 2 (what the beacons say).
        self.put("nodes/vm4", forged("vm4", 4), lease=self.lease())
        self.hold(2.5, whole)
        self.assertIn("node vm4 lists 2 rank(s) outside the job's world of 2: ignored", read(self.a.log))
        self.assertEqual(self.invariants(), {}, self.unexpected_pages())

    # E5.
    def test_e5_deeply_nested_json_crashes_no_agent_and_a_stall_is_still_paged(self):
        self.start_job()

        def summary(node, nesting):
            return '{"v":1,"node":"%s","poll_seq":1,"incarnation":0,"obs":{"type":"obs","deep":%s}}' % (node, nesting)

        def view(nesting):
            return '{"leader":"a","at_wall_ns":1,"nodes":[],"verdict":%s}' % nesting

        # The review's 1.2 MB (refused by its size), and 100,000 levels in 200 KB (under every
        # size bound: refused by its depth), which a recursive dump() could not survive either.
        shallow = "[" * 100000 + "]" * 100000
        lease = self.lease()
        self.put("nodes/zzz", summary("zzz", DEEP))
        self.put("nodes/zzl", summary("zzl", DEEP), lease=lease)
        self.put("nodes/zzd", summary("zzd", shallow), lease=lease)

        def alive_and_answering():
            self.healthy_job()
            for n in (self.a, self.b):
                self.assertEqual(n.json("/healthz")["status"], "ok", n.name)

        # The leader re-puts its view now and then; the follower reads whatever is there at its poll.
        for nesting in (DEEP, shallow, shallow):
            self.put("view", view(nesting))
            self.hold(0.7, alive_and_answering)
        # Each was read and refused, not missed: the leader read the leased summaries, the
        # follower the view.
        self.assertIn(f"skipped etcd key {self.key('nodes/zzd')}: ", read(self.a.log))
        self.assertIn(f"skipped etcd key {self.key('nodes/zzl')}: ", read(self.a.log))
        self.assertIn(f"skipped etcd key {self.key('view')}: ", read(self.b.log))
        self.stall()
        self.wait_for("the page", self.job_pages, timeout=15)
        time.sleep(2 * TTL)
        self.assertEqual(list(self.invariants().values()), [1], self.unexpected_pages())

    # E6.
    def test_e6_garbage_orders_neither_mute_the_page_nor_flap_coordination(self):
        self.put(f"orders/{1:020d}", "x")
        self.put("orders/x", "x")
        self.start_job()
        losses = {n.name: n.json("/healthz")["coord"]["losses_total"] for n in (self.a, self.b)}

        def connected():
            self.agents_alive()
            for n in (self.a, self.b):
                c = n.json("/healthz")["coord"]
                self.assertTrue(c["connected"], (n.name, c))
                self.assertEqual(c["losses_total"], losses[n.name], (n.name, c))

        self.hold(1.0, connected)
        self.stall()
        deadline = time.monotonic() + 15
        while not self.job_pages() and time.monotonic() < deadline:
            connected()
            time.sleep(0.2)
        self.assertTrue(self.job_pages(), f"no page within 15 s\n{self.logs()}")
        # The leader's order goes through beside the garbage: each node preempts its own rank.
        for p in self.trainers:
            self.wait_for(f"trainer {p.pid} preempted", lambda: p.poll() is not None, timeout=15)
        self.preempted_on_both_nodes()
        self.hold(1.0, connected)
        self.assertEqual(list(self.invariants().values()), [1], self.rx.pages)
        for n in (self.a, self.b):  # said once per key and value, not every poll (E17)
            said = read(n.log).count(f"skipped etcd key {self.key('orders/x')} ")
            self.assertLessEqual(said, 1, (n.name, said))

    # E11.
    def test_e11_a_huge_summary_of_thousands_of_ranks_adds_none(self):
        self.start_job()
        real = json.loads(self.get("nodes/a"))
        rank0 = dict(real["obs"]["ranks"][0], pid=0, pid_start_ticks=0)
        count = 1400 * 1000 // (len(json.dumps(rank0, separators=(",", ":"))) + 1)  # 1.4 MB
        ranks = [dict(rank0, rank=2 + i, local_rank=i) for i in range(count)]

        def summary(node):
            return json.dumps(dict(real, node=node, obs=dict(real["obs"], ranks=ranks, procs=[])),
                              separators=(",", ":"))

        big = summary("zz2")
        print(f"\nE11: {count} ranks, {len(big) / 1e6:.2f} MB", file=sys.stderr)
        self.assertLess(len(big), 1500 * 1024)

        def leader_cpu(during):
            cpu, t = cpu_seconds(self.a.pid), time.monotonic()
            during()
            return (cpu_seconds(self.a.pid) - cpu) / (time.monotonic() - t)

        def reputs():
            for i in range(10):  # every 200 ms, as in the review
                self.put("nodes/zz2", big)
                time.sleep(0.2)

        before = leader_cpu(lambda: time.sleep(1.5))
        self.put("nodes/zz2", big)
        self.put("nodes/zz3", summary("zz3"), lease=self.lease())  # the same under a lease, once
        still = leader_cpu(lambda: time.sleep(1.5))
        busy = leader_cpu(reputs)
        print(f"E11: the leader's CPU: {before:.0%} of a core before the puts, {still:.0%} with both keys "
              f"there, {busy:.0%} while zz2 is re-put", file=sys.stderr)

        def two_ranks():
            self.healthy_job()
            for n in (self.a, self.b):
                self.assertEqual(self.ranks(n), [0, 1], n.name)

        self.hold(1.0, two_ranks)
        self.assertEqual(self.invariants(), {}, self.unexpected_pages())

    # E12.
    def test_e12_a_forged_incarnation_neither_restarts_nor_ends_a_launcher(self):
        launchers = {}
        for rank, n in ((0, self.a), (1, self.b)):
            env = python_env()
            env.update(RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2")
            log = os.path.join(self.tmp, f"launcher-{n.name}.log")
            with open(log, "w") as out:
                p = subprocess.Popen([self.bin, "run", "--coord", self.etcd.endpoint, "--job", JOB, "--node", n.name,
                                      "--dir", n.root, "--lease-ttl", "1s", "--grace", "2s", "--",
                                      "/usr/bin/python3", "-c", TRAINER, self.tmp],
                                     env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            self.addCleanup(self._stop_launcher, p, log)
            launchers[n.name] = (p, log)
            if n is self.a:
                self.wait_for("a's first summary",
                              lambda: self.a.json("/healthz")["coord"]["summaries_published_total"] > 0, timeout=30)
        self.wait_for("a's merged healthy view", lambda: (lambda j: j["state"] == "healthy" and len(
            j["ranks"]) == 2 and j["cluster"]["leads"])(self.a.job(JOB)), timeout=30)

        def children(log):
            return re.findall(r"launched pid=(\d+)", read(log))

        first = {name: self.wait_for(f"{name}'s child", lambda: children(log)) for name, (p, log) in launchers.items()}
        self.put("incarnation", json.dumps({"incarnation": 1, "by": "attacker", "at_ns": 0}))
        for name, (p, log) in launchers.items():
            self.wait_for(f"{name}'s launcher refusing the move",
                          lambda: "incarnation 1 (by attacker) is not obeyed" in read(log), timeout=10)
        self.put("incarnation", json.dumps({"incarnation": 2, "by": "attacker", "at_ns": 0, "scheduler": "slurm",
                                            "scheduler_job": "1"}))

        def same_children():
            self.agents_alive()
            for name, (p, log) in launchers.items():
                self.assertIsNone(p.poll(), f"the launcher on {name} exited:\n{read(log)[-2000:]}")
                self.assertEqual(children(log), first[name], read(log)[-2000:])
                self.assertTrue(swtest.alive(int(first[name][0])), read(log)[-2000:])

        self.hold(2.0, same_children)
        for name, (p, log) in launchers.items():
            self.assertIn("incarnation 2 (by attacker) is not obeyed", read(log), name)
        self.assertIn(self.a.job(JOB)["state"], ("healthy", "suspect", "slow"))
        self.assertEqual(self.invariants(), {}, self.unexpected_pages())

    # E10, against a real Slurm (slurm_support.py): another batch job runs in the cluster; the
    # job's launcher keys name the Slurm job "--state=RUNNING" (to scancel, as root: every running
    # job), and the spec cancels the job's Slurm job after its preempt (resume = false). The
    # agents run the real scontrol and scancel through a wrapper that logs each command line.
    def test_e10_a_forged_slurm_job_id_reaches_no_command_line(self):
        cluster = SlurmCluster()
        self.addCleanup(cluster.stop)
        cluster.start()
        other = cluster.sbatch("#!/bin/sh\nsleep 300\n")
        self.addCleanup(cluster.run, "scancel", other, check=False)
        cluster.wait_job(other, ("RUNNING",), timeout=20)
        calls = os.path.join(self.tmp, "slurm-calls.log")
        open(calls, "w").close()
        tools = {}
        for tool in ("scontrol", "scancel"):
            tools[tool] = os.path.join(self.tmp, tool)
            with open(tools[tool], "w") as f:
                f.write(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n'
                        f'SLURM_CONF={cluster.conf} exec {slurm_binary(tool)} "$@"\n')
            os.chmod(tools[tool], 0o755)
        self.respec(runbook='resume = false\nresume_owner = "slurm"\n',
                    tail=f'[slurm]\nscontrol = "{tools["scontrol"]}"\nscancel = "{tools["scancel"]}"\n')
        # A user's own launcher with that SLURM_JOB_ID refuses to start: it publishes nothing.
        env = python_env()
        env.update(SLURM_JOB_ID="--state=RUNNING", SLURM_RESTART_COUNT="0", SLURMD_NODENAME="a")
        r = subprocess.run([self.bin, "run", "--coord", self.etcd.endpoint, "--job", JOB, "--node", "a", "--dir",
                            self.a.root, "--", "/bin/true"], env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn('SLURM_JOB_ID: Slurm job id "--state=RUNNING" must be digits', r.stderr)
        self.assertEqual(self.keys_under("launchers/"), [])
        # An etcd writer's: both nodes' launcher keys, under a lease of their own.
        lease = self.lease()
        for node in ("a", "b"):
            self.put(f"launchers/{node}", json.dumps({
                "node": node, "pid": 1, "incarnation": 0, "started_at_ns": 1, "scheduler": "slurm",
                "scheduler_job": "--state=RUNNING", "scheduler_restarts": 0}), lease=lease)
        self.start_job()
        stalled_at = time.time()
        self.stall()
        self.wait_for("the page", self.job_pages, timeout=15)
        self.paged_in_time(stalled_at)
        # Paged, preempted on both nodes, and then the leader would cancel the Slurm job.
        for p in self.trainers:
            self.wait_for(f"trainer {p.pid} preempted", lambda: p.poll() is not None, timeout=15)
        said = "not cancelled: no launcher of incarnation 0 carries a Slurm job id"
        self.wait_for("the leader's refusal", lambda: said in read(self.a.log), timeout=10)
        for node in ("a", "b"):  # each forged key said once, by the leader that read it
            self.assertEqual(read(self.a.log).count(f"skipped etcd key {self.key('launchers/' + node)}: "), 1)
        self.assertNotIn("--state", read(calls))
        self.assertEqual(read(calls), "", "no scontrol or scancel at all")
        self.assertEqual(cluster.show_job(other)["JobState"], "RUNNING")
        self.assertEqual(list(self.invariants().values()), [1], self.unexpected_pages())

    # The leader dies mid-incident.
    def test_the_leader_killed_mid_incident_the_other_takes_over_one_page(self):
        self.start_job()
        self.stall()
        self.wait_for("the page", self.job_pages, timeout=15)
        incident = self.rx.pages[0]["incident_id"]
        t = time.monotonic()
        self.a.kill()
        self.killed.add("a")
        self.wait_for("b to lead", lambda: self.b.job(JOB)["cluster"]["leads"], timeout=TTL + 5)
        print(f"\nleader killed: b leads {time.monotonic() - t:.2f} s later", file=sys.stderr)
        inc = self.b.json(f"/api/v1/incidents?job={JOB}")["incidents"]
        self.assertEqual([str(i["id"]) for i in inc], [str(incident)], inc)
        time.sleep(max(0.0, 3 * TTL - (time.monotonic() - t)))
        self.assertEqual(self.invariants(), {str(incident): 1}, self.rx.pages)

    def restart_etcd(self, wipe=False, down=1.0):
        """etcd SIGKILLed, down for `down` s (both nodes say they are cut off), then started on
        the same ports with its data, or with none (`wipe`: its data directory deleted, as a
        lost disk); until both nodes answer connected again."""
        self.etcd.kill()
        t = time.monotonic()
        for n in (self.a, self.b):
            self.wait_for(f"{n.name} disconnected", lambda: not self.connected(n), timeout=5)
        if wipe:
            shutil.rmtree(os.path.join(self.etcd.dir, "data"))
        time.sleep(max(0.0, down - (time.monotonic() - t)))
        self.assertTrue(self.etcd.start(), self.etcd.log_tail())
        for n in (self.a, self.b):
            self.wait_for(f"{n.name} connected again", lambda: self.connected(n), timeout=10)

    def stalled_and_paged(self):
        """Starts the job, stalls it, and waits for its page (in time), its delivery in etcd and
        the leader's view saying so (every node knows what was paged: E16): the incident's id."""
        self.start_job()
        stalled_at = time.time()
        self.stall()
        self.wait_for("the page", self.job_pages, timeout=15)
        self.paged_in_time(stalled_at)
        incident = self.page_recorded()
        self.wait_for("the view naming the page", lambda: (
            lambda v: v is not None and json.loads(v).get("paged", {}).get("key") == incident)(self.get("view")),
            timeout=5)
        time.sleep(3 * POLL)  # b's polls read it
        return incident

    def joined(self, node, incident):
        """The line of `node`'s own incident joining the job's page of `incident`."""
        return (f"not paged again: joins the page of incident {incident} of the job, paged through etcd by node a "
                f"(dedup key {incident})") in read(node.log)

    def at_most_one_own_incident_per_node(self, local):
        """Degraded mode (docs/multinode.md): a node cut off from etcd pages its own ranks' stall
        from its own store, once per incident, and at most one such incident per node."""
        self.assertTrue(all(c == 1 for c in local.values()), self.unexpected_pages())
        nodes = [node for node, _ in local]
        self.assertLessEqual(set(nodes), {"a", "b"}, self.unexpected_pages())
        self.assertEqual(len(nodes), len(set(nodes)), self.unexpected_pages())

    # etcd crashes mid-incident and comes back with its data.
    def test_etcd_killed_mid_incident_and_back_with_its_data_one_page(self):
        incident = self.stalled_and_paged()
        self.restart_etcd(down=1.5)  # each node's own incident joins the job's page meanwhile (E16)
        # The incident is still in etcd: the leader adopts it, pages nothing again, and goes on.
        back = time.monotonic()
        self.wait_for("a leading again", lambda: self.a.job(JOB)["cluster"]["leads"], timeout=5)
        self.hold(max(0.0, 3.0 - (time.monotonic() - back)), self.agents_alive)
        job, local = self.page_groups()
        print(f"etcd killed and back: pages {dict(job)} of the job's incident, {dict(local)} of the nodes' own",
              file=sys.stderr)
        self.invariants()
        self.assertEqual((job, dict(local)), ({incident: 1}, {}), self.unexpected_pages())
        self.assertEqual(len(self.rx.pages), 1, self.unexpected_pages())
        for n in (self.a, self.b):  # each node's own incident joined the job's page, then handed over
            self.assertTrue(self.joined(n, incident), f"{n.name}:\n{self.logs()}")
            self.assertIn("etcd answers again: the job's leader (a) owns its incident now", read(n.log), n.name)

    # etcd stops mid-incident, for long enough that every lease lapses (E14, E16).
    def test_etcd_stopped_mid_incident_one_page(self):
        incident = self.stalled_and_paged()
        self.etcd.proc.send_signal(signal.SIGSTOP)
        for n in (self.a, self.b):
            self.wait_for(f"{n.name} disconnected", lambda: not self.connected(n), timeout=5)
        time.sleep(3 * TTL)  # each node's own incident joins the job's page meanwhile
        self.etcd.proc.send_signal(signal.SIGCONT)
        for n in (self.a, self.b):
            self.wait_for(f"{n.name} connected again", lambda: self.connected(n), timeout=10)
        self.hold(3.0, self.agents_alive)
        job, local = self.page_groups()
        print(f"etcd stopped: pages {dict(job)} of the job's incident, {dict(local)} of the nodes' own", file=sys.stderr)
        self.invariants()
        self.assertEqual((job, dict(local)), ({incident: 1}, {}), self.unexpected_pages())
        for n in (self.a, self.b):
            self.assertTrue(self.joined(n, incident), f"{n.name}:\n{self.logs()}")

    # E14: etcd stops right as the page is delivered, before the delivery is recorded, for long
    # enough that every lease lapses. The leader recorded nothing, and b never read the page in
    # the leader's view: the job's page is sent once and never again (the leader records its
    # delivery once etcd answers, leading or not), the leader's own node joins it, and b, which
    # cannot know, pages its own view once, saying so.
    def stall_and_stop_etcd_at_the_page(self):
        """Starts the job, stalls it, and SIGSTOPs etcd as the page arrives, before the 200 reaches
        the leader: when it stopped."""
        self.start_job()
        stopped = []

        def stop_etcd(_page):
            if not stopped:
                self.etcd.proc.send_signal(signal.SIGSTOP)
                stopped.append(time.monotonic())

        self.rx.before_reply = stop_etcd
        self.stall()
        self.wait_for("the page", lambda: stopped, timeout=15)
        return stopped[0]

    def test_e14_etcd_stopped_as_the_page_is_delivered_the_page_is_never_sent_again(self):
        stopped = self.stall_and_stop_etcd_at_the_page()
        time.sleep(max(0.0, 4.0 - (time.monotonic() - stopped)))  # four lease TTLs
        self.etcd.proc.send_signal(signal.SIGCONT)
        for n in (self.a, self.b):
            self.wait_for(f"{n.name} connected again", lambda: self.connected(n), timeout=10)
        incident = self.page_recorded()  # recorded after all, by the node that delivered it
        self.hold(3.0, self.agents_alive)
        job, local = self.page_groups()
        print(f"E14: pages {dict(job)} of the job's incident, {dict(local)} of the nodes' own", file=sys.stderr)
        self.invariants()
        self.assertEqual(job, {incident: 1}, self.unexpected_pages())
        self.assertNotIn("never delivered", read(self.a.log) + read(self.b.log))
        self.assertTrue(self.joined(self.a, incident), self.logs())
        self.assertLessEqual(set(local), {("b", "1")}, self.unexpected_pages())
        for p in self.rx.pages:
            if p["incident_id"] != incident:
                self.assertIn("node b's view alone (etcd does not answer it): ", p["summary"], p)

    # E14 across an agent restart: the leader's agent is killed after its page was delivered and
    # before etcd took that. The outcome was kept in its node's store as well: the agent, started
    # again (etcd still stopped), records it once etcd answers, and nobody sends the page again.
    def test_e14_the_leaders_agent_killed_before_etcd_took_its_delivery_records_it_once_back(self):
        self.stall_and_stop_etcd_at_the_page()
        self.wait_for("a keeping the delivery", lambda: "cannot record its page's outcome (kept" in read(self.a.log),
                      timeout=10)
        self.a.kill()
        self.a.start()
        self.wait_for("a's agent taking up what its store kept",
                      lambda: "before the agent restarted, and etcd did not take that then" in read(self.a.log),
                      timeout=10)
        self.etcd.proc.send_signal(signal.SIGCONT)
        for n in (self.a, self.b):
            self.wait_for(f"{n.name} connected again", lambda: self.connected(n), timeout=10)
        incident = self.page_recorded()  # recorded after all, by the restarted agent
        self.hold(3.0, self.agents_alive)
        job, local = self.page_groups()
        print(f"E14, agent restarted: pages {dict(job)} of the job's incident, {dict(local)} of the nodes' own",
              file=sys.stderr)
        self.invariants()
        self.assertEqual(job, {incident: 1}, self.unexpected_pages())
        self.assertNotIn("never delivered", read(self.a.log) + read(self.b.log))
        # b never read the page's delivery: it may page its own view, once (the E14 case above).
        self.assertLessEqual(set(local), {("b", "1")}, self.unexpected_pages())

    # etcd loses its data mid-incident (the end of E7 in the review).
    def test_etcd_wiped_mid_incident_the_stall_is_not_paged_again(self):
        incident = self.stalled_and_paged()
        self.restart_etcd(wipe=True)
        # The job's incident went with the data: its leader opens it again, under an id never seen,
        # joined to the page already delivered (E16), which every node remembers.
        # (Its join is recorded after its claim: the record is waited for until it says so.)
        def reopened():
            return [i for i in self.a.json(f"/api/v1/incidents?job={JOB}")["incidents"]
                    if int(i["id"]) > int(incident) and i["delivered_at_ns"] is not None]

        again = self.wait_for("the job's incident open again in etcd, joined to the page", reopened, timeout=10)
        self.hold(3.0, self.agents_alive)
        job, local = self.page_groups()
        print(f"etcd wiped: pages {dict(job)} of the job's incidents, {dict(local)} of the nodes' own",
              file=sys.stderr)
        self.invariants()
        self.assertEqual((job, dict(local)), ({incident: 1}, {}), self.unexpected_pages())
        self.assertEqual(len(self.rx.pages), 1, self.unexpected_pages())
        self.assertIn(f"joins the page of incident {incident}", again[0]["page_result"], again[0])
        # Ids never repeat (issue 26, point 4): the new one is larger than any seen before.
        self.assertGreater(int(again[0]["id"]), int(incident), again)

    # E7.
    def test_e7_a_dead_job_pages_no_storm_after_etcd_lost_its_data_mid_incident(self):
        self.respec(top='exit_grace = "1s"\n')
        self.start_job()
        # Rank 1 hangs, rank 0 crashes: rank 0 is dead once rank 1 ran on for the exit grace.
        # Its processes then all end (rank 1 under the job's preempt), its beacons still say
        # running: the dead job of the review, whose next preempt ends nothing.
        self.trainers[1].send_signal(signal.SIGSTOP)
        self.trainers[0].kill()
        self.wait_for("the page of the dead job", self.job_pages, timeout=15)
        before = {self.page_recorded()}
        wiped = time.monotonic()
        self.restart_etcd(wipe=True)  # mid-incident: rank 1's preempt is under way
        self.wait_for("rank 1 ended", lambda: self.trainers[1].poll() is not None, timeout=10)
        # Until 6 s after the loss, 30 polls: the review saw 56 pages in 15 s, each a new id.
        self.hold(max(0.0, 6.0 - (time.monotonic() - wiped)), self.agents_alive)
        job, local = self.page_groups()
        print(f"E7: pages {dict(job)} of the job's incidents, {dict(local)} of the nodes' own; incidents "
              f"{[(n.name, n.job(JOB)['incidents_total']) for n in (self.a, self.b)]}", file=sys.stderr)
        self.invariants()
        self.assertTrue(all(c == 1 for c in job.values()), self.unexpected_pages())
        after = set(job) - before
        self.assertLessEqual(len(after), 1, self.unexpected_pages())
        self.at_most_one_own_incident_per_node(local)
        for i in after:  # ids never repeat
            self.assertNotIn(i, before)
            self.assertGreater(int(i), max(int(b) for b in before), f"incident ids before the wipe {sorted(before)}, "
                               f"after it {sorted(after)}")

    # One node cut off from etcd while its own ranks stall.
    def test_a_node_cut_off_from_etcd_pages_its_own_stall_and_nothing_more_once_back(self):
        fwd = self.b_through_forwarder()
        self.start_job()
        fwd.cut()
        self.wait_for("b disconnected", lambda: not self.connected(self.b), timeout=5)
        self.assertTrue(self.connected(self.a))
        stalled_at = time.time()
        self.stall()
        # b, cut off, pages its own rank's stall from its own store; a, the leader, the job's
        # (rank 0 stalled here, rank 1 silent on b).
        self.wait_for("b's own page", lambda: [k for k in self.page_groups()[1] if k[0] == "b"], timeout=10)
        self.wait_for("the job's page", lambda: self.page_groups()[0], timeout=10)
        self.paged_in_time(stalled_at, host="b")
        self.paged_in_time(stalled_at, host="a")
        time.sleep(1.0)  # five polls of b cut off
        fwd.restore()
        self.wait_for("b connected again", lambda: self.connected(self.b), timeout=10)
        self.wait_for("b's own incident handed over", lambda: "etcd answers again: the job's leader (a) owns its "
                      "incident now" in read(self.b.log), timeout=5)
        self.hold(3.0, self.agents_alive)
        job, local = self.page_groups()
        print(f"b cut off: pages {dict(job)} of the job's incident, {dict(local)} of the nodes' own", file=sys.stderr)
        self.invariants()
        self.assertEqual(list(job.values()), [1], self.unexpected_pages())
        self.assertEqual([(node, c) for (node, _), c in local.items()], [("b", 1)], self.unexpected_pages())

    # The leader stopped past its TTL mid-incident, right after it ordered the preempt, then woken.
    def test_the_leader_stopped_past_its_ttl_mid_incident_stands_down_once_woken_one_page(self):
        incident = self.stalled_and_paged()
        self.wait_for("a's preempt order", lambda: f"incident {incident}: ordered every node" in read(self.a.log),
                      timeout=5)
        t = time.monotonic()
        self.a.signal(signal.SIGSTOP)
        self.wait_for("b to lead while a is stopped", lambda: self.b.job(JOB)["cluster"]["leads"], timeout=TTL + 5)
        print(f"leader stopped: b leads {time.monotonic() - t:.2f} s later", file=sys.stderr)
        # The new leader goes on with the preempt a ordered (signed again by b: a node carries out
        # only the leader of now's order), rather than waiting out the incident afresh, where the
        # ranks its own order ended could read as the others finishing, and the job as recovered.
        self.wait_for("b taking up a's order", lambda: f'incident {incident}: the preempt that "a" ordered is taken '
                      'up by this node' in read(self.b.log), timeout=5)
        time.sleep(max(0.0, 2.5 * TTL - (time.monotonic() - t)))
        self.a.signal(signal.SIGCONT)
        self.wait_for("the job preempted on both nodes, every rank ended", lambda: all(
            (lambda j: j["state"] == "preempted" and all(r["state"] == "finished" for r in j["ranks"]))(n.job(JOB))
            for n in (self.a, self.b)), timeout=10)
        self.assertFalse(any(p.poll() is None for p in self.trainers), "a rank outlived the preempt")
        self.wait_for("a following b", lambda: (lambda c: c["leader"] == "b" and not c["leads"])(
            self.a.job(JOB)["cluster"]), timeout=5)

        def b_leads():
            self.agents_alive()
            self.assertTrue(self.b.job(JOB)["cluster"]["leads"])
            self.assertFalse(self.a.job(JOB)["cluster"]["leads"])

        self.hold(2.0, b_leads)  # ten polls of the woken agent
        self.assertIn("this node no longer leads it (b does)", read(self.a.log))
        self.assertEqual([str(i["id"]) for i in self.b.json(f"/api/v1/incidents?job={JOB}")["incidents"]], [incident])
        self.assertEqual(self.invariants(), {incident: 1}, self.unexpected_pages())

    # E8.
    def test_e8_a_hung_etcd_stops_neither_healthz_nor_the_poll_loop(self):
        self.start_job()
        self.etcd.proc.send_signal(signal.SIGSTOP)
        t = time.monotonic()
        samples = {n.name: [] for n in (self.a, self.b)}  # (seconds since the stop, polls_total)
        while time.monotonic() - t < 5.0:
            for n in (self.a, self.b):
                asked = time.monotonic()
                h = n.json("/healthz", timeout=2)
                took = time.monotonic() - asked
                self.assertLess(took, 1.0, (n.name, h))
                self.assertEqual(h["status"], "ok", (n.name, h))
                samples[n.name].append((round(asked - t, 2), h["polls_total"]))
            time.sleep(0.25)
        self.etcd.proc.send_signal(signal.SIGCONT)
        for name, s in samples.items():
            print(f"\nE8: {name}'s polls_total while etcd was stopped: {s[0][1]} -> {s[-1][1]}", file=sys.stderr)
            self.assertGreaterEqual(s[-1][1] - s[0][1], 3, (name, s))
            # At most one request_timeout (0.5 s) plus the poll's etcd budget (2 x 0.5 s) per
            # poll: no gap of 2.5 s without a poll.
            moved = [at for (at, polls), (_, before) in zip(s[1:], s) if polls > before]
            gaps = [b - a for a, b in zip([0.0] + moved, moved + [s[-1][0]])]
            self.assertLess(max(gaps), 2.5, (name, s))
        for n in (self.a, self.b):
            self.wait_for(f"{n.name} connected again", lambda: n.json("/healthz")["coord"]["connected"], timeout=10)
        self.wait_for("the job whole again", lambda: (lambda j, c: j["state"] == "healthy" and len(j["ranks"]) == 2 and
                                                      c["leader"] in ("a", "b"))(
            self.a.job(JOB), self.b.job(JOB)["cluster"]), timeout=10)
        self.hold(1.0, self.healthy_job)
        self.assertEqual(self.invariants(), {}, self.unexpected_pages())

    # E15: a record at the job's incident key that does not read.
    def test_e15_an_unreadable_incident_record_is_set_aside_and_the_paged_incident_is_ackable(self):
        junk = '{"state": 7, "id": "x", "page": [1, 2], "ack": {"by": 3}}'
        self.put("incident", junk)
        incident = self.stalled_and_paged()
        for n in (self.a, self.b):
            self.assertEqual([str(i["id"]) for i in n.json(f"/api/v1/incidents?job={JOB}")["incidents"]], [incident],
                             n.name)
        aside = self.keys_under("set_aside/")
        self.assertEqual(len(aside), 1, aside)
        self.assertEqual(self.get(aside[0][len(self.key("")):]), junk)
        self.assertIn("not joined; it is set aside when the job's own incident opens", read(self.a.log))
        # No supervisor ever ran where the ack is given: the agent's answer is the whole answer.
        env = dict(os.environ, STEPWATCH_STATE_DIR=os.path.join(self.tmp, "no-state"))
        none = subprocess.run([self.bin, "ack", "other-job", "--agent", self.b.api, "--by", "alice"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
        self.assertEqual((none.returncode, none.stdout), (1, "no job other-job on this agent\n"))
        ack = subprocess.run([self.bin, "ack", JOB, "--agent", self.b.api, "--by", "alice"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
        self.assertEqual(ack.returncode, 0, ack.stdout)
        self.wait_for("acked", lambda: json.loads(self.get("incident")).get("acked_by") == "alice", timeout=5)
        self.assertEqual(self.invariants(), {incident: 1}, self.unexpected_pages())

    # E15 mid-incident: junk written over the job's incident record after its page.
    def test_e15_junk_over_the_paged_incident_is_set_aside_and_the_incident_stays_listed_and_ackable(self):
        incident = self.stalled_and_paged()
        junk = '{"state": 7, "page": [1, 2]}'
        self.put("incident", junk)
        # The leader's next poll sets the junk aside and restores the incident under its id.
        self.wait_for("the incident restored", lambda: (lambda v: v is not None and json.loads(v).get("id") == int(
            incident))(self.get("incident")), timeout=5)
        aside = self.keys_under("set_aside/")
        self.assertEqual(len(aside), 1, aside)
        self.assertEqual(self.get(aside[0][len(self.key("")):]), junk)
        self.assertIn(f"but incident {incident} was open there: that record is set aside", read(self.a.log))
        for n in (self.a, self.b):
            self.assertEqual([str(i["id"]) for i in n.json(f"/api/v1/incidents?job={JOB}")["incidents"]], [incident],
                             n.name)
        env = dict(os.environ, STEPWATCH_STATE_DIR=os.path.join(self.tmp, "no-state"))
        ack = subprocess.run([self.bin, "ack", JOB, "--agent", self.b.api, "--by", "alice"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
        self.assertEqual(ack.returncode, 0, ack.stdout)
        self.assertIn(incident, ack.stdout)
        self.hold(1.0, self.agents_alive)
        self.assertEqual(self.invariants(), {incident: 1}, self.unexpected_pages())

    # E8: the stall the degraded mode is for.
    def test_e8_a_stall_while_etcd_hangs_is_paged_by_each_node_in_time(self):
        self.start_job()
        self.etcd.proc.send_signal(signal.SIGSTOP)
        stalled_at = time.time()
        self.stall()
        # Cut off by a hung etcd, each node pages its own rank's stall from its own store.
        self.wait_for("both nodes' own pages", lambda: {node for node, _ in self.page_groups()[1]} == {"a", "b"},
                      timeout=10)
        for host in ("a", "b"):
            self.paged_in_time(stalled_at, host=host, bound=STALL_PAGED_HUNG)
        self.etcd.proc.send_signal(signal.SIGCONT)
        # Back: the nodes hand their own over; the leader opens the job's incident, joined to the
        # page its own node sent (E16): each node's view was paged once, the job's not again.
        self.wait_for("the job's incident in etcd", lambda: self.a.json(f"/api/v1/incidents?job={JOB}")["incidents"],
                      timeout=10)
        self.hold(2.0, self.agents_alive)
        job, local = self.page_groups()
        print(f"E8, stalled while etcd hangs: pages {dict(job)} of the job's incident, {dict(local)} of the "
              f"nodes' own", file=sys.stderr)
        self.invariants()
        self.assertEqual(dict(job), {}, self.unexpected_pages())
        self.assertEqual(sorted(node for node, _ in local), ["a", "b"], self.unexpected_pages())
        self.at_most_one_own_incident_per_node(local)
        for p in self.rx.pages:
            self.assertIn(f"node {p['host']}'s view alone (etcd does not answer it): ", p["summary"], p)
        inc = self.a.json(f"/api/v1/incidents?job={JOB}")["incidents"][0]
        self.assertIn("joins the page of this node's own incident", inc["page_result"], inc)


if __name__ == "__main__":
    unittest.main()
