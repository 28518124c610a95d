#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Starts N local ranks of a Python training script with the env:// variables and waits for them.

    /usr/bin/python3 examples/launch.py --nproc 2 examples/train_ddp.py --steps 100

A stand-in for torchrun on one host (Debian's torchrun does not run on Python 3.11). Each rank
gets MASTER_ADDR, MASTER_PORT (a free port unless --master-port), RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, GROUP_RANK. When a rank fails, the others get SIGTERM, then SIGKILL after
--grace seconds, and the launcher exits with the failed rank's status (128+N for a signal).
SIGINT or SIGTERM to the launcher is passed on to the ranks the same way.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port(host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def exit_code(returncode):
    return 128 - returncode if returncode < 0 else returncode


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=2, help="ranks to start (default 2)")
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=0, help="default: a free port")
    p.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL (default 10)")
    p.add_argument("--python", default=sys.executable, help="interpreter for the ranks (default: this one)")
    p.add_argument("--keep-going", action="store_true",
                   help="do not stop the other ranks when one fails (as on a multi-node job, where the "
                        "survivors block in their next collective)")
    p.add_argument("--linger", type=float, default=0.0,
                   help="seconds to stay on after every rank exited, as srun or torchrun's monitor can (default 0)")
    p.add_argument("script")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.nproc < 1:
        p.error("--nproc must be at least 1")
    return args


class Launcher:
    def __init__(self, args):
        self.args = args
        self.procs = []
        self.stopping = False

    def start(self):
        port = self.args.master_port or free_port(self.args.master_addr)
        n = self.args.nproc
        for rank in range(n):
            env = dict(os.environ)
            env.update(
                MASTER_ADDR=self.args.master_addr,
                MASTER_PORT=str(port),
                RANK=str(rank),
                LOCAL_RANK=str(rank),
                WORLD_SIZE=str(n),
                LOCAL_WORLD_SIZE=str(n),
                GROUP_RANK="0",
            )
            cmd = [self.args.python, self.args.script, *self.args.script_args]
            self.procs.append(subprocess.Popen(cmd, env=env))
            print(f"launch: rank {rank} pid {self.procs[-1].pid} port {port}", file=sys.stderr, flush=True)

    def stop_all(self):
        if self.stopping:
            return
        self.stopping = True
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.args.grace
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
            time.sleep(0.05)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()

    def wait(self):
        """The first failing rank's exit code, or 0 when every rank succeeded."""
        failed = None
        while True:
            running = False
            for rank, p in enumerate(self.procs):
                rc = p.poll()
                if rc is None:
                    running = True
                elif rc != 0 and failed is None:
                    failed = exit_code(rc)
                    if self.args.keep_going:
                        print(f"launch: rank {rank} exited with {rc}; the others keep going", file=sys.stderr, flush=True)
                    else:
                        print(f"launch: rank {rank} exited with {rc}; stopping the others", file=sys.stderr, flush=True)
                        self.stop_all()
            if failed is not None and not self.args.keep_going:
                return failed
            if not running:
                return failed or 0
            if not running:
                return 0
            time.sleep(0.05)


def main(argv=None):
    args = parse_args(argv)
    launcher = Launcher(args)

    def on_signal(signum, frame):
        print(f"launch: got {signal.Signals(signum).name}; stopping the ranks", file=sys.stderr, flush=True)
        launcher.stop_all()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    launcher.start()
    status = launcher.wait()
    if args.linger > 0:
        time.sleep(args.linger)
    return status


if __name__ == "__main__":
    sys.exit(main())
