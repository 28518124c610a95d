"""What the agent's end-to-end tests share: ranks that step and then hang, ports, HTTP gets, and
a test base that starts real processes and stops them all afterwards."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def wait_for(self, what, check, timeout=60):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = check()
                if last:
                    return last
            except (OSError, ValueError, KeyError, IndexError) as e:
                last = e
            time.sleep(0.5)
        self.fail(f"timed out waiting for {what}: {last}")
