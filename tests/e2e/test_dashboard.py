# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""The agent's dashboard (GET /) in a real headless Chromium (Debian's chromium package): real
ranks (the Python package) write beacons for two jobs, the real `stepwatch agent` watches them,
and the page Chromium renders shows one job healthy and the other stalled; a screenshot of the
stalled job's view is left in the build directory for a person to look at.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from agent_support import RANKS, AgentBase, free_port, get_with_type as get  # noqa: E402
from swtest import python_env  # noqa: E402

CHROMIUM = shutil.which("chromium")

SPEC = 'job = "{job}"\nexpected_interval = "500ms"\ngrace_intervals = 2\n[learn]\nwarmup_steps = 1\n'


class DashboardTest(AgentBase):
    prefix = "stepwatch-dashboard-"

    def chromium(self, *args):
        # Root needs --no-sandbox; a fresh profile keeps runs apart. Chromium 112+ takes
        # --headless=new (the only headless mode in recent versions).
        cmd = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
               f"--user-data-dir={self.tmp}/chromium-profile", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-3000:]}")
        return r.stdout

    def test_chromium_renders_a_healthy_and_a_stalled_job(self):
        self.assertTrue(CHROMIUM, "chromium is not installed: scripts/setup-deps.sh installs it")
        beacons = os.path.join(self.tmp, "beacons")
        specs = os.path.join(self.tmp, "specs")
        os.makedirs(specs)
        for job in ("steady", "stuck"):
            with open(os.path.join(specs, f"{job}.toml"), "w") as f:
                f.write(SPEC.format(job=job))
        port = free_port()
        cfg = self.agent_config(beacons, specs, port)
        for job, hang_after in (("steady", 1000000), ("stuck", 30)):
            env = python_env()
            env.update(STEPWATCH_DIR=beacons, STEPWATCH_JOB=job)
            for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                env.pop(k, None)
            for rank in (0, 1):
                self.start(["/usr/bin/python3", "-c", RANKS, str(rank), str(hang_after)], env=env)
        self.start([self.bin, "agent", "--config", cfg])
        api = f"http://127.0.0.1:{port}"

        def states():
            jobs = json.loads(get(api + "/api/v1/jobs")[1])["jobs"]
            s = {j["job_id"]: j["state"] for j in jobs}
            return s if s.get("steady") == "healthy" and s.get("stuck") == "stalled" else None

        self.wait_for("steady healthy and stuck stalled in the API", states, timeout=90)

        ctype, page = get(api + "/")
        self.assertTrue(ctype.startswith("text/html"), ctype)
        self.assertIn("<title>stepwatch agent</title>", page)

        dom = self.chromium("--virtual-time-budget=5000", "--dump-dom", api + "/")

        def row(job):
            m = re.search(r'<tr[^>]*id="job-row-' + job + r'"[^>]*>(.*?)</tr>', dom, re.S)
            self.assertTrue(m, f"no row for job {job} in the rendered page:\n{dom[-4000:]}")
            return m.group(0)

        self.assertIn("stalled", row("stuck"))
        self.assertNotIn("healthy", row("stuck"))
        self.assertIn("healthy", row("steady"))
        self.assertNotIn("stalled", row("steady"))
        self.assertIn("<polyline", row("steady"))  # the recent-intervals chart was drawn

        # The stalled job's view, opened through the URL: culprits, evidence and per-rank lines.
        shot = os.path.join(self.tmp, "dashboard.png")
        self.chromium("--virtual-time-budget=5000", "--hide-scrollbars", "--window-size=1280,800",
                      f"--screenshot={shot}", f"{api}/#job=stuck")
        self.assertTrue(os.path.exists(shot), "chromium wrote no screenshot")
        self.assertGreater(os.path.getsize(shot), 10 * 1024, "the screenshot is (nearly) blank")
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        out = os.environ.get("STEPWATCH_DASHBOARD_PNG")
        if out:
            shutil.copyfile(shot, out)
            print(f"dashboard screenshot: {out}")

        detail_dom = self.chromium("--virtual-time-budget=5000", "--dump-dom", f"{api}/#job=stuck")
        m = re.search(r'<section class="card" id="detail"(.*?)</section>', detail_dom, re.S)
        self.assertTrue(m, "no job view in the rendered page")
        view = m.group(1)
        self.assertIn("Job stuck", view)
        self.assertIn("Culprits", view)
        self.assertIn("Evidence", view)
        self.assertEqual(len(re.findall(r"<tr><td>[01]</td>", view)), 2, "expected one line per rank")
        # The node-fault section: one incarnation each, nothing to suspect (agent_history_test
        # covers suspects and storms in the API the page reads).
        self.assertIn("Node fault", view)
        self.assertIn("no suspect host, no restart storm", view)


if __name__ == "__main__":
    unittest.main()
