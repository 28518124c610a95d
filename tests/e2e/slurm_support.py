# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""A real two-node Slurm on this one machine for end-to-end tests (docs: the background notes on
schedulers, "A real single-machine Slurm"): slurmctld and two `slurmd -N n1|n2` from Debian's
slurmctld/slurmd/slurm-client packages, auth/none (no munge), everything as root, every file in a
scratch directory, free ports and a unique ClusterName per instance (two test processes can each
run one at once).

    with SlurmCluster() as c:                  # or c = SlurmCluster(); c.start(); ...; c.stop()
        job = c.sbatch("#!/bin/sh\\nsleep 5\\n", "--requeue")
        rec = c.wait_job(job, {"RUNNING"})     # scontrol show job -o, as a dict
        subprocess.run(["scontrol", "requeue", job], env=c.env(), check=True)
        c.kill_slurmd("n2"); c.restart_slurmd("n2"); c.drain("n1", "why"); c.resume("n1")

env() is os.environ with SLURM_CONF naming this instance's slurm.conf: jobs submitted with it
inherit it (sbatch exports the submitter's environment), so `scontrol` inside a job talks to this
instance too.

Requeue semantics (measured in the notes): a requeued job is not eligible again for cred_expire
+ 1 s (11 s here); RequeueExit=75 requeues by itself; a node whose slurmd dies is down after
about SlurmdTimeout, and its batch job is requeued (with --requeue or JobRequeue=1) while the
job's processes on that node keep running: the orphans stepwatch must clean.
"""

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from agent_support import free_port  # noqa: E402

PACKAGES = "slurmctld slurmd slurm-client"
NODES = ("n1", "n2")
# Where Debian installs them; PATH of a test may lack /usr/sbin.
_SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin"])


def slurm_binary(name):
    """The path of a Slurm program; RuntimeError naming the packages when missing (the tests must
    fail, not skip: scripts/setup-deps.sh installs them)."""
    path = shutil.which(name, path=_SEARCH)
    if path is None:
        raise RuntimeError(f"{name} is missing: scripts/setup-deps.sh installs the Debian packages {PACKAGES}")
    return path


def parse_record(line):
    """One line of `scontrol show job|node -o` as a dict. Values may hold '=' (TRES=cpu=1,node=1)
    and spaces (Reason=, JobName=, Command= and WorkDir= paths): a word that does not start with
    Key= belongs to the previous value (so a path holding " Upper=" would be split)."""
    rec, key = {}, None
    for word in line.strip().split(" "):
        # Every key Slurm prints starts upper case (JobId, TRES, Socks/Node, ReqB:S:C:T).
        m = re.match(r"([A-Z][A-Za-z0-9_:/]*)=(.*)", word, re.S)
        if m:
            key = m.group(1)
            rec[key] = m.group(2)
        elif key is not None:
            rec[key] += " " + word
    return rec


class SlurmError(RuntimeError):
    pass


class SlurmCluster:
    """slurmctld + slurmd n1, n2 on 127.0.0.1. Parameters: cpus_per_node (2: a 2-rank job fits on
    one node; CPUs=2 on a 2-core machine is accepted, and SlurmdParameters=config_overrides keeps
    a node with fewer real cores than that from being drained), slurmd_timeout and
    message_timeout (see below), cred_expire (a requeued job waits cred_expire + 1 s before it
    can start again), extra_conf (lines appended to slurm.conf; a key must not repeat one above).

    A killed slurmd is noticed by slurmctld's pings (every SlurmdTimeout/3 s), each of which
    waits up to MessageTimeout for the dead node: measured (SIGKILL of slurmd -> node down* ->
    job requeued at once; its rerun starts cred_expire + 1 s later):
      SlurmdTimeout/MessageTimeout 30/10 (the notes): 40 s;  5/10 and 3/10: 25 s;
      3/3: 11 s;  2/2: 9 s;  1/1: 4 s.
    3/3 is the default: below 3 s slurmctld pings every node on every pass of its 1-s loop and
    a slurmd or slurmctld stalled 1-2 s on a loaded 2-core CI machine would be declared dead (a
    spurious node failure that kills the jobs on it), for 2 s saved per test."""

    def __init__(self, cpus_per_node=2, slurmd_timeout=3, message_timeout=3, cred_expire=10, extra_conf="",
                 prefix="stepwatch-slurm-"):
        self.bins = {n: slurm_binary(n) for n in ("slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "srun")}
        self.cpus_per_node = cpus_per_node
        self.slurmd_timeout = slurmd_timeout
        self.message_timeout = message_timeout
        self.cred_expire = cred_expire
        self.extra_conf = extra_conf
        self.prefix = prefix
        self.dir = None
        self.conf = None
        self.cluster_name = None
        self.ctld_port = None
        self.node_ports = {}
        self.procs = {}  # "slurmctld" / node name -> Popen
        self.start_seconds = None
        self._stopped = True
        self._scripts = 0

    # ---- lifecycle ----------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self, timeout=30):
        """Writes slurm.conf, starts the daemons and waits until both nodes are idle. Seconds it
        took: self.start_seconds."""
        if not self._stopped:
            return self
        self._stopped = False
        atexit.register(self.stop)
        t0 = time.monotonic()
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.dir = tempfile.mkdtemp(prefix=self.prefix, dir=base)
        # cluster names are lower case, short; state and logs never mix between instances anyway.
        self.cluster_name = "sw" + uuid.uuid4().hex[:10]
        # slurmd logs an error when its spool (%n) does not exist yet, though it creates it.
        for sub in ("state", "log", "jobs", *(os.path.join("spool", n) for n in NODES)):
            os.makedirs(os.path.join(self.dir, sub))
        self.conf = os.path.join(self.dir, "slurm.conf")
        try:
            for attempt in range(3):
                self._choose_ports()
                self._write_conf()
                self._start_daemon("slurmctld", [self.bins["slurmctld"], "-D", "-f", self.conf])
                for n in NODES:
                    self._start_slurmd(n)
                if self._wait_nodes(NODES, ("idle",), timeout, raise_on_timeout=attempt == 2, starting=True):
                    break
                # A port taken between choosing and binding it: new ports, fresh state.
                self._stop_daemons()
                shutil.rmtree(os.path.join(self.dir, "state"), True)
                os.makedirs(os.path.join(self.dir, "state"))
        except BaseException:
            self.stop()  # the error already carries the logs' tails
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def stop(self):
        """SIGTERM, then SIGKILL after 5 s, to every daemon started here (by pid) and to every
        process tied to this instance: its environment names this slurm.conf (slurmstepd inherits
        slurmd's environment and job tasks the submitter's) or its command line names the scratch
        directory. Safe to call twice; also registered with atexit."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        self._stop_daemons()
        self._kill_tied()
        if self.dir:
            shutil.rmtree(self.dir, True)

    def _stop_daemons(self):
        procs = [p for p in self.procs.values() if p.poll() is None]
        for p in procs:
            p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = {}

    def tied_pids(self):
        """Live processes tied to this instance (not this test process itself)."""
        if not self.dir:
            return []
        conf = ("SLURM_CONF=" + self.conf).encode() + b"\0"
        mine = self.dir.encode()
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    env = f.read() + b"\0"
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue  # gone, or a kernel thread
            if (b"\0" + conf) in (b"\0" + env) or mine in cmd:
                pids.append(int(entry))
        return pids

    def _kill_tied(self):
        for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 3)):
            pids = self.tied_pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.tied_pids():
                time.sleep(0.1)

    # ---- configuration and daemons ---------------------------------------------------

    def _choose_ports(self):
        ports = set()
        while len(ports) < 1 + len(NODES):
            ports.add(free_port())
        self.ctld_port, *rest = sorted(ports)
        self.node_ports = dict(zip(NODES, rest))

    def _write_conf(self):
        d = self.dir
        host = socket.gethostname().split(".")[0]  # hostname -s: slurmd checks NodeHostname against it
        nodes = "".join(
            f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={self.node_ports[n]} "
            f"CPUs={self.cpus_per_node} RealMemory=1000 State=UNKNOWN\n" for n in NODES)
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName={self.cluster_name}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={self.ctld_port}
AuthType=auth/none
CredType=cred/none
AuthInfo=cred_expire={self.cred_expire}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
JobRequeue=1
RequeueExit=75
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout={self.slurmd_timeout}
MessageTimeout={self.message_timeout}
SlurmdParameters=config_overrides
SchedulerParameters=bf_interval=1,sched_interval=1
{nodes}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
{self.extra_conf}
""")

    def _start_daemon(self, name, argv):
        # -D: foreground, a child we can wait for and signal by pid; stdout/stderr to a log here.
        with open(os.path.join(self.dir, "log", f"{name}.out"), "ab") as out:
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                                env=self.env(), cwd=self.dir, start_new_session=True)

    def _start_slurmd(self, node):
        self._start_daemon(node, [self.bins["slurmd"], "-D", "-N", node, "-f", self.conf])

    def env(self, **extra):
        """os.environ with SLURM_CONF naming this instance (and `extra`): for sbatch, scontrol,
        srun, sinfo run by a test, and inherited by the jobs they submit."""
        env = dict(os.environ)
        env["SLURM_CONF"] = self.conf
        env["PATH"] = _SEARCH
        env.update(extra)
        return env

    def pid(self, name):
        """The pid of "slurmctld", "n1" or "n2" (its slurmd), None when not running."""
        p = self.procs.get(name)
        return p.pid if p is not None and p.poll() is None else None

    def log_tail(self, n=1500):
        """The end of every log of this instance, for failure messages."""
        out = []
        logdir = os.path.join(self.dir or "", "log")
        for name in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
            try:
                with open(os.path.join(logdir, name), errors="replace") as f:
                    text = f.read()[-n:]
            except OSError:
                continue
            if text.strip():
                out.append(f"--- {name} ---\n{text}")
        return "\n".join(out)

    # ---- client commands --------------------------------------------------------------

    def run(self, *argv, check=True, timeout=20):
        """Runs a Slurm client command (argv[0] a name like "scontrol") against this instance;
        its stdout. SlurmError with its output and the logs' tails when it fails."""
        argv = [self.bins.get(argv[0], argv[0]), *argv[1:]]
        r = subprocess.run(argv, env=self.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout, cwd=self.dir)
        if check and r.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} exited {r.returncode}: {r.stdout}{r.stderr}\n{self.log_tail()}")
        return r.stdout

    def sbatch(self, script_text, *args):
        """Writes the script into the scratch directory and submits it (`sbatch --parsable`,
        output to jobs/slurm-%j.out there unless args say otherwise); the job id, a string."""
        self._scripts += 1
        path = os.path.join(self.dir, "jobs", f"script{self._scripts}.sh")
        with open(path, "w") as f:
            f.write(script_text)
        os.chmod(path, 0o755)
        out = ["--output", os.path.join(self.dir, "jobs", "slurm-%j.out")]
        if any(a == "-o" or a.startswith("--output") for a in args):
            out = []
        return self.run("sbatch", "--parsable", *out, *args, path).strip().split(";")[0]

    def job_output(self, job_id):
        """The job's output file written by the default --output of sbatch()."""
        try:
            with open(os.path.join(self.dir, "jobs", f"slurm-{job_id}.out"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def show_job(self, job_id):
        """`scontrol show job -o <id>` as a dict (JobState, Restarts, ExitCode, NodeList,
        BatchHost, Requeue, Reason, Command, WorkDir, ...)."""
        return parse_record(self.run("scontrol", "show", "job", "-o", str(job_id)))

    def show_node(self, name):
        return parse_record(self.run("scontrol", "show", "node", "-o", name))

    def wait_job(self, job_id, states=("COMPLETED",), timeout=60, until=None, poll=0.2):
        """Polls the job until its JobState is one of `states` and `until(record)` (if given) is
        true; the record. SlurmError with the last record and the logs' tails on timeout."""
        states = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout
        rec = {}
        while True:
            try:
                rec = self.show_job(job_id)
            except SlurmError:
                pass  # a slurmctld briefly busy
            if rec.get("JobState") in states and (until is None or until(rec)):
                return rec
            if time.monotonic() >= deadline:
                raise SlurmError(f"job {job_id} not in {sorted(states)} after {timeout} s: {rec}\n"
                                 f"job output:\n{self.job_output(job_id)}\n{self.log_tail()}")
            time.sleep(poll)

    def node_state(self, name):
        """sinfo's short state: "idle", "alloc", "mix", "drain", "down*" ('*': not responding)."""
        return self.run("sinfo", "-h", "-n", name, "-o", "%t").strip()

    def wait_node(self, name, states, timeout=30):
        """Waits until node_state(name) is one of `states`; seconds it took."""
        t0 = time.monotonic()
        self._wait_nodes((name,), states, timeout)
        return time.monotonic() - t0

    def _wait_nodes(self, names, states, timeout, raise_on_timeout=True, starting=False):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if starting and any(self.procs[n].poll() is not None for n in ("slurmctld", *names) if n in self.procs):
                break  # a daemon died (a port taken?): no use waiting
            try:
                last = {n: self.node_state(n) for n in names}
                if all(s in states for s in last.values()):
                    return True
            except (SlurmError, subprocess.TimeoutExpired) as e:
                last = e
            time.sleep(0.1)
        if raise_on_timeout:
            raise SlurmError(f"nodes {names} not in {states} after {timeout} s (last: {last}; daemons: "
                             f"{ {n: p.poll() for n, p in self.procs.items()} })\n{self.log_tail()}")
        return False

    # ---- faults and node admin ----------------------------------------------------------

    def kill_slurmd(self, name, sig=signal.SIGKILL):
        """Signals node `name`'s slurmd (by its pid) and, for TERM/KILL, waits for it to exit. Its
        slurmstepd and job processes are not touched: they keep running, as on a real node."""
        p = self.procs[name]
        p.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            p.wait(timeout=10)

    def restart_slurmd(self, name, timeout=30):
        """Stops node `name`'s slurmd if it runs and starts it again; waits until the node
        responds again (its state has no '*'; ReturnToService=2 returns a DOWN node to service)."""
        if self.pid(name) is not None:
            self.kill_slurmd(name, signal.SIGTERM)
        self._start_slurmd(name)
        deadline = time.monotonic() + timeout
        while True:
            state = self.node_state(name)
            if not state.endswith("*") and not state.startswith("down"):
                return state
            if time.monotonic() >= deadline or self.procs[name].poll() is not None:
                raise SlurmError(f"slurmd {name} did not come back: {state}\n{self.log_tail()}")
            time.sleep(0.2)

    def drain(self, name, reason="stepwatch test"):
        self.run("scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")

    def resume(self, name):
        self.run("scontrol", "update", f"NodeName={name}", "State=RESUME")
