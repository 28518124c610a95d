#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Multi-node latencies with real processes: a real etcd (/usr/bin/etcd), real `stepwatch agent`
processes, two ranks that write real beacons through the Python package, a real webhook.

- stall verdict: seconds from the moment rank 1 hangs in its data loader (it writes the time,
  then sleeps) to the page arriving, for the job split across two nodes (rank 0 under agent a,
  rank 1 under agent b, through etcd) and for the same job with both ranks under one agent
  without [coord];
- leader failover: seconds from SIGKILL of the leader's agent to the other agent's API reporting
  that it leads the job, for lease TTLs of 1 s and 2 s.

Each figure is the median of --repetitions runs (default 3), each on a fresh etcd and fresh
agents. Polls every 200 ms; the spec: a step every 500 ms, grace 2, data fetches of at most 1 s.

    /usr/bin/python3 bench/multinode_latency.py --build-dir build/release [--repetitions 3]
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

POLL = "200ms"
SPEC = ('job = "{job}"\nexpected_interval = "500ms"\ngrace_intervals = 2\n[learn]\nwarmup_steps = 1\n'
        '[phases]\ndata = "1s"\n[[runbook.pager]]\nurl = "{url}"\ntimeout = "2s"\nretries = 0\n')

# A rank (argv: RANK HANG_AT HANG_FILE) that commits a step every 0.1 s. Before step HANG_AT,
# rank 1 writes time.time() to HANG_FILE and hangs in phase "data"; rank 0 stops stepping too,
# as a rank blocked in the next all-reduce. HANG_AT < 0: never.
RANKS = r"""
import sys, time, stepwatch
rank, hang_at, hang_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
stepwatch.init(rank=rank, world_size=2)
for n in range(1, 1000000):
    if n == hang_at:
        if rank == 1:
            with stepwatch.phase("data"):
                with open(hang_file, "w") as f:
                    f.write(repr(time.time()))
                time.sleep(3600)
        time.sleep(3600)
    time.sleep(0.1)
    stepwatch.step(n)
"""


class Run:
    """One repetition's processes and files; close() stops every process by its pid."""

    def __init__(self, bin):
        from agent_support import Receiver

        self.bin = bin
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-mn-bench-")
        self.receiver = Receiver()
        self.etcd = None
        self.agents = []
        self.ranks = []

    def with_etcd(self):
        from etcd_support import Etcd

        self.etcd = Etcd()
        return self

    def agent(self, name, coord=True, ttl="1s"):
        from agent_support import NodeAgent

        a = NodeAgent(self.bin, self.tmp, name, self.etcd.endpoint if coord else None, ttl=ttl, poll=POLL)
        with open(os.path.join(a.specs, "bench.toml"), "w") as f:
            f.write(SPEC.format(job="bench", url=self.receiver.url))
        self.agents.append(a)
        return a.start()

    def rank(self, rank, node, hang_at):
        from swtest import python_env

        env = python_env()
        env.update(STEPWATCH_JOB="bench", STEPWATCH_DIR=node.root)
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(k, None)
        p = subprocess.Popen(["/usr/bin/python3", "-c", RANKS, str(rank), str(hang_at), self.hang_file], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ranks.append(p)

    @property
    def hang_file(self):
        return os.path.join(self.tmp, "hang-time")

    def close(self):
        for p in self.ranks:
            p.kill()
            p.wait()
        for a in self.agents:
            a.stop()
        if self.etcd:
            self.etcd.close()
        self.receiver.close()
        shutil.rmtree(self.tmp, True)


def wait_for(what, check, timeout=30, every=0.01):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            last = e
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}: {last}")


def published(node):
    return node.json("/healthz")["coord"]["summaries_published_total"] > 0


def stall_latency(bin, nodes):
    """Seconds from rank 1's hang to the page, and the page; nodes: 1 (one agent, no etcd) or 2."""
    run = Run(bin)
    try:
        if nodes == 2:
            run.with_etcd()
            a = run.agent("a")
            run.rank(0, a, 20)
            wait_for("a's first summary", lambda: published(a))
            b = run.agent("b")
            run.rank(1, b, 20)
        else:
            a = run.agent("a", coord=False)
            run.rank(0, a, 20)
            run.rank(1, a, 20)
        wait_for("the page", lambda: run.receiver.pages, timeout=60)
        with open(run.hang_file) as f:
            hung_at = float(f.read())
        return run.receiver.times[0] - hung_at, run.receiver.pages[0]
    finally:
        run.close()


def failover(bin, ttl):
    """Seconds from SIGKILL of the leader's agent to the other agent reporting that it leads."""
    run = Run(bin)
    try:
        run.with_etcd()
        a = run.agent("a", ttl=f"{ttl}s")
        run.rank(0, a, -1)
        wait_for("a's first summary", lambda: published(a))
        b = run.agent("b", ttl=f"{ttl}s")
        run.rank(1, b, -1)
        wait_for("a to lead both ranks", lambda: (lambda j: j["cluster"]["leads"] and len(j["ranks"]) == 2)(
            a.job("bench")))
        wait_for("b to follow a", lambda: b.job("bench")["cluster"]["leader"] == "a")
        t = time.monotonic()
        a.proc.send_signal(signal.SIGKILL)
        wait_for("b to lead", lambda: b.job("bench")["cluster"]["leads"], timeout=ttl + 10, every=0.005)
        return time.monotonic() - t
    finally:
        run.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    p.add_argument("--repetitions", type=int, default=3)
    args = p.parse_args()
    build = os.path.abspath(args.build_dir)
    os.environ["STEPWATCH_BUILD_DIR"] = build
    os.environ["STEPWATCH_BIN"] = os.path.join(build, "src", "cli", "stepwatch")
    sys.path.insert(0, os.path.join(build, "python"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    bin = os.environ["STEPWATCH_BIN"]
    n = args.repetitions

    print(f"multinode_latency: {n} repetition(s) of each, real processes; this takes about a minute", flush=True)
    rows = []
    for nodes in (1, 2):
        times, pages = zip(*(stall_latency(bin, nodes) for _ in range(n)))
        culprits = {", ".join(f"rank {c['rank']}" + (f" on {c['host']}" if "host" in c else "") for c in pg["culprits"])
                    for pg in pages}
        what = {f"{pg['state']}/{pg['cause']}" for pg in pages}
        rows.append((f"stall verdict, hang -> page, {'2 nodes through etcd' if nodes == 2 else '1 node, no etcd'}",
                     times, f"{', '.join(sorted(what))}; culprit {'; '.join(sorted(culprits))}"))
    for ttl in (1, 2):
        times = [failover(bin, ttl) for _ in range(n)]
        rows.append((f"leader failover, SIGKILL -> new leader leads, lease TTL {ttl} s", times,
                     f"the lease ends (2/3..1) x TTL after the kill (renewed every TTL/3), then etcd's expiry "
                     f"tick (<= 0.5 s) and b's next poll ({POLL})"))

    w = max(len(r[0]) for r in rows)
    print(f"\n| {'measure':<{w}} | median s | min s | max s | notes |")
    print(f"| {'-' * w} | --- | --- | --- | --- |")
    for name, times, note in rows:
        print(f"| {name:<{w}} | {statistics.median(times):8.2f} | {min(times):5.2f} | {max(times):5.2f} | {note} |")
    print(f"\npolls every {POLL}; spec: a step every 500 ms, grace 2, data phase budget 1 s (the stall's own "
          f"budget: the floor of both stall figures); median of {n}")
    print(f"reproduce: /usr/bin/python3 bench/multinode_latency.py --build-dir {os.path.relpath(build, ROOT)}"
          f" --repetitions {n}")


if __name__ == "__main__":
    main()
