# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""`stepwatch agent` end to end: the real binary watches a job that real ranks (the Python
package) write beacons for, serves it on /api/v1 and /metrics, and a real Prometheus scrapes it
and answers queries about it, until the job stalls and the agent says so.
"""

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from agent_support import AS_NOBODY, RANKS, AgentBase, Receiver, free_port, get, write_paged_spec  # noqa: E402
from swtest import SOURCE_DIR, python_env  # noqa: E402

PROMETHEUS = shutil.which("prometheus")
DASHBOARD = os.path.join(SOURCE_DIR, "deploy", "grafana", "stepwatch-dashboard.json")

# Dashboard panels that cannot have data for a single-node agent watching two CPU-only ranks,
# each with the reason; their queries must still parse.
DASHBOARD_PANELS_WITHOUT_DATA = {
    "GPU SM utilisation (evidence, not the verdict)": "the ranks hold no GPU (no NVML series)",
    "Multi-node: coordination through etcd": "a single-node agent exports no stepwatch_agent_coord_*",
    "Multi-node: job leaders": "a single-node agent exports no stepwatch_job_leader",
    "Node fault: implicated and suspect hosts": "no incarnation of the stalled job ends here, so no host is "
                                                "implicated (agent_history_test checks the series)",
}


def grafana_substitute(expr, values):
    """What Grafana sends Prometheus for one selected value per variable: $var and ${var} replaced
    by the value regex-escaped (the panels match with =~), $__rate_interval by 1m."""
    expr = expr.replace("$__rate_interval", "1m").replace("${__rate_interval}", "1m")

    def value(m):
        name = m.group(1) or m.group(2)
        return re.escape(values[name]).replace("\\", "\\\\")  # a backslash in a PromQL string is \\

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", value, expr)


class PrometheusScrape(AgentBase):
    def test_real_prometheus_scrapes_the_agent_and_sees_the_stall(self):
        self.assertTrue(PROMETHEUS, "prometheus is not installed: scripts/setup-deps.sh installs it")
        beacons = os.path.join(self.tmp, "beacons")
        port = free_port()
        specs = os.path.join(self.tmp, "specs")
        os.makedirs(specs)
        receiver = Receiver()  # a page, so that the dashboard's runbook actions have one to show
        self.addCleanup(receiver.close)
        write_paged_spec(specs, "scraped", receiver.url)
        cfg = self.agent_config(beacons, specs, port)
        env = python_env()
        env.update(STEPWATCH_DIR=beacons, STEPWATCH_JOB="scraped")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(k, None)
        for rank in (0, 1):
            self.start(["/usr/bin/python3", "-c", RANKS, str(rank), "80"], env=env)
        self.start([self.bin, "agent", "--config", cfg])
        api = f"http://127.0.0.1:{port}"
        jobs = self.wait_for("the job in the API", lambda: json.loads(get(api + "/api/v1/jobs"))["jobs"])
        self.assertEqual(jobs[0]["job_id"], "scraped")
        self.assertEqual(jobs[0]["ranks"], 2)

        prom_port = free_port()
        prom_cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(prom_cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                    f"  - job_name: stepwatch-agent\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        self.start([PROMETHEUS, f"--config.file={prom_cfg}", f"--storage.tsdb.path={self.tmp}/tsdb",
                    f"--web.listen-address=127.0.0.1:{prom_port}"])

        def query(q):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            return json.loads(get(url))["data"]["result"]

        healthy = self.wait_for("healthy in Prometheus",
                                lambda: query('stepwatch_job_state{job_id="scraped",state="healthy"} == 1'))
        self.assertEqual(healthy[0]["metric"]["job"], "stepwatch-agent")  # the scrape job label stays Prometheus's
        steps = query('stepwatch_rank_step{job_id="scraped"}')
        self.assertEqual(sorted(s["metric"]["rank"] for s in steps), ["0", "1"])
        self.assertTrue(query("stepwatch_agent_polls_total > 0"))
        # The ranks stop at step 80 (~8 s): Prometheus sees the job stalled.
        self.wait_for("stalled in Prometheus",
                      lambda: query('stepwatch_job_state{job_id="scraped",state="stalled"} == 1'), timeout=90)
        detail = json.loads(get(api + "/api/v1/jobs/scraped"))
        self.assertEqual(detail["state"], "stalled")
        self.assertEqual(detail["last_step"], 79)
        self.wait_for("the page action in Prometheus",
                      lambda: query('stepwatch_job_actions_total{job_id="scraped",action="page"}'))
        self.check_dashboard(prom_port, port)

    def check_dashboard(self, prom_port, agent_port):
        """Every query of deploy/grafana/stepwatch-dashboard.json, its variables set to the stalled
        job, its host and its agent, parses in this Prometheus and returns data for the job
        (but for the panels that cannot have any here, DASHBOARD_PANELS_WITHOUT_DATA)."""
        with open(DASHBOARD) as f:
            dashboard = json.load(f)

        def prometheus(q):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            try:
                reply = json.loads(get(url))
            except urllib.error.HTTPError as e:  # 400 with {"status": "error", "error": ...}
                reply = json.loads(e.read().decode())
            self.assertEqual(reply["status"], "success", f"{q}\n{reply.get('error')}")
            return reply["data"]["result"]

        (info,) = prometheus('stepwatch_job_info{job_id="scraped"}')
        values = {"job": "scraped", "host": info["metric"]["host"], "instance": f"127.0.0.1:{agent_port}"}
        # The variables' own queries, label_values(SELECTOR, LABEL), offer those values.
        for var in dashboard["templating"]["list"]:
            if var["type"] != "query":
                continue
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["definition"])
            self.assertTrue(m, var["definition"])
            offered = {r["metric"].get(m.group(2)) for r in prometheus(grafana_substitute(m.group(1), values))}
            self.assertIn(values[var["name"]], offered, var["definition"])

        titles = {p["title"] for p in dashboard["panels"]}
        self.assertLessEqual(set(DASHBOARD_PANELS_WITHOUT_DATA), titles, "a panel listed without data is gone")
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                with self.subTest(panel=panel["title"], target=target["refId"]):
                    result = prometheus(grafana_substitute(target["expr"], values))
                    if panel["title"] in DASHBOARD_PANELS_WITHOUT_DATA:
                        continue
                    self.assertTrue(result, f"no data for {target['expr']}")
                    jobs = {r["metric"]["job_id"] for r in result if "job_id" in r["metric"]}
                    if jobs:  # a job's panel; the agent's panels have no job_id
                        self.assertIn("scraped", jobs, result)
                    if panel["title"] == "Jobs now: verdict, cause, owner":
                        self.assertEqual([r["metric"]["state"] for r in result], ["stalled"])
                        self.assertNotEqual(result[0]["metric"]["cause"], "none")
                    if panel["title"] == "Verdict over time":  # the state as a number, named by the value mappings
                        (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
                        self.assertEqual([mapping["options"][r["value"][1]]["text"] for r in result], ["stalled"])


class AgentKilled(AgentBase):
    def test_sigkill_mid_incident_loses_nothing_and_pages_once(self):
        receiver = Receiver()
        self.addCleanup(receiver.close)
        beacons = os.path.join(self.tmp, "beacons")
        specs = os.path.join(self.tmp, "specs")
        os.makedirs(specs)
        write_paged_spec(specs, "killed", receiver.url)
        port = free_port()
        cfg = self.agent_config(beacons, specs, port)
        env = python_env()
        env.update(STEPWATCH_DIR=beacons, STEPWATCH_JOB="killed")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(k, None)
        for rank in (0, 1):
            self.start(["/usr/bin/python3", "-c", RANKS, str(rank), "20"], env=env)
        agent = self.start([self.bin, "agent", "--config", cfg])
        self.wait_for("the page", lambda: receiver.pages, timeout=60)
        agent.kill()  # SIGKILL, mid-incident: the job is still stalled
        agent.wait()
        api = f"http://127.0.0.1:{port}"
        self.start([self.bin, "agent", "--config", cfg])
        jobs = self.wait_for("the restarted agent", lambda: json.loads(get(api + "/api/v1/jobs"))["jobs"])
        self.wait_for("stalled again", lambda: json.loads(get(api + "/api/v1/jobs/killed"))["state"] == "stalled")
        time.sleep(2)  # several polls of the restarted agent on the stalled job
        self.assertEqual(len(receiver.pages), 1, receiver.pages)  # nobody paged twice
        incidents = json.loads(get(api + "/api/v1/incidents?job=killed"))["incidents"]
        self.assertEqual(len(incidents), 1, incidents)  # the same incident, still open: nothing lost
        self.assertEqual(incidents[0]["state"], "stalled")
        self.assertIsNone(incidents[0].get("closed_at"))
        self.assertEqual(jobs[0]["job_id"], "killed")
        # `stepwatch status` and `stepwatch ack` talk to the running agent.
        env = dict(os.environ, STEPWATCH_AGENT=api)
        st = subprocess.run([self.bin, "status", "killed"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=30)
        self.assertEqual(st.returncode, 0, st.stdout)
        self.assertIn(f"from the agent at {api}", st.stdout)
        self.assertIn("job killed  stalled", st.stdout)
        ack = subprocess.run([self.bin, "ack", "killed", "--by", "bob"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=30)
        self.assertEqual(ack.returncode, 0, ack.stdout)
        self.assertIn("through the agent", ack.stdout)
        incidents = json.loads(get(api + "/api/v1/incidents?job=killed"))["incidents"]
        self.assertEqual(incidents[0]["acked_by"], "bob")
        unknown = subprocess.run([self.bin, "status", "--agent", "http://127.0.0.1:9", "x"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=30)
        self.assertEqual(unknown.returncode, 2)
        self.assertIn("no stepwatch agent answers at http://127.0.0.1:9", unknown.stdout)


class AgentPreempts(AgentBase):
    """A real 2-rank PyTorch (gloo) training, launched without `stepwatch run`, hangs: an agent
    told it may preempt the job does so once the ack timeout passes, and only the ranks proven to
    be the job's beacon writers."""

    def test_a_hung_torch_job_listed_in_preempt_jobs_is_preempted(self):
        beacons = os.path.join(self.tmp, "beacons")
        specs = os.path.join(self.tmp, "specs")
        os.makedirs(specs)
        with open(os.path.join(specs, "torch-hang.toml"), "w") as f:
            f.write('job = "torch-hang"\nexpected_interval = "300ms"\ngrace_intervals = 2\n'
                    '[learn]\nwarmup_steps = 1\n[runbook]\nack_timeout = "2s"\npreempt_grace = "5s"\n')
        port = free_port()
        cfg = self.agent_config(beacons, specs, port, extra='preempt_jobs = ["torch-*"]\n')
        env = python_env()
        env.update(STEPWATCH_DIR=beacons, STEPWATCH_JOB="torch-hang")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
            env.pop(k, None)
        src = SOURCE_DIR
        launcher = self.start(["/usr/bin/python3", os.path.join(src, "examples", "launch.py"), "--nproc", "2",
                               "--keep-going", os.path.join(src, "examples", "train_ddp.py"), "--steps", "400",
                               "--step-time", "0.05", "--hang-rank", "1", "--hang-at-step", "15",
                               "--hang-incarnation", "0"], env=env)
        log_path = os.path.join(self.tmp, "agent.log")
        with open(log_path, "w") as log:
            self.start([self.bin, "agent", "--config", cfg], stderr=log)
        api = f"http://127.0.0.1:{port}"
        self.wait_for("the stall", lambda: json.loads(get(api + "/api/v1/jobs/torch-hang"))["state"] == "stalled",
                      timeout=90)
        # The owner has the ack timeout (2 s) to answer; then both ranks are ended. Until they are,
        # /metrics says the stall, never healthy (E13); retired, the job exports no state.
        exported, deadline = [], time.monotonic() + 60
        while launcher.poll() is None and time.monotonic() < deadline:
            m = re.search(r'stepwatch_job_state\{job_id="torch-hang",state="([a-z-]+)"\} 1', get(api + "/metrics"))
            exported.append(m.group(1) if m else None)
            time.sleep(0.1)
        launcher.wait(timeout=1)
        self.assertEqual(set(exported) - {None}, {"stalled"}, exported)
        job = self.wait_for("the preempt action",
                            lambda: (lambda j: j if j["actions_total"].get("preempt") else None)(
                                json.loads(get(api + "/api/v1/jobs/torch-hang"))))
        self.assertEqual(job["actions_total"]["preempt"], 1, job)
        incidents = json.loads(get(api + "/api/v1/incidents?job=torch-hang"))["incidents"]
        self.assertEqual(len(incidents), 1, incidents)
        self.assertIn("preempted by the agent: 2 of 2 processes gone", incidents[0]["resolution"])
        self.assertIsNotNone(incidents[0].get("closed_at"))
        for rank in job["ranks"]:
            pid = rank["beacon"]["pid"]
            self.assertFalse(os.path.exists(f"/proc/{pid}/stat") and
                             open(f"/proc/{pid}/stat").read().split(") ")[1][0] not in "ZX",
                             f"rank {rank['rank']} (pid {pid}) still runs")
        time.sleep(1.5)  # the ranks' silence after the preempt opens no second incident
        self.assertEqual(len(json.loads(get(api + "/api/v1/incidents?job=torch-hang"))["incidents"]), 1)
        # E13: ended by the agent's own preempt, the job reads preempted (never finished), retired,
        # and its incarnation ended "preempted"; retired, it exports no state (not "finished").
        job = json.loads(get(api + "/api/v1/jobs/torch-hang"))
        self.assertEqual((job["state"], job["retired"]), ("preempted", True), job)
        self.assertIn("ended by this node's preempt", job["summary"])
        ended = [i for i in job["node_fault"]["incarnations"] if i["ended_at"]]
        self.assertEqual([i["end_reason"] for i in ended], ["preempted"], job["node_fault"])
        self.assertNotIn('job_id="torch-hang",state=', get(api + "/metrics"))
        # Between the SIGCONT/SIGTERM and the ranks' exit the verdict stood: the log has the stall,
        # then "preempted", and no transition through healthy (or finished) on the way.
        with open(log_path, errors="replace") as f:
            moves = re.findall(r"agent: job torch-hang: (\w+) -> (\w+)", f.read())
        states = [to for _, to in moves]
        since_stall = states[states.index("stalled"):]  # a change of cause reads stalled -> stalled
        self.assertEqual((set(since_stall), since_stall[-1]), ({"stalled", "preempted"}, "preempted"), moves)
        with open(log_path, errors="replace") as f:
            self.assertIn("agent: job torch-hang retired: job preempted", f.read())


def unit_capabilities():
    """The capability set of the shipped systemd unit (deploy/stepwatch-agent.service)."""
    src = SOURCE_DIR
    with open(os.path.join(src, "deploy", "stepwatch-agent.service")) as f:
        for line in f:
            if line.startswith("CapabilityBoundingSet="):
                return line.split("=", 1)[1].split()
    raise AssertionError("the unit sets no CapabilityBoundingSet")


@unittest.skipUnless(os.geteuid() == 0, "needs root: the agent runs as root and the job as nobody")
class AgentCapabilities(AgentBase):
    """The agent as the shipped unit runs it (root with only the unit's capabilities) preempts a
    stalled job of another user; without CAP_KILL the preemption fails and says why."""

    def run_job_as_nobody_and_preempt(self, caps):
        os.chmod(self.tmp, 0o755)
        beacons = os.path.join(self.tmp, "beacons")
        os.makedirs(beacons)
        os.chmod(beacons, 0o1777)  # like /dev/shm: the job's user creates its own job directory
        specs = os.path.join(self.tmp, "specs")
        os.makedirs(specs)
        with open(os.path.join(specs, "nobody-hang.toml"), "w") as f:
            f.write('job = "nobody-hang"\nusers = ["nobody"]\nexpected_interval = "300ms"\ngrace_intervals = 2\n'
                    '[learn]\nwarmup_steps = 1\n[runbook]\nack_timeout = "1s"\npreempt_grace = "2s"\n')
        port = free_port()
        cfg = self.agent_config(beacons, specs, port, extra='preempt_jobs = ["nobody-*"]\n')
        env = python_env()
        env.update(STEPWATCH_DIR=beacons, STEPWATCH_JOB="nobody-hang")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(k, None)
        ranks = [self.start([*AS_NOBODY, "/usr/bin/python3",
                             "-c", RANKS, str(rank), "10"], env=env) for rank in (0, 1)]
        bounding = ",".join(["-all"] + ["+" + c.lower().removeprefix("cap_") for c in caps])
        self.start(["setpriv", f"--bounding-set={bounding}", "--inh-caps=-all", "--no-new-privs",
                    self.bin, "agent", "--config", cfg])
        api = f"http://127.0.0.1:{port}"
        job = self.wait_for("the preempt action",
                            lambda: (lambda j: j if j["actions_total"].get("preempt") else None)(
                                json.loads(get(api + "/api/v1/jobs/nobody-hang"))), timeout=90)
        self.assertEqual(job["actions_total"]["preempt"], 1, job)
        self.assertEqual(sorted(r["beacon"]["pid"] for r in job["ranks"]), sorted(p.pid for p in ranks))
        incidents = json.loads(get(api + "/api/v1/incidents?job=nobody-hang"))["incidents"]
        self.assertEqual(len(incidents), 1, incidents)
        return ranks, incidents[0]

    def test_the_units_capabilities_preempt_another_users_job(self):
        caps = unit_capabilities()
        self.assertIn("CAP_KILL", caps)
        ranks, incident = self.run_job_as_nobody_and_preempt(caps)
        self.assertIn("preempted by the agent: 2 of 2 processes gone", incident["resolution"])
        for p in ranks:
            self.assertIsNotNone(p.wait(timeout=10), "the agent ended the job")

    def test_without_cap_kill_the_failed_preemption_says_why_and_keeps_the_incident_open(self):
        caps = [c for c in unit_capabilities() if c != "CAP_KILL"]
        ranks, incident = self.run_job_as_nobody_and_preempt(caps)
        # A preemption with survivors is no resolution: the incident stays open (and pages again).
        self.assertEqual(incident["status"], "open", incident)
        self.assertFalse(incident["resolution"], incident)
        with sqlite3.connect(f"file:{self.tmp}/state/stepwatch.db?mode=ro", uri=True) as db:
            (detail,) = db.execute("SELECT detail FROM actions WHERE kind = 'preempt'").fetchone()
        self.assertIn("0 of 2 processes gone, 2 SURVIVOR(S)", detail)
        self.assertIn("not permitted (EPERM: signalling another user's process needs CAP_KILL", detail)
        for p in ranks:
            self.assertIsNone(p.poll(), "nothing was signalled")


# An HTTP server that answers every GET with 200 "ok" and prints what it was sent, one line per
# request: "METHOD PATH AUTHORIZATION". What a user who took the agent's port would run.
IMPOSTOR = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        print(self.command, self.path, self.headers.get("Authorization", "-"), flush=True)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
print("listening", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@unittest.skipUnless(os.geteuid() == 0, "needs root: the impostor runs as another user")
class AgentPortTaken(AgentBase):
    """Another user holds the agent's port before it starts: the agent still watches and pages,
    takes its port once it is free, and the CLI sends the impostor nothing (no token)."""

    def test_a_taken_port_silences_nothing_and_the_cli_sends_the_impostor_nothing(self):
        receiver = Receiver()
        self.addCleanup(receiver.close)
        beacons = os.path.join(self.tmp, "beacons")
        specs = os.path.join(self.tmp, "specs")
        os.makedirs(specs)
        write_paged_spec(specs, "squatted", receiver.url)
        port = free_port()
        impostor = subprocess.Popen([*AS_NOBODY, "/usr/bin/python3", "-c", IMPOSTOR, str(port)],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(impostor)
        self.assertEqual(impostor.stdout.readline().strip(), "listening")
        token = os.path.join(self.tmp, "token")
        with open(token, "w") as f:
            f.write("s3cr3t-token-abc\n")
        os.chmod(token, 0o600)
        cfg = self.agent_config(beacons, specs, port, extra=f'token_file = "{token}"\n')
        env = python_env()
        env.update(STEPWATCH_DIR=beacons, STEPWATCH_JOB="squatted")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(k, None)
        for rank in (0, 1):
            self.start(["/usr/bin/python3", "-c", RANKS, str(rank), "10"], env=env)
        agent = subprocess.Popen([self.bin, "agent", "--config", cfg], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        self.procs.append(agent)
        # The job stalls and is paged although the agent has no API.
        self.wait_for("the page", lambda: receiver.pages, timeout=60)
        self.assertIsNone(agent.poll(), "the agent kept running")

        api = f"http://127.0.0.1:{port}"
        cli_env = dict(os.environ, STEPWATCH_AGENT=api, STEPWATCH_AGENT_TOKEN_FILE=token)
        for args in (["ack", "squatted", "--by", "mallory"], ["status", "squatted"]):
            r = subprocess.run([self.bin, *args], env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stdout)
            self.assertIn(f"{api} is served by a process of uid 65534, not by root or you", r.stdout)

        # The impostor goes; the agent binds its port and the CLI trusts it.
        impostor.terminate()
        seen = impostor.communicate(timeout=10)[0]
        self.assertNotIn("s3cr3t", seen)
        self.assertEqual(seen.strip(), "", "the CLI sent the impostor nothing at all")
        job = self.wait_for("the API", lambda: json.loads(get(api + "/api/v1/jobs/squatted")), timeout=30)
        self.assertEqual(job["state"], "stalled")
        r = subprocess.run([self.bin, "ack", "squatted", "--by", "alice"], env=cli_env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("through the agent", r.stdout)
        agent.terminate()
        log = agent.communicate(timeout=30)[1]
        self.assertIn("paging without the API, binding again every 2.0s", log)
        self.assertIn(f"(port {port} is held by uid 65534)", log)
        self.assertEqual(len(receiver.pages), 1, receiver.pages)


# Another user's flood (argv: ROOT N): N job directories, each with a real beacon that steps and
# then stalls, one of them under a job id whose spec pages someone's on-call, one with a 100 GiB
# sparse progress file and a FIFO for a beacon; then it sleeps.
FLOOD = r"""
import os, sys, time, stepwatch
root, n = sys.argv[1], int(sys.argv[2])
jobs = ["victim-spec"] + [f"spam-{i}" for i in range(n - 1)]
beacons = [stepwatch.Beacon(job=j, dir=root, rank=0, world_size=1) for j in jobs]
for step in range(1, 4):
    for b in beacons:
        b.step(step)
with open(os.path.join(root, "spam-0", "progress.jsonl"), "w") as f:
    f.truncate(100 << 30)
os.mkfifo(os.path.join(root, "spam-1", "rank-1.beacon"))
print("flooded", flush=True)
time.sleep(3600)
"""


@unittest.skipUnless(os.geteuid() == 0, "needs root: the flood comes from another user")
class AgentUnderFlood(AgentBase):
    """An unprivileged user floods the beacon root with hundreds of stalling jobs (one squatting a
    job id that has a spec, one with a 100 GiB sparse file and a FIFO). A real stalled job beside
    them is paged on time; the flood is bounded per user and pages nobody."""

    def test_a_real_stall_is_paged_on_time_beside_another_users_flood(self):
        receiver = Receiver()
        self.addCleanup(receiver.close)
        os.chmod(self.tmp, 0o755)
        beacons = os.path.join(self.tmp, "beacons")
        os.makedirs(beacons)
        os.chmod(beacons, 0o1777)
        specs = os.path.join(self.tmp, "specs")
        os.makedirs(specs)
        for job in ("real", "victim-spec"):  # root's specs: for root's own job directories
            write_paged_spec(specs, job, receiver.url)
        env = python_env()
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "STEPWATCH_JOB"):
            env.pop(k, None)
        flood = subprocess.Popen([*AS_NOBODY, "/usr/bin/python3",
                                  "-c", FLOOD, beacons, "300"], env=env, stdout=subprocess.PIPE, text=True)
        self.procs.append(flood)
        self.addCleanup(flood.stdout.close)
        self.assertEqual(flood.stdout.readline().strip(), "flooded")
        port = free_port()
        cfg = self.agent_config(beacons, specs, port)
        self.start([self.bin, "agent", "--config", cfg])
        api = f"http://127.0.0.1:{port}"
        self.wait_for("the flood to be seen", lambda: len(json.loads(get(api + "/api/v1/jobs"))["jobs"]) >= 64)
        env.update(STEPWATCH_DIR=beacons, STEPWATCH_JOB="real")
        self.start(["/usr/bin/python3", "-c", RANKS, "0", "10"], env=env)
        self.wait_for("the real job", lambda: json.loads(get(api + "/api/v1/jobs/real"))["state"] == "healthy",
                      timeout=30)
        healthy_at = time.monotonic()
        self.wait_for("the real job's page", lambda: [p for p in receiver.pages if p["job"] == "real"], timeout=30)
        # 10 steps of 0.1 s, then 2 x 500 ms of grace and a poll: paged within seconds.
        self.assertLess(time.monotonic() - healthy_at, 10)
        jobs = json.loads(get(api + "/api/v1/jobs"))["jobs"]
        flood_jobs = [j for j in jobs if j["job_id"] != "real"]
        self.assertEqual(len(flood_jobs), 64, "max_jobs_per_user")
        incidents = json.loads(get(api + "/api/v1/incidents?limit=1000"))["incidents"]
        self.assertLessEqual(len([i for i in incidents if i["job_id"] != "real"]), 60, "incidents_per_user_per_hour")
        self.assertEqual([p["job"] for p in receiver.pages], ["real"], "the squatted spec paged nobody")
        self.assertEqual(json.loads(get(api + "/healthz"))["status"], "ok")


class AgentEndings(AgentBase):
    """A real 2-rank PyTorch (gloo) job without stepwatch.finish(), its ranks exiting seconds apart
    and a launcher that outlives them, watched by an agent with a real webhook: it ends, and the
    agent says finished: no page, no incident. A rank killed while the other blocks is dead."""

    def job_spec(self, specs, job, receiver):
        with open(os.path.join(specs, f"{job}.toml"), "w") as f:
            f.write(f'job = "{job}"\nexpected_interval = "1s"\ngrace_intervals = 3\n[learn]\nwarmup_steps = 1\n'
                    f'[[runbook.pager]]\nurl = "{receiver.url}"\ntimeout = "2s"\nretries = 1\n')

    def launch(self, beacons, job, *train_args, launcher_args=()):
        env = python_env()
        env.update(STEPWATCH_DIR=beacons, STEPWATCH_JOB=job)
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
            env.pop(k, None)
        src = SOURCE_DIR
        # A session of its own, ended whole afterwards: a rank blocked in gloo ignores SIGTERM, and
        # the crashing rank's forked socket holder is nobody's child.
        p = self.start(["/usr/bin/python3", os.path.join(src, "examples", "launch.py"), "--nproc", "2",
                        *launcher_args, os.path.join(src, "examples", "train_ddp.py"), "--step-time", "0.05",
                        "--no-finish", *train_args], env=env, start_new_session=True)
        self.addCleanup(self._kill_session, p.pid)
        return p

    @staticmethod
    def _kill_session(sid):
        try:
            os.killpg(sid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def test_a_job_that_ends_is_finished_and_one_whose_rank_is_killed_is_dead(self):
        receiver = Receiver()
        self.addCleanup(receiver.close)
        beacons = os.path.join(self.tmp, "beacons")
        specs = os.path.join(self.tmp, "specs")
        os.makedirs(specs)
        port = free_port()
        self.start([self.bin, "agent", "--config", self.agent_config(beacons, specs, port)])
        api = f"http://127.0.0.1:{port}"
        for i, (linger_rank, launcher_linger) in enumerate([(0, 4), (1, 0), (-1, 5)]):
            job = f"ends-{i}"
            self.job_spec(specs, job, receiver)
            launcher = self.launch(beacons, job, "--steps", "15", "--linger-rank", str(linger_rank), "--linger", "3",
                                   launcher_args=("--linger", str(launcher_linger)))
            self.assertEqual(launcher.wait(timeout=120), 0)
            self.wait_for(f"{job} finished",
                          lambda: json.loads(get(api + f"/api/v1/jobs/{job}"))["state"] == "finished")
        time.sleep(1.5)  # a few more polls of the ended jobs
        self.assertEqual(receiver.pages, [])
        self.assertEqual(json.loads(get(api + "/api/v1/incidents"))["incidents"], [])

        # SIGKILL while the other rank blocks in gloo: dead within seconds, that rank named, paged once.
        self.job_spec(specs, "killed-rank", receiver)
        self.launch(beacons, "killed-rank", "--steps", "400", "--crash-rank", "1", "--crash-at-step", "15",
                    "--crash-how", "kill", launcher_args=("--keep-going",))
        job = self.wait_for("dead", lambda: (lambda j: j if j["state"] == "dead" else None)(
            json.loads(get(api + "/api/v1/jobs/killed-rank"))), timeout=90)
        self.assertEqual([c["rank"] for c in job["culprits"]], [1], job)
        self.wait_for("the page", lambda: receiver.pages)
        time.sleep(1.5)
        self.assertEqual(len(receiver.pages), 1, receiver.pages)
        self.assertEqual(receiver.pages[0]["state"], "dead")


if __name__ == "__main__":
    unittest.main()
