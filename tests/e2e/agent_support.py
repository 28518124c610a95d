# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""What the agent's end-to-end tests share: ranks that step and then hang, ports, HTTP gets, a
webhook receiver, a node agent of a multi-node job, and a test base that starts real processes
and stops them all afterwards."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import swtest  # noqa: E402

# A rank (argv: RANK HANG_AFTER) that commits a step every 0.1 s through the Python package,
# then stops committing steps (a hang) after HANG_AFTER steps.
RANKS = r"""
import os, sys, time, stepwatch
rank = int(sys.argv[1]); hang_after = int(sys.argv[2])
stepwatch.init(rank=rank, world_size=2)
for n in range(1000000):
    if n == hang_after:
        time.sleep(3600)
    time.sleep(0.1)
    stepwatch.step(n)
"""


# A command prefix that runs the rest as user nobody (the other local user of the root-only tests).
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def write_paged_spec(specs, job, url, interval="500ms"):
    """<specs>/<job>.toml: a step every `interval`, stalled after two, paging the webhook `url`."""
    with open(os.path.join(specs, f"{job}.toml"), "w") as f:
        f.write(f'job = "{job}"\nexpected_interval = "{interval}"\ngrace_intervals = 2\n[learn]\nwarmup_steps = 1\n'
                f'[[runbook.pager]]\nurl = "{url}"\ntimeout = "2s"\nretries = 1\n')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pgrep(pattern):
    """The pids whose command line matches `pattern` (pgrep -f)."""
    r = subprocess.run(["pgrep", "-f", pattern], stdout=subprocess.PIPE, text=True)
    return [int(p) for p in r.stdout.split()]


def left_behind(markers):
    """{marker: pids} of the processes whose argv still names one of `markers` (temporary
    paths a test's processes were started with): what a class's tearDownClass must find empty."""
    left = {m: pgrep(re.escape(m)) for m in markers}
    return {m: p for m, p in left.items() if p}


def get_with_type(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.headers.get("Content-Type", ""), r.read().decode()


def get(url, timeout=5):
    return get_with_type(url, timeout)[1]


class AgentBase(unittest.TestCase):
    prefix = "stepwatch-agent-"

    def setUp(self):
        self.bin = swtest.stepwatch_bin()
        self.tmp = tempfile.mkdtemp(prefix=self.prefix)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.procs = []
        self.addCleanup(self._stop_all)

    def _stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def agent_config(self, beacons, specs, port, extra=""):
        """Writes an agent.toml for a test agent on 127.0.0.1:port polling every 250 ms; its path."""
        cfg = os.path.join(self.tmp, "agent.toml")
        with open(cfg, "w") as f:
            f.write(f'beacon_roots = ["{beacons}"]\npoll_interval = "250ms"\nstate_dir = "{self.tmp}/state"\n'
                    f'listen = "127.0.0.1:{port}"\nspecs_dir = "{specs}"\n{extra}')
        return cfg

    def start(self, args, **kw):
        """Starts a process stopped at cleanup; its output is dropped unless kw says where."""
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        p = subprocess.Popen(args, **kw)
        self.procs.append(p)
        return p

    def wait_for(self, what, check, timeout=60):
        return swtest.wait_for(what, check, timeout, every=0.5)


class Receiver:
    """A real local webhook receiver that records every page, and when it came (time.time()).
    `before_reply`, when set, is called with each page before the 200 goes back (a fault placed
    between a delivery and its sender learning of it)."""

    def __init__(self):
        import http.server

        self.pages = []
        self.times = []
        self.before_reply = None
        pages, times, receiver = self.pages, self.times, self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                times.append(time.time())
                pages.append(body)
                if receiver.before_reply:
                    receiver.before_reply(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/page"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


_API_RE = re.compile(r"API on 127\.0\.0\.1:(\d+)$", re.M)


class NodeAgent:
    """One node of a multi-node job: a real `stepwatch agent` with its own node name, beacon root,
    state and specs directories under base/<name>, a [coord] section naming `endpoint` (none when
    it is None: a single-node agent), and the API on 127.0.0.1:0 (the port it bound is read from
    its log: "... API on 127.0.0.1:PORT").
    start() may be called again after kill(): same directories, a new port."""

    def __init__(self, bin, base, name, endpoint, ttl="1s", poll="200ms", request_timeout="500ms", extra="",
                 coord_extra=""):
        self.bin, self.name = bin, name
        self.dir = os.path.join(base, name)
        self.root = os.path.join(self.dir, "beacons")
        self.specs = os.path.join(self.dir, "specs")
        for d in (self.root, self.specs):
            os.makedirs(d, exist_ok=True)
        self.log = os.path.join(self.dir, "agent.log")
        self.config = os.path.join(self.dir, "agent.toml")
        with open(self.config, "w") as f:
            f.write(f'beacon_roots = ["{self.root}"]\nstate_dir = "{self.dir}/state"\nspecs_dir = "{self.specs}"\n'
                    f'listen = "127.0.0.1:0"\npoll_interval = "{poll}"\n{extra}\n')
            if endpoint is not None:  # None: a single-node agent, no [coord]
                f.write(f'[coord]\nendpoints = ["{endpoint}"]\nnode_name = "{name}"\nlease_ttl = "{ttl}"\n'
                        f'request_timeout = "{request_timeout}"\n{coord_extra}\n')
        self.proc = None
        self.api = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self, timeout=15):
        offset = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([self.bin, "agent", "--config", self.config], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log, errors="replace") as f:
                f.seek(offset)
                m = _API_RE.search(f.read())
            if m:
                self.api = f"http://127.0.0.1:{m.group(1)}"
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"agent {self.name} did not start; its log ends:\n{self.log_tail()}")

    def log_tail(self, n=3000):
        with open(self.log, errors="replace") as f:
            return f.read()[-n:]

    def json(self, path, timeout=5):
        return json.loads(get(self.api + path, timeout))

    def job(self, job):
        return self.json(f"/api/v1/jobs/{job}")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill(self):
        """SIGKILL, as a node or agent that dies; reaped."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)  # a stopped agent cannot act on SIGTERM
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
